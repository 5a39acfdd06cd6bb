"""SaslHandshake (v0-v1) and SaslAuthenticate (v0-v2) outside a SASL exchange.

On a SASL listener the connection's authenticator (``mq.server.sasl_authenticator``) answers these while a client
authenticates or re-authenticates; what reaches the broker here came on a listener without SASL, or (a
SaslAuthenticate) after the exchange completed. Both are ILLEGAL_SASL_STATE, as Kafka answers them. Listed so that
ApiVersions advertises both, which clients check before authenticating.
"""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, RequestContext


def sasl_apis() -> list[Api]:
    async def handshake(context: RequestContext, request: Any) -> dict[str, Any]:
        return handshake_error(context, request, ErrorCode.ILLEGAL_SASL_STATE)

    def handshake_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, "mechanisms": []}

    async def authenticate(context: RequestContext, request: Any) -> dict[str, Any]:
        return authenticate_error(context, request, ErrorCode.ILLEGAL_SASL_STATE)

    def authenticate_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        message = (
            "SaslAuthenticate request received after successful authentication"
            if code == ErrorCode.ILLEGAL_SASL_STATE
            else None
        )
        return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}

    return [
        Api(ApiKey.SASL_HANDSHAKE, 0, 1, handshake, handshake_error),
        Api(ApiKey.SASL_AUTHENTICATE, 0, 2, authenticate, authenticate_error),
    ]
