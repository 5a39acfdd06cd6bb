"""``__consumer_offsets``: writing group metadata and committed offsets as records, and reading a partition back.

Writes are one v2 batch per call, appended through the replica manager as the partition's leader with
``offsets.commit.required.acks`` (-1: the answer waits until the ISR has the batch, up to
``offsets.commit.timeout.ms``). Append errors are mapped as Kafka's coordinator maps them, so clients retry or
rediscover the coordinator. Loading reads a partition from its log start to its log end: the last value of a key
wins and a tombstone (null value) removes the key. Loading decodes every record, so it runs in a worker thread.

Transactional offset commits (TxnOffsetCommit) are written as a transactional batch of the producer; they count
once the producer's COMMIT marker follows them on the partition, and are dropped at its ABORT marker; those with no
marker yet are loaded as pending (``LoadedPartition.pending``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import (
    ConsumerGroupKey,
    ConsumerGroupValue,
    FormatError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_consumer_group_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from mq.records.batch_header import BatchHeader, iter_headers
from mq.records.default_batch import RecordBatchBuilder, iter_batch_records, read_end_txn_marker
from mq.server.coordinator_partitions import InternalTopicLogs
from mq.server.group_metadata import GroupMetadata
from mq.server.purgatory import settled
from mq.server.replica_manager import ProduceResult
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)
T = TypeVar("T")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

COORDINATOR_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
_TOO_LARGE = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE)


def group_append_error(code: ErrorCode) -> ErrorCode:
    """The error a group metadata write reports (JoinGroup/SyncGroup): a timeout means the rebalance goes on."""
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if code in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return COORDINATOR_APPEND_ERRORS.get(code, code)


def consumer_group_append_error(code: ErrorCode) -> ErrorCode:
    """The error a consumer-protocol group's records write reports (ConsumerGroupHeartbeat, DeleteGroups)."""
    if code in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return COORDINATOR_APPEND_ERRORS.get(code, code)


def offset_append_error(code: ErrorCode) -> ErrorCode:
    """The error an offset commit write reports."""
    if code in _TOO_LARGE:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return COORDINATOR_APPEND_ERRORS.get(code, code)


