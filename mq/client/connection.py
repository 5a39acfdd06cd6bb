"""One TCP connection to one broker: version negotiation, pipelined requests, timeouts, reconnect on next use.

Requests are written as soon as they are sent; responses come back in request order and are matched to their
request by correlation id. A request that times out, a broken socket or an out-of-order response closes the
connection and fails every request in flight; the next ``send`` connects again and repeats the ApiVersions
handshake.

Security (``ClientSecurity``): SSL and SASL_SSL open the socket with TLS, checking the broker's certificate against
the host name connected to unless told not to. SASL_PLAINTEXT and SASL_SSL authenticate right after ApiVersions, as
Kafka's clients do: SaslHandshake v1 names the mechanism, then SaslAuthenticate carries the tokens (PLAIN: one,
``\0user\0password``; SCRAM: client-first, client-final, and the broker's signature is checked). A refused TLS
handshake or SASL exchange raises ``AuthenticationError``, which is not retriable. When the broker gives the session
a lifetime (SaslAuthenticate v1+), the connection authenticates again on the same socket before the lifetime has
passed (KIP-368), at a random point between 85 % and 95 % of it, before the next request; other requests wait
until it is done. A broker that closes the socket instead fails the requests then in flight with the retriable
``BrokerConnectionError``, and the next ``send`` connects and authenticates afresh.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import ssl
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.protocol.framing import FrameDecoder

DEFAULT_CLIENT_ID = "mq"
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
_API_VERSIONS_VERSION = 3
_CORRELATION_ID = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")

CLIENT_MAX_VERSIONS: Mapping[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.METADATA: 12,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 8,
    ApiKey.API_VERSIONS: _API_VERSIONS_VERSION,
}
"""Highest versions whose request shape this client writes; other APIs go up to kio's highest schema."""

CLIENT_MIN_VERSIONS: Mapping[int, int] = {ApiKey.PRODUCE: 3, ApiKey.FETCH: 4, ApiKey.LIST_OFFSETS: 1}
"""Lowest versions whose shape this client writes and reads (record batches v2, one offset per partition); the
older ones, declared for the broker's old clients, are not for it."""


@cache
def client_versions(api_key: int) -> tuple[int, int] | None:
    """(min, max) request versions this client can encode for ``api_key``, or None when it has no schema."""
    lowest, highest = CLIENT_MIN_VERSIONS.get(api_key, 0), CLIENT_MAX_VERSIONS.get(api_key, 32)
    versions = [v for v in range(lowest, highest + 1) if request_schema(api_key, v) is not None]
    return (versions[0], versions[-1]) if versions else None


class BrokerConnectionError(KafkaError):
    """The connection failed or was closed while a request was in flight (retriable)."""

    code = ErrorCode.NETWORK_EXCEPTION


class RequestTimedOutError(KafkaError):
    """No response arrived within the request timeout (retriable)."""

    code = ErrorCode.REQUEST_TIMED_OUT


