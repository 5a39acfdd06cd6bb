"""Produce: per-partition appends through the replica manager; acks=0 gets no response at all.

With an authorizer, each topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED for its partitions, checked before
anything else of them); a request with a transactional id needs WRITE on it, else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Idempotent producers are authorized by InitProducerId. Authorizer or not, a
request of transactional records without a transactional id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as
Kafka's does.

Internal topics (``__consumer_offsets``) take appends only from their coordinators, not from clients: as in Kafka,
only the client id ``__admin_client`` may write to them; others get INVALID_TOPIC_EXCEPTION for those partitions.

Both paths share the answering code, so they answer the same frame with the same bytes. The immediate path reads a
one-topic, one-partition frame of the common layout with ``read_one_partition`` (no entity), appends synchronously
and answers acks=0/1 at once; acks=all answers at once when the high watermark already covers the batch, else
through a future the produce purgatory completes with the response frame. Other frames are decoded in full and
answered the same way.

Produce v13 names topics by id: each id is resolved through the metadata cache, and a partition of an id no topic
has answers UNKNOWN_TOPIC_ID (before authorization, which is by name); answers name topics as the request did. From
v10 a partition answered NOT_LEADER_OR_FOLLOWER carries the leader the metadata cache knows (id and epoch) and the
response the endpoints of those leaders on the request's listener (KIP-951). v11's TRANSACTION_ABORTABLE and v12's
implicit AddPartitionsToTxn concern transactional appends only, which are refused here. A partition this broker
hosts no replica of is NOT_LEADER_OR_FOLLOWER when the metadata knows it (``ReplicaManager.leader_partition``), so it
names its leader too.

Produce v0-v2 bring message sets (magic 0 and 1): the general path takes them, and up-converts each partition's set
to one v2 batch (``mq.records.convert``) on a worker thread before it is appended, so the log holds v2 batches only;
a set that does not convert (a partial message, a CRC mismatch) answers CORRUPT_MESSAGE for its partition, and so
does a set refused with INVALID_RECORD (a keyless record on a compacted topic): those clients predate that code. From
v3 a partition's records must be one v2 batch (INVALID_RECORD), zstd only from v7 (UNSUPPORTED_COMPRESSION_TYPE), as
Kafka's ProduceRequest validates them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from mq.errors import CorruptRecordError, ErrorCode, UnsupportedCompressionError
from mq.protocol.api_keys import ApiKey
from mq.protocol.produce_request import (
    MAX_VERSION,
    TOPIC_IDS_FROM,
    TRANSACTIONAL_FROM,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    decode_produce_request,
    read_one_partition,
)
from mq.protocol.produce_response import (
    CURRENT_LEADER_FROM,
    PartitionResponse,
    TopicKey,
    encode_one_partition,
    encode_produce_response,
)
from mq.protocol.response_writer import NodeEndpoint
from mq.records.batch_header import (
    CODEC_MASK,
    HEADER_PREFIX_SIZE,
    MAGIC_OFFSET,
    Codec,
    is_transactional_batch,
    peek_size,
)
from mq.records.convert import up_convert
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import LATER, Api, NowResult, RequestContext
from mq.server.authorization import allowed_names, allows
from mq.server.metadata_cache import MetadataCache
from mq.server.network import ClientAddress
from mq.server.partition import AppendResult
from mq.server.purgatory import settled
from mq.server.replica_manager import ProduceResult, ReplicaManager
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition

ADMIN_CLIENT_ID = "__admin_client"

Answer = bytes | None | asyncio.Future[bytes | None]


def _refusal(
    acks: int, transactional_refused: bool, topic: str, internal_allowed: bool, writable: bool
) -> ErrorCode | None:
    """Why a partition's records are refused before any append, in Kafka's order; None when they may be appended.
    ``transactional_refused``: the request's transactional id may not be written by the client."""
    if not writable:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if acks not in (-1, 0, 1):
        return ErrorCode.INVALID_REQUIRED_ACKS
    if transactional_refused:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if topic in INTERNAL_TOPICS and not internal_allowed:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return None


