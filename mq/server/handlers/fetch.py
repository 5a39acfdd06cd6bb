"""Fetch: file slices from the partitions' logs, long-polled, answered with the piecewise encoder (sendfile).

Fetch sessions are answered as "no session" (session id 0), which every client accepts and then sends full
requests. read_committed reads up to the last stable offset and gets, per partition with records, the aborted
transactions those records overlap.

Both paths share one body: the frame is read by ``decode_fetch_request`` and ``ReplicaManager.fetch_or_park``
either answers at once or parks the fetch, whose future the purgatory completes with the encoded response (no task
per request). The immediate path (``now``) takes every consumer fetch of v4+; a follower's fetch (replica_id >= 0)
and a v0-v3 fetch are left to the general path.

Fetch v0-v3 clients read message sets: each partition's first batch is read whole, and the batches read are
down-converted (``mq.records.convert``) to magic 0 (v0-v1) or 1 (v2-v3) within each partition's
``partition_max_bytes`` (and v3's response ``max_bytes``), ending with a partial message when not even one fits, as
Kafka's brokers answer. The conversion runs on a worker thread once the fetch is answered; the v4+ path is unchanged
(file slices, sendfile).

A version before v6 gets NOT_LEADER_OR_FOLLOWER for a partition in an offline log dir (KAFKA_STORAGE_ERROR from
v6), a version before v10 UNSUPPORTED_COMPRESSION_TYPE for a topic whose compression.type is zstd, and a consumer's
v0-v3 fetch that reads records UNSUPPORTED_VERSION for a topic with message.downconversion.enable=false, as Kafka 2.8
answers them.

A consumer's Fetch v11+ (KIP-392) is answered by a follower too, up to the follower's high watermark, as Kafka 2.8
answers it; mq names no preferred read replica. A read_committed fetch is answered by the leader only: followers
keep no producer state, so they do not know the last stable offset.

From v13 topics are named by id: each id is resolved through the metadata cache; a partition of an id no topic has
answers UNKNOWN_TOPIC_ID, and one whose local replica belongs to another topic id (the topic was deleted and
created again and this broker has not caught up) INCONSISTENT_TOPIC_ID; answers name topics by id. From v15 the
replica id comes from replica_state. From v16 a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
names its current leader from the metadata cache, and the response those leaders' endpoints on the request's
listener (KIP-951). v17's replica directory id is read and not used (one log dir per partition is where it is);
v18's replica high watermark (KIP-1166) is honoured by the replica manager: a follower whose high watermark is behind
is answered at once rather than parked.

A partition this broker hosts no replica of is NOT_LEADER_OR_FOLLOWER when the metadata knows it
(``ReplicaManager.leader_partition``), so it names its leader too.

With an authorizer, a consumer needs READ on each topic and a follower CLUSTER_ACTION on the cluster; a refused
partition answers TOPIC_AUTHORIZATION_FAILED (no wait is spent on it: a fetch of only refused partitions is answered
at once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import cast

from mq.errors import ErrorCode, error_code_of
from mq.protocol.api_keys import ApiKey
from mq.protocol.fetch_request import MAX_VERSION, FetchPartitionRequest, FetchRequest, decode_fetch_request
from mq.protocol.fetch_response import (
    NODE_ENDPOINTS_FROM,
    TRANSACTIONS_FROM,
    EmptyShape,
    FetchPartition,
    FetchTopic,
    TopicKey,
    encode_empty_fetch_response,
    encode_fetch_response,
    keyed,
)
from mq.protocol.response_writer import NO_LEADER, NodeEndpoint
from mq.records.convert import down_convert
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import LATER, Api, NowResult, RequestContext
from mq.server.authorization import allowed_names, allows_cluster
from mq.server.metadata_cache import MetadataCache
from mq.server.network import ClientAddress, Response
from mq.server.purgatory import DelayedFuture, waited
from mq.server.replica_manager import FetchRequestPartition, FetchResult, ReplicaManager
from mq.storage.log_segment import FileSlice
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)


REFUSED = FetchResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
ZSTD_FROM = 10
"""Fetch v10+ may read zstd batches (KIP-110); older versions get UNSUPPORTED_COMPRESSION_TYPE for a zstd topic."""
FOLLOWER_READS_FROM = 11
"""Fetch v11+ carries client metadata (KIP-392): a consumer may then read a follower, up to its high watermark; older
versions and replicas get NOT_LEADER_OR_FOLLOWER from a follower."""
STORAGE_ERROR_FROM = 6
"""Fetch v6+ clients know KAFKA_STORAGE_ERROR; older ones get NOT_LEADER_OR_FOLLOWER instead, which makes them
refresh their metadata and retry."""
UNKNOWN_ID = FetchResult(ErrorCode.UNKNOWN_TOPIC_ID)
INCONSISTENT_ID = FetchResult(ErrorCode.INCONSISTENT_TOPIC_ID)
LEADER_ERRORS = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH))
"""The errors whose partitions name their current leader from v16."""


def keys(request: FetchRequest) -> Sequence[TopicKey]:
    """The request's topics as its response names them: by id from v13, by name below."""
    return [topic for topic, _ in request.topics] if request.topic_ids is None else request.topic_ids


