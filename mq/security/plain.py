"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` checks it, without I/O.

One client message, UTF-8: ``[authzid] NUL authcid NUL passwd``. The user name (authcid) and the password must not
be empty, the password must be that user's (the ``user_<name>="<password>"`` options of the broker's JAAS
``PlainLoginModule``, compared in constant time), and an authorization id, when given, must equal the user name.
The server answers an empty message and the exchange is complete. A message without exactly two NULs is refused
(Kafka's server drops anything after a third NUL).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from mq.security.errors import AuthenticationError, invalid_credentials

MECHANISM = "PLAIN"

_STAND_IN = b"\0" * 32
"""What a password of an unknown user is compared with, so that the comparison takes place either way."""


class PlainServer:
    """The broker's side of one PLAIN exchange over ``users`` (name -> password). ``respond`` takes the client's
    one message; ``username`` is set once it succeeded."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self.username is not None

    def respond(self, message: bytes) -> bytes:
        """Check the client's message: b"" once the user is authenticated, else AuthenticationError."""
        if self._done:
            raise invalid_credentials(MECHANISM, "unexpected message after the exchange")
        self._done = True
        self.username = authenticate(self._users, message)
        return b""


def authenticate(users: Mapping[str, str], message: bytes) -> str:
    """The user that ``message`` authenticates against ``users``; AuthenticationError otherwise."""
    try:
        tokens = message.decode("utf-8").split("\0")
    except UnicodeDecodeError:
        raise invalid_credentials(MECHANISM, "SASL/PLAIN response is not UTF-8") from None
    if len(tokens) != 3:
        raise invalid_credentials(MECHANISM, f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    authorization_id, username, password = tokens
    if not username:
        raise invalid_credentials(MECHANISM, "Authentication failed: username not specified")
    if not password:
        raise invalid_credentials(MECHANISM, "Authentication failed: password not specified")
    expected = users.get(username)
    given = password.encode("utf-8")
    matched = hmac.compare_digest(given, _STAND_IN if expected is None else expected.encode("utf-8"))
    if expected is None or not matched:
        raise AuthenticationError("Authentication failed: Invalid username or password")
    if authorization_id and authorization_id != username:
        raise AuthenticationError(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    return username
