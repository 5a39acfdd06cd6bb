"""WriteTxnMarkers to a partition's leader: what the transaction coordinator is told for each answer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from mq.client.security import ClientSecurity
from mq.errors import ErrorCode
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo, TopicInfo
from mq.server.transaction_marker_channel import TransactionMarkerChannelManager
from mq.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
LEADER = BrokerEndpoint(2, "127.0.0.1", 9093)


class AnsweringConnection:
    """Stands for the connection to the leader: answers every WriteTxnMarkers with ``code`` for the partition."""

    def __init__(self, code: ErrorCode) -> None:
        self.host, self.port, self.code = LEADER.host, LEADER.port, code

    async def send(self, api_key: int, body: dict[str, Any], version: int | None = None) -> Any:
        partitions = [SimpleNamespace(partition_index=TP.partition, error_code=int(self.code))]
        return SimpleNamespace(
            markers=[SimpleNamespace(topics=[SimpleNamespace(name=TP.topic, partitions=partitions)])]
        )

    async def close(self) -> None:
        pass


def channel(known: bool) -> TransactionMarkerChannelManager:
    cache = MetadataCache(1, "cluster")
    if known:
        cache.topics[TP.topic] = TopicInfo(TP.topic, None, {TP.partition: PartitionInfo(2, 0, (2,), (2,))})
    return TransactionMarkerChannelManager(1, cache, lambda broker_id: LEADER, ClientSecurity())


def sent(manager: TransactionMarkerChannelManager, answer: ErrorCode) -> ErrorCode:
    manager._connections[LEADER.broker_id] = AnsweringConnection(answer)  # type: ignore[assignment]
    return asyncio.run(manager.send(TP, 7, 0, 3, True))


def test_a_partition_the_leader_does_not_host_yet_is_retried_and_a_deleted_one_needs_no_marker() -> None:
    assert sent(channel(known=True), ErrorCode.NONE) == ErrorCode.NONE
    assert sent(channel(known=True), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert sent(channel(known=True), ErrorCode.INVALID_PRODUCER_EPOCH) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert sent(channel(known=False), ErrorCode.NONE) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # deleted: skipped
