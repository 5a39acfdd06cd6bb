"""SASL/PLAIN without sockets: Kafka's PlainSaslServer rules over the users of a JAAS PlainLoginModule."""

from __future__ import annotations

import pytest

from mq.errors import ErrorCode
from mq.security.errors import AuthenticationError
from mq.security.jaas import login_module
from mq.security.plain import PlainServer, authenticate

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
USERS = login_module(JAAS).users()


def test_the_jaas_users_authenticate_with_their_passwords() -> None:
    server = PlainServer(USERS)
    assert not server.complete
    assert server.respond(b"\0alice\0alice-secret") == b""
    assert server.complete and server.username == "alice"
    assert authenticate(USERS, b"admin\0admin\0admin-secret") == "admin"  # authzid equal to the user


def test_a_wrong_password_and_an_unknown_user_get_the_same_answer() -> None:
    answers = []
    for message in (b"\0alice\0wrong-secret", b"\0mallory\0alice-secret", b"\0alice\0alice-secre"):
        with pytest.raises(AuthenticationError) as failed:
            authenticate(USERS, message)
        assert failed.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "secret" not in str(failed.value) and "secret" not in failed.value.reason
        answers.append(str(failed.value))
    assert answers == ["Authentication failed: Invalid username or password"] * 3


def test_another_authorization_id_is_refused_after_the_password_check() -> None:
    with pytest.raises(AuthenticationError, match="authorization id that is different from username"):
        authenticate(USERS, b"admin\0alice\0alice-secret")
    with pytest.raises(AuthenticationError, match="Invalid username or password"):
        authenticate(USERS, b"admin\0alice\0wrong")


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"\0\0alice-secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"alice-secret", "expected 3 tokens, got 1"),
        (b"\0alice\0alice-secret\0more", "expected 3 tokens, got 4"),
        (b"\0alice\0\xff", "not UTF-8"),
    ],
)
def test_malformed_messages_are_refused_with_kafkas_generic_answer(message: bytes, reason: str) -> None:
    with pytest.raises(AuthenticationError) as failed:
        authenticate(USERS, message)
    assert reason in failed.value.reason
    assert str(failed.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
    )


def test_one_message_per_exchange() -> None:
    server = PlainServer(USERS)
    with pytest.raises(AuthenticationError):
        server.respond(b"\0alice\0wrong")
    with pytest.raises(AuthenticationError):
        server.respond(b"\0alice\0alice-secret")
    assert not server.complete