class AuthenticationError(KafkaError):
    """The broker refused this client's TLS handshake or SASL authentication (not retriable). ``code`` is the
    broker's SASL error (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE); a refused TLS
    handshake has SASL_AUTHENTICATION_FAILED, Kafka's code for a failed authentication."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnsupportedVersionError(KafkaError):
    """Client and broker share no version of an API."""

    code = ErrorCode.UNSUPPORTED_VERSION


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    schema: type[Any]
    future: asyncio.Future[Any]


class BrokerConnection:
    """An asyncio connection to ``host:port``; ``send`` may be called concurrently (requests are pipelined)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = DEFAULT_CLIENT_ID,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.security = security
        self.api_versions: dict[int, tuple[int, int]] = {}
        """The broker's (min, max) per API key, from the last handshake."""
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._in_flight: deque[_InFlight] = deque()
        self._correlation_ids = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self._connecting = False
        self._reauthenticate_at: float | None = None
        """Loop time after which the SASL session is renewed before the next request (None: never)."""

    def __repr__(self) -> str:
        return f"BrokerConnection(node_id={self.node_id}, {self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._writer is not None

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def waiting_for(self) -> str | None:
        """What this connection waits for, e.g. ``127.0.0.1:9092 (no answer to ApiVersions)``; None when idle."""
        if self._connecting:
            return f"{self.host}:{self.port} (connecting)"
        for entry in self._in_flight:
            if not entry.future.done():
                return f"{self.host}:{self.port} (no answer to {_display_name(entry.schema.__api_key__)})"
        return None

    async def connect(self) -> None:
        """Open the socket (TLS when the protocol says so), negotiate API versions and authenticate (SASL), unless
        already connected; renew a SASL session whose lifetime is nearly over."""
        async with self._connect_lock:
            if self._writer is not None:
                if self._reauthenticate_at is not None and asyncio.get_running_loop().time() >= self._reauthenticate_at:
                    await self._reauthenticate()
                return
            self._connecting = True
            tls: dict[str, Any] = {}
            if self.security.uses_tls:
                tls = {"ssl": self.security.ssl_context, "server_hostname": self.host}
            try:
                async with asyncio.timeout(self.connect_timeout_ms / 1000):
                    reader, writer = await asyncio.open_connection(self.host, self.port, **tls)
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
                raise BrokerConnectionError(
                    f"cannot connect to {self.host}:{self.port}: the connection closed during the TLS handshake"
                ) from exc
            except ssl.SSLError as exc:
                raise AuthenticationError(
                    f"TLS handshake with {self.host}:{self.port} failed: {_tls_reason(exc)}"
                ) from exc
            except OSError as exc:  # TimeoutError included
                reason = (
                    os.strerror(exc.errno)
                    if exc.errno
                    else str(exc) or f"no answer within {self.connect_timeout_ms} ms"
                )
                raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {reason}") from exc
            finally:
                self._connecting = False
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
            try:
                self.api_versions = await self._handshake()
            except BrokerConnectionError as exc:
                self._close(BrokerConnectionError(f"ApiVersions handshake with {self.host}:{self.port} failed"))
                if not self.security.uses_tls:
                    raise
                # TLS 1.3 finishes the client's side of the handshake before the broker has checked the client's
                # certificate: a refusal then shows as a closed or reset connection at the first request.
                raise BrokerConnectionError(
                    f"{exc} (right after the TLS handshake: the broker may have refused this client's certificate)"
                ) from exc
            except BaseException:
                self._close(BrokerConnectionError(f"ApiVersions handshake with {self.host}:{self.port} failed"))
                raise
            if self.security.uses_sasl:
                try:
                    await self._authenticate()
                except BaseException:
                    self._close(BrokerConnectionError(f"SASL authentication with {self.host}:{self.port} failed"))
                    raise

    async def _handshake(self) -> dict[int, tuple[int, int]]:
        body = {"client_software_name": "mq", "client_software_version": "1"}
        response = await self._request(ApiKey.API_VERSIONS, _API_VERSIONS_VERSION, body, self.request_timeout_ms)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = await self._request(ApiKey.API_VERSIONS, 0, {}, self.request_timeout_ms)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(f"ApiVersions failed: {ErrorCode(response.error_code).name}", code=response.error_code)
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then the mechanism's SaslAuthenticate exchanges; schedules the renewal of a session
        the broker gave a lifetime."""
        security = self.security
        mechanism, username, password = security.sasl_mechanism, security.username, security.password
        assert mechanism is not None and username is not None and password is not None
        version = self.version_for(ApiKey.SASL_AUTHENTICATE)
        timeout_ms = self.request_timeout_ms
        handshake = await self._request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}, timeout_ms)
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationError(
                f"{self.host}:{self.port} refused SASL mechanism {mechanism} "
                f"({ErrorCode(handshake.error_code).name}; enabled: {', '.join(handshake.mechanisms) or 'none'})",
                code=ErrorCode(handshake.error_code),
            )
        if mechanism == "PLAIN":
            response = await self._sasl_authenticate(version, b"\0" + username.encode() + b"\0" + password.encode())
        else:
            response = await self._scram(mechanism, username, password, version)
        lifetime_ms = int(response.session_lifetime.total_seconds() * 1000) if version >= 1 else 0
        self._reauthenticate_at = None
        if lifetime_ms > 0:
            renew_after = lifetime_ms / 1000 * random.uniform(0.85, 0.95)
            self._reauthenticate_at = asyncio.get_running_loop().time() + renew_after

    async def _scram(self, mechanism: str, username: str, password: str, version: int) -> Any:
        """RFC 5802 without channel binding, as Kafka speaks it; the broker's final message must prove that it
        knows the password too."""
        from scramp import ScramClient, ScramException

        try:
            scram = ScramClient([mechanism], username, password)
        except ScramException:
            raise AuthenticationError(f"the username or password cannot be used with {mechanism}") from None
        response = await self._sasl_authenticate(version, scram.get_client_first().encode())
        try:
            scram.set_server_first(response.auth_bytes.decode())
            final = scram.get_client_final()
        except (ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationError(f"{self.host}:{self.port} sent a bad SCRAM first message: {exc}") from None
        response = await self._sasl_authenticate(version, final.encode())
        try:
            scram.set_server_final(response.auth_bytes.decode())
        except (ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationError(
                f"{self.host}:{self.port} did not prove that it knows the password: {exc}"
            ) from None
        return response

    async def _sasl_authenticate(self, version: int, token: bytes) -> Any:
        response = await self._request(
            ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}, self.request_timeout_ms
        )
        if response.error_code != ErrorCode.NONE:
            code = ErrorCode(response.error_code)
            message = response.error_message or f"SASL authentication with {self.host}:{self.port} failed: {code.name}"
            raise AuthenticationError(message, code=code)
        return response

    async def _reauthenticate(self) -> None:
        self._reauthenticate_at = None
        try:
            await self._authenticate()
        except BaseException:
            self._close(BrokerConnectionError(f"SASL re-authentication with {self.host}:{self.port} failed"))
            raise

    def version_for(self, api_key: int) -> int:
        """Highest version of ``api_key`` both sides support (the connection must be open)."""
        ours = client_versions(api_key)
        theirs = self.api_versions.get(api_key)
        if ours is None or theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            raise UnsupportedVersionError(
                f"{self.host}:{self.port} supports {_name(api_key)} {theirs}, this client {ours}: no common version"
            )
        return min(ours[1], theirs[1])

    async def send(
        self, api_key: int, body: Mapping[str, Any], version: int | None = None, *, timeout_ms: int | None = None
    ) -> Any:
        """Send one request and return the response entity (None for Produce with acks=0).

        ``version`` defaults to the highest both sides support. Raises BrokerConnectionError and RequestTimedOutError
        (both retriable) and UnsupportedVersionError.
        """
        await self.connect()
        if version is None:
            version = self.version_for(api_key)
        return await self._request(api_key, version, body, timeout_ms or self.request_timeout_ms)

    async def _request(self, api_key: int, version: int, body: Mapping[str, Any], timeout_ms: int) -> Any:
        schema = request_schema(api_key, version)
        if schema is None:
            raise UnsupportedVersionError(f"no schema for {_name(api_key)} v{version}")
        writer = self._writer
        if writer is None:
            raise BrokerConnectionError(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        header = RequestHeader(api_key, version, correlation_id, self.client_id, 0)
        data = encode_request(header, build(schema, body))
        expects_response = not (api_key == ApiKey.PRODUCE and body.get("acks") == 0)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expects_response:
            self._in_flight.append(_InFlight(correlation_id, response_schema(api_key, version), future))
        writer.write(data)
        try:
            await writer.drain()
        except OSError as exc:
            self._close(BrokerConnectionError(f"write to {self.host}:{self.port} failed: {exc}"))
        if not expects_response:
            return None
        try:
            # not asyncio.wait_for: on Python 3.11 it drops a cancellation that arrives just after the response
            async with asyncio.timeout(timeout_ms / 1000):
                return await asyncio.shield(future)
        except TimeoutError:
            error = RequestTimedOutError(
                f"{_name(api_key)} to {self.host}:{self.port} got no response within {timeout_ms} ms"
            )
            self._close(BrokerConnectionError(f"connection to {self.host}:{self.port} closed after a timeout"), future)
            future.cancel()
            raise error from None
        except asyncio.CancelledError:
            future.cancel()  # its response, if it comes, is read and dropped; a later close has nothing to report
            raise

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(MAX_RESPONSE_BYTES)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    raise BrokerConnectionError(f"{self.host}:{self.port} closed the connection")
                for payload in decoder.feed(data):
                    self._dispatch(payload)
        except asyncio.CancelledError:
            raise
        except KafkaError as exc:
            if self._writer is writer:
                self._close(exc)
        except ssl.SSLError as exc:  # a TLS alert: the broker refused this client's certificate
            if self._writer is writer and not isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
                self._close(AuthenticationError(f"TLS with {self.host}:{self.port} failed: {_tls_reason(exc)}"))
            elif self._writer is writer:
                self._close(BrokerConnectionError(f"{self.host}:{self.port} closed the TLS connection"))
        except Exception as exc:  # a socket error or an undecodable response: the connection is unusable
            if self._writer is writer:
                self._close(BrokerConnectionError(f"connection to {self.host}:{self.port} failed: {exc}"))

    def _dispatch(self, payload: bytes) -> None:
        (correlation_id,) = _CORRELATION_ID.unpack_from(payload, 0)
        if not self._in_flight or self._in_flight[0].correlation_id != correlation_id:
            raise BrokerConnectionError(f"unexpected correlation id {correlation_id} from {self.host}:{self.port}")
        entry = self._in_flight.popleft()
        schema = entry.schema
        if schema.__api_key__ == ApiKey.API_VERSIONS and _is_unsupported_version(payload):
            schema = response_schema(ApiKey.API_VERSIONS, 0)  # the broker answers error 35 with a v0 body
        _, body = decode_response(payload, schema)
        if not entry.future.done():
            entry.future.set_result(body)

    def _close(self, error: KafkaError, exclude: asyncio.Future[Any] | None = None) -> None:
        self._reauthenticate_at = None
        writer, self._writer = self._writer, None
        task, self._reader_task = self._reader_task, None
        in_flight, self._in_flight = self._in_flight, deque()
        for entry in in_flight:
            if entry.future is not exclude and not entry.future.done():
                entry.future.set_exception(error)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        if writer is not None:
            writer.close()

    async def close(self) -> None:
        """Close the socket; requests in flight fail with BrokerConnectionError."""
        task = self._reader_task
        self._close(BrokerConnectionError(f"connection to {self.host}:{self.port} was closed"))
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)


def _is_unsupported_version(payload: bytes) -> bool:
    return len(payload) >= 6 and _ERROR_CODE.unpack_from(payload, 4)[0] == ErrorCode.UNSUPPORTED_VERSION


def _tls_reason(exc: ssl.SSLError) -> str:
    """``certificate has expired``, ``TLSV1_ALERT_UNKNOWN_CA``, ...: OpenSSL's words for why TLS failed."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return str(exc.verify_message)
    return str(exc.reason or exc)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


def _display_name(api_key: int) -> str:
    """Kafka's name of an API as its documentation writes it: ``API_VERSIONS`` -> ``ApiVersions``."""
    return "".join(word.capitalize() for word in _name(api_key).split("_"))
