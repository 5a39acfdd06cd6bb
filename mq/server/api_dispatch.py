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

Authorization (``mq.server.authorization``): with an authorizer (``acl``), the APIs Kafka authorizes as a whole by one
operation on the CLUSTER resource are checked here, before their handler, and a refused request is answered by the
API's error builder with CLUSTER_AUTHORIZATION_FAILED; handlers check the resources they touch, on both paths.

Client quotas (``mq.server.quotas``): while any quota is set, ``quotas`` holds the broker's managers and every
request is recorded once it is answered — Produce by its request size and Fetch by its response size (consumers
only) against the byte rates, the time its handling took on the loop against ``request_percentage`` — and a
request that takes its client over a quota gets the throttle time in its response's ``throttle_time_ms`` and mutes
its connection for that time (KIP-219). As in Kafka, a throttled consumer Fetch is answered without any partition
and its bytes are taken back from the rate (the records are fetched again once the throttle has passed).
Inter-broker APIs, a follower's Fetch, ApiVersions and SASL are exempt, as in Kafka. While no quota is set,
``quotas`` is None and requests pay nothing for them.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from mq.errors import ErrorCode, error_code_of
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import (
    InvalidRequestError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    encode_response,
    parse_request_header,
    peek_api,
    response_schema,
)
from mq.protocol.entities import build
from mq.protocol.fetch_response import encode_fetch_response
from mq.protocol.frame_fields import I32
from mq.protocol.produce_response import with_throttle_time
from mq.server.authorization import cluster_refused
from mq.server.network import ClientAddress, Response
from mq.server.quotas import ClientQuotas

if TYPE_CHECKING:
    from mq.server.acl_cache import AclCache

log = logging.getLogger(__name__)
request_log = logging.getLogger("kafka.request.logger")
"""DEBUG: one line per request the general path completed (off unless its level is lowered)."""


