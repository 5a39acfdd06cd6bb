"""The failure of a SASL exchange, shared by every mechanism's server."""

from __future__ import annotations

from mq.errors import ErrorCode, KafkaError


class AuthenticationError(KafkaError):
    """A SASL exchange failed. ``str(error)`` is what the client may be told (Kafka's text for the case) and
    ``reason`` says why for the broker's log; neither ever holds a password, a proof or a key, and neither tells an
    unknown user from a wrong password. The code is SASL_AUTHENTICATION_FAILED, or UNSUPPORTED_SASL_MECHANISM for a
    mechanism the server does not serve."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, message: str, reason: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message, code)
        self.reason = reason or message


def invalid_credentials(mechanism: str, reason: str) -> AuthenticationError:
    """Kafka's answer to a failed exchange whose details stay on the broker (its ``SaslException`` cases)."""
    return AuthenticationError(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}",
        reason,
    )
