"""A connection's SASL exchange as Kafka's server authenticator runs it: the states, bare tokens after a v0
handshake, refusals that close, and sessions that end or are renewed."""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.protocol.framing import frame
from mq.security.plain import PlainServer
from mq.server.sasl_authenticator import PASS, SaslAuthenticator, State

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def request(api_key: ApiKey, version: int, body: dict[str, Any]) -> bytearray:
    schema = request_schema(api_key, version)
    assert schema is not None
    return bytearray(encode_request(RequestHeader(int(api_key), version, 9, "c", 0), build(schema, body))[4:])


def answer(response: bytes | None, api_key: ApiKey, version: int) -> Any:
    assert response is not None
    return decode_response(response[4:], response_schema(api_key, version))[1]


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def authenticator(lifetime_ms: int = 0, clock: Clock | None = None) -> SaslAuthenticator:
    return SaslAuthenticator({"PLAIN": lambda: PlainServer(USERS)}, "127.0.0.1:1", lifetime_ms, clock or Clock())


def test_a_v0_handshake_takes_bare_tokens_and_answers_bare_tokens() -> None:
    sasl = authenticator()
    assert sasl.handle(request(ApiKey.API_VERSIONS, 0, {})) is PASS
    outcome = sasl.handle(request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}))
    assert outcome is not None and not outcome.close
    assert answer(outcome.response, ApiKey.SASL_HANDSHAKE, 0).mechanisms == ("PLAIN",)
    assert sasl.state is State.RAW_AUTHENTICATE
    outcome = sasl.handle(bytearray(b"\0alice\0alice-secret"))
    assert outcome is not None and outcome.response == frame(b"") and not outcome.close
    assert sasl.authenticated and sasl.principal == "User:alice"
    assert sasl.handle(request(ApiKey.METADATA, 1, {"topics": None})) is PASS


def test_a_wrong_bare_token_closes_unanswered_and_an_unknown_mechanism_is_refused() -> None:
    sasl = authenticator()
    sasl.handle(request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}))
    outcome = sasl.handle(bytearray(b"\0alice\0nope"))
    assert outcome is not None and outcome.close and outcome.response is None
    refused = authenticator().handle(request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"}))
    assert refused is not None and refused.close
    body = answer(refused.response, ApiKey.SASL_HANDSHAKE, 1)
    assert body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and body.mechanisms == ("PLAIN",)


def test_anything_but_the_exchange_before_authentication_closes_unanswered() -> None:
    sasl = authenticator()
    sasl.handle(request(ApiKey.API_VERSIONS, 0, {}))
    second = sasl.handle(request(ApiKey.API_VERSIONS, 0, {}))  # only once
    assert second is not None and second.close and second.response is None
    early = authenticator().handle(request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": b"\0alice\0alice-secret"}))
    assert early is not None and early.close and early.response is None


def test_sessions_end_and_renew_as_the_same_principal_only() -> None:
    clock = Clock()
    sasl = authenticator(1000, clock)
    sasl.handle(request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    outcome = sasl.handle(request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"}))
    assert outcome is not None
    assert answer(outcome.response, ApiKey.SASL_AUTHENTICATE, 1).session_lifetime.total_seconds() == 1.0
    clock.now += 0.9
    assert sasl.handle(request(ApiKey.METADATA, 1, {"topics": None})) is PASS
    renewed = sasl.handle(request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    assert renewed is not None and not renewed.close
    sasl.handle(request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"}))
    clock.now += 0.9
    assert sasl.handle(request(ApiKey.METADATA, 1, {"topics": None})) is PASS
    clock.now += 0.2
    expired = sasl.handle(request(ApiKey.METADATA, 1, {"topics": None}))
    assert expired is not None and expired.close

    other = authenticator(1000, Clock())
    other.handle(request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    other.handle(request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"}))
    other.handle(request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
    taken = other.handle(request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0bob\0bob-secret"}))
    assert taken is not None and taken.close
    assert answer(taken.response, ApiKey.SASL_AUTHENTICATE, 1).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert other.principal == "User:alice"