def _refused_as(version: int, code: ErrorCode) -> ErrorCode:
    """The code a refused append answers at ``version``: INVALID_RECORD came with Kafka 2.5, so Produce v0-v2 clients
    (0.8-0.10) get CORRUPT_MESSAGE, the code their brokers gave for an invalid message (a keyless record on a
    compacted topic, a bad inner message)."""
    if code == ErrorCode.INVALID_RECORD and version < TRANSACTIONAL_FROM:
        return ErrorCode.CORRUPT_MESSAGE
    return code


ZSTD_FROM = 7
"""Produce v7+ may carry zstd batches (KIP-110)."""
_ATTRIBUTES_LOW_BYTE = 22
"""Position of the low byte of a v2 batch's attributes (its codec bits)."""


def _records_refusal(version: int, records: memoryview) -> ErrorCode | None:
    """Kafka's ProduceRequest.validateRecords: from v3 a partition's records are exactly one complete batch of magic
    2 (else INVALID_RECORD), zstd-compressed only from v7 (else UNSUPPORTED_COMPRESSION_TYPE); older versions' message
    sets are not checked here. None when the records pass."""
    if version < TRANSACTIONAL_FROM:
        return None
    size = peek_size(records)
    if size is None or size > len(records) or len(records) < HEADER_PREFIX_SIZE:
        return ErrorCode.INVALID_RECORD  # no complete batch
    if records[MAGIC_OFFSET] != 2 or size < len(records):
        return ErrorCode.INVALID_RECORD
    if version < ZSTD_FROM and records[_ATTRIBUTES_LOW_BYTE] & CODEC_MASK == Codec.ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE  # a complete magic 2 batch holds its attributes
    return None


