"""One partition replica on this broker: leader or follower state, ISR, high watermark, leader epoch.

Invariants: ``log_start_offset <= high_watermark <= log_end_offset``; the high watermark only moves forward while
this replica leads and equals the smallest log end offset among the in-sync replicas; followers' positions are
known from their fetches. The last stable offset is the first offset of the oldest open transaction, or the high
watermark when that is lower (or no transaction is open); read_committed consumers read below it.

Producer state (idempotence, open transactions) follows the log on leaders and followers alike, one v2 batch header
at a time (``_apply_batch``): a leader's validated appends and markers, a follower's replicated batches (a replicated
ABORT marker adds its transaction index entry, as the leader's did). So a follower that becomes leader has the state
already. It is rebuilt from the latest producer snapshot at or below the log end (``<offset>.snapshot``, written when
an append rolls the log and at a clean shutdown) and the batch headers after it, or from the log start without one:
when the log is loaded and when a truncation cuts it (Kafka's truncateAndReload); ABORT markers found there whose
transaction index entry is missing (an unflushed index) get it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from mq.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from mq.records.batch_header import BatchHeader, parse_header
from mq.records.crc import Buffer
from mq.records.default_batch import build_control_batch, read_end_txn_marker
from mq.records.record import ABORT, COMMIT, EndTxnMarker
from mq.server.partition_state import PartitionStateInfo
from mq.server.producer_state import (
    SEQUENCE_MODULUS,
    BatchMetadata,
    CompletedTxn,
    ProducerEntry,
    ProducerStateManager,
)
from mq.storage.file_names import log_file_name, offset_from_file_name, snapshot_file_name
from mq.storage.log_segment import LogSegment
from mq.storage.partition_log import FetchDataInfo, Log, LogAppendInfo
from mq.storage.producer_snapshot import (
    CorruptSnapshotError,
    ProducerSnapshotEntry,
    list_snapshot_offsets,
    read_snapshot,
    write_snapshot,
)
from mq.storage.txn_index import AbortedTxn
from mq.topic_partition import TopicPartition


class AppendResult(NamedTuple):
    """Where an appended batch landed (a tuple: one is built per produced batch)."""

    base_offset: int
    log_append_time_ms: int
    log_start_offset: int


@dataclass
class ReplicaState:
    """What the leader knows of a follower: its log end offset, when it last caught up, and the leader's log end
    offset and clock at its previous fetch."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    leader_end_at_last_fetch: int = -1
    last_fetch_ms: int = 0


