"""The controller's channel to the broker it runs in: LeaderAndIsr, UpdateMetadata and StopReplica as calls."""

from __future__ import annotations

from mq.server.controller import LEADER_DURING_DELETE, PartitionStateInfo
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.server.replica_manager import ReplicaManager
from mq.topic_partition import TopicPartition
from mq.zk.codecs import BrokerRegistration


def endpoint_of(registration: BrokerRegistration) -> BrokerEndpoint:
    host, port = registration.host_port() or ("", -1)
    return BrokerEndpoint(registration.broker_id, host, port, registration.rack)


class LocalChannel:
    def __init__(self, broker_id: int, replica_manager: ReplicaManager, cache: MetadataCache) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cache = cache

    def leader_and_isr(self, broker_id: int, partitions: list[PartitionStateInfo]) -> None:
        if broker_id == self.broker_id:
            self.replica_manager.become_leader_or_follower(partitions)

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None:
        if broker_id != self.broker_id:
            return
        self.cache.update_brokers([endpoint_of(b) for b in brokers], controller_id)
        for info in partitions:
            if info.leader == LEADER_DURING_DELETE:
                self.cache.remove_topic(info.tp.topic)
                continue
            offline = tuple(r for r in info.replicas if r not in self.cache.brokers)
            state = PartitionInfo(info.leader, info.leader_epoch, info.replicas, info.isr, offline)
            self.cache.update_partition(info.tp.topic, info.topic_id, info.tp.partition, state)

    def stop_replica(self, broker_id: int, partitions: list[TopicPartition], delete: bool) -> None:
        if broker_id == self.broker_id:
            self.replica_manager.stop_replicas(partitions, delete)
