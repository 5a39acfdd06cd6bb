"""``mq topics --zookeeper`` writes and reads the metadata tree in a real ZooKeeper, as Kafka's ZooKeeper-mode tool."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from mq.zk.codecs import BrokerRegistration, PartitionState, TopicAssignment
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow


def run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, "topics", *args], capture_output=True, text=True, timeout=60)


def test_zookeeper_mode(mq_command: list[str], zookeeper) -> None:
    connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
    z = ["--zookeeper", connect]
    created = run(mq_command, *z, "--create", "--topic", "orders", "--replica-assignment", "1:2,2:1")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic orders.\n"
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assignment = zk.get_topic_assignment("orders")
    assert assignment is not None and assignment.partitions == {0: [1, 2], 1: [2, 1]}
    assert zk.get_entity_config("topics", "orders") == {}

    no_brokers = run(mq_command, *z, "--create", "--topic", "auto", "--partitions", "2", "--replication-factor", "1")
    assert no_brokers.returncode == 1
    assert no_brokers.stderr.strip() == (
        "Error while executing topic command : Replication factor: 1 larger than available brokers: 0."
    )
    missing = run(mq_command, *z, "--create", "--topic", "auto", "--partitions", "2")
    assert (
        missing.returncode == 2 and missing.stderr.strip() == 'Error: Missing required argument "[replication-factor]"'
    )

    described = run(mq_command, *z, "--describe", "--topic", "orders").stdout.splitlines()
    assert described[1] == "\tTopic: orders\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: "
    zk.create_partition_state("orders", 0, PartitionState(-1, 3, [], 1))
    zk.create_partition_state("orders", 1, PartitionState(2, 0, [2, 1], 1))
    zk.register_broker(BrokerRegistration(2, ["PLAINTEXT://127.0.0.1:9092"]))
    described = run(mq_command, *z, "--describe", "--topic", "orders").stdout.splitlines()
    assert described[1] == "\tTopic: orders\tPartition: 0\tLeader: -1\tReplicas: 1,2\tIsr: "
    assert described[2] == "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,1\tIsr: 2,1"
    unavailable = run(mq_command, *z, "--describe", "--unavailable-partitions").stdout.splitlines()
    assert [line.split("\t")[2] for line in unavailable] == ["Partition: 0"]

    altered = run(mq_command, *z, "--alter", "--topic", "orders", "--config", "retention.ms=1000")
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.splitlines()[-1] == "Updated config for topic orders."
    assert zk.get_entity_config("topics", "orders") == {"retention.ms": "1000"}
    assert store.get_children("/config/changes")
    assert "Configs: retention.ms=1000" in run(mq_command, *z, "--describe", "--topic", "orders").stdout
    alter = [*z, "--alter", "--topic", "orders"]
    assert run(mq_command, *alter, "--config", "cleanup.policy=compact").returncode == 0
    removed = run(mq_command, *alter, "--delete-config", "retention.ms")
    assert removed.returncode == 0 and zk.get_entity_config("topics", "orders") == {"cleanup.policy": "compact"}
    removed = run(mq_command, *alter, "--deleteConfig", "cleanup.policy")  # 0.8.1's spelling
    assert removed.returncode == 0 and zk.get_entity_config("topics", "orders") == {}

    zk.register_broker(BrokerRegistration(1, ["PLAINTEXT://127.0.0.1:9093"]))
    grown = run(mq_command, *z, "--alter", "--topic", "orders", "--partitions", "3")
    assert grown.returncode == 0, grown.stderr
    assert grown.stdout.splitlines()[-1] == "Adding partitions succeeded!"
    grown_assignment = zk.get_topic_assignment("orders")
    assert isinstance(grown_assignment, TopicAssignment) and grown_assignment.partitions[2] == [1, 2]

    deleted = run(mq_command, *z, "--delete", "--topic", "orders")
    assert deleted.stdout.splitlines() == [
        "Topic orders is marked for deletion.",
        "Note: This will have no impact if delete.topic.enable is not set to true.",
    ]
    assert (
        run(mq_command, *z, "--delete", "--topic", "orders").stdout == "Topic orders is already marked for deletion.\n"
    )
    assert run(mq_command, *z, "--list").stdout == "orders - marked for deletion\n"
    header = run(mq_command, *z, "--describe", "--topic", "orders").stdout.splitlines()[0]
    assert header.endswith("\tMarkedForDeletion: true")
    both = run(mq_command, *z, "--bootstrap-server", "127.0.0.1:1", "--list")
    assert both.returncode == 2
    store.close()
