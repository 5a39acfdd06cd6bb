"""Partitions hosted by this broker, and the produce and fetch paths through them.

Produce appends to each leader partition (errors stay per partition); acks=-1 waits until the high watermark
passes the appended offsets or the timeout. The append is synchronous (``append_to_leader``); the acks=-1 wait
(``when_replicated``) costs a future and a purgatory entry only when the high watermark does not already pass the
batch. Fetch reads file slices from each partition, and when fewer than
``min_bytes`` are available waits for an append (or the timeout) before answering, so clients long-poll instead of
spinning; a follower that reports a high watermark behind the leader's (Fetch v18, KIP-1166) is answered at once, so
it learns the high watermark without waiting for data. The controller's LeaderAndIsr and StopReplica decisions arrive here.

A partition whose log dir is offline answers KAFKA_STORAGE_ERROR to produce and fetch; an OSError while appending to
or reading a log takes its dir offline (``LogManager.mark_offline``) and is answered the same way, never acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from mq.config import BrokerConfig, TopicConfig
from mq.errors import (
    ErrorCode,
    KafkaError,
    NotLeaderOrFollowerError,
    RecordError,
    UnknownTopicOrPartitionError,
    error_code_of,
)
from mq.protocol.fetch_request import UNKNOWN_HIGH_WATERMARK
from mq.records.crc import Buffer
from mq.server import long_lived
from mq.server import state_change_log as state_change
from mq.server.clock import Clock, SystemClock
from mq.server.isr_updates import Current, IsrChange
from mq.server.metrics import (
    BYTES_IN,
    BYTES_OUT,
    BYTES_REJECTED,
    FAILED_FETCH,
    FAILED_PRODUCE,
    MESSAGES_IN,
    TOTAL_FETCH,
    TOTAL_PRODUCE,
    BrokerTopicStats,
    ReplicaManagerStats,
)
from mq.server.partition import AppendResult, Partition, write_roll_snapshot
from mq.server.partition_state import PartitionStateInfo
from mq.server.purgatory import DelayedFuture, Purgatory, answer_or_wait, park, settled, waited
from mq.server.replica_fetcher import ReplicaFetcherManager
from mq.server.replication_quota import ReplicationQuotas
from mq.storage.log_manager import LogManager
from mq.storage.log_segment import FileSlice
from mq.storage.producer_snapshot import ProducerSnapshotEntry
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[RecordError, ...] = ()


@dataclass(frozen=True)
class FetchRequestPartition:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    """The requester's leader epoch; -1 when it sent none."""
    replica_high_watermark: int = UNKNOWN_HIGH_WATERMARK
    """A follower's high watermark (Fetch v18, KIP-1166); ``UNKNOWN_HIGH_WATERMARK`` when it sent none."""


@dataclass(frozen=True)
class FetchResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    aborted_transactions: list[tuple[int, int]] | None = None
    """For read_committed fetches with records: (producer id, first offset) of the aborted transactions they
    overlap."""