def _unresolved(topic_id: uuid.UUID) -> str:
    """The name a topic id no topic has stands under in a request: one no topic can have ('?' is not allowed)."""
    return f"?{topic_id}"


def fetch_api(replica_manager: ReplicaManager, acl: AclCache | None = None, cache: MetadataCache | None = None) -> Api:
    """Fetch over ``replica_manager``, authorized by ``acl`` (None: no authorizer); ``cache`` resolves the topic ids
    of v13+ requests and names current leaders from v16 (None: no id is known and no leader named)."""

    def resolve(request: FetchRequest) -> dict[TopicPartition, FetchResult]:
        """Name the topics of a v13+ ``request`` from their ids, in place; the partitions to answer at once
        (UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID)."""
        failed: dict[TopicPartition, FetchResult] = {}
        if request.topic_ids is None:
            return failed
        topics: list[tuple[str, list[FetchPartitionRequest]]] = []
        for topic_id, (_, partitions) in zip(request.topic_ids, request.topics, strict=True):
            name = None if cache is None else cache.topic_name(topic_id)
            if name is None:
                name = _unresolved(topic_id)
                failed.update((TopicPartition(name, p[0]), UNKNOWN_ID) for p in partitions)
            else:
                stored = cache.topics[name].topic_id if cache is not None else None
                for p in partitions:
                    tp = TopicPartition(name, p[0])
                    local = replica_manager.partitions.get(tp)
                    if local is not None and local.topic_id is not None and local.topic_id != stored:
                        failed[tp] = INCONSISTENT_ID
            topics.append((name, partitions))
        request.topics = topics
        return failed

    def leaders(
        listener: str, results: dict[TopicPartition, FetchResult]
    ) -> tuple[dict[TopicPartition, tuple[int, int]], list[NodeEndpoint]]:
        """KIP-951: the current leader of each partition answered with a leader error, and their endpoints."""
        found: dict[TopicPartition, tuple[int, int]] = {}
        endpoints: dict[int, NodeEndpoint] = {}
        if cache is None:
            return found, []
        for tp, r in results.items():
            if r.error in LEADER_ERRORS:
                found[tp], broker = cache.current_leader(tp, listener)
                if broker is not None:
                    endpoints[broker.broker_id] = (broker.broker_id, broker.host, broker.port, broker.rack)
        return found, list(endpoints.values())

    def readable(context: RequestContext, request: FetchRequest, unknown: set[str]) -> set[str]:
        """The topics of the request the client may fetch from (``unknown``: the names of unresolved ids, not
        asked about)."""
        if request.replica_id >= 0:
            allowed = allows_cluster(acl, context, AclOperation.CLUSTER_ACTION)
            return {topic for topic, _ in request.topics} if allowed else set()
        names = (topic for topic, partitions in request.topics for _ in partitions if topic not in unknown)
        return allowed_names(acl, context, AclOperation.READ, ResourceType.TOPIC, names)

    def answer(
        version: int,
        correlation_id: int,
        request: FetchRequest,
        context: RequestContext | None,
        listener: str,
        deferred: list[Callable[[], Response]] | None = None,
    ) -> Response | DelayedFuture[Response]:
        """The response, or the parked fetch whose future gets it; ``context`` is None only without an
        authorizer, ``listener`` is the request's. With ``deferred`` (v0-v3), a response with records is left to
        the encoder appended to it (the answer is then a placeholder), so the caller runs the down-conversion off
        the loop."""
        refused = {} if request.topic_ids is None else resolve(request)
        if context is None and not refused:
            wanted = [
                FetchRequestPartition(TopicPartition(topic, p[0]), p[2], p[5], p[1], p[6])
                for topic, partitions in request.topics
                for p in partitions
            ]
        else:
            unknown = {tp.topic for tp, r in refused.items() if r is UNKNOWN_ID}
            allowed = None if context is None else readable(context, request, unknown)
            wanted = []
            for topic, partitions in request.topics:
                for p in partitions:
                    tp = TopicPartition(topic, p[0])
                    if tp in refused:
                        continue
                    if allowed is None or topic in allowed:
                        wanted.append(FetchRequestPartition(tp, p[2], p[5], p[1], p[6]))
                    else:
                        refused[tp] = REFUSED
        read_committed = request.isolation_level == 1
        no_aborted: list[tuple[int, int]] | None = [] if read_committed else None

        def encode(results: dict[TopicPartition, FetchResult]) -> Response:
            if version < ZSTD_FROM:
                consumer = request.replica_id < 0
                results = {tp: for_old_version(version, tp, r, consumer) for tp, r in results.items()}
            if refused:
                results = {**refused, **results}
            named = version >= NODE_ENDPOINTS_FROM and any(r.error in LEADER_ERRORS for r in results.values())
            if not named and all(r.records is None or not r.records.length for r in results.values()):
                ids = request.topic_ids
                shape: EmptyShape
                if ids is None:
                    shape = tuple((topic, tuple(p[0] for p in partitions)) for topic, partitions in request.topics)
                else:
                    shape = tuple(
                        (topic_id, tuple(p[0] for p in partitions))
                        for topic_id, (_, partitions) in zip(ids, request.topics, strict=True)
                    )
                order = (
                    (w.tp for w in wanted)
                    if not refused
                    else (TopicPartition(t, p[0]) for t, ps in request.topics for p in ps)
                )
                values = [
                    (r.error, r.high_watermark, r.last_stable_offset, r.log_start_offset)
                    for r in (results[tp] for tp in order)
                ]
                return encode_empty_fetch_response(version, correlation_id, shape, read_committed, values)
            if deferred is not None:
                deferred.append(functools.partial(with_records, results))
                return b""
            return with_records(results)

        def with_records(results: dict[TopicPartition, FetchResult]) -> Response:
            topics = []
            budget = request.max_bytes
            current, endpoints = leaders(listener, results) if version >= NODE_ENDPOINTS_FROM else ({}, [])
            for key, (topic, partitions) in zip(keys(request), request.topics, strict=True):
                answered = []
                for p in partitions:
                    tp = TopicPartition(topic, p[0])
                    r = results[tp]
                    records: bytes | FileSlice = r.records if r.records is not None and r.records.length else b""
                    if version < TRANSACTIONS_FROM and records:
                        assert isinstance(records, FileSlice)
                        magic = 0 if version < 2 else 1
                        records = down_convert(records.read(), magic, p[2], max(min(p[5], budget), 0))
                        budget -= len(records)
                    answered.append(
                        FetchPartition(
                            p[0],
                            r.error,
                            r.high_watermark,
                            r.last_stable_offset,
                            r.log_start_offset,
                            no_aborted if r.aborted_transactions is None else r.aborted_transactions,
                            -1,
                            records,
                            current.get(tp, NO_LEADER),
                        )
                    )
                topics.append(FetchTopic(*keyed(key), answered))
            return encode_fetch_response(version, correlation_id, topics, node_endpoints=endpoints)

        if refused and not wanted:
            return encode({})
        return replica_manager.fetch_or_park(
            wanted,
            replica_id=request.replica_id,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            answer=encode,
            whole_batch_each=version < TRANSACTIONS_FROM,
            leader_only=request.replica_id >= 0 or version < FOLLOWER_READS_FROM or read_committed,
            read_committed=read_committed,
        )

    def for_old_version(version: int, tp: TopicPartition, result: FetchResult, consumer: bool) -> FetchResult:
        """``result`` as Kafka 2.8's fetch handler answers a version before v10 (maybeConvertFetchedData,
        maybeDownConvertStorageError)."""
        if result.error == ErrorCode.KAFKA_STORAGE_ERROR and version < STORAGE_ERROR_FROM:
            return dataclasses.replace(result, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if result.error != ErrorCode.NONE:
            return result
        config = replica_manager.topic_config(tp.topic)
        if config.compression_type == "zstd":
            return FetchResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        converts = version < TRANSACTIONS_FROM and result.records is not None and result.records.length > 0
        if converts and consumer and not config.message_downconversion_enable:
            return FetchResult(ErrorCode.UNSUPPORTED_VERSION)
        return result

    async def handle(context: RequestContext, request: FetchRequest) -> Response:
        deferred: list[Callable[[], Response]] | None = [] if context.version < TRANSACTIONS_FROM else None
        found = answer(
            context.version,
            context.header.correlation_id,
            request,
            None if acl is None else context,
            context.client.listener,
            deferred,
        )
        response = await waited(found) if isinstance(found, DelayedFuture) else found
        if deferred:
            return await asyncio.to_thread(deferred[0])  # down-conversion: per-record work, off the loop
        return response

    def now(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> NowResult:
        header, request = decode_fetch_request(frame)
        if request.replica_id >= 0 or version < TRANSACTIONS_FROM:
            return LATER
        try:
            authorized = None if acl is None else RequestContext(header, client)
            found = answer(version, correlation_id, request, authorized, client.listener)
        except Exception as exc:  # answered as the dispatcher answers a handler's failure
            code = error_code_of(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("error handling FETCH v%d from %s", version, client.host)
            return error(RequestContext(header, client), request, code)
        if isinstance(found, DelayedFuture):
            future: asyncio.Future[Response] = found.future
            return future
        return found

    def error(context: RequestContext, request: FetchRequest, code: ErrorCode) -> bytes:
        topics = [
            FetchTopic(*keyed(key), [FetchPartition(p[0], code, records=b"") for p in partitions])
            for key, (_, partitions) in zip(keys(request), request.topics, strict=True)
        ]
        pieces = encode_fetch_response(context.version, context.header.correlation_id, topics)
        return b"".join(cast(list[bytes], pieces))  # no records: no file regions

    return Api(ApiKey.FETCH, 0, MAX_VERSION, handle, error, decode_fetch_request, now)
