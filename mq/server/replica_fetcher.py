"""Followers replicate by fetching from their leaders, as consumers do but with ``replica_id`` set.

One fetcher task per source broker long-polls Fetch for every partition this broker follows there, appends what
arrives with ``append_as_follower`` (offsets as the leader assigned them), and takes the leader's high watermark,
capped at its own log end. A partition moves between fetchers when LeaderAndIsr names a new leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.records.batch_header import iter_headers
from mq.server.metadata_cache import BrokerEndpoint
from mq.server.partition import Partition
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 12
STOP_TIMEOUT_S = 5.0


def whole_batches(records: bytes) -> bytes:
    """``records`` without a partial batch at its end (a fetch may stop inside one)."""
    end = 0
    for header in iter_headers(records):
        end = header.end_position
    return records[:end]


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
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partitions: dict[TopicPartition, Partition] = {}
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

    def _request(self, offsets: dict[TopicPartition, int]) -> dict[str, Any]:
        """The Fetch request; ``offsets`` records the fetch offset used per partition."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, partition in self.partitions.items():
            offsets[tp] = partition.log_end_offset
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
                endpoint.host, endpoint.port, node_id=self.leader_id, client_id=f"replica-fetcher-{self.broker_id}"
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
            offsets: dict[TopicPartition, int] = {}
            try:
                response = await connection.send(ApiKey.FETCH, self._request(offsets), FETCH_VERSION)
            except (KafkaError, OSError) as exc:
                log.info("fetch from leader %d failed: %s", self.leader_id, exc)
                await asyncio.sleep(0.5)
                continue
            if not self._apply(response, offsets) and any(
                p.error_code for t in response.responses for p in t.partitions
            ):
                await asyncio.sleep(0.2)

    def _apply(self, response: Any, offsets: dict[TopicPartition, int]) -> bool:
        """Append what arrived; a partition whose log changed while the fetch was out (it was truncated or moved to
        another leader) ignores its answer, which was for a position it no longer has."""
        progressed = False
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                partition = self.partitions.get(tp)
                if partition is None or partition.log_end_offset != offsets.get(tp):
                    continue
                if data.error_code != ErrorCode.NONE:
                    log.debug("fetch of %s from leader %d: error %s", tp, self.leader_id, data.error_code)
                    continue
                records = whole_batches(bytes(data.records or b""))
                if records:
                    try:
                        partition.log.append_as_follower(records)
                    except KafkaError as exc:
                        log.warning("replica of %s rejected data from leader %d: %s", tp, self.leader_id, exc)
                        continue
                    progressed = True
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
    ) -> None:
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.settings = {"max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes}
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def follow(self, partition: Partition, leader_id: int) -> None:
        self.unfollow(partition.tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(
                self.broker_id, leader_id, self.endpoint, **self.settings
            )
            fetcher.start()
        fetcher.partitions[partition.tp] = partition

    def unfollow(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.partitions.pop(tp, None)

    async def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