@dataclass
class Partition:
    tp: TopicPartition
    log: Log
    local_broker_id: int
    time_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    leader_id: int = -1
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: frozenset[int] = frozenset()
    pending_isr: frozenset[int] | None = None
    """An ISR change sent to the metadata tree and not yet answered; the ISR in use stays ``isr`` meanwhile."""
    zk_version: int = 0
    controller_epoch: int = 0
    high_watermark: int = 0
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    on_roll_snapshot: Callable[[Path, int, list[ProducerSnapshotEntry]], None] | None = None
    """Told (log dir, new segment's base offset, producer state before it) when a leader's or a follower's append
    rolled the log: the snapshot is written off the loop (``write_roll_snapshot``)."""
    follower_lag: int = 0
    """As a follower: the leader's high watermark at the last fetch minus this log's end (ReplicaFetcher MaxLag)."""
    topic_id: str | None = None
    """The topic id the controller's decisions named (stored form); None until one does."""

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def leader_epoch_start_offset(self) -> int | None:
        """Where the current leader epoch began in this leader's log (Kafka's leaderEpochStartOffsetOpt); None when
        this broker does not lead the partition or the epoch is not recorded."""
        if not self.is_leader:
            return None
        entries = self.log.leader_epoch_cache.entries
        return entries[-1][1] if entries and entries[-1][0] == self.leader_epoch else None

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producers.first_unstable_offset
        return self.high_watermark if first_unstable is None else min(first_unstable, self.high_watermark)

    def rebuild_producer_state(self) -> None:
        """Recover producers' recent batches and open transactions from the latest snapshot and the batch headers
        after it (control batches alone are read whole), so a retry that crosses a broker restart is still a
        duplicate and an open transaction still bounds the last stable offset."""
        self.producers.truncate()
        start = self._load_snapshot()
        for segment, header in self.log.batches_from(start):
            if header.is_control and header.producer_id >= 0:
                data = os.pread(segment.fd, header.size, header.position)
                parsed = parse_header(data, 0)
                if parsed is not None:
                    self._apply_batch(parsed, data)
            else:
                self._apply_batch(header, b"")

    def _apply_batch(self, header: BatchHeader, buf: Buffer) -> None:
        """Update the producer state for one batch already in the log at its own offsets (replayed or replicated):
        an idempotent v2 batch is recorded, a control batch (read from ``buf``, which holds it at ``header.position``;
        no other batch is read) completes its producer's transaction. Batches without a producer id change nothing."""
        if header.magic < 2 or header.producer_id < 0:
            return
        if header.is_control:
            marker = read_end_txn_marker(buf, header)
            if marker is not None:
                self._complete_txn(marker, header.offset, header.max_timestamp)
        elif header.base_sequence >= 0:
            self._record_batch(header, header.offset, header.last_offset, header.max_timestamp)

    def _record_batch(self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record the idempotent batch ``header`` describes, appended at ``first_offset``..``last_offset``."""
        batch = BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp)
        self.producers.update(header.producer_id, header.producer_epoch, batch, header.is_transactional)

    def _complete_txn(self, marker: EndTxnMarker, offset: int, timestamp: int) -> None:
        """Apply ``marker``, in the log at ``offset`` with ``timestamp``: close its producer's open transaction; an
        aborted one gets its transaction index entry (once: a replay over indexed markers adds none)."""
        done = self.producers.complete_txn(
            marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.commit, timestamp
        )
        if done is not None and done.aborted:
            self.log.append_aborted_txn(self._aborted_entry(done, offset))

    def _snapshot_if_rolled(self, active: LogSegment) -> None:
        """After an append that started in the segment ``active``: when it rolled the log, ask for the snapshot of the
        producer state before the new segment (the state before the append's batches are applied)."""
        log_ = self.log
        if log_.active is not active and self.on_roll_snapshot is not None:
            self.on_roll_snapshot(log_.dir, log_.active.base_offset, self.snapshot_entries())

    def _load_snapshot(self) -> int:
        """Load the latest readable snapshot at or below the log end (deleting those above it and damaged ones);
        returns the offset the log must be replayed from."""
        log_ = self.log
        for offset in reversed(list_snapshot_offsets(log_.dir)):
            path = snapshot_file_name(log_.dir, offset)
            if offset > log_.log_end_offset:
                path.unlink(missing_ok=True)
                continue
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError):
                path.unlink(missing_ok=True)
                continue
            for e in entries:
                entry = ProducerEntry(
                    e.producer_epoch, coordinator_epoch=e.coordinator_epoch, last_timestamp=e.timestamp
                )
                if e.has_batch:
                    first_offset = e.last_offset - e.offset_delta
                    entry.batches.append(
                        BatchMetadata(e.first_sequence, e.last_sequence, first_offset, e.last_offset, e.timestamp)
                    )
                if e.current_txn_first_offset >= 0:
                    entry.current_txn_first_offset = e.current_txn_first_offset
                    self.producers.ongoing[e.producer_id] = e.current_txn_first_offset
                self.producers.producers[e.producer_id] = entry
            return max(offset, log_.log_start_offset)
        return log_.log_start_offset

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        """The producer state as snapshot entries (on the loop: the state is the loop's)."""
        entries = []
        for producer_id, entry in self.producers.producers.items():
            last = entry.batches[-1] if entry.batches else None
            entries.append(
                ProducerSnapshotEntry(
                    producer_id,
                    entry.epoch,
                    last.last_sequence if last else -1,
                    last.last_offset if last else -1,
                    (last.last_sequence - last.first_sequence) % SEQUENCE_MODULUS if last else 0,
                    entry.last_timestamp,
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset,
                )
            )
        return entries

    def write_producer_snapshot(self) -> None:
        """Write the producer state as of the log end to ``<log end>.snapshot`` (fsynced) and delete older
        snapshots; for a clean shutdown."""
        end = self.log.log_end_offset
        write_snapshot(snapshot_file_name(self.log.dir, end), self.snapshot_entries())
        for offset in list_snapshot_offsets(self.log.dir):
            if offset != end:
                snapshot_file_name(self.log.dir, offset).unlink(missing_ok=True)

    def _aborted_entry(self, done: CompletedTxn, marker_offset: int) -> AbortedTxn:
        """The transaction index entry of ``done``, aborted by the marker at ``marker_offset``: its last stable offset
        is the first offset still unstable, or the offset after the marker."""
        first_unstable = self.producers.first_unstable_offset
        lso = marker_offset + 1 if first_unstable is None else first_unstable
        return AbortedTxn(done.producer_id, done.first_offset, marker_offset, lso)

    def apply_state(self, info: PartitionStateInfo) -> bool:
        """Take the controller's decision if its leader epoch is newer; returns whether it was applied."""
        if info.leader_epoch < self.leader_epoch:
            return False
        self.leader_id = info.leader
        self.leader_epoch = info.leader_epoch
        if info.topic_id is not None:
            self.topic_id = info.topic_id
        self.replicas = info.replicas
        self.isr = frozenset(info.isr)
        self.pending_isr = None
        self.zk_version = info.zk_version
        self.controller_epoch = info.controller_epoch
        now = self.time_ms()
        self.remote_replicas = {
            r: self.remote_replicas.get(r, ReplicaState(last_caught_up_ms=now))
            for r in info.replicas
            if r != self.local_broker_id
        }
        self.high_watermark = min(max(self.high_watermark, self.log_start_offset), self.log_end_offset)
        if self.is_leader:
            self.maybe_increment_high_watermark()
        return True

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the ISR; returns True when it moved."""
        candidate = self.log_end_offset
        for replica, state in self.remote_replicas.items():
            if replica in self.isr and state.log_end_offset < candidate:
                candidate = state.log_end_offset
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def append_records_to_leader(self, records: Buffer, required_acks: int, min_insync_replicas: int) -> AppendResult:
        """Validate idempotence, append, advance the HW. Exactly one batch per request for magic 2 producers.
        ``min_insync_replicas`` is read for acks=-1 only."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader for {self.tp}")
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the min.isr requirement "
                f"of {min_insync_replicas} for partition {self.tp}"
            )
        header = parse_header(records, 0)
        if header is None:
            raise CorruptRecordError(f"Record set of {len(records)} bytes holds no complete batch")
        if header.magic >= 2 and header.size != len(records):
            raise InvalidRecordError("Produce requests with version 3 and above must contain exactly one record batch")
        if header.is_control:
            raise InvalidRecordError("Control records may only be appended by the transaction coordinator")
        idempotent = header.magic >= 2 and header.producer_id >= 0 and header.base_sequence >= 0
        if idempotent:
            duplicate = self.producers.check(
                header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence
            )
            if duplicate is not None:
                return AppendResult(duplicate.first_offset, -1, self.log_start_offset)
        active = self.log.active
        info = self.log.append_as_leader(records, self.leader_epoch, header)
        self._snapshot_if_rolled(active)
        if idempotent:
            timestamp = info.log_append_time_ms if info.log_append_time_ms >= 0 else header.max_timestamp
            self._record_batch(header, info.first_offset, info.last_offset, timestamp)
        self.maybe_increment_high_watermark()
        return AppendResult(int(info.first_offset), int(info.log_append_time_ms), self.log_start_offset)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> int:
        """Append a COMMIT or ABORT marker for ``producer_id`` as leader, closing its open transaction (an ABORT
        adds the transaction index entry); returns the marker's offset. InvalidProducerEpochError for an epoch
        older than the producer's."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader for {self.tp}")
        self.producers.check_marker(producer_id, producer_epoch)
        now = self.time_ms()
        marker = build_control_batch(
            COMMIT if commit else ABORT, producer_id, producer_epoch, coordinator_epoch, timestamp=now
        )
        active = self.log.active
        info = self.log.append_as_leader(bytearray(marker), self.leader_epoch)
        self._snapshot_if_rolled(active)
        offset = int(info.first_offset)
        self._complete_txn(EndTxnMarker(producer_id, producer_epoch, coordinator_epoch, commit), offset, now)
        self.maybe_increment_high_watermark()
        return offset

    def append_records_to_follower(self, records: Buffer) -> LogAppendInfo:
        """Append whole batches whose offsets the leader assigned (``Log.append_as_follower``) and update the producer
        state from each batch header as the leader did, without validating sequences (Kafka's replication origin):
        a roll first asks for the snapshot of the state before the new segment; an ABORT marker adds its transaction
        index entry."""
        active = self.log.active
        headers: list[BatchHeader] = []
        info = self.log.append_as_follower(records, headers)
        self._snapshot_if_rolled(active)
        for header in headers:
            self._apply_batch(header, records)
        return info

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower catching up with its leader) with the leader epochs that
        start there, cap the high watermark, and reload the producer state to the new log end (Kafka's
        truncateAndReload: the snapshots above it went with the truncation; the latest one at or below it and the
        batches after it give the state)."""
        log_ = self.log
        end = log_.log_end_offset
        log_.truncate_to(offset)
        log_.leader_epoch_cache.truncate_from_end(offset)  # also epochs that start at the log end
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        if log_.log_end_offset != end:
            self.rebuild_producer_state()

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """A requester that sent its leader epoch (>= 0) must know ours: FENCED_LEADER_EPOCH when its epoch is older,
        UNKNOWN_LEADER_EPOCH when newer (this broker has not heard of it yet)."""
        if 0 <= current_leader_epoch < self.leader_epoch:
            raise KafkaError(
                f"The leader epoch in the request ({current_leader_epoch}) is older than the current leader epoch "
                f"{self.leader_epoch} of {self.tp}",
                ErrorCode.FENCED_LEADER_EPOCH,
            )
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(
                f"The leader epoch in the request ({current_leader_epoch}) is newer than the current leader epoch "
                f"{self.leader_epoch} of {self.tp}",
                ErrorCode.UNKNOWN_LEADER_EPOCH,
            )

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        from_follower: bool,
        min_one_message: bool,
        current_leader_epoch: int = -1,
        leader_only: bool = True,
        read_committed: bool = False,
    ) -> FetchDataInfo:
        """A fetch data info for ``fetch_offset``; consumers read only below the high watermark (read_committed ones
        below the last stable offset). The requester's leader epoch is checked first, as Kafka does; a follower
        answers only without ``leader_only``."""
        self.check_leader_epoch(current_leader_epoch)
        if leader_only and not self.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader for {self.tp}")
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {self.tp}, but we only have log segments "
                f"in the range {self.log_start_offset} to {self.log_end_offset}."
            )
        max_offset = self.last_stable_offset if read_committed else self.high_watermark
        return self.log.read(
            fetch_offset, max_bytes, max_offset=None if from_follower else max_offset, min_one_message=min_one_message
        )

    def update_follower_fetch(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from ``fetch_offset``: record its position, maybe advance the HW.

        A follower outside the ISR that has reached the high watermark is a candidate to join it
        (``isr_to_expand``); the caller writes the change, as only the leader may.
        """
        state = self.remote_replicas.get(replica_id)
        if state is None:
            return False
        now = self.time_ms()
        state.log_end_offset = fetch_offset
        if fetch_offset >= self.log_end_offset:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.leader_end_at_last_fetch >= 0:
            # It has everything the leader had at its previous fetch: caught up as of then (under a steady stream
            # of appends a follower is never level with the leader at the instant it fetches).
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.leader_end_at_last_fetch = self.log_end_offset
        state.last_fetch_ms = now
        return self.maybe_increment_high_watermark()

    def isr_to_expand(self, replica_id: int) -> frozenset[int] | None:
        """The ISR with ``replica_id`` added when that follower, not in the ISR, has just fetched from at least the
        high watermark; None otherwise. Only a fetch proves a follower is alive, so a replica that stopped fetching
        (a broker in controlled shutdown, say) is never re-added on the strength of an old position."""
        state = self.remote_replicas.get(replica_id)
        if not self.is_leader or state is None or replica_id in self.isr:
            return None
        return self.isr | {replica_id} if state.log_end_offset >= self.high_watermark else None

    def isr_to_shrink(self, lag_time_max_ms: int) -> frozenset[int] | None:
        """The ISR without followers that have not caught up for ``lag_time_max_ms``, or None."""
        now = self.time_ms()
        lagging = {
            r for r, s in self.remote_replicas.items() if r in self.isr and now - s.last_caught_up_ms > lag_time_max_ms
        }
        return self.isr - lagging if lagging and self.is_leader else None


def write_roll_snapshot(directory: Path, offset: int, entries: list[ProducerSnapshotEntry]) -> None:
    """Any thread: write the snapshot a roll asked for (fsynced) and delete those below the log's first segment.
    Nothing is written when the segment the roll started is gone (the log was truncated below it meanwhile, which
    deleted the snapshots above the new log end: this one would describe data no longer in the log)."""
    if not log_file_name(directory, offset).exists():
        return
    write_snapshot(snapshot_file_name(directory, offset), entries)
    first = min((offset_from_file_name(p.name) for p in directory.glob("*.log")), default=offset)
    for older in list_snapshot_offsets(directory):
        if older < first:
            snapshot_file_name(directory, older).unlink(missing_ok=True)
