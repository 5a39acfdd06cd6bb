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

Produce v0-v2 bring message sets (magic 0 and 1): the general path takes them, and up-converts each partition's set
to one v2 batch (``mq.records.convert``) on a worker thread before it is appended, so the log holds v2 batches only;
a set that does not convert (a partial message, a CRC mismatch) answers CORRUPT_MESSAGE for its partition, and so
does a set refused with INVALID_RECORD (a keyless record on a compacted topic): those clients predate that code. From
v3 a partition's records must be one v2 batch (INVALID_RECORD), zstd only from v7 (UNSUPPORTED_COMPRESSION_TYPE), as
Kafka's ProduceRequest validates them.
"""

from __future__ import annotations

import asyncio

from mq.errors import CorruptRecordError, ErrorCode, UnsupportedCompressionError
from mq.protocol.api_keys import ApiKey
from mq.protocol.produce_request import (
    TRANSACTIONAL_FROM,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    decode_produce_request,
    read_one_partition,
)
from mq.protocol.produce_response import PartitionResponse, encode_one_partition, encode_produce_response
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


def produce_api(replica_manager: ReplicaManager, acl: AclCache | None = None) -> Api:
    """Produce over ``replica_manager``, authorized by ``acl`` (None: no authorizer)."""

    def answer_one(
        version: int,
        correlation_id: int,
        client_id: str | None,
        transactional_refused: bool,
        acks: int,
        timeout_ms: int,
        topic: str,
        index: int,
        records: memoryview | None,
        writable: bool,
    ) -> Answer:
        """The answer to a request for one topic with one partition (``writable``: the client may write to it)."""
        refusal = _refusal(acks, transactional_refused, topic, client_id == ADMIN_CLIENT_ID, writable)
        if refusal is None and records:
            refusal = _records_refusal(version, records)
        if refusal is not None or not records:
            if acks == 0:
                return None
            code = ErrorCode.CORRUPT_MESSAGE if refusal is None else refusal
            return encode_produce_response(version, correlation_id, [(topic, [PartitionResponse(index, code)])])
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
            return encode_produce_response(version, correlation_id, [(topic, [answer])])
        base_offset, log_append_time_ms, log_start_offset = result
        if acks == 1:
            return encode_one_partition(
                version, correlation_id, topic, index, 0, base_offset, log_append_time_ms, log_start_offset
            )

        def encoded(found: list[ErrorCode]) -> bytes:
            return encode_one_partition(
                version, correlation_id, topic, index, found[0], base_offset, log_append_time_ms, log_start_offset
            )

        return replica_manager.when_replicated({tp: base_offset}, timeout_ms, encoded)

    def answer_many(
        version: int,
        correlation_id: int,
        client_id: str | None,
        request: ProduceRequest,
        writable: set[str] | None,
        transactional_refused: bool,
    ) -> Answer:
        """The answer to a request of any shape: partitions named twice are appended once (the last record set)
        and answered each time; a topic named twice is answered once, with all its partitions. ``writable``: the
        topics the client may write to (None: all)."""
        acks = request.acks
        internal_allowed = client_id == ADMIN_CLIENT_ID
        entries: dict[TopicPartition, memoryview] = {}
        refused: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topic_data:
            for p in topic.partition_data:
                tp = TopicPartition(topic.name, p.index)
                allowed = writable is None or topic.name in writable
                refusal = _refusal(acks, transactional_refused, topic.name, internal_allowed, allowed)
                if refusal is not None:
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
            by_topic: dict[str, list[PartitionResponse]] = {}
            for topic in request.topic_data:
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
                    else:
                        answer = PartitionResponse(
                            p.index, outcomes[tp], r.base_offset, r.log_append_time_ms, r.log_start_offset
                        )
                    by_topic.setdefault(topic.name, []).append(answer)
            return encode_produce_response(version, correlation_id, list(by_topic.items()))

        appended = {tp: r.base_offset for tp, r in results.items() if isinstance(r, AppendResult)}
        if acks == 1 or not appended:
            return encoded(dict.fromkeys(appended, ErrorCode.NONE))
        return replica_manager.when_replicated(
            appended, request.timeout_ms, lambda found: encoded(dict(zip(appended, found, strict=True)))
        )

    def answer(version: int, correlation_id: int, context: RequestContext, request: ProduceRequest) -> Answer:
        topics = request.topic_data
        names = (t.name for t in topics)
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
        if len(topics) == 1 and len(topics[0].partition_data) == 1:
            p = topics[0].partition_data[0]
            return answer_one(
                version,
                correlation_id,
                client_id,
                transactional_refused,
                request.acks,
                request.timeout_ms,
                topics[0].name,
                p.index,
                p.records,
                writable is None or topics[0].name in writable,
            )
        return answer_many(version, correlation_id, client_id, request, writable, transactional_refused)

    def now(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> NowResult:
        if version < TRANSACTIONAL_FROM:
            return LATER
        one = read_one_partition(frame, version)
        if one is not None:
            client_id, _, acks, timeout_ms, topic, index, records = one  # a frame without a transactional id
            writable = acl is None or allows(
                acl, RequestContext.of_frame(frame, client), AclOperation.WRITE, ResourceType.TOPIC, topic
            )
            refused = records is not None and is_transactional_batch(records)
            return answer_one(
                version, correlation_id, client_id, refused, acks, timeout_ms, topic, index, records, writable
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
        topics = [(t.name, [PartitionResponse(p.index, code) for p in t.partition_data]) for t in request.topic_data]
        return encode_produce_response(context.version, context.header.correlation_id, topics)

    return Api(ApiKey.PRODUCE, 0, 9, handle, error, decode_produce_request, now)


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
            ProduceTopic(t.name, [ProducePartition(p.index, converted(p.records)) for p in t.partition_data])
            for t in request.topic_data
        ],
    )
