from __future__ import annotations

import random

import pytest

from mq.errors import (
    ConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from mq.zk import paths
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.assignment import AssignmentError, assign_replicas, rack_alternated
from mq.zk.codecs import BrokerRegistration, PartitionState, decode_config_change
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from mq.zk.store import BadVersionError, NodeExistsError


def cluster(broker_ids: list[int], racks: dict[int, str] | None = None) -> tuple[KafkaZkClient, AdminZkClient]:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    for b in broker_ids:
        zk.register_broker(BrokerRegistration(b, [f"PLAINTEXT://127.0.0.1:{9092 + b}"], rack=(racks or {}).get(b)))
    return zk, AdminZkClient(zk, random.Random(7))


def test_round_robin_example_from_kafka() -> None:
    assignment = assign_replicas(range(5), 10, 3, start_index=0)
    assert assignment[0] == [0, 1, 2] and assignment[1] == [1, 2, 3] and assignment[5] == [0, 2, 3]
    leaders = [r[0] for r in assignment.values()]
    assert sorted(leaders) == sorted(list(range(5)) * 2)


def test_rack_aware_puts_replicas_on_distinct_racks() -> None:
    racks = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated(range(9), racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    for replicas in assign_replicas(range(9), 12, 3, racks=racks).values():
        assert len({racks[b] for b in replicas}) == 3 and len(set(replicas)) == 3


def test_assignment_preconditions() -> None:
    with pytest.raises(AssignmentError, match="Replication factor: 3 larger than available brokers: 2."):
        assign_replicas([0, 1], 1, 3)
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas([0, 1], 1, 1, racks={0: "a"})


def test_create_topic_writes_config_then_assignment() -> None:
    zk, admin = cluster([0, 1, 2])
    assignment = admin.create_topic("orders", 3, 2, {"retention.ms": "1000"})
    stored = zk.get_topic_assignment("orders")
    assert stored is not None and stored.partitions == assignment and stored.topic_id is not None
    assert all(len(r) == 2 for r in assignment.values())
    assert zk.get_entity_config("topics", "orders") == {"retention.ms": "1000"}
    assert zk.get_all_topics() == ["orders"]


def test_create_topic_errors() -> None:
    zk, admin = cluster([0])
    admin.create_topic("a_b", 1, 1)
    with pytest.raises(TopicExistsError, match="Topic 'a_b' already exists."):
        admin.create_topic("a_b", 1, 1)
    with pytest.raises(InvalidTopicError, match="Topic 'a.b' collides with existing topics: a_b"):
        admin.create_topic("a.b", 1, 1)
    with pytest.raises(InvalidTopicError, match="illegal"):
        admin.create_topic("bad name", 1, 1)
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 1"):
        admin.create_topic("t", 1, 2)
    with pytest.raises(InvalidPartitionsError):
        admin.create_topic("t", 0, 1)
    with pytest.raises(ConfigError, match="unknown topic config key 'retention.mss'"):
        admin.create_topic("t", 1, 1, {"retention.mss": "1"})
    with pytest.raises(InvalidReplicaAssignmentError, match="duplicate entries: 0"):
        admin.create_topic("t", 0, 0, replica_assignment={0: [0, 0]})
    with pytest.raises(InvalidReplicaAssignmentError, match="Partition 1 has different replication factor: 0"):
        admin.create_topic("t", 0, 0, replica_assignment={0: [0, 1], 1: [0]})
    assert zk.get_all_topics() == ["a_b"]


def test_validate_only_writes_nothing() -> None:
    zk, admin = cluster([0, 1])
    admin.create_topic("t", 2, 2, validate_only=True)
    assert zk.get_all_topics() == []


def test_add_partitions_continues_round_robin() -> None:
    zk, admin = cluster([0, 1, 2])
    admin.create_topic("t", 0, 0, replica_assignment={0: [1, 2], 1: [2, 0]})
    added = admin.add_partitions("t", 4)
    assert sorted(added) == [2, 3] and all(len(r) == 2 for r in added.values())
    stored = zk.get_topic_assignment("t")
    assert stored is not None and sorted(stored.partitions) == [0, 1, 2, 3]
    with pytest.raises(InvalidPartitionsError, match="Topic already has 4 partitions."):
        admin.add_partitions("t", 4)
    with pytest.raises(InvalidReplicaAssignmentError, match="Unknown broker"):
        admin.add_partitions("t", 5, [[0, 9]])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.add_partitions("nope", 5)


def test_delete_marks_and_config_change_notifies() -> None:
    zk, admin = cluster([0])
    admin.create_topic("t", 1, 1)
    assert admin.delete_topic("t") is True
    assert admin.delete_topic("t") is False
    assert zk.get_topics_marked_for_deletion() == ["t"]
    with pytest.raises(InvalidTopicError, match="internal topic"):
        admin.delete_topic("__consumer_offsets")
    admin.change_topic_config("t", {"cleanup.policy": "compact"})
    changes = zk.store.get_children(paths.CONFIG_CHANGES)
    assert changes == ["config_change_0000000000"]
    assert decode_config_change(zk.store.get(f"{paths.CONFIG_CHANGES}/{changes[0]}")[0]) == "topics/t"
    zk.delete_topic_nodes("t")
    assert zk.get_all_topics() == [] and zk.get_entity_config("topics", "t") == {}


def test_partition_state_is_conditional() -> None:
    zk, _ = cluster([0])
    zk.create_partition_state("t", 0, PartitionState(0, 0, [0], 1))
    state, version = zk.get_partition_state("t", 0) or (None, -1)
    assert state == PartitionState(0, 0, [0], 1) and version == 0
    assert zk.set_partition_state("t", 0, PartitionState(0, 1, [0], 1), 0) == 1
    with pytest.raises(BadVersionError):
        zk.set_partition_state("t", 0, PartitionState(0, 2, [0], 1), 0)


def test_broker_registration_conflict_and_cluster_id() -> None:
    zk, _ = cluster([0])
    with pytest.raises(NodeExistsError, match="A broker is already registered on the path /brokers/ids/0"):
        zk.register_broker(BrokerRegistration(0, ["PLAINTEXT://h:1"]))
    assert zk.get_or_create_cluster_id() == zk.get_or_create_cluster_id()
    assert sorted(zk.get_all_brokers()) == [0]
