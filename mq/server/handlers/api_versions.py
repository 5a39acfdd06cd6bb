"""ApiVersions: what this broker serves. Request v3+ carries the client's software name and version."""

from __future__ import annotations

import re
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, ApiDispatcher, RequestContext

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_api(dispatcher: ApiDispatcher) -> Api:
    """The ApiVersions entry; it reads the dispatcher's table when answering, so it lists itself too."""

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        if context.version >= 3 and not (
            _SOFTWARE.fullmatch(request.client_software_name or "")
            and _SOFTWARE.fullmatch(request.client_software_version or "")
        ):
            return error(context, request, ErrorCode.INVALID_REQUEST)
        return {"error_code": 0, "api_keys": dispatcher.advertised(), "throttle_time": 0}

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, "api_keys": dispatcher.advertised(), "throttle_time": 0}

    return Api(ApiKey.API_VERSIONS, 0, 4, handle, error)
