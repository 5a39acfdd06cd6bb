"""``__transaction_state``: each transactional id's metadata as records, and reading a partition back.

A transactional id lives in partition ``partition_for(transactional id)``; each change of its metadata appends one
record (key: the id, value: ``TransactionLogValue`` v0) as a v2 batch through the replica manager with acks=-1, and
the change takes effect only once the write succeeded. Loading replays a partition from its log start to its log
end: the last value of an id wins, a tombstone removes it. Loading decodes every record, so it runs in a worker
thread. Append errors map as Kafka's coordinator maps them, so clients retry or rediscover the coordinator.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import FormatError, partition_for
from mq.protocol.transaction_log import (
    TransactionLogValue,
    TransactionState,
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from mq.records.default_batch import RecordBatchBuilder, iter_batch_records
from mq.server.coordinator_partitions import InternalTopicLogs
from mq.server.group_metadata_manager import COORDINATOR_APPEND_ERRORS, replay_batches
from mq.server.purgatory import settled
from mq.server.replica_manager import ProduceResult
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
TXN_LOG_APPEND_TIMEOUT_MS = 30000
"""How long a write waits for the ISR (Kafka's coordinator uses ``request.timeout.ms``, 30 s)."""


@dataclass
class TransactionMetadata:
    """One transactional id's state on its coordinator. ``pending_state`` is set while a write of a change is in
    flight: no other change may start meanwhile (CONCURRENT_TRANSACTIONS)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = -1
    last_producer_epoch: int = -1
    pending_state: TransactionState | None = None

    def value(self, state: TransactionState, now_ms: int) -> TransactionLogValue:
        """What the log stores for this id moving to ``state`` at ``now_ms`` (an EMPTY or completed transaction
        keeps no partitions)."""
        keeps = state in (TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
        partitions = tuple(sorted(self.partitions)) if keeps else ()
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            state,
            partitions,
            now_ms,
            self.start_ms,
            previous_producer_id=self.previous_producer_id,
        )

    @classmethod
    def of_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            value.state,
            set(value.partitions),
            value.start_timestamp_ms,
            value.last_update_timestamp_ms,
            value.previous_producer_id,
        )


def read_partition(log_: Log, buffer_bytes: int) -> dict[str, TransactionLogValue]:
    """Replay a partition's log from its start to its end: the last value of every transactional id."""
    found: dict[str, TransactionLogValue] = {}
    for data, header, offset in replay_batches(log_, buffer_bytes):
        if header.is_control:
            continue
        for record in iter_batch_records(data, header):
            if record.offset < offset or record.key is None:
                continue
            try:
                transactional_id = decode_transaction_log_key(record.key)
                if record.value is None:
                    found.pop(transactional_id, None)
                else:
                    found[transactional_id] = decode_transaction_log_value(record.value)
            except (FormatError, UnicodeDecodeError) as exc:
                log.warning("skipping a %s record this broker cannot read: %s", TRANSACTION_STATE_TOPIC_NAME, exc)
    return found


class TransactionStateManager(InternalTopicLogs):
    topic = TRANSACTION_STATE_TOPIC_NAME

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    def load(self, partition: int) -> dict[str, TransactionLogValue]:
        """Any thread: the stored metadata of the partition's transactional ids."""
        log_ = self.log_of(partition)
        if log_ is None:
            return {}
        return read_partition(log_, self.config.transaction_state_log_load_buffer_size)

    async def append(self, transactional_id: str, value: TransactionLogValue | None) -> ErrorCode:
        """Write ``value`` (None: a tombstone) for the id and wait for the ISR; the error as a coordinator reports
        it (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...), NONE once stored."""
        builder = RecordBatchBuilder()
        builder.append(
            self.time_ms(),
            encode_transaction_log_key(transactional_id),
            None if value is None else encode_transaction_log_value(value),
        )
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, self.partition_for(transactional_id))
        appended = self.replica_manager.append_to_leader(tp, builder.build(), -1)
        if isinstance(appended, ProduceResult):
            code = appended.error
        else:
            outcome = await settled(
                self.replica_manager.when_replicated(
                    {tp: appended.base_offset}, TXN_LOG_APPEND_TIMEOUT_MS, lambda found: found[0]
                )
            )
            code = outcome
        if code == ErrorCode.REQUEST_TIMED_OUT:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return COORDINATOR_APPEND_ERRORS.get(code, code if code == ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR)