def produce_api(
    replica_manager: ReplicaManager, acl: AclCache | None = None, cache: MetadataCache | None = None
) -> Api:
    """Produce over ``replica_manager``, authorized by ``acl`` (None: no authorizer); ``cache`` resolves v13's topic
    ids and names the current leaders of v10+ answers (None: no topic id is known, no leader is named)."""

    def topic_name(topic_id: uuid.UUID) -> str | None:
        return None if cache is None else cache.topic_name(topic_id)

    def failed(
        version: int, correlation_id: int, key: TopicKey, topic: str, answer: PartitionResponse, listener: str
    ) -> bytes:
        """The answer for one partition of ``topic`` (``key`` as the request names it) that failed, with its current
        leader where KIP-951 asks for it."""
        endpoints: dict[int, NodeEndpoint] = {}
        answer = with_leader(version, topic, answer, listener, endpoints)
        return encode_produce_response(version, correlation_id, [(key, [answer])], 0, list(endpoints.values()))

    def with_leader(
        version: int, topic: str, answer: PartitionResponse, listener: str, endpoints: dict[int, NodeEndpoint]
    ) -> PartitionResponse:
        """``answer`` (of a partition of ``topic``) with its current leader when it is NOT_LEADER_OR_FOLLOWER in a
        v10+ answer; the leader's endpoint is added to ``endpoints``."""
        if cache is None or version < CURRENT_LEADER_FROM or answer.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return answer
        leader, broker = cache.current_leader(TopicPartition(topic, answer.index), listener)
        if broker is not None:
            endpoints[broker.broker_id] = (broker.broker_id, broker.host, broker.port, broker.rack)
        return PartitionResponse(
            answer.index,
            answer.error_code,
            error_message=answer.error_message,
            record_errors=answer.record_errors,
            current_leader=leader,
        )

    def answer_one(
        version: int,
        correlation_id: int,
        listener: str,
        client_id: str | None,
        transactional_refused: bool,
        acks: int,
        timeout_ms: int,
        key: TopicKey,
        topic: str,
        index: int,
        records: memoryview | None,
        writable: bool,
    ) -> Answer:
        """The answer to a request for one topic with one partition (``key``: the topic as the request names it;
        ``writable``: the client may write to it)."""
        refusal = _refusal(acks, transactional_refused, topic, client_id == ADMIN_CLIENT_ID, writable)
        if refusal is None and records:
            refusal = _records_refusal(version, records)
        if refusal is not None or not records:
            if acks == 0:
                return None
            code = ErrorCode.CORRUPT_MESSAGE if refusal is None else refusal
            return encode_produce_response(version, correlation_id, [(key, [PartitionResponse(index, code)])])
        tp = TopicPartition(topic, index)
        result = replica_manager.append_to_leader(tp, records, acks)
        if acks == 0:
            return None
        if isinstance(result, ProduceResult):
            answer = PartitionResponse(
                index,
                _refused_as(version, result.error),
                error_message=result.message,
                record_errors=result.record_errors,
            )
            return failed(version, correlation_id, key, topic, answer, listener)
        base_offset, log_append_time_ms, log_start_offset = result
        if acks == 1:
            return encode_one_partition(
                version, correlation_id, key, index, 0, base_offset, log_append_time_ms, log_start_offset
            )

        def encoded(found: list[ErrorCode]) -> bytes:
            return encode_one_partition(
                version, correlation_id, key, index, found[0], base_offset, log_append_time_ms, log_start_offset
            )

        return replica_manager.when_replicated({tp: base_offset}, timeout_ms, encoded)

    def unknown_id(version: int, correlation_id: int, acks: int, topic_id: uuid.UUID, index: int) -> Answer:
        """The answer to a request for one partition of a topic id no topic has."""
        if acks == 0:
            return None
        answer = PartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_ID)
        return encode_produce_response(version, correlation_id, [(topic_id, [answer])])

    def answer_many(
        version: int,
        correlation_id: int,
        listener: str,
        client_id: str | None,
        request: ProduceRequest,
        writable: set[str] | None,
        transactional_refused: bool,
    ) -> Answer:
        """The answer to a request of any shape: partitions named twice are appended once (the last record set)
        and answered each time; a topic named twice is answered once, with all its partitions. ``writable``: the
        topics the client may write to (None: all). Topics named by an id no topic has (an id and an empty name)
        answer UNKNOWN_TOPIC_ID."""
        acks = request.acks
        internal_allowed = client_id == ADMIN_CLIENT_ID
        entries: dict[TopicPartition, memoryview] = {}
        refused: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topic_data:
            for p in topic.partition_data:
                tp = TopicPartition(topic.name, p.index)
                allowed = writable is None or topic.name in writable
                refusal = _refusal(acks, transactional_refused, topic.name, internal_allowed, allowed)
                if topic.topic_id is not None and not topic.name:
                    refused[tp] = ErrorCode.UNKNOWN_TOPIC_ID
                elif refusal is not None:
                    refused[tp] = refusal
                elif p.records is None or not p.records:
                    refused[tp] = ErrorCode.CORRUPT_MESSAGE
                elif (invalid := _records_refusal(version, p.records)) is not None:
                    refused[tp] = invalid
                else:
                    entries[tp] = p.records
        results: dict[TopicPartition, ProduceResult | AppendResult] = {
            tp: replica_manager.append_to_leader(tp, records, acks) for tp, records in entries.items()
        }
        if acks == 0:
            return None

        def encoded(outcomes: dict[TopicPartition, ErrorCode]) -> bytes:
            by_topic: dict[TopicKey, list[PartitionResponse]] = {}
            endpoints: dict[int, NodeEndpoint] = {}
            for topic in request.topic_data:
                key: TopicKey = topic.name if topic.topic_id is None else topic.topic_id
                for p in topic.partition_data:
                    tp = TopicPartition(topic.name, p.index)
                    r = refused.get(tp) or results[tp]
                    if isinstance(r, ErrorCode):
                        answer = PartitionResponse(p.index, r)
                    elif isinstance(r, ProduceResult):
                        answer = PartitionResponse(
                            p.index,
                            _refused_as(version, r.error),
                            error_message=r.message,
                            record_errors=r.record_errors,
                        )
                        answer = with_leader(version, topic.name, answer, listener, endpoints)
                    else:
                        answer = PartitionResponse(
                            p.index, outcomes[tp], r.base_offset, r.log_append_time_ms, r.log_start_offset
                        )
                    by_topic.setdefault(key, []).append(answer)
            return encode_produce_response(version, correlation_id, list(by_topic.items()), 0, list(endpoints.values()))

        appended = {tp: r.base_offset for tp, r in results.items() if isinstance(r, AppendResult)}
        if acks == 1 or not appended:
            return encoded(dict.fromkeys(appended, ErrorCode.NONE))
        return replica_manager.when_replicated(
            appended, request.timeout_ms, lambda found: encoded(dict(zip(appended, found, strict=True)))
        )

    def answer(version: int, correlation_id: int, context: RequestContext, request: ProduceRequest) -> Answer:
        if version >= TOPIC_IDS_FROM:
            request = _named(request, topic_name)
        topics = request.topic_data
        names = (t.name for t in topics if t.topic_id is None or t.name)
        writable = None if acl is None else allowed_names(acl, context, AclOperation.WRITE, ResourceType.TOPIC, names)
        client_id = context.header.client_id
        transactional_id = request.transactional_id
        if transactional_id is None:  # transactional records need a transactional id
            transactional_refused = any(
                p.records is not None and is_transactional_batch(p.records) for t in topics for p in t.partition_data
            )
        else:
            transactional_refused = not allows(
                acl, context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
            )
        listener = context.client.listener
        if len(topics) == 1 and len(topics[0].partition_data) == 1 and (topics[0].topic_id is None or topics[0].name):
            topic, p = topics[0], topics[0].partition_data[0]
            return answer_one(
                version,
                correlation_id,
                listener,
                client_id,
                transactional_refused,
                request.acks,
                request.timeout_ms,
                topic.name if topic.topic_id is None else topic.topic_id,
                topic.name,
                p.index,
                p.records,
                writable is None or topic.name in writable,
            )
        return answer_many(version, correlation_id, listener, client_id, request, writable, transactional_refused)

    def now(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> NowResult:
        if version < TRANSACTIONAL_FROM:
            return LATER
        one = read_one_partition(frame, version)
        if one is not None:
            client_id, _, acks, timeout_ms, key, index, records = one  # a frame without a transactional id
            name = topic_name(key) if isinstance(key, uuid.UUID) else key
            if name is None:
                assert isinstance(key, uuid.UUID)
                return unknown_id(version, correlation_id, acks, key, index)
            writable = acl is None or allows(
                acl, RequestContext.of_frame(frame, client), AclOperation.WRITE, ResourceType.TOPIC, name
            )
            refused = records is not None and is_transactional_batch(records)
            return answer_one(
                version,
                correlation_id,
                client.listener,
                client_id,
                refused,
                acks,
                timeout_ms,
                key,
                name,
                index,
                records,
                writable,
            )
        header, request = decode_produce_request(frame)
        return answer(version, correlation_id, RequestContext(header, client), request)

    async def handle(context: RequestContext, request: ProduceRequest) -> bytes | None:
        header = context.header
        if header.api_version < TRANSACTIONAL_FROM:
            request = await asyncio.to_thread(_up_converted, request)  # per-record work, off the loop
        found = answer(header.api_version, header.correlation_id, context, request)
        return await settled(found)

    def error(context: RequestContext, request: ProduceRequest, code: ErrorCode) -> bytes | None:
        if request.acks == 0:
            return None
        topics: list[tuple[TopicKey, list[PartitionResponse]]] = [
            (t.name if t.topic_id is None else t.topic_id, [PartitionResponse(p.index, code) for p in t.partition_data])
            for t in request.topic_data
        ]
        return encode_produce_response(context.version, context.header.correlation_id, topics)

    return Api(ApiKey.PRODUCE, 0, MAX_VERSION, handle, error, decode_produce_request, now)


def _named(request: ProduceRequest, topic_name: Callable[[uuid.UUID], str | None]) -> ProduceRequest:
    """A v13+ ``request`` with each topic's name resolved from its id (empty when no topic has the id)."""
    topics = [
        ProduceTopic((topic_name(t.topic_id) or "") if t.topic_id is not None else t.name, t.partition_data, t.topic_id)
        for t in request.topic_data
    ]
    return ProduceRequest(request.transactional_id, request.acks, request.timeout_ms, topics)


def _up_converted(request: ProduceRequest) -> ProduceRequest:
    """``request`` with each partition's message set as one v2 batch; a set that does not convert becomes empty
    (answered CORRUPT_MESSAGE)."""

    def converted(records: memoryview | None) -> memoryview | None:
        if not records:
            return records
        try:
            batch = up_convert(records)
        except (CorruptRecordError, UnsupportedCompressionError):
            return memoryview(b"")
        return records if batch is None else memoryview(bytearray(batch))

    return ProduceRequest(
        request.transactional_id,
        request.acks,
        request.timeout_ms,
        [
            ProduceTopic(
                t.name, [ProducePartition(p.index, converted(p.records)) for p in t.partition_data], t.topic_id
            )
            for t in request.topic_data
        ],
    )
