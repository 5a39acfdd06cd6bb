"""ApiVersions: what this broker serves. Request v3+ carries the client's software name and version.

The immediate path answers from a response built once per (version, error code) from the dispatcher's table (again
whenever the table changes), patching in the correlation id. Which answer a request gets depends only on the bytes
after its correlation id (client_id, and from v3 the software name and version): each distinct run of them is
decoded in full once, as the general path decodes it, and its verdict kept (for tails of up to 512 bytes).

v3+ answers carry no supported or finalized features (KIP-584; epoch -1), as a ZooKeeper-era cluster without feature
flags: ``metadata.version`` and ``kraft.version`` describe a KRaft quorum mq does not have, and a finalized
``transaction.version`` 2 would tell Java clients to use KIP-890's second transaction protocol (an epoch bump per
transaction), which mq does not serve; its transactions are transaction.version 1, and clients choose the KIP-848
group protocol by their own ``group.protocol``. librdkafka skips these fields; kafka-python reads them only for
``describe_features``.
"""

from __future__ import annotations

import re
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import decode_request, encode_response, response_schema
from mq.protocol.entities import build
from mq.protocol.frame_fields import I32
from mq.server.api_dispatch import Api, ApiDispatcher, NowResult, RequestContext
from mq.server.network import ClientAddress

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_VERDICTS_KEPT = 1024
"""Distinct request tails whose verdict is kept at most; the cache starts over beyond that."""
_TAIL_KEPT = 512
"""Longest request tail whose verdict is kept (a longer one is decoded each time), so the cache stays small."""


def api_versions_api(dispatcher: ApiDispatcher) -> Api:
    """The ApiVersions entry; it reads the dispatcher's table when answering, so it lists itself too."""

    def body(code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, "api_keys": dispatcher.advertised(), "throttle_time": 0}

    def verdict(version: int, request: Any) -> ErrorCode:
        if version >= 3 and not (
            _SOFTWARE.fullmatch(request.client_software_name or "")
            and _SOFTWARE.fullmatch(request.client_software_version or "")
        ):
            return ErrorCode.INVALID_REQUEST
        return ErrorCode.NONE

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        return body(verdict(context.version, request))

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return body(code)

    built_for = -1
    """The dispatcher's ``changes`` when ``responses`` were built."""
    responses: dict[tuple[int, ErrorCode], tuple[bytes, bytes]] = {}
    """(version, error code) -> the response's size field, and its bytes after the correlation id."""
    verdicts: dict[tuple[int, bytes], ErrorCode] = {}

    def now(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> NowResult:
        nonlocal built_for
        key = (version, bytes(frame[8 : 8 + _TAIL_KEPT + 1]))
        code = verdicts.get(key)
        if code is None:
            _, request = decode_request(frame)  # refuses what the general path refuses
            code = verdict(version, request)
            if len(key[1]) <= _TAIL_KEPT:
                if len(verdicts) >= _VERDICTS_KEPT:
                    verdicts.clear()
                verdicts[key] = code
        if built_for != dispatcher.changes:
            responses.clear()
            built_for = dispatcher.changes
        response = responses.get((version, code))
        if response is None:
            encoded = encode_response(0, build(response_schema(ApiKey.API_VERSIONS, version), body(code)))
            response = responses[version, code] = (encoded[:4], encoded[8:])
        size, rest = response
        return size + I32.pack(correlation_id) + rest

    return Api(ApiKey.API_VERSIONS, 0, 4, handle, error, now=now)