def _log_completed(context: RequestContext, api_key: ApiKey, started: float) -> None:
    header, client = context.header, context.client
    request_log.debug(
        "Completed request:RequestHeader(apiKey=%s, apiVersion=%d, clientId=%s, correlationId=%d) from connection "
        "%s:%d-%d;totalTime:%.3f,principal:%s",
        api_key.name,
        header.api_version,
        header.client_id,
        header.correlation_id,
        client.host,
        client.port,
        client.connection_id,
        (time.perf_counter() - started) * 1000,
        client.principal,
    )


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    client: ClientAddress

    @property
    def version(self) -> int:
        return self.header.api_version

    @classmethod
    def of_frame(cls, frame: bytearray, client: ClientAddress) -> RequestContext:
        """The context of a frame on the immediate path (its header read without the tagged fields of a flexible
        one: what follows the client id is not needed)."""
        return cls(parse_request_header(frame, False), client)


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

    def __init__(self, apis: Iterable[Api] = (), acl: AclCache | None = None) -> None:
        self.apis: dict[int, Api] = {}
        self.changes = 0
        """Counts the table's changes: what was built from ``advertised()`` is stale once this moved."""
        self.quotas: ClientQuotas | None = None
        """The client quotas while any is set (see the module docstring)."""
        self.acl = acl
        """The authorizer's ACLs (None: no authorizer): the APIs of ``CLUSTER_OPERATIONS`` are checked here."""
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
        quotas = self.quotas
        if quotas is not None:
            return await self._throttled(quotas, api, frame, client)
        header, body = api.decode(frame)
        return await self._answer(api, RequestContext(header, client), body)

    async def _throttled(
        self, quotas: ClientQuotas, api: Api, frame: bytearray, client: ClientAddress
    ) -> Response | None:
        """The general path while quotas are set: the answer, recorded and throttled; the request's loop time is its
        decoding and the handler's steps, not its waits."""
        size = len(frame)
        started = time.perf_counter_ns()
        header, body = api.decode(frame)
        context = RequestContext(header, client)
        if api.key in EXEMPT or (api.key == ApiKey.FETCH and body.replica_id >= 0):
            return await self._answer(api, context, body)
        decode_ns = time.perf_counter_ns() - started
        timed = _Timed(self._answer(api, context, body))
        response = await timed
        loop_ns = decode_ns + timed.step_ns
        return self._throttle(quotas, api.key, header.api_version, client, header.client_id, size, loop_ns, response)

    async def _answer(self, api: Api, context: RequestContext, body: Any) -> Response | None:
        """The encoded answer of the handler, or of the API's error builder when the handler failed."""
        header = context.header
        started = time.perf_counter() if request_log.isEnabledFor(logging.DEBUG) else None
        try:
            acl = self.acl
            result: HandlerResult
            if acl is not None and cluster_refused(acl, context):
                result = api.error_response(context, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                result = await api.handle(context, body)
            response = _encoded(header.correlation_id, api.key, header.api_version, result)
            if started is not None:
                _log_completed(context, api.key, started)
            return response
        except Exception as exc:
            code = error_code_of(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("error handling %s v%d from %s", api.key.name, header.api_version, context.client.host)
            return _encoded(header.correlation_id, api.key, header.api_version, api.error_response(context, body, code))

    def _record(
        self,
        quotas: ClientQuotas,
        api_key: int,
        client: ClientAddress,
        client_id: str | None,
        request_bytes: int,
        response_bytes: int,
        loop_ns: int,
    ) -> int:
        """Record one answered request against the quotas of its client; the throttle time (0: none)."""
        user = quotas.sanitized(client.user)
        sanitized = quotas.sanitized(client_id)
        now_ms = quotas.time_ms()
        throttle_ms = quotas.request.record(user, sanitized, loop_ns / 10_000_000, now_ms)
        if api_key == ApiKey.PRODUCE:
            throttle_ms = max(throttle_ms, quotas.produce.record(user, sanitized, request_bytes, now_ms))
        elif api_key == ApiKey.FETCH and response_bytes:
            throttle_ms = max(throttle_ms, quotas.fetch.record(user, sanitized, response_bytes, now_ms))
            if throttle_ms > 0:  # the records are not sent: the throttled answer is empty
                quotas.fetch.record(user, sanitized, -response_bytes, now_ms)
        return throttle_ms

    def _throttle(
        self,
        quotas: ClientQuotas,
        api_key: int,
        api_version: int,
        client: ClientAddress,
        client_id: str | None,
        request_bytes: int,
        loop_ns: int,
        response: Response | None,
    ) -> Response | None:
        """Record an encoded answer (None: produce with acks=0) and throttle it if a quota is exceeded."""
        response_bytes = 0 if response is None else I32.unpack_from(_head(response), 0)[0] + 4
        throttle_ms = self._record(quotas, api_key, client, client_id, request_bytes, response_bytes, loop_ns)
        if throttle_ms <= 0:
            return response
        client.mute(throttle_ms)
        if response is None:
            return None
        if api_key == ApiKey.FETCH:
            correlation_id = I32.unpack_from(_head(response), 4)[0]
            return encode_fetch_response(api_version, correlation_id, [], throttle_time_ms=throttle_ms)
        return _with_throttle_time(api_key, api_version, response, throttle_ms)

    def now(self, frame: bytearray, client: ClientAddress) -> NowResult:
        """The immediate answer to ``frame`` from its API's ``now`` handler, or LATER (no such handler, a version out
        of range, an unknown API: the general path answers or refuses those)."""
        api_key, api_version, correlation_id = peek_api(frame)
        api = self.apis.get(api_key)
        if api is None or api.now is None or not api.min_version <= api_version <= api.max_version:
            return LATER
        if request_log.isEnabledFor(logging.DEBUG):
            return self._logged_now(api, frame, api_version, correlation_id, client)
        if self.quotas is None:
            return api.now(frame, api_version, correlation_id, client)
        return self._throttled_now(self.quotas, api, frame, api_version, correlation_id, client)

    def _logged_now(
        self, api: Api, frame: bytearray, api_version: int, correlation_id: int, client: ClientAddress
    ) -> NowResult:
        """The immediate path while the request log is at DEBUG: the answer, and its line once it is complete."""
        assert api.now is not None
        context = RequestContext.of_frame(frame, client)
        started = time.perf_counter()
        if self.quotas is None:
            result = api.now(frame, api_version, correlation_id, client)
        else:
            result = self._throttled_now(self.quotas, api, frame, api_version, correlation_id, client)
        if result is LATER:
            return result
        if result is None or isinstance(result, bytes | list):
            _log_completed(context, api.key, started)
            return result

        async def completed(answer: Awaitable[Response | None]) -> Response | None:
            response = await answer
            _log_completed(context, api.key, started)
            return response

        return completed(result)

    def _throttled_now(
        self,
        quotas: ClientQuotas,
        api: Api,
        frame: bytearray,
        api_version: int,
        correlation_id: int,
        client: ClientAddress,
    ) -> NowResult:
        """The immediate path while quotas are set: the answer, recorded and throttled once it is complete."""
        assert api.now is not None
        size = len(frame)
        if api.key in EXEMPT:
            return api.now(frame, api_version, correlation_id, client)
        client_id = parse_request_header(frame, False).client_id
        started = time.perf_counter_ns()
        result = api.now(frame, api_version, correlation_id, client)
        loop_ns = time.perf_counter_ns() - started
        if result is LATER:
            return result
        if result is None or isinstance(result, bytes | list):
            return self._throttle(quotas, api.key, api_version, client, client_id, size, loop_ns, result)

        async def completed(answer: Awaitable[Response | None]) -> Response | None:
            return self._throttle(quotas, api.key, api_version, client, client_id, size, loop_ns, await answer)

        return completed(result)

    def _api_versions_fallback(self, correlation_id: int) -> bytes:
        """A v0 ApiVersions response with UNSUPPORTED_VERSION and our ranges, as Kafka answers a newer client."""
        body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self.advertised()}
        return encode_response(correlation_id, build(response_schema(ApiKey.API_VERSIONS, 0), body))


EXEMPT = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
)
"""APIs no client quota applies to (Kafka's cluster actions, and what a client sends before it is identified)."""

