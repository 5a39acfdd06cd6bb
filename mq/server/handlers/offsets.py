"""ListOffsets (earliest, latest, max timestamp, earliest local, latest tiered, by timestamp through the time index)
and DeleteRecords.

The max-timestamp spec (-3, KIP-734, v7+) answers the offset and timestamp of the first record holding the log's
largest timestamp. Logs have no remote (tiered) segments: earliest-local (-4, v8+) answers the log start offset and
latest-tiered (-5, v9+) offset -1 with leader epoch -1, as Kafka answers for a topic without remote storage. A special
timestamp asked before its version (or an unknown negative one) answers UNSUPPORTED_VERSION for its partition. v10's
timeout_ms bounds reads from remote storage: with none, every answer is immediate. While a new leader's high watermark
lags behind the start of its epoch, a consumer's latest offset (or a timestamp past what it may read) answers
OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5). From v1 a partition named twice is refused with INVALID_REQUEST
at each mention; from v4 a requester's current leader epoch is checked (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), as
Kafka 2.8 answers. A partition this broker hosts no replica of answers NOT_LEADER_OR_FOLLOWER when the metadata knows
it, UNKNOWN_TOPIC_OR_PARTITION otherwise (``ReplicaManager.leader_partition``).

ListOffsets v0 asks for up to ``max_num_offsets`` offsets and answers them as ``old_style_offsets``, descending
(``legacy_offsets``): the log end for LATEST, the log start for EARLIEST, and for a timestamp the base offset of
the newest segment whose file was last modified at or before it, followed by older segments' base offsets.

With an authorizer, ListOffsets needs DESCRIBE and DeleteRecords DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
for its partitions."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mq.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from mq.protocol.api_keys import ApiKey
from mq.protocol.list_offsets import EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED, MAX_TIMESTAMP, SPECIAL_FROM
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names
from mq.server.replica_manager import ReplicaManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

HIGH_WATERMARK_OFFSET = -1
OFFSET_NOT_AVAILABLE_FROM = 5
"""ListOffsets v5+ answers OFFSET_NOT_AVAILABLE; older versions get LEADER_NOT_AVAILABLE instead."""


def _offset_not_available(version: int, tp: TopicPartition, high_watermark: int, epoch_start: int | None) -> KafkaError:
    """Kafka's answer to a consumer's latest offset (or a timestamp past what it may read) while a new leader's high
    watermark lags behind the start of its epoch."""
    return KafkaError(
        f"Failed to fetch offsets for partition {tp} as its high watermark ({high_watermark}) is lagging behind the "
        f"start offset from the beginning of this epoch ({epoch_start}).",
        ErrorCode.OFFSET_NOT_AVAILABLE if version >= OFFSET_NOT_AVAILABLE_FROM else ErrorCode.LEADER_NOT_AVAILABLE,
    )


def offsets_apis(replica_manager: ReplicaManager, acl: AclCache | None = None) -> list[Api]:
    """ListOffsets and DeleteRecords over ``replica_manager``, authorized by ``acl`` (None: no authorizer)."""

    def list_one(
        version: int,
        tp: TopicPartition,
        timestamp: int,
        consumer: bool,
        current_leader_epoch: int,
        read_committed: bool,
    ) -> dict[str, Any]:
        answer: dict[str, Any] = {"partition_index": tp.partition, "error_code": 0, "timestamp": -1, "offset": -1}
        if timestamp < 0 and SPECIAL_FROM.get(timestamp, version + 1) > version:
            answer["error_code"] = ErrorCode.UNSUPPORTED_VERSION
            return answer
        try:
            partition = replica_manager.leader_partition(tp, current_leader_epoch)
            if not consumer:
                limit = partition.log_end_offset
            else:
                limit = partition.last_stable_offset if read_committed else partition.high_watermark
            epoch_start = partition.leader_epoch_start_offset
            lagging = consumer and epoch_start is not None and epoch_start > partition.high_watermark
            answer["leader_epoch"] = partition.leader_epoch
            if timestamp == LATEST:
                if lagging:
                    raise _offset_not_available(version, tp, partition.high_watermark, epoch_start)
                answer["offset"] = limit
            elif timestamp in (EARLIEST, EARLIEST_LOCAL):
                answer["offset"] = partition.log_start_offset
            elif timestamp == LATEST_TIERED:
                answer["leader_epoch"] = -1
            else:
                log: Log = partition.log
                found = (
                    log.fetch_max_timestamp()
                    if timestamp == MAX_TIMESTAMP
                    else log.fetch_offset_by_timestamp(timestamp)
                )
                if found is not None and found[0] < limit:
                    answer["offset"], answer["timestamp"] = found
                elif lagging:
                    raise _offset_not_available(version, tp, partition.high_watermark, epoch_start)
        except KafkaError as exc:
            answer["error_code"] = exc.code
        return answer

    def list_legacy(tp: TopicPartition, timestamp: int, max_num_offsets: int, consumer: bool) -> dict[str, Any]:
        answer: dict[str, Any] = {"partition_index": tp.partition, "error_code": 0, "old_style_offsets": []}
        try:
            partition = replica_manager.leader_partition(tp)
            log: Log = partition.log
            answer["old_style_offsets"] = legacy_offsets(
                log.legacy_offset_candidates(),
                timestamp,
                max_num_offsets,
                partition.high_watermark if consumer else None,
            )
        except KafkaError as exc:
            answer["error_code"] = exc.code
        return answer

    async def list_offsets(context: RequestContext, request: Any) -> dict[str, Any]:
        consumer = int(request.replica_id) < 0
        read_committed = context.version >= 2 and int(request.isolation_level) == 1
        if context.version == 0:
            return list_offsets_v0(context, request, consumer)
        described = allowed_names(
            acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
        )
        named = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
        topics = [
            {
                "name": t.name,
                "partitions": [
                    refused_listing(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if t.name not in described
                    else refused_listing(p.partition_index, ErrorCode.INVALID_REQUEST)
                    if named[t.name, p.partition_index] > 1  # Kafka's duplicatePartitions: each mention refused
                    else list_one(
                        context.version,
                        TopicPartition(t.name, p.partition_index),
                        p.timestamp,
                        consumer,
                        getattr(p, "current_leader_epoch", -1),  # v4+
                        read_committed,
                    )
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    def list_offsets_v0(context: RequestContext, request: Any, consumer: bool) -> dict[str, Any]:
        described = allowed_names(
            acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
        )
        topics = [
            {
                "name": t.name,
                "partitions": [
                    list_legacy(TopicPartition(t.name, p.partition_index), p.timestamp, p.max_num_offsets, consumer)
                    if t.name in described
                    else {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        "old_style_offsets": [],
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    def refused_listing(index: int, code: ErrorCode) -> dict[str, Any]:
        return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1}

    def list_offsets_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        topics = [
            {
                "name": t.name,
                "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
            }
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    def delete_one(tp: TopicPartition, offset: int) -> dict[str, Any]:
        try:
            partition = replica_manager.leader_partition(tp)
            target = partition.high_watermark if offset == HIGH_WATERMARK_OFFSET else offset
            if target < 0 or target > partition.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {target} of partition {tp} since it is larger than "
                    f"the high watermark {partition.high_watermark}"
                )
            log: Log = partition.log
            log.maybe_increment_log_start_offset(target)
            return {"partition_index": tp.partition, "low_watermark": partition.log_start_offset, "error_code": 0}
        except KafkaError as exc:
            return {"partition_index": tp.partition, "low_watermark": -1, "error_code": exc.code}

    async def delete_records(context: RequestContext, request: Any) -> dict[str, Any]:
        deletable = allowed_names(
            acl, context, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
        )
        topics = [
            {
                "name": t.name,
                "partitions": [
                    delete_one(TopicPartition(t.name, p.partition_index), p.offset)
                    if t.name in deletable
                    else {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    }
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        deleted = [
            f"{t['name']}-{p['partition_index']} below {p['low_watermark']}"
            for t in topics
            for p in t["partitions"]
            if p["error_code"] == ErrorCode.NONE
        ]
        if deleted:
            audit(context, f"deleted records of {', '.join(deleted)}")
        return {"throttle_time": 0, "topics": topics}

    def delete_records_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "low_watermark": -1, "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    return [
        Api(ApiKey.LIST_OFFSETS, 0, 10, list_offsets, list_offsets_error),
        Api(ApiKey.DELETE_RECORDS, 0, 2, delete_records, delete_records_error),
    ]


def legacy_offsets(
    candidates: list[tuple[int, int]], timestamp: int, max_num_offsets: int, high_watermark: int | None
) -> list[int]:
    """ListOffsets v0's offsets from ``candidates`` ((offset, ms) pairs, oldest first): from the last (LATEST), the
    first (EARLIEST) or the last stamped at or before ``timestamp``, at most ``max_num_offsets`` going back, in
    descending order. For a consumer (``high_watermark`` given) offsets above the high watermark give way to it."""
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = max(min(max_num_offsets, start + 1), 0)
    offsets = sorted((candidates[start - i][0] for i in range(count)), reverse=True)
    if high_watermark is not None and any(offset > high_watermark for offset in offsets):
        offsets = [high_watermark, *(offset for offset in offsets if offset <= high_watermark)]
    return offsets
