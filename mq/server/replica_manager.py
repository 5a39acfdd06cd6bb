"""Partitions hosted by this broker, and the produce and fetch paths through them.

Produce appends to each leader partition (errors stay per partition); acks=-1 waits until the high watermark
passes the appended offsets or the timeout. Fetch reads file slices from each partition, and when fewer than
``min_bytes`` are available waits for an append (or the timeout) before answering, so clients long-poll instead of
spinning. The controller's LeaderAndIsr and StopReplica decisions arrive here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode, KafkaError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError, error_code_of
from mq.records.crc import Buffer
from mq.server.controller import PartitionStateInfo
from mq.server.partition import AppendResult, Partition
from mq.server.replica_fetcher import ReplicaFetcherManager
from mq.server.replication_quota import ReplicationQuotas
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None


@dataclass(frozen=True)
class FetchRequestPartition:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    """The requester's leader epoch; -1 when it sent none."""


@dataclass(frozen=True)
class FetchResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None
    """A file slice (fd, position, length) or None."""


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        log_manager: Any,
        topic_config: Callable[[str], TopicConfig],
        checkpointed_high_watermarks: dict[TopicPartition, int] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.partitions: dict[TopicPartition, Partition] = {}
        self._checkpointed = dict(checkpointed_high_watermarks or {})
        self.fetchers: ReplicaFetcherManager | None = None
        """Set in cluster mode: followers fetch from their leaders through it."""
        self.isr_writer: Callable[[Partition, frozenset[int]], bool] | None = None
        """Set in cluster mode: records a leader's ISR change in the metadata tree; False when it lost the race."""
        self._appended = asyncio.Event()
        self.quotas = ReplicationQuotas(config, broker_id, topic_config)
        """Replication throttles: the leader side is applied in ``fetch``, the follower side by the fetchers."""
        self.leadership_listener: Callable[[TopicPartition, bool], None] | None = None
        """Told (partition, now leads it) after each applied leadership decision and each stopped replica: the group
        coordinator loads and unloads ``__consumer_offsets`` partitions through it."""

    # --- controller decisions ----------------------------------------------------------------------------------

    def become_leader_or_follower(self, infos: Iterable[PartitionStateInfo]) -> None:
        for info in infos:
            if self.broker_id not in info.replicas:
                continue
            partition = self.partitions.get(info.tp)
            if partition is None:
                log_ = self.log_manager.get_or_create_log(info.tp, self.topic_config(info.tp.topic))
                partition = Partition(info.tp, log_, self.broker_id)
                partition.high_watermark = self._checkpointed.pop(info.tp, 0)
                partition.rebuild_producer_state()
                self.partitions[info.tp] = partition
            was_leader = partition.is_leader
            if not partition.apply_state(info):
                continue
            if partition.is_leader:
                if self.fetchers is not None:
                    self.fetchers.unfollow(info.tp)
                partition.log.leader_epoch_cache.assign(info.leader_epoch, partition.log_end_offset)
                if not was_leader:
                    partition.rebuild_producer_state()  # retries of batches replicated here are duplicates
            elif info.leader >= 0 and self.fetchers is not None:
                partition.producers.truncate()
                self.fetchers.follow(partition, info.leader)  # truncates by leader epoch before fetching
            if self.leadership_listener is not None:
                self.leadership_listener(info.tp, partition.is_leader)
        self._wake_fetchers()  # parked produces and fetches re-check who leads

    def stop_replicas(self, tps: Iterable[TopicPartition], delete: bool) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)
            if self.fetchers is not None:
                self.fetchers.unfollow(tp)
            if self.leadership_listener is not None:
                self.leadership_listener(tp, False)
            if delete:
                self.log_manager.delete_log(tp)
        self._wake_fetchers()

    def update_topic_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.log.update_config(config)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {tp}")
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader for {tp}")
        return partition

    def _change_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        if self.isr_writer is not None and self.isr_writer(partition, isr):
            partition.isr = isr
            if partition.maybe_increment_high_watermark():
                self._wake_fetchers()

    def _follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        if partition.update_follower_fetch(replica_id, fetch_offset):
            self._wake_fetchers()  # the high watermark moved: acks=all produces may complete
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

    def _wake_fetchers(self) -> None:
        self._appended.set()
        self._appended = asyncio.Event()

    async def append_records(
        self, entries: Mapping[TopicPartition, Buffer], required_acks: int, timeout_ms: int
    ) -> dict[TopicPartition, ProduceResult]:
        results: dict[TopicPartition, ProduceResult] = {}
        appended: dict[TopicPartition, AppendResult] = {}
        for tp, records in entries.items():
            try:
                partition = self.leader_partition(tp)
                min_isr = self.topic_config(tp.topic).min_insync_replicas
                appended[tp] = partition.append_records_to_leader(records, required_acks, min_isr)
            except KafkaError as exc:
                results[tp] = ProduceResult(exc.code, message=str(exc))
            except Exception as exc:
                log.exception("append to %s failed", tp)
                results[tp] = ProduceResult(error_code_of(exc), message=str(exc))
        if appended:
            self._wake_fetchers()
        outcomes: dict[TopicPartition, ErrorCode | None] = dict.fromkeys(appended, ErrorCode.NONE)
        if required_acks == -1 and appended:
            outcomes = await self._await_replication(appended, timeout_ms)
        for tp, result in appended.items():
            outcome = outcomes[tp]
            error = ErrorCode.REQUEST_TIMED_OUT if outcome is None else outcome
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

    async def _await_replication(
        self, appended: dict[TopicPartition, AppendResult], timeout_ms: int
    ) -> dict[TopicPartition, ErrorCode | None]:
        """Wait until every append has an outcome or ``timeout_ms`` passed; None marks those still waiting."""

        def outcomes() -> dict[TopicPartition, ErrorCode | None]:
            return {tp: self._replication_outcome(tp, result.base_offset) for tp, result in appended.items()}

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while None in outcomes().values() and loop.time() < deadline:
            event = self._appended
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), deadline - loop.time())
        return outcomes()

    # --- fetch -------------------------------------------------------------------------------------------------

    def _read(
        self, requests: list[FetchRequestPartition], replica_id: int, max_bytes: int
    ) -> dict[TopicPartition, FetchResult]:
        results: dict[TopicPartition, FetchResult] = {}
        remaining = max_bytes
        for request in requests:
            try:
                partition = self.leader_partition(request.tp)
                partition.check_leader_epoch(request.current_leader_epoch)  # a fenced fetch moves nothing
                if replica_id >= 0:
                    self._follower_fetched(partition, replica_id, request.fetch_offset)
                    if self._leader_throttled(partition, replica_id):
                        results[request.tp] = FetchResult(
                            ErrorCode.NONE,
                            partition.high_watermark,
                            partition.last_stable_offset,
                            partition.log_start_offset,
                        )
                        continue
                limit = min(request.max_bytes, max(remaining, 0))
                info = partition.read(
                    request.fetch_offset,
                    limit,
                    from_follower=replica_id >= 0,
                    min_one_message=remaining == max_bytes,
                    current_leader_epoch=request.current_leader_epoch,
                )
                records = info.records
                remaining -= records.length if records is not None else 0
                results[request.tp] = FetchResult(
                    ErrorCode.NONE,
                    partition.high_watermark,
                    partition.last_stable_offset,
                    partition.log_start_offset,
                    records,
                )
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

    async def fetch(
        self,
        requests: list[FetchRequestPartition],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
    ) -> dict[TopicPartition, FetchResult]:
        """Read now; if fewer than ``min_bytes`` are ready and nothing failed, wait for appends up to ``max_wait_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            event = self._appended
            results = self._read(requests, replica_id, max_bytes)
            available = sum(r.records.length for r in results.values() if r.records is not None)
            failed = any(r.error != ErrorCode.NONE for r in results.values())
            remaining = deadline - loop.time()
            if available >= min_bytes or failed or remaining <= 0:
                if replica_id >= 0:
                    self._record_leader_throttled(results)
                return results
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)
