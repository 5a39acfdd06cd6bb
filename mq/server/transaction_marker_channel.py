"""Transaction markers for partitions led by other brokers (cluster mode): WriteTxnMarkers to each leader.

One connection per leader over the inter-broker listener, kept open and reused. The leader is read from this
broker's metadata cache at each send, so a marker whose leader moved is sent to the new one on the coordinator's
next attempt; an unreachable leader answers a retriable error (the coordinator retries until it is written).
UNKNOWN_TOPIC_OR_PARTITION means a deleted partition (which needs no marker) only when this broker's own metadata
lacks it; from the leader it means the leader has not taken the partition up yet (a broker just restarted), and it
is answered as NOT_LEADER_OR_FOLLOWER, so the marker is sent again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mq.client.connection import BrokerConnection
from mq.client.security import ClientSecurity
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class TransactionMarkerChannelManager:
    def __init__(
        self,
        broker_id: int,
        cache: MetadataCache,
        endpoint: Callable[[int], BrokerEndpoint | None],
        security: ClientSecurity,
    ) -> None:
        self.broker_id = broker_id
        self.cache = cache
        self.endpoint = endpoint
        """The inter-broker endpoint of a broker id, None when it is not alive."""
        self.security = security
        self._connections: dict[int, BrokerConnection] = {}

    async def send(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> ErrorCode:
        """Write one marker on ``tp`` through its leader; the leader's error for it (NONE once written)."""
        topic = self.cache.topics.get(tp.topic)
        state = None if topic is None else topic.partitions.get(tp.partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        endpoint = self.endpoint(state.leader)
        if endpoint is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        connection = self._connections.get(state.leader)
        if connection is None or (connection.host, connection.port) != (endpoint.host, endpoint.port):
            if connection is not None:
                await connection.close()
            connection = self._connections[state.leader] = BrokerConnection(
                endpoint.host,
                endpoint.port,
                node_id=state.leader,
                client_id=f"broker-{self.broker_id}-txn-marker-sender",
                security=self.security,
            )
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": commit,
                    "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        try:
            response = await connection.send(ApiKey.WRITE_TXN_MARKERS, body)
        except Exception as exc:
            log.debug("WriteTxnMarkers to broker %d failed: %s", state.leader, exc)
            await connection.close()
            del self._connections[state.leader]
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        for marker in response.markers:
            for topic_result in marker.topics:
                for p in topic_result.partitions:
                    code = ErrorCode(int(p.error_code))
                    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # the leader does not host it yet (restarting)
                    return code
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
