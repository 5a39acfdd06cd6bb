"""The ZooKeeper-coordinated consumer (Kafka 0.8's design) against a ZooKeeper-mode broker: partitions split over a
group's members, and taken over when a member closes or dies (its session expires)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator

import pytest
from conftest import BrokerProcess, ZooKeeperProcess
from waiting import wait_for

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.sync import SyncAdmin, SyncProducer
from mq.client.zk_consumer import ZkConsumerConfig, ZookeeperConsumer
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ConsumerIdTakenError, ZkConsumerGroups
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

SESSION_MS = 2000
BACKOFF_MS = 200
RETRIES = 10


def consumer_properties(connect: str, group: str, **extra: str) -> dict[str, str]:
    return {
        "zookeeper.connect": connect,
        "group.id": group,
        "auto.offset.reset": "smallest",
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "rebalance.backoff.ms": str(BACKOFF_MS),
        "rebalance.max.retries": str(RETRIES),
        "auto.commit.interval.ms": "200",
        **extra,
    }


@pytest.fixture
def zk_broker(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> Iterator[tuple[str, BrokerProcess, ZooKeeperStore]]:
    """A broker on a fresh chroot with topic ``t`` (4 partitions, 40 records), and a store on the same chroot."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    broker = broker_factory("zk", [f"zookeeper.connect={connect}", "broker.id=1"]).start()
    with SyncAdmin(broker.bootstrap) as admin:
        admin.call(AsyncAdmin.create_topics, [NewTopic("t", 4, 1)])
    with SyncProducer(broker.bootstrap) as producer:
        for i in range(40):
            producer.send("t", f"v{i}".encode(), partition=i % 4)
        producer.flush()
    store = ZooKeeperStore(connect)
    yield connect, broker, store
    store.close()


def owners(store: ZooKeeperStore, group: str) -> dict[TopicPartition, str]:
    return ZkConsumerGroups(store).owners(group)


def owned_only_by(store: ZooKeeperStore, group: str, consumer: ZookeeperConsumer) -> bool:
    found = owners(store, group)
    return len(found) == 4 and set(found.values()) == {f"{consumer.consumer_id}-0"}


def test_two_consumers_split_partitions_and_one_takes_over_at_close(zk_broker) -> None:
    connect, _, store = zk_broker
    config = ZkConsumerConfig.from_properties(consumer_properties(connect, "g1"))
    first = ZookeeperConsumer(config, ["t"])
    try:
        assert wait_for(lambda: owned_only_by(store, "g1", first), timeout=10)
        second = ZookeeperConsumer(config, ["t"])
        assert wait_for(lambda: len(set(owners(store, "g1").values())) == 2, timeout=10)
        ids = sorted([first.consumer_id, second.consumer_id])
        assert wait_for(
            lambda: owners(store, "g1")
            == {
                TopicPartition("t", 0): f"{ids[0]}-0",
                TopicPartition("t", 1): f"{ids[0]}-0",
                TopicPartition("t", 2): f"{ids[1]}-0",
                TopicPartition("t", 3): f"{ids[1]}-0",
            },
            timeout=10,
        )
        records = []
        for consumer in (first, second):
            assert wait_for(lambda c=consumer: records.extend(c.poll(200)) or len(records) >= 20, timeout=10)
        second.close()
        assert wait_for(lambda: owned_only_by(store, "g1", first), timeout=(SESSION_MS + BACKOFF_MS) / 1000)
        assert wait_for(lambda: records.extend(first.poll(200)) or len(records) >= 40, timeout=10)
        assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(40))
        first.commit_offsets()
        assert ZkConsumerGroups(store).offsets("g1") == {TopicPartition("t", p): 10 for p in range(4)}
    finally:
        first.close()
    assert ZkConsumerGroups(store).consumer_ids("g1") == []


def test_a_killed_consumer_loses_its_partitions_when_its_session_expires(zk_broker) -> None:
    connect, _, store = zk_broker
    properties = consumer_properties(connect, "g2", **{"consumer.id": "killed"})
    script = textwrap.dedent(
        f"""
        import time
        from mq.client.zk_consumer import ZkConsumerConfig, ZookeeperConsumer
        consumer = ZookeeperConsumer(ZkConsumerConfig.from_properties({properties!r}), ["t"])
        print("started", flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "started\n"
        survivor = ZookeeperConsumer(ZkConsumerConfig.from_properties(consumer_properties(connect, "g2")), ["t"])
        try:
            assert wait_for(lambda: len(set(owners(store, "g2").values())) == 2, timeout=10)
            assert "g2_killed-0" in owners(store, "g2").values()
            duplicate = ZkConsumerConfig.from_properties(properties)
            with pytest.raises(ConsumerIdTakenError, match="g2_killed is already registered"):
                ZookeeperConsumer(duplicate, ["t"])
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            assert wait_for(lambda: owned_only_by(store, "g2", survivor), timeout=(2 * SESSION_MS + BACKOFF_MS) / 1000)
        finally:
            survivor.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
