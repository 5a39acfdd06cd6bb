"""Idempotent-producer state of one partition: sequence checks and duplicate suppression.

For each producer id the partition remembers its epoch and the sequence ranges and offsets of its last five
batches (Kafka's window: a producer keeps at most five requests in flight). A batch whose sequence range equals
one of them is a retry of an appended batch and is answered with that batch's offsets instead of being appended
again; any other batch must start right after the last sequence (wrapping at 2**31 - 1), or start at 0 under a
newer epoch. A producer the partition has never seen may start at any sequence.
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

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

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

    def update(self, producer_id: int, epoch: int, batch: BatchMetadata) -> None:
        """Record an appended batch."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.batches.append(batch)

    def truncate(self) -> None:
        """Forget everything (the log was truncated or replaced)."""
        self.producers.clear()
