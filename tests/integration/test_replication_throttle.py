"""Replication throttling on a real ZooKeeper with three broker processes: a follower that fell out of the ISR
catches up no faster than the leader's ``leader.replication.throttled.rate``, and removing the throttle lets it
finish at once. The follower is stopped with SIGSTOP while an acks=1 producer writes a few MB; its ZooKeeper session
expires, so the controller takes it out of the ISR (in-sync followers are never throttled, as in Kafka)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from mq.client.admin import AlterOp, ResourceType
from mq.client.sync import SyncAdmin
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import ControllerInfo
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

TOPIC = "throttled"
RATE = 1_000_000
"""Bytes/s; with ``replication.quota.window.num=2`` the leader lets about one second's worth through at first."""
RECORD = b"x" * 100_000


def wait_for(condition: Callable[[], object], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def cluster(zookeeper, broker_factory) -> Iterator[tuple[list, KafkaZkClient]]:
    connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
    brokers = [
        broker_factory(
            f"broker{i}",
            [
                f"zookeeper.connect={connect}",
                f"broker.id={i}",
                "zookeeper.session.timeout.ms=4000",
                "replication.quota.window.num=2",
                "replication.quota.window.size.seconds=1",
            ],
        ).start()
        for i in (1, 2, 3)
    ]
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assert wait_for(lambda: sorted(zk.get_all_brokers()) == [1, 2, 3])
    yield brokers, zk
    for broker in brokers:
        if broker.process is not None:
            os.kill(broker.process.pid, signal.SIGCONT)  # a stopped broker could not shut down
    store.close()


def log_bytes(broker) -> int:
    directory: Path = broker.log_dir / f"{TOPIC}-0"
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.exists() else 0


def isr(zk: KafkaZkClient) -> list[int]:
    found = zk.get_partition_state(TOPIC, 0)
    return [] if found is None else found[0].isr


def produce_while_stopped(follower, leader, leader_id: int, zk: KafkaZkClient, n_bytes: int) -> None:
    """SIGSTOP the follower, write ``n_bytes`` with acks=1 through the leader alone and wait until the controller has dropped the follower
    from the ISR (its session expired), then SIGCONT it."""
    os.kill(follower.process.pid, signal.SIGSTOP)
    try:
        producer = KafkaProducer(bootstrap_servers=leader.bootstrap, acks=1, linger_ms=5, max_request_size=2_000_000)
        for _ in range(n_bytes // len(RECORD)):
            producer.send(TOPIC, RECORD)
        producer.flush(60)
        producer.close()
        assert wait_for(lambda: isr(zk) == [leader_id], 30), isr(zk)
    finally:
        os.kill(follower.process.pid, signal.SIGCONT)


def test_a_lagging_follower_catches_up_at_the_throttled_rate(cluster) -> None:
    brokers, zk = cluster
    controller = ControllerInfo.decode(zk.store.get("/controller")[0]).broker_id
    leader_id, follower_id = [i for i in (1, 2, 3) if i != controller][:2]
    leader, follower = brokers[leader_id - 1], brokers[follower_id - 1]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    kafka_admin.create_topics(
        [
            NewTopic(
                TOPIC,
                replica_assignments={0: [leader_id, follower_id]},
                topic_configs={"leader.replication.throttled.replicas": "*"},
            )
        ]
    )
    kafka_admin.close()
    assert wait_for(lambda: sorted(isr(zk)) == sorted([leader_id, follower_id]))
    # The rate is set the ZooKeeper way (as `kafka-configs --zookeeper` and `reassign-partitions --throttle` do).
    AdminZkClient(zk).change_broker_config(leader_id, {"leader.replication.throttled.rate": str(RATE)})
    assert wait_for(lambda: f"leader {RATE} B/s" in leader.stderr(), 10)

    size = 6_000_000
    produce_while_stopped(follower, leader, leader_id, zk, size)
    started = time.monotonic()
    target = log_bytes(leader)
    assert target >= size
    assert wait_for(lambda: log_bytes(follower) == target, 60), (log_bytes(follower), target)
    took = time.monotonic() - started
    assert took >= 0.6 * target / RATE, f"caught up {target} bytes in {took:.1f}s at a {RATE} B/s throttle"
    assert wait_for(lambda: sorted(isr(zk)) == sorted([leader_id, follower_id]))

    # A much lower rate holds the follower back until the throttle is removed through the admin API.
    AdminZkClient(zk).change_broker_config(leader_id, {"leader.replication.throttled.rate": "50000"})
    assert wait_for(lambda: "leader 50000 B/s" in leader.stderr(), 10)
    produce_while_stopped(follower, leader, leader_id, zk, 4_000_000)
    target = log_bytes(leader)
    time.sleep(3)
    assert log_bytes(follower) < target - 2_000_000
    with SyncAdmin(leader.bootstrap) as admin:
        changes = {"leader.replication.throttled.rate": (AlterOp.DELETE, None)}
        admin.call("incremental_alter_configs", ResourceType.BROKER, str(leader_id), changes)
    started = time.monotonic()
    assert wait_for(lambda: log_bytes(follower) == target, 30), (log_bytes(follower), target)
    assert time.monotonic() - started < 0.6 * (target - 2_000_000) / 50000
