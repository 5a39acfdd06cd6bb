"""The SASL exchange of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's server authenticator.

States: ``HANDSHAKE_OR_VERSIONS`` (an ApiVersions passes through to the broker once, a SaslHandshake names the
mechanism) -> ``HANDSHAKE`` (after ApiVersions) -> ``AUTHENTICATE`` (SaslHandshake v1+: SaslAuthenticate requests
carry the tokens) or ``RAW_AUTHENTICATE`` (v0: each frame is a bare token, answered by a bare token) ->
``COMPLETE``. Any other request before ``COMPLETE`` closes the connection unanswered; an unsupported mechanism is
answered UNSUPPORTED_SASL_MECHANISM (with the enabled ones) and closes it; a failed authentication is answered
SASL_AUTHENTICATION_FAILED (a bare-token exchange: no answer) and closes it, logged with the client's address and
the mechanism's reason, never a secret.

With ``connections.max.reauth.ms`` > 0 the session lasts that long (SaslAuthenticate v1+ tells the client): a
SaslHandshake on a complete connection starts a re-authentication (KIP-368) as the same principal, and a request
other than SaslHandshake after the session expired closes the connection.
"""

from __future__ import annotations

import enum
import logging
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import decode_request, encode_response, response_schema
from mq.protocol.entities import build
from mq.protocol.framing import frame as framed
from mq.security.errors import AuthenticationError

log = logging.getLogger("kafka.server.SaslServerAuthenticator")

_KEY = struct.Struct(">h")
_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
_API_VERSIONS = int(ApiKey.API_VERSIONS)


class MechanismServer(Protocol):
    """One mechanism's side of one exchange: ``respond`` to each client token until ``complete`` (then ``username``
    is set); raises AuthenticationError (its message for the client, its reason for the log)."""

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    def respond(self, token: bytes) -> bytes: ...


MechanismFactory = Callable[[], MechanismServer]


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_AUTHENTICATE = "raw authenticate"
    COMPLETE = "complete"


class Outcome:
    """What the connection does with a frame the authenticator took: send ``response`` (framed) unless None, and
    close after it when ``close``."""

    __slots__ = ("close", "response")

    def __init__(self, response: bytes | None, close: bool = False) -> None:
        self.response = response
        self.close = close


PASS = None
"""``handle``'s answer for a frame the broker handles as usual (an ApiVersions, or any request once complete)."""


class SaslAuthenticator:
    """Per connection; ``peer`` names the client in log lines."""

    def __init__(
        self,
        mechanisms: Mapping[str, MechanismFactory],
        peer: str,
        session_lifetime_ms: int = 0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mechanisms = mechanisms
        self.peer = peer
        self.session_lifetime_ms = session_lifetime_ms
        self._monotonic = monotonic
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.principal: str | None = None
        """``User:<name>`` once authenticated."""
        self.expires_at = 0.0
        """When the session ends (monotonic seconds; 0 = never)."""
        self._mechanism = ""
        self._server: MechanismServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    def handle(self, frame: bytearray) -> Outcome | None:
        """The outcome of ``frame``, or PASS when the broker should handle it."""
        state = self.state
        if state is State.RAW_AUTHENTICATE:
            return self._raw(bytes(frame))
        api_key = _KEY.unpack_from(frame, 0)[0] if len(frame) >= 2 else -1
        if state is State.COMPLETE:
            if api_key == _HANDSHAKE:
                return self._handshake(frame, reauthenticating=True)
            if self.expires_at and self._monotonic() > self.expires_at:
                log.info("Closing connection from %s: its SASL session expired", self.peer)
                return Outcome(None, close=True)
            return PASS
        if api_key == _API_VERSIONS and state is State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE
            return PASS
        if api_key == _HANDSHAKE and state in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            return self._handshake(frame, reauthenticating=False)
        if api_key == _AUTHENTICATE and state is State.AUTHENTICATE:
            return self._authenticate(frame)
        log.info(
            "Closing connection from %s: unexpected request (api key %d) in SASL state %s",
            self.peer,
            api_key,
            state.value,
        )
        return Outcome(None, close=True)

    def _handshake(self, frame: bytearray, reauthenticating: bool) -> Outcome:
        try:
            header, body = decode_request(frame)
        except Exception as exc:
            log.info("Closing connection from %s: malformed SaslHandshake: %s", self.peer, exc)
            return Outcome(None, close=True)
        mechanism = str(body.mechanism)
        enabled = sorted(self.mechanisms)
        factory = self.mechanisms.get(mechanism)
        if factory is None or (reauthenticating and (header.api_version < 1 or mechanism != self._mechanism)):
            code = ErrorCode.UNSUPPORTED_SASL_MECHANISM if factory is None else ErrorCode.ILLEGAL_SASL_STATE
            log.info("Failed authentication with %s (unsupported SASL mechanism %s)", self.peer, mechanism)
            response = _response(header.correlation_id, _HANDSHAKE, header.api_version, code, mechanisms=enabled)
            return Outcome(response, close=True)
        self._mechanism = mechanism
        self._server = factory()
        self.state = State.AUTHENTICATE if header.api_version >= 1 else State.RAW_AUTHENTICATE
        response = _response(header.correlation_id, _HANDSHAKE, header.api_version, ErrorCode.NONE, mechanisms=enabled)
        return Outcome(response)

    def _authenticate(self, frame: bytearray) -> Outcome:
        try:
            header, body = decode_request(frame)
        except Exception as exc:
            log.info("Closing connection from %s: malformed SaslAuthenticate: %s", self.peer, exc)
            return Outcome(None, close=True)
        version, correlation_id = header.api_version, header.correlation_id
        try:
            token = self._step(bytes(body.auth_bytes))
        except AuthenticationError as exc:
            response = _response(
                correlation_id,
                _AUTHENTICATE,
                version,
                exc.code,
                error_message=str(exc),
                auth_bytes=b"",
                session_lifetime=0,
            )
            return Outcome(response, close=True)
        lifetime = self.session_lifetime_ms if self.authenticated and version >= 1 else 0
        response = _response(
            correlation_id,
            _AUTHENTICATE,
            version,
            ErrorCode.NONE,
            error_message=None,
            auth_bytes=token,
            session_lifetime=lifetime,
        )
        return Outcome(response)

    def _raw(self, token: bytes) -> Outcome:
        try:
            answer = self._step(token)
        except AuthenticationError:
            return Outcome(None, close=True)
        return Outcome(framed(answer))

    def _step(self, token: bytes) -> bytes:
        """Hand one token to the mechanism; on completion the principal is set (the same one when
        re-authenticating) and the session's end is set."""
        server = self._server
        assert server is not None
        try:
            answer = server.respond(token)
            if server.complete and server.username is not None:
                principal = f"User:{server.username}"
                if self.principal is not None and principal != self.principal:
                    raise AuthenticationError(
                        "Cannot change principals during re-authentication",
                        f"{principal} re-authenticated a session of {self.principal}",
                    )
                self.principal = principal
                self.state = State.COMPLETE
                self._server = None
                lifetime = self.session_lifetime_ms
                self.expires_at = self._monotonic() + lifetime / 1000 if lifetime > 0 else 0.0
        except AuthenticationError as exc:
            log.info("Failed authentication with %s (%s)", self.peer, exc.reason)
            raise
        return answer


def _response(correlation_id: int, api_key: int, version: int, code: ErrorCode, **fields: Any) -> bytes:
    """A SaslHandshake or SaslAuthenticate response with ``code`` and those of ``fields`` its version has."""
    return encode_response(correlation_id, build(response_schema(api_key, version), {"error_code": code, **fields}))