_THROTTLE_POSITIONS: dict[tuple[int, int], int] = {}
"""(api key, version) -> offset of throttle_time_ms in the response frame when only fixed-size fields precede it in
the body, else -1."""

_FIXED_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "error_code": 2, "bool": 1, "uint16": 2}


def _throttle_position(api_key: int, api_version: int) -> int:
    position = _THROTTLE_POSITIONS.get((api_key, api_version))
    if position is None:
        schema = response_schema(api_key, api_version)
        # after the size prefix, correlation_id and the empty tagged-field section of a flexible response header
        position = 8 + bool(schema.__flexible__)
        for f in dataclasses.fields(schema):
            if f.name == "throttle_time":
                break
            size = _FIXED_SIZES.get(f.metadata.get("kafka_type", ""))
            if size is None:
                position = -1
                break
            position += size
        else:
            position = -1
        _THROTTLE_POSITIONS[api_key, api_version] = position
    return position


def _with_throttle_time(api_key: int, api_version: int, response: Response, throttle_ms: int) -> Response:
    """An encoded response with its throttle_time_ms set: Produce's is its last field, other APIs' (that have one)
    follows fixed-size fields only (most have it first)."""
    if api_key == ApiKey.PRODUCE:
        assert isinstance(response, bytes)
        return with_throttle_time(response, api_version, throttle_ms)
    position = _throttle_position(api_key, api_version)
    if position < 0:
        return response
    head = _head(response)
    patched = head[:position] + I32.pack(throttle_ms) + head[position + 4 :]
    return patched if isinstance(response, bytes) else [patched, *response[1:]]


def _head(response: Response) -> bytes:
    """The first bytes of a response frame (a piecewise response starts with its size and header)."""
    head = response if isinstance(response, bytes) else response[0]
    assert isinstance(head, bytes)
    return head


class _Timed:
    """Awaits a coroutine, measuring the time its steps ran on the loop (``step_ns``) apart from the time it waited;
    ``wall_ns`` is the whole time it took."""

    def __init__(self, coroutine: Coroutine[Any, Any, Response | None]) -> None:
        self._coroutine = coroutine
        self.step_ns = 0
        self.wall_ns = 0

    def __await__(self) -> Generator[Any, Any, Response | None]:
        coroutine = self._coroutine
        began = time.perf_counter_ns()
        sent: Any = None
        raised: BaseException | None = None
        try:
            while True:
                started = time.perf_counter_ns()
                try:
                    waiting = coroutine.send(sent) if raised is None else coroutine.throw(raised)
                except StopIteration as stop:
                    return cast(Response | None, stop.value)
                finally:
                    self.step_ns += time.perf_counter_ns() - started
                try:
                    sent, raised = (yield waiting), None
                except BaseException as exc:  # delivered into the coroutine, as ``await`` would
                    sent, raised = None, exc
        finally:
            self.wall_ns = time.perf_counter_ns() - began


def _encoded(correlation_id: int, api_key: int, api_version: int, result: HandlerResult) -> Response | None:
    """The response frame for a handler's result (a dict is shaped into the response schema of the version)."""
    if result is None or isinstance(result, bytes | list):
        return result
    return encode_response(correlation_id, build(response_schema(api_key, api_version), result))