MARKER_REPLICATION_TIMEOUT_MS = 30000
"""How long a transaction marker waits for the ISR (Kafka's coordinator uses ``request.timeout.ms``, 30 s)."""


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], TopicConfig],
        checkpointed_high_watermarks: dict[TopicPartition, int] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.partitions: dict[TopicPartition, Partition] = {}
        self._checkpointed = dict(checkpointed_high_watermarks or {})
        self.fetchers: ReplicaFetcherManager | None = None
        """Set in cluster mode: followers fetch from their leaders through it."""
        self.isr_submitter: Callable[[IsrChange], None] | None = None
        """Set in cluster mode: hands a leader's ISR change to the metadata writer, which answers through
        ``isr_change_done`` on the loop."""
        self.snapshot_requested: Callable[[Path, int, list[ProducerSnapshotEntry]], None] = write_roll_snapshot
        """Called when a leader's or follower's append rolled its log, with the producer snapshot to write; the broker
        writes it on a worker thread."""
        self.flush_requested: Callable[[Partition], None] = lambda partition: partition.log.flush()
        """Called when a log's flush.messages is reached; the broker flushes it on a worker thread."""
        self.fetch_purgatory: Purgatory[TopicPartition] = Purgatory(self.clock, "Fetch")
        self.produce_purgatory: Purgatory[TopicPartition] = Purgatory(self.clock, "Produce")
        self.quotas = ReplicationQuotas(config, broker_id, topic_config)
        """Replication throttles: the leader side is applied in ``fetch``, the follower side by the fetchers."""
        self.topic_stats = BrokerTopicStats()
        """Counted per produced batch and per answered fetch partition (``mq.server.metrics``)."""
        self.stats = ReplicaManagerStats()
        self.known_partition: Callable[[TopicPartition], bool] = lambda tp: False
        """Set by the broker: whether the metadata names ``tp`` (Kafka's metadataCache.contains); a partition it names
        that this broker does not host answers NOT_LEADER_OR_FOLLOWER, one it does not name UNKNOWN_TOPIC_OR_PARTITION."""
        self.leadership_listener: Callable[[TopicPartition, bool], None] | None = None
        """Told (partition, now leads it) after each applied leadership decision and each stopped replica: the group
        coordinator loads and unloads ``__consumer_offsets`` partitions through it."""

    # --- controller decisions ----------------------------------------------------------------------------------

    def prepare_logs(self, infos: Iterable[PartitionStateInfo]) -> None:
        """Any thread, before ``become_leader_or_follower``: create the logs of partitions new to this broker and
        record the leader epoch of those it is to lead, so the loop does no file creation or fsync for them (a
        topic of many partitions costs the loop only in-memory work)."""
        for info in infos:
            if self.broker_id not in info.replicas or info.tp in self.partitions or self.is_offline(info.tp):
                continue
            created = self.log_manager.get_or_create_log(info.tp, self.topic_config(info.tp.topic))
            if info.leader == self.broker_id:
                created.leader_epoch_cache.assign(info.leader_epoch, created.log_end_offset)

    def become_leader_or_follower(self, infos: Iterable[PartitionStateInfo]) -> None:
        hosted = len(self.partitions)
        self._apply_states(infos)
        if len(self.partitions) > hosted:
            long_lived.freeze()  # the new partitions' objects stay: keep them out of full collections

    def _apply_states(self, infos: Iterable[PartitionStateInfo]) -> None:
        for info in infos:
            if self.broker_id not in info.replicas:
                continue
            partition = self.partitions.get(info.tp)
            if partition is None:
                log_ = self.log_manager.get_or_create_log(info.tp, self.topic_config(info.tp.topic))
                partition = Partition(
                    info.tp, log_, self.broker_id, time_ms=self.clock.time_ms, on_roll_snapshot=self._roll_snapshot
                )
                partition.high_watermark = self._checkpointed.pop(info.tp, 0)
                partition.rebuild_producer_state()
                self.partitions[info.tp] = partition
            if not self.log_manager.is_online(partition.log):
                continue  # an offline replica follows no decision (the controller moves leadership elsewhere)
            was_leader, previous_epoch, old_isr = partition.is_leader, partition.leader_epoch, partition.isr
            if not partition.apply_state(info):
                continue
            state_change.broker_became(
                self.broker_id,
                partition.is_leader,
                info.tp,
                info.leader_epoch,
                partition.log_end_offset,
                partition.high_watermark,
                previous_epoch,
            )
            if partition.is_leader:
                if was_leader:  # the controller changed the ISR under this leader (a replica died or came back)
                    self._count_isr_change(old_isr, partition.isr)
                if self.fetchers is not None:
                    self.fetchers.unfollow(info.tp)
                partition.log.leader_epoch_cache.assign(info.leader_epoch, partition.log_end_offset)
            elif info.leader >= 0 and self.fetchers is not None:
                self.fetchers.follow(partition, info.leader)  # truncates by leader epoch before fetching
            if self.leadership_listener is not None:
                self.leadership_listener(info.tp, partition.is_leader)
            self._partition_changed(info.tp)  # parked produces and fetches re-check who leads

    def stop_replicas(self, tps: Iterable[TopicPartition], delete: bool) -> None:
        for tp in tps:
            if self.partitions.pop(tp, None) is not None:
                state_change.broker_stopped(self.broker_id, tp, delete)
            if self.fetchers is not None:
                self.fetchers.unfollow(tp)
            if self.leadership_listener is not None:
                self.leadership_listener(tp, False)
            if delete:
                self.log_manager.delete_log(tp)
            self._partition_changed(tp)

    def log_dir_failed(self, directory: Path) -> None:
        """On the loop, once ``directory`` went offline: followers of its partitions stop fetching, and everything
        parked on them re-checks (and is answered KAFKA_STORAGE_ERROR)."""
        for tp, partition in list(self.partitions.items()):
            if partition.log.dir.parent == directory:
                if self.fetchers is not None:
                    self.fetchers.unfollow(tp)
                self._partition_changed(tp)

    def update_topic_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.log.update_config(config)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def last_stable_offsets(self) -> dict[TopicPartition, int]:
        return {tp: p.last_stable_offset for tp, p in self.partitions.items()}

    def hosted_partition(self, tp: TopicPartition) -> Partition:
        """The replica of ``tp`` this broker hosts, leader or follower, in an online log dir (Kafka's
        getPartitionOrException): raises KAFKA_STORAGE_ERROR for one in an offline dir, NOT_LEADER_OR_FOLLOWER for a
        partition the metadata names that this broker does not host, else UNKNOWN_TOPIC_OR_PARTITION."""
        partition = self.partitions.get(tp)
        if partition is None:
            if self.known_partition(tp):
                raise NotLeaderOrFollowerError(f"This broker is not a replica of {tp}")
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {tp}")
        if not self.log_manager.is_online(partition.log):
            raise self.log_manager.offline_error(partition.log)
        return partition

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        """``hosted_partition`` when this broker leads it, else raises NOT_LEADER_OR_FOLLOWER; a requester's
        ``current_leader_epoch`` (-1: none) is checked first (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), as Kafka's
        Partition.localLogWithEpochOrException does."""
        partition = self.hosted_partition(tp)
        partition.check_leader_epoch(current_leader_epoch)
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader for {tp}")
        return partition

    def leads(self, tp: TopicPartition) -> bool:
        """Whether this broker hosts ``tp`` as its leader."""
        partition = self.partitions.get(tp)
        return partition is not None and partition.is_leader

    def is_offline(self, tp: TopicPartition) -> bool:
        """Whether this broker has a log of ``tp`` in an offline log dir (any thread)."""
        found = self.log_manager.get_log(tp)
        return found is not None and not self.log_manager.is_online(found)

    def _change_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        """Propose an ISR change; at most one is in flight per partition, and the ISR in use (for the high
        watermark and min.insync.replicas) changes only once the metadata tree holds the new one."""
        if self.isr_submitter is None or partition.pending_isr is not None:
            return
        partition.pending_isr = isr
        self.isr_submitter(
            IsrChange(partition.tp, partition.leader_epoch, isr, partition.zk_version, partition.controller_epoch)
        )

    def isr_change_done(self, change: IsrChange, zk_version: int | None, current: Current | None = None) -> None:
        """The writer's answer (on the loop): the state znode's new version, or None when the write lost a race with
        the controller or failed; with ``current`` (a lost race within this leader epoch) the znode's ISR and version
        become this leader's, and a later fetch proposes its change again on them."""
        partition = self.partitions.get(change.tp)
        if partition is None or partition.leader_epoch != change.leader_epoch or partition.pending_isr != change.isr:
            return
        partition.pending_isr = None
        if partition.zk_version != change.zk_version:
            return  # a LeaderAndIsr came meanwhile: it is newer than both
        if zk_version is not None:
            isr, partition.zk_version = change.isr, zk_version
        elif current is not None:
            isr, partition.zk_version = current.isr, current.zk_version
        else:
            return
        self._count_isr_change(partition.isr, isr)
        partition.isr = isr
        partition.maybe_increment_high_watermark()
        self._partition_changed(change.tp)

    def _count_isr_change(self, old: frozenset[int], new: frozenset[int]) -> None:
        """Kafka's IsrShrinks / IsrExpands of a partition this broker leads."""
        if len(new) < len(old):
            self.stats.isr_shrinks += 1
        elif len(new) > len(old):
            self.stats.isr_expands += 1

    def _follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        if partition.update_follower_fetch(replica_id, fetch_offset):
            self._partition_changed(partition.tp)  # the HW moved: acks=all produces and consumers may complete
        expanded = partition.isr_to_expand(replica_id)
        if expanded is not None:
            self._change_isr(partition, expanded)

    def shrink_isrs(self) -> None:
        """Drop followers that have not caught up within ``replica.lag.time.max.ms`` from their leaders' ISRs."""
        for partition in list(self.partitions.values()):
            shrunk = partition.isr_to_shrink(self.config.replica_lag_time_max_ms)
            if shrunk is not None:
                self._change_isr(partition, shrunk)

    # --- produce -----------------------------------------------------------------------------------------------

    def _appended(self, tp: TopicPartition, high_watermark_moved: bool) -> None:
        """After an append or a follower's fetch of ``tp``: wake the fetches watching it and, when its high watermark
        moved, the acks=all produces."""
        self.fetch_purgatory.check_and_complete(tp)
        if high_watermark_moved:
            self.produce_purgatory.check_and_complete(tp)

    def _partition_changed(self, tp: TopicPartition) -> None:
        """Leadership, ISR or existence of ``tp`` changed: everything parked on it re-checks."""
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)

    def append_to_leader(self, tp: TopicPartition, records: Buffer, required_acks: int) -> AppendResult | ProduceResult:
        """The synchronous part of a produce to ``tp``: append to the leader (waking the fetches watching it, and the
        acks=all produces when the high watermark moved), or the error for that partition as a ProduceResult."""
        stats = self.topic_stats.of(tp.topic)
        stats[TOTAL_PRODUCE] += 1
        try:
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader or self.log_manager.offline_dirs:
                partition = self.leader_partition(tp)  # raises unless it leads a partition in an online dir
            high_watermark = partition.high_watermark
            end_offset = partition.log_end_offset
            min_isr = self.topic_config(tp.topic).min_insync_replicas if required_acks == -1 else 0
            try:
                appended = partition.append_records_to_leader(records, required_acks, min_isr)
            except OSError as exc:
                raise self.log_manager.storage_error(partition.log, exc) from exc
            stats[MESSAGES_IN] += partition.log_end_offset - end_offset  # 0 for a duplicate batch
            stats[BYTES_IN] += len(records)
            self._appended(tp, partition.high_watermark != high_watermark)
            if partition.log.flush_due:
                self.flush_requested(partition)
            return appended
        except KafkaError as exc:
            stats[FAILED_PRODUCE] += 1
            if exc.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE):
                stats[BYTES_REJECTED] += len(records)
            return ProduceResult(exc.code, message=str(exc), record_errors=exc.record_errors)
        except Exception as exc:
            stats[FAILED_PRODUCE] += 1
            log.exception("append to %s failed", tp)
            return ProduceResult(error_code_of(exc), message=str(exc))

    async def write_txn_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> ErrorCode:
        """Append a COMMIT or ABORT marker to ``tp`` as its leader (waking its fetches: the last stable offset may
        have moved) and wait until the ISR has it, as acks=all; the error for that partition, NONE once replicated."""
        try:
            partition = self.leader_partition(tp)
            high_watermark = partition.high_watermark
            try:
                offset = partition.write_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit)
            except OSError as exc:
                raise self.log_manager.storage_error(partition.log, exc) from exc
            self._appended(tp, partition.high_watermark != high_watermark)
        except KafkaError as exc:
            return exc.code
        except Exception:
            log.exception("transaction marker for %s failed", tp)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        replicated: ErrorCode = await settled(
            self.when_replicated({tp: offset}, MARKER_REPLICATION_TIMEOUT_MS, lambda found: found[0])
        )
        return replicated

    def remove_expired_producers(self) -> None:
        """On the loop: every hosted partition, leader or follower, forgets the producers idle for
        producer.id.expiration.ms (Kafka's PeriodicProducerExpirationCheck); in-memory work only."""
        now = self.clock.time_ms()
        for partition in self.partitions.values():
            partition.producers.remove_expired(now, self.config.producer_id_expiration_ms)

    def _roll_snapshot(self, directory: Path, offset: int, entries: list[ProducerSnapshotEntry]) -> None:
        self.snapshot_requested(directory, offset, entries)

    def write_producer_snapshots(self) -> None:
        """Snapshot the producer state of every partition this broker hosts, leader or follower, at its log end (a
        clean shutdown)."""
        for partition in list(self.partitions.values()):
            try:
                partition.write_producer_snapshot()
            except OSError:
                log.warning("could not write the producer snapshot of %s", partition.tp, exc_info=True)

    def when_replicated(
        self, appended: Mapping[TopicPartition, int], timeout_ms: int, answer: Callable[[list[ErrorCode]], T]
    ) -> T | asyncio.Future[T]:
        """The waiting part of an acks=all produce whose batches were appended at the base offsets ``appended``:
        ``answer(outcomes)`` (one per partition, in order: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER, or REQUEST_TIMED_OUT at the timeout) now when the high watermark already passed every
        batch (a partition with no follower in its ISR), else a future of it completed from the produce purgatory."""

        def current() -> list[ErrorCode | None]:
            return [self._replication_outcome(tp, base_offset) for tp, base_offset in appended.items()]

        def check() -> T | None:
            found = current()
            return None if None in found else answer(cast(list[ErrorCode], found))

        def final() -> T:
            return answer([ErrorCode.REQUEST_TIMED_OUT if o is None else o for o in current()])

        return answer_or_wait(self.produce_purgatory, appended, timeout_ms, check, final)

    async def append_records(
        self, entries: Mapping[TopicPartition, Buffer], required_acks: int, timeout_ms: int
    ) -> dict[TopicPartition, ProduceResult]:
        """Append every entry (``append_to_leader``) and, for acks=all, wait for their replication."""
        results: dict[TopicPartition, ProduceResult] = {}
        appended: dict[TopicPartition, AppendResult] = {}
        for tp, records in entries.items():
            result = self.append_to_leader(tp, records, required_acks)
            if isinstance(result, ProduceResult):
                results[tp] = result
            else:
                appended[tp] = result
        outcomes = [ErrorCode.NONE] * len(appended)
        if required_acks == -1 and appended:
            base_offsets = {tp: result.base_offset for tp, result in appended.items()}
            outcomes = await settled(self.when_replicated(base_offsets, timeout_ms, lambda found: found))
        for (tp, result), error in zip(appended.items(), outcomes, strict=True):
            results[tp] = ProduceResult(error, result.base_offset, result.log_append_time_ms, result.log_start_offset)
        return results

    def _replication_outcome(self, tp: TopicPartition, base_offset: int) -> ErrorCode | None:
        """Where an acks=all append stands: None while it waits for the ISR, NONE once the high watermark passed it,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when it did with the ISR below ``min.insync.replicas``, and
        NOT_LEADER_OR_FOLLOWER as soon as this broker no longer leads the partition (the producer retries on the new
        leader instead of waiting out its timeout)."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark <= base_offset:
            return None
        if len(partition.isr) < self.topic_config(tp.topic).min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    # --- fetch -------------------------------------------------------------------------------------------------

    def _read(
        self,
        requests: list[FetchRequestPartition],
        replica_id: int,
        max_bytes: int,
        *,
        record_follower: bool = True,
        whole_batch_each: bool = False,
        leader_only: bool = True,
        read_committed: bool = False,
    ) -> dict[TopicPartition, FetchResult]:
        """File slices for ``requests``; a follower's fetch offsets count as its positions only with
        ``record_follower`` (its first read, not the re-reads of a parked fetch). Only the first partition read gets
        its first batch whole beyond its limit (KIP-74), every partition with ``whole_batch_each``. A follower
        replica answers only without ``leader_only``. A ``read_committed`` consumer reads below the last stable offset
        and is told the aborted transactions its records overlap (from the transaction indexes, per partition read)."""
        results: dict[TopicPartition, FetchResult] = {}
        remaining = max_bytes
        for request in requests:
            try:
                if leader_only:  # a fenced fetch moves nothing
                    partition = self.leader_partition(request.tp, request.current_leader_epoch)
                else:
                    partition = self.hosted_partition(request.tp)
                    partition.check_leader_epoch(request.current_leader_epoch)
                if replica_id >= 0:
                    if record_follower:
                        self._follower_fetched(partition, replica_id, request.fetch_offset)
                    if self._leader_throttled(partition, replica_id):
                        results[request.tp] = _answer(partition)
                        continue
                elif (
                    request.fetch_offset
                    == (partition.last_stable_offset if read_committed else partition.high_watermark)
                    >= partition.log_start_offset
                ):
                    # a consumer at the high watermark: what the log would answer (no records), without asking it
                    results[request.tp] = _answer(partition)
                    continue
                limit = min(request.max_bytes, max(remaining, 0))
                try:
                    info = partition.read(
                        request.fetch_offset,
                        limit,
                        from_follower=replica_id >= 0,
                        min_one_message=whole_batch_each or remaining == max_bytes,
                        current_leader_epoch=request.current_leader_epoch,
                        leader_only=leader_only,
                        read_committed=read_committed,
                    )
                    records = info.records
                    aborted = None
                    if read_committed and records is not None:
                        found = partition.log.collect_aborted_txns(request.fetch_offset, partition.last_stable_offset)
                        aborted = [(txn.producer_id, txn.first_offset) for txn in found]
                except OSError as exc:
                    raise self.log_manager.storage_error(partition.log, exc) from exc
                remaining -= records.length if records is not None else 0
                results[request.tp] = _answer(partition, records, aborted)
            except KafkaError as exc:
                results[request.tp] = FetchResult(exc.code)
        return results

    def _leader_throttled(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's leader-side throttle: a follower outside the ISR fetching a throttled partition gets no records
        while the leader quota is exceeded. In-sync followers, unthrottled partitions and consumers never wait."""
        quota = self.quotas.leader
        return replica_id not in partition.isr and quota.is_throttled(partition.tp) and quota.is_quota_exceeded()

    def _record_leader_throttled(self, results: dict[TopicPartition, FetchResult]) -> None:
        """Count the bytes a follower fetch sends for throttled partitions against the leader quota."""
        quota = self.quotas.leader
        sent = sum(r.records.length for tp, r in results.items() if r.records is not None and quota.is_throttled(tp))
        if sent:
            quota.record(sent)

    def fetch_or_park(
        self,
        requests: list[FetchRequestPartition],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        answer: Callable[[dict[TopicPartition, FetchResult]], T],
        whole_batch_each: bool = False,
        leader_only: bool = True,
        read_committed: bool = False,
    ) -> T | DelayedFuture[T]:
        """Read now and return ``answer(results)`` when at least ``min_bytes`` are ready, a partition failed or there
        is no time to wait; else park in the fetch purgatory on the requested partitions and return the parked
        operation, whose future gets ``answer`` of the read that an append or high-watermark move there made
        sufficient, or of a last read after ``max_wait_ms``. No task and one timer per parked fetch; the loop runs
        all of it. A follower's throttled bytes are counted once, when it is answered. ``whole_batch_each``: every
        partition's first batch is read whole (for the down-conversion of old versions, which cuts to their limits).
        Without ``leader_only`` (a consumer's Fetch v11+, KIP-392) a follower answers too, up to its high watermark;
        its high-watermark moves wake no parked fetch (they wait out their max wait), as in Kafka 2.8.
        ``read_committed``: reads stop at the last stable offset."""

        def respond(results: dict[TopicPartition, FetchResult]) -> T:
            if replica_id >= 0:
                self._record_leader_throttled(results)
            of = self.topic_stats.of
            for tp, result in results.items():
                stats = of(tp.topic)
                stats[TOTAL_FETCH] += 1
                if result.error != ErrorCode.NONE:
                    stats[FAILED_FETCH] += 1
                elif result.records is not None:
                    stats[BYTES_OUT] += result.records.length
            return answer(results)

        behind = {
            r.tp: r.replica_high_watermark for r in requests if r.replica_high_watermark != UNKNOWN_HIGH_WATERMARK
        }

        def ready(results: dict[TopicPartition, FetchResult]) -> bool:
            available = 0
            for r in results.values():
                if r.error != ErrorCode.NONE:
                    return True
                if r.records is not None:
                    available += r.records.length
            if behind and any(results[tp].high_watermark > known for tp, known in behind.items() if tp in results):
                return True  # a follower behind on the high watermark learns it now (KIP-1166)
            return available >= min_bytes

        whole, only, committed = whole_batch_each, leader_only, read_committed
        results = self._read(
            requests, replica_id, max_bytes, whole_batch_each=whole, leader_only=only, read_committed=committed
        )
        if max_wait_ms <= 0 or ready(results):
            return respond(results)

        def check() -> T | None:
            again = self._read(
                requests,
                replica_id,
                max_bytes,
                record_follower=False,
                whole_batch_each=whole,
                leader_only=only,
                read_committed=committed,
            )
            return respond(again) if ready(again) else None

        def final() -> T:
            return respond(
                self._read(
                    requests,
                    replica_id,
                    max_bytes,
                    record_follower=False,
                    whole_batch_each=whole,
                    leader_only=only,
                    read_committed=committed,
                )
            )

        return park(self.fetch_purgatory, [r.tp for r in requests], max_wait_ms, check, final)

    async def fetch(
        self,
        requests: list[FetchRequestPartition],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
    ) -> dict[TopicPartition, FetchResult]:
        """``fetch_or_park``, waiting for the answer of a parked fetch (which leaves the purgatory when the waiter is
        cancelled)."""
        found = self.fetch_or_park(
            requests,
            replica_id=replica_id,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            answer=_same,
        )
        if not isinstance(found, DelayedFuture):
            return found
        return await waited(found)


def _same(results: dict[TopicPartition, FetchResult]) -> dict[TopicPartition, FetchResult]:
    return results


def _answer(
    partition: Partition, records: FileSlice | None = None, aborted: list[tuple[int, int]] | None = None
) -> FetchResult:
    """A successful fetch of ``partition``: its offsets as they stand, with ``records`` (none when nothing was read)
    and the aborted transactions they overlap (read_committed)."""
    return FetchResult(
        ErrorCode.NONE,
        partition.high_watermark,
        partition.last_stable_offset,
        partition.log_start_offset,
        records,
        aborted,
    )
