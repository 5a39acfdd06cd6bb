"""ZooKeeper-coordinated groups through GroupAdmin: where their committed offsets come from."""

from __future__ import annotations

from typing import Any

from mq.tools.zk_groups import ZkGroupAdmin
from mq.topic_partition import TopicPartition
from mq.zk.codecs import TopicAssignment
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore


class BrokerOffsets:
    """Stands in for SyncAdmin: the broker's committed offsets of every group, and the calls it was asked."""

    def __init__(self, offsets: dict[TopicPartition, int]) -> None:
        self.offsets = offsets
        self.calls: list[str] = []

    def call(self, method: Any, *args: Any) -> Any:
        self.calls.append(method.__name__)
        return dict(self.offsets)


def test_offsets_come_from_zookeeper_alone_until_the_offsets_topic_exists() -> None:
    store = LocalStore(None)
    groups = ZkConsumerGroups(store)
    groups.set_offset("g", TopicPartition("t", 0), 4)
    groups.set_offset("g", TopicPartition("t", 1), 6)
    broker = BrokerOffsets({TopicPartition("t", 1): 9})
    admin = ZkGroupAdmin(broker, groups)  # type: ignore[arg-type]

    assert admin.list_group_offsets("g") == {TopicPartition("t", 0): 4, TopicPartition("t", 1): 6}
    assert broker.calls == []

    KafkaZkClient(store).create_topic("__consumer_offsets", TopicAssignment({0: [1]}), {})
    assert admin.list_group_offsets("g") == {TopicPartition("t", 0): 4, TopicPartition("t", 1): 9}
    assert broker.calls == ["list_group_offsets"]
