"""Followers replicate by fetching from their leaders, as consumers do but with ``replica_id`` set.

One fetcher task per source broker long-polls Fetch for every partition this broker follows there, appends what
arrives with ``Partition.append_records_to_follower`` (offsets as the leader assigned them; producer state and
transaction index kept as the leader keeps them), and takes the leader's high watermark, capped at its own log end. A partition moves between fetchers when LeaderAndIsr names a new leader.

A newly followed partition is first *truncating* (KIP-101, KIP-279): the fetcher asks the leader with
OffsetForLeaderEpoch where the follower's latest epoch ends in the leader's log and truncates to
min(that end offset, its own end of that epoch, its log end); when the leader only knows an older epoch, the follower
cuts back to where that older epoch ends on its side and asks again. A log without epochs truncates to its high
watermark. Truncation reloads the producer state to the new log end. Only then is the partition fetched, so a
returning replica keeps exactly the prefix it shares with the leader. A fenced leader epoch (FENCED_LEADER_EPOCH) takes the partition out of the fetcher until the next
LeaderAndIsr follows it again; UNKNOWN_LEADER_EPOCH (the leader has not heard of the epoch yet) is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mq.client.connection import BrokerConnection
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.records.batch_header import iter_headers
from mq.server.metadata_cache import BrokerEndpoint
from mq.server.partition import Partition
from mq.server.replication_quota import ReplicationQuotaManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
STOP_TIMEOUT_S = 5.0
UNDEFINED_EPOCH_OFFSET = -1


def whole_batches(records: bytes) -> bytes:
    """``records`` without a partial batch at its end (a fetch may stop inside one)."""
    end = 0
    for header in iter_headers(records):
        end = header.end_position
    return records[:end]


def _log_of(partition: Partition) -> Log:
    """The partition's log, typed as the storage layer defines it."""
    log_: Log = partition.log
    return log_


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        endpoint: Callable[[int], BrokerEndpoint | None],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        quota: ReplicationQuotaManager | None = None,
        storage_failed: Callable[[Partition, OSError], None] = lambda partition, error: None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.security = security
        """TLS and SASL of the connection to the leader (the inter-broker listener's)."""
        self.leader_id = leader_id
        self.storage_failed = storage_failed
        """Told when appending fetched data fails with an OSError; the partition is no longer fetched."""
        self.endpoint = endpoint
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.quota = quota
        """The follower replication throttle: throttled partitions are left out of fetches while it is exceeded."""
        self.partitions: dict[TopicPartition, Partition] = {}
        self.truncating: set[TopicPartition] = set()
        """Partitions not fetched until their log is truncated to what they share with the leader."""
        self._connection: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=STOP_TIMEOUT_S)
            self._task = None
        if self._connection is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._connection.close(), STOP_TIMEOUT_S)
            self._connection = None

    def add(self, partition: Partition) -> None:
        """Follow ``partition``, truncating it first."""
        self.partitions[partition.tp] = partition
        self.truncating.add(partition.tp)

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.truncating.discard(tp)

    def _request(self, sent: dict[TopicPartition, tuple[int, int]]) -> dict[str, Any]:
        """The Fetch request for the partitions past truncation; ``sent`` records the (fetch offset, leader epoch)
        used per partition."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, partition in self.partitions.items():
            if tp in self.truncating:
                continue
            if self.quota is not None and self.quota.is_throttled(tp) and self.quota.is_quota_exceeded():
                continue
            sent[tp] = (partition.log_end_offset, partition.leader_epoch)
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": partition.leader_epoch,
                    "fetch_offset": partition.log_end_offset,
                    "log_start_offset": partition.log_start_offset,
                    "partition_max_bytes": self.max_bytes,
                }
            )
        return {
            "replica_id": self.broker_id,
            "max_wait": self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    async def _connection_to_leader(self) -> BrokerConnection | None:
        endpoint = self.endpoint(self.leader_id)
        if endpoint is None:
            return None
        if self._connection is None or (self._connection.host, self._connection.port) != (endpoint.host, endpoint.port):
            if self._connection is not None:
                await self._connection.close()
            self._connection = BrokerConnection(
                endpoint.host,
                endpoint.port,
                node_id=self.leader_id,
                client_id=f"replica-fetcher-{self.broker_id}",
                security=self.security,
            )
        return self._connection

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                await asyncio.sleep(0.1)
                continue
            connection = await self._connection_to_leader()
            if connection is None:
                await asyncio.sleep(0.5)
                continue
            sent: dict[TopicPartition, tuple[int, int]] = {}
            try:
                if self.truncating:
                    await self._truncate(connection)
                request = self._request(sent)
                if not sent:
                    await asyncio.sleep(0.2)  # every partition still truncating: retry shortly
                    continue
                response = await connection.send(ApiKey.FETCH, request, FETCH_VERSION)
            except (KafkaError, OSError) as exc:
                log.info("fetch from leader %d failed: %s", self.leader_id, exc)
                await asyncio.sleep(0.5)
                continue
            if not self._apply(response, sent) and any(p.error_code for t in response.responses for p in t.partitions):
                await asyncio.sleep(0.2)

    def _fenced(self, tp: TopicPartition, code: int, epoch: int) -> None:
        """A leader epoch error for a request sent with ``epoch``: FENCED while this replica still has that epoch
        stops fetching the partition until LeaderAndIsr follows it again; anything else is retried."""
        if code == ErrorCode.FENCED_LEADER_EPOCH and self.partitions[tp].leader_epoch == epoch:
            log.info("leader %d fenced epoch %d of %s: waiting for LeaderAndIsr", self.leader_id, epoch, tp)
            self.remove(tp)

    async def _truncate(self, connection: BrokerConnection) -> None:
        """Truncate every truncating partition to the offset its log shares with the leader's, asking the leader
        with OffsetForLeaderEpoch as many rounds as the partitions need; those whose answer was an error stay
        truncating for the next call."""
        while True:
            asked: dict[TopicPartition, tuple[int, int]] = {}
            for tp in list(self.truncating):
                partition = self.partitions[tp]
                latest = _log_of(partition).leader_epoch_cache.latest_epoch
                if latest is None:
                    self._truncate_to(partition, partition.high_watermark)
                    self.truncating.discard(tp)
                else:
                    asked[tp] = (partition.leader_epoch, latest)
            if not asked:
                return
            response = await connection.send(
                ApiKey.OFFSET_FOR_LEADER_EPOCH, self._epoch_request(asked), OFFSET_FOR_LEADER_EPOCH_VERSION
            )
            again = False
            for topic in response.topics:
                for answer in topic.partitions:
                    tp = TopicPartition(topic.topic, answer.partition)
                    if tp not in asked or tp not in self.truncating:
                        continue
                    partition = self.partitions[tp]
                    current_epoch, latest = asked[tp]
                    if (
                        partition.leader_epoch != current_epoch
                        or _log_of(partition).leader_epoch_cache.latest_epoch != latest
                    ):
                        again = True  # followed again meanwhile: ask afresh
                    elif answer.error_code != ErrorCode.NONE:
                        log.info("OffsetForLeaderEpoch of %s from %d: error %s", tp, self.leader_id, answer.error_code)
                        self._fenced(tp, answer.error_code, current_epoch)
                    elif self._truncate_by_epoch(partition, int(answer.leader_epoch), int(answer.end_offset)):
                        self.truncating.discard(tp)
                    else:
                        again = True
            if not again:
                return

    def _epoch_request(self, asked: dict[TopicPartition, tuple[int, int]]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, (current_epoch, latest) in asked.items():
            topics.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "current_leader_epoch": current_epoch, "leader_epoch": latest}
            )
        return {"replica_id": self.broker_id, "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]}

    def _truncate_by_epoch(self, partition: Partition, leader_epoch: int, leader_end_offset: int) -> bool:
        """Apply the leader's ``(epoch, end offset)`` answer; True when truncation is complete, False when the
        leader named an epoch this log does not hold (it was cut back to the epoch below, to ask again)."""
        log_ = _log_of(partition)
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            target = partition.high_watermark  # the leader cannot place our epoch
        else:
            own_epoch, own_end = log_.end_offset_for_epoch(leader_epoch)
            if own_end == UNDEFINED_EPOCH_OFFSET:
                target = min(leader_end_offset, log_.log_end_offset)
            elif own_epoch != leader_epoch:
                self._truncate_to(partition, min(own_end, log_.log_end_offset))
                return False
            else:
                target = min(own_end, leader_end_offset, log_.log_end_offset)
        self._truncate_to(partition, target)
        return True

    def _truncate_to(self, partition: Partition, offset: int) -> None:
        if offset < partition.log_end_offset:
            log.info(
                "Truncating %s to offset %d (log end %d) to follow leader %d",
                partition.tp,
                offset,
                partition.log_end_offset,
                self.leader_id,
            )
        partition.truncate_to(offset)

    def _apply(self, response: Any, sent: dict[TopicPartition, tuple[int, int]]) -> bool:
        """Append what arrived; a partition whose log or epoch changed while the fetch was out (it was truncated, or
        followed again) ignores its answer, which was for a position it no longer has."""
        progressed = False
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                partition = self.partitions.get(tp)
                asked = sent.get(tp)
                if (
                    partition is None
                    or asked is None
                    or tp in self.truncating
                    or asked != (partition.log_end_offset, partition.leader_epoch)
                ):
                    continue
                if data.error_code != ErrorCode.NONE:
                    log.debug("fetch of %s from leader %d: error %s", tp, self.leader_id, data.error_code)
                    self._fenced(tp, data.error_code, asked[1])
                    continue
                records = whole_batches(bytes(data.records or b""))
                if records:
                    try:
                        partition.append_records_to_follower(records)
                    except KafkaError as exc:
                        log.warning("replica of %s rejected data from leader %d: %s", tp, self.leader_id, exc)
                        continue
                    except OSError as exc:
                        self.remove(tp)
                        self.storage_failed(partition, exc)
                        continue
                    if self.quota is not None and self.quota.is_throttled(tp):
                        self.quota.record(len(records))
                    progressed = True
                partition.follower_lag = max(int(data.high_watermark) - partition.log_end_offset, 0)
                new_hw = min(int(data.high_watermark), partition.log_end_offset)
                if new_hw > partition.high_watermark:
                    partition.high_watermark = new_hw
                    progressed = True
        return progressed


class ReplicaFetcherManager:
    """The fetchers of one broker, one per leader it follows partitions on."""

    def __init__(
        self,
        broker_id: int,
        endpoint: Callable[[int], BrokerEndpoint | None],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        quota: ReplicationQuotaManager | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.security = security
        self.settings = {"max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes}
        self.quota = quota
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.storage_failed: Callable[[Partition, OSError], None] = lambda partition, error: None
        """Told when a follower's append fails with an OSError (the replica manager takes the log dir offline)."""

    def follow(self, partition: Partition, leader_id: int) -> None:
        self.unfollow(partition.tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(
                self.broker_id,
                leader_id,
                self.endpoint,
                **self.settings,
                quota=self.quota,
                storage_failed=lambda partition, error: self.storage_failed(partition, error),
                security=self.security,
            )
            fetcher.start()
        fetcher.add(partition)

    def unfollow(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    async def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
