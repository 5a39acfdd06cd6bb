"""Idempotent-producer state of one partition: sequence checks and duplicate suppression.

For each producer id the partition remembers its epoch and the sequence ranges and offsets of its last five
batches (Kafka's window: a producer keeps at most five requests in flight). A batch whose sequence range equals
one of them is a retry of an appended batch and is answered with that batch's offsets instead of being appended
again; any other batch must start right after the last sequence (wrapping at 2**31 - 1), or start at 0 under a
newer epoch. A producer the partition has never seen may start at any sequence.

Transactions: a producer's first transactional batch after a marker opens its transaction at that batch's first
offset (``ongoing``, ordered by first offset since appends are); the ABORT or COMMIT marker closes it. The smallest
open first offset bounds the last stable offset. A marker under an older epoch than the producer's is fenced.

Expiration (producer.id.expiration.ms): a producer with no open transaction whose last timestamp (the max timestamp of
its last batch, or its last marker's timestamp, as Kafka keeps it) is that old is forgotten; its next batch is then
that of an unknown producer, accepted at any sequence (Kafka 2.5 and later, KIP-360).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mq.errors import ErrorCode, KafkaError

RECENT_BATCHES = 5
SEQUENCE_MODULUS = 0x80000000


class OutOfOrderSequenceError(KafkaError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


@dataclass(frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    current_txn_first_offset: int = -1
    """The first offset of the producer's open transaction; -1 without one."""
    coordinator_epoch: int = -1
    """The coordinator epoch of the producer's last marker."""
    last_timestamp: int = -1
    """The max timestamp of the producer's last batch or the timestamp of its last marker; -1 when unknown."""

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction a marker closed: its producer, first offset, and whether it aborted."""

    producer_id: int
    first_offset: int
    aborted: bool


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}
        """Producer id -> first offset of its open transaction."""

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction; None without one."""
        return min(self.ongoing.values()) if self.ongoing else None

    def check(self, producer_id: int, epoch: int, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        """Validate a batch before it is appended; returns the original batch when this one is a duplicate."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Producer's epoch {epoch} is older than the current epoch {entry.epoch} of producer {producer_id}"
            )
        if epoch > entry.epoch:
            if first_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch {epoch} of producer {producer_id}: {first_sequence} "
                    "(request epoch), 0 (expected)"
                )
            return None
        for batch in entry.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        expected = (entry.last_sequence + 1) % SEQUENCE_MODULUS
        if entry.batches and first_sequence != expected:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {producer_id}: {first_sequence} (incoming), "
                f"{entry.last_sequence} (last)"
            )
        return None

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        """The producer's entry for an append under ``epoch``: a newer epoch starts a new entry (its batches
        forgotten), which keeps the open transaction and the coordinator epoch."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            previous = entry
            entry = self.producers[producer_id] = ProducerEntry(epoch)
            if previous is not None:
                entry.current_txn_first_offset = previous.current_txn_first_offset
                entry.coordinator_epoch = previous.coordinator_epoch
                entry.last_timestamp = previous.last_timestamp
        return entry

    def update(self, producer_id: int, epoch: int, batch: BatchMetadata, transactional: bool = False) -> None:
        """Record an appended batch; a transactional one opens the producer's transaction unless one is open."""
        entry = self._entry(producer_id, epoch)
        entry.batches.append(batch)
        entry.last_timestamp = batch.timestamp
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = batch.first_offset
            self.ongoing[producer_id] = batch.first_offset

    def check_marker(self, producer_id: int, epoch: int) -> None:
        """InvalidProducerEpochError when a marker's epoch is older than the producer's (a fenced coordinator)."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Producer's epoch {epoch} in the marker is older than the current epoch {entry.epoch} of producer "
                f"{producer_id}"
            )

    def complete_txn(
        self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, timestamp: int
    ) -> CompletedTxn | None:
        """Apply a marker appended for ``producer_id`` at ``timestamp``: close its open transaction (returned), None
        if none was open."""
        entry = self._entry(producer_id, epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        return None if first < 0 else CompletedTxn(producer_id, first, not commit)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers without an open transaction whose last timestamp is ``expiration_ms`` or more before
        ``now_ms``; returns their ids."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return expired

    def truncate(self) -> None:
        """Forget everything (the log was truncated or replaced)."""
        self.producers.clear()
        self.ongoing.clear()
