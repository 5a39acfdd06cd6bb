"""Routes a request frame to its handler and encodes the answer.

The table of ``Api`` entries is the broker's truth about what it serves: ApiVersions advertises exactly these
ranges. A handler returns a version-agnostic dict (shaped into the response schema of the request's version), a
prebuilt network ``Response`` (the fetch path, with file regions), or None (no response: produce with acks=0).
A KafkaError escaping a handler (or the encoding of its answer) answers that request with its code through the API's
error builder: a handler raises INVALID_REQUEST for a request that decodes but makes no sense. Any other exception
is a defect: it answers UNKNOWN_SERVER_ERROR and is logged. An undecodable frame (a truncated body, a length
running past the end, invalid UTF-8) raises InvalidRequestError, and the network layer closes the connection, as
Kafka's brokers do.

The immediate path: an API may also have a ``now`` handler, which the network layer calls synchronously, in the
loop turn that received the frame, before anything else of that connection waits. It reads what it needs straight
from the frame (no header or body entities) and returns the response frame, None (no response), an awaitable of
either (the answer comes later; the network layer keeps the connection's responses in order), or ``LATER``: it did
nothing, and the frame takes the general path (``__call__``). A ``now`` handler decides on ``LATER`` before any side
effect, and answers every error itself once it has had one. It raises only InvalidRequestError (the connection is
closed), never for a frame the general path would answer.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mq.errors import ErrorCode, error_code_of
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import (
    InvalidRequestError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_response,
    peek_api,
    response_schema,
)
from mq.protocol.entities import build
from mq.server.network import ClientAddress, Response

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    client: ClientAddress

    @property
    def version(self) -> int:
        return self.header.api_version


HandlerResult = dict[str, Any] | bytes | list[Any] | None
Handler = Callable[[RequestContext, Any], Awaitable[HandlerResult]]
ErrorBuilder = Callable[[RequestContext, Any, ErrorCode], dict[str, Any] | bytes | None]
Decoder = Callable[[bytearray], tuple[RequestHeader, Any]]


class Later(enum.Enum):
    LATER = "later"


LATER = Later.LATER
"""A ``now`` handler's answer for a frame it leaves to the general path."""

NowResult = Response | None | Awaitable[Response | None] | Later
NowHandler = Callable[[bytearray, int, int, ClientAddress], NowResult]
"""(frame, api_version, correlation_id, client) -> the answer, now or as an awaitable, or LATER."""


@dataclass(frozen=True)
class Api:
    key: ApiKey
    min_version: int
    max_version: int
    handle: Handler
    error_response: ErrorBuilder
    """The response that reports ``code`` for everything the request asked about."""
    decode: Decoder = decode_request
    """Header and body of a frame of a supported version; Produce reads its record sets without copying them."""
    now: NowHandler | None = None
    """The immediate path (see the module docstring); None: every frame takes the general path."""


class ApiDispatcher:
    """Callable as the network layer's request handler."""

    def __init__(self, apis: Iterable[Api] = ()) -> None:
        self.apis: dict[int, Api] = {}
        self.changes = 0
        """Counts the table's changes: what was built from ``advertised()`` is stale once this moved."""
        for api in apis:
            self.add(api)

    def add(self, api: Api) -> None:
        self.apis[int(api.key)] = api
        self.changes += 1

    def advertised(self) -> list[dict[str, int]]:
        """ApiVersions entries: every API this broker serves, with its version range."""
        return [
            {"api_key": int(a.key), "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(self.apis.values(), key=lambda a: a.key)
        ]

    async def __call__(self, frame: bytearray, client: ClientAddress) -> Response | None:
        api_key, api_version, correlation_id = peek_api(frame)
        api = self.apis.get(api_key)
        if api is None:
            raise InvalidRequestError(f"unknown api key {api_key}")
        if not api.min_version <= api_version <= api.max_version:
            if api.key == ApiKey.API_VERSIONS:
                return self._api_versions_fallback(correlation_id)
            raise UnsupportedVersionError(
                f"{api.key.name} version {api_version} is not in the supported range "
                f"{api.min_version}-{api.max_version}"
            )
        header, body = api.decode(frame)
        context = RequestContext(header, client)
        try:
            return _encoded(correlation_id, api_key, api_version, await api.handle(context, body))
        except Exception as exc:
            code = error_code_of(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("error handling %s v%d from %s", api.key.name, api_version, client.host)
            return _encoded(correlation_id, api_key, api_version, api.error_response(context, body, code))

    def now(self, frame: bytearray, client: ClientAddress) -> NowResult:
        """The immediate answer to ``frame`` from its API's ``now`` handler, or LATER (no such handler, a version out
        of range, an unknown API: the general path answers or refuses those)."""
        api_key, api_version, correlation_id = peek_api(frame)
        api = self.apis.get(api_key)
        if api is None or api.now is None or not api.min_version <= api_version <= api.max_version:
            return LATER
        return api.now(frame, api_version, correlation_id, client)

    def _api_versions_fallback(self, correlation_id: int) -> bytes:
        """A v0 ApiVersions response with UNSUPPORTED_VERSION and our ranges, as Kafka answers a newer client."""
        body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self.advertised()}
        return encode_response(correlation_id, build(response_schema(ApiKey.API_VERSIONS, 0), body))


def _encoded(correlation_id: int, api_key: int, api_version: int, result: HandlerResult) -> Response | None:
    """The response frame for a handler's result (a dict is shaped into the response schema of the version)."""
    if result is None or isinstance(result, bytes | list):
        return result
    return encode_response(correlation_id, build(response_schema(api_key, api_version), result))