@dataclass
class LoadedPartition:
    """What one ``__consumer_offsets`` partition holds after replaying its log."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = field(default_factory=dict)
    pending: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = field(default_factory=dict)
    """Producer id -> group -> offsets committed in its open transaction."""
    consumer_groups: dict[str, dict[ConsumerGroupKey, ConsumerGroupValue]] = field(default_factory=dict)
    """Consumer-protocol groups: the live records of each."""


def replay_batches(log_: Log, buffer_bytes: int) -> Iterator[tuple[bytes, BatchHeader, int]]:
    """(data, header, from offset) of every v2 batch of a log from its start to its end, read ``buffer_bytes`` at a
    time: records below ``from offset`` were given with the previous read."""
    offset = log_.log_start_offset
    end = log_.log_end_offset
    while offset < end:
        info = log_.read(offset, buffer_bytes, max_offset=None, min_one_message=True)
        if info.records is None:
            break
        data = info.records.read()
        next_offset = offset
        for header in iter_headers(data):
            next_offset = header.next_offset
            if header.magic >= 2 and header.last_offset >= offset:
                yield data, header, offset
        if next_offset <= offset:
            break
        offset = next_offset


def read_partition(log_: Log, buffer_bytes: int) -> LoadedPartition:
    """Replay a partition's log from its start to its end (v2 batches; a transaction's offset commits wait for its
    marker)."""
    loaded = LoadedPartition()
    for data, header, offset in replay_batches(log_, buffer_bytes):
        if header.is_control:
            marker = read_end_txn_marker(data, header)
            pending = loaded.pending.pop(header.producer_id, {}) if marker is not None else {}
            if marker is not None and marker.commit:
                for group, offsets in pending.items():
                    loaded.offsets.setdefault(group, {}).update(offsets)
            continue
        target = loaded
        if header.is_transactional:
            target = LoadedPartition(offsets=loaded.pending.setdefault(header.producer_id, {}))
        for record in iter_batch_records(data, header):
            if record.offset >= offset and record.key is not None:
                apply_record(target, record.key, record.value)
    loaded.offsets = {group: offsets for group, offsets in loaded.offsets.items() if offsets}
    loaded.consumer_groups = {group: records for group, records in loaded.consumer_groups.items() if records}
    return loaded


def apply_record(loaded: LoadedPartition, key_bytes: bytes, value: bytes | None) -> None:
    """Replay one record: the last value of a key wins, a tombstone removes it; a record this broker cannot read is
    skipped."""
    try:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                loaded.offsets.get(key.group, {}).pop(tp, None)
            else:
                loaded.offsets.setdefault(key.group, {})[tp] = decode_offset_commit_value(value)
        elif isinstance(key, ConsumerGroupKey):
            decoded = None if value is None else decode_consumer_group_value(key.record, value)
            if decoded is None:
                loaded.consumer_groups.get(key.group, {}).pop(key, None)
            else:
                loaded.consumer_groups.setdefault(key.group, {})[key] = decoded
        elif value is None:
            loaded.groups.pop(key.group, None)
        else:
            loaded.groups[key.group] = decode_group_metadata_value(value)
    except (FormatError, UnicodeDecodeError) as exc:
        log.warning("skipping a __consumer_offsets record this broker cannot read: %s", exc)


def group_metadata_value(group: GroupMetadata, assignment: dict[str, bytes]) -> GroupMetadataValue:
    return GroupMetadataValue(
        group.protocol_type or "",
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        group.state_timestamp_ms,
        tuple(
            MemberMetadataValue(
                m.member_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                assignment.get(m.member_id, b""),
                m.group_instance_id,
            )
            for m in group.members.values()
        ),
    )


class GroupMetadataManager(InternalTopicLogs):
    topic = GROUP_METADATA_TOPIC_NAME

    def load(self, partition: int) -> LoadedPartition:
        log_ = self.log_of(partition)
        if log_ is None:
            return LoadedPartition()
        return read_partition(log_, self.config.offsets_load_buffer_size)

    def append_now(
        self,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None]],
        answer: Callable[[ErrorCode], T],
        producer: tuple[int, int] | None = None,
    ) -> T | asyncio.Future[T]:
        """Append ``records`` to ``partition`` now (as a transactional batch of ``producer``, (id, epoch), when
        given); ``answer(error)`` now, or (acks -1 while the ISR catches up) a future of it that the produce
        purgatory completes."""
        builder = (
            RecordBatchBuilder()
            if producer is None
            else RecordBatchBuilder(producer_id=producer[0], producer_epoch=producer[1], is_transactional=True)
        )
        now = self.time_ms()
        for key, value in records:
            builder.append(now, key, value)
        if not len(builder):
            return answer(ErrorCode.NONE)
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        acks = self.config.offsets_commit_required_acks
        appended = self.replica_manager.append_to_leader(tp, builder.build(), acks)
        if isinstance(appended, ProduceResult):
            return answer(appended.error)
        if acks != -1:
            return answer(ErrorCode.NONE)
        timeout_ms = self.config.offsets_commit_timeout_ms
        return self.replica_manager.when_replicated(
            {tp: appended.base_offset}, timeout_ms, lambda found: answer(found[0])
        )

    async def _append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> ErrorCode:
        return await settled(self.append_now(partition, records, lambda code: code))

    async def store_records(self, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Write a consumer-protocol group's records (tombstones too)."""
        return consumer_group_append_error(await self._append(partition, records))

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode:
        key = encode_group_metadata_key(GroupMetadataKey(group.group_id))
        value = encode_group_metadata_value(group_metadata_value(group, assignment))
        return group_append_error(await self._append(group.partition, [(key, value)]))

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetCommitValue],
        answer: Callable[[ErrorCode], T],
        producer: tuple[int, int] | None = None,
    ) -> T | asyncio.Future[T]:
        """Write ``offsets`` (in the transaction of ``producer``, (id, epoch), when given); ``answer(error)`` as
        ``append_now`` gives it."""
        records = [
            (
                encode_offset_commit_key(OffsetCommitKey(group.group_id, tp.topic, tp.partition)),
                encode_offset_commit_value(value),
            )
            for tp, value in offsets.items()
        ]
        return self.append_now(group.partition, records, lambda code: answer(offset_append_error(code)), producer)

    async def write_tombstones(
        self, partition: int, group_id: str, offsets: Iterable[TopicPartition], group_too: bool
    ) -> ErrorCode:
        """Remove offsets (and the group itself when ``group_too``) from the partition's compacted log."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition)), None) for tp in offsets
        ]
        if group_too:
            records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
        return offset_append_error(await self._append(partition, records))
