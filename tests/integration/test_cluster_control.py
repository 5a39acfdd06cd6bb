"""The controller's administrative work on a real ZooKeeper with three broker processes: work left pending by a
killed controller, controlled shutdown, preferred and automatic leader elections, and ZooKeeper session expiry."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from waiting import wait_for

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.zk.codecs import ControllerInfo, encode_reassignment
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_MS = 4000


class Cluster:
    def __init__(self, connect: str, brokers: list) -> None:
        self.connect = connect
        self.brokers = brokers
        self.store = ZooKeeperStore(connect)
        self.zk = KafkaZkClient(self.store)

    def broker(self, broker_id: int):
        return self.brokers[broker_id - 1]

    def bootstrap(self, *ids: int) -> str:
        chosen = ids or tuple(i for i in (1, 2, 3) if self.broker(i).process is not None)
        return ",".join(self.broker(i).bootstrap for i in chosen)

    def controller(self) -> int:
        data = self.store.get_or_none("/controller")
        return -1 if data is None else ControllerInfo.decode(data).broker_id

    def state(self, topic: str, partition: int = 0):
        found = self.zk.get_partition_state(topic, partition)
        return None if found is None else found[0]

    def replicas(self, topic: str, partition: int = 0) -> list[int]:
        assignment = self.zk.get_topic_assignment(topic)
        return [] if assignment is None else assignment.partitions[partition]


@pytest.fixture
def start_cluster(zookeeper, broker_factory) -> Iterator[Callable[..., Cluster]]:
    started: list[Cluster] = []

    def start(*overrides: str) -> Cluster:
        connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
        brokers = [
            broker_factory(
                f"broker{i}",
                [
                    f"zookeeper.connect={connect}",
                    f"broker.id={i}",
                    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                    "controlled.shutdown.retry.backoff.ms=500",
                    *overrides,
                ],
            ).start()
            for i in (1, 2, 3)
        ]
        cluster = Cluster(connect, brokers)
        assert wait_for(lambda: sorted(cluster.zk.get_all_brokers()) == [1, 2, 3])
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.store.close()


def create(cluster: Cluster, *topics: NewTopic) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    admin.create_topics(list(topics))
    admin.close()
    for topic in topics:
        count = topic.num_partitions if topic.num_partitions > 0 else len(topic.replica_assignments)
        assert wait_for(lambda t=topic.name, n=count: all(cluster.state(t, p) is not None for p in range(n)))


def produce(bootstrap: str, topic: str, count: int, prefix: str = "m") -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    for future in [producer.send(topic, f"{prefix}{i}".encode()) for i in range(count)]:
        future.get(30)
    producer.close()


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < end and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=1000).values():
            values.extend(r.value for r in batch)
    consumer.close()
    return values


def known_brokers(bootstrap: str) -> set[int]:
    """The brokers one broker's metadata lists (clients pick among them)."""
    with SyncAdmin(bootstrap) as admin:
        return {b.node_id for b in admin.call(AsyncAdmin.describe_cluster).brokers}


def segment(broker, topic: str) -> bytes:
    path = broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else b""


def test_a_new_controller_completes_a_reassignment_and_a_deletion_left_pending(start_cluster) -> None:
    cluster = start_cluster()
    assert wait_for(lambda: cluster.controller() in (1, 2, 3))
    first = cluster.controller()
    target, keeper = [b for b in (1, 2, 3) if b != first]
    create(
        cluster,
        NewTopic("moving", -1, -1, replica_assignments={0: [first, keeper]}),
        NewTopic("doomed", 1, 3),
    )
    produce(cluster.bootstrap(), "moving", 500)
    produce(cluster.bootstrap(), "doomed", 10)
    cluster.broker(target).kill()  # the reassignment's new replica and a replica of the doomed topic are down
    assert wait_for(lambda: target not in cluster.zk.get_all_brokers())
    assert wait_for(lambda: all(target not in known_brokers(cluster.bootstrap(b)) for b in (first, keeper)))

    cluster.store.create("/admin/reassign_partitions", encode_reassignment([("moving", 0, [keeper, target])]))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    admin.delete_topics(["doomed"])
    admin.close()
    assert wait_for(lambda: cluster.replicas("moving") == [keeper, target, first])
    assert wait_for(lambda: not (cluster.broker(first).log_dir / "doomed-0").exists())
    time.sleep(1)
    assert cluster.store.exists("/admin/reassign_partitions") is not None, "the move cannot finish without its target"
    assert cluster.zk.get_topics_marked_for_deletion() == ["doomed"], (
        "a replica of the topic is on a broker that is down"
    )

    cluster.broker(first).kill()
    assert wait_for(lambda: cluster.controller() == keeper)
    cluster.broker(target).start()
    assert wait_for(lambda: cluster.replicas("moving") == [keeper, target], timeout=60)
    assert wait_for(lambda: cluster.store.exists("/admin/reassign_partitions") is None)
    state = cluster.state("moving")
    assert state.leader in (keeper, target) and sorted(state.isr) == sorted([keeper, target])
    assert not (cluster.broker(target).log_dir / "doomed-0").exists()

    cluster.broker(first).start()  # the last replica of the doomed topic returns: its deletion completes
    assert wait_for(lambda: cluster.zk.get_topics_marked_for_deletion() == [], timeout=60)
    assert "doomed" not in cluster.zk.get_all_topics()
    assert not (cluster.broker(first).log_dir / "doomed-0").exists()
    assert wait_for(lambda: segment(cluster.broker(target), "moving") == segment(cluster.broker(keeper), "moving"))
    assert read_values(cluster.bootstrap(keeper, target), "moving") == [f"m{i}".encode() for i in range(500)]


def test_controlled_shutdown_moves_leadership_before_the_broker_exits(start_cluster, mq_command) -> None:
    cluster = start_cluster()
    create(cluster, NewTopic("calm", -1, -1, replica_assignments={0: [2, 1, 3], 1: [2, 3, 1], 2: [2, 1, 3]}))
    errors: list[Exception] = []
    acked: list[int] = []
    stop = threading.Event()

    def keep_producing() -> None:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(1, 3), acks="all", retries=20)
        i = 0
        while not stop.is_set():
            try:
                producer.send("calm", f"c{i}".encode(), partition=i % 3).get(30)
                acked.append(i)
            except Exception as exc:
                errors.append(exc)
            i += 1
        producer.close(5)

    worker = threading.Thread(target=keep_producing)
    worker.start()
    assert wait_for(lambda: len(acked) >= 100)
    assert cluster.broker(2).stop() == 0
    states = [cluster.state("calm", p) for p in range(3)]
    assert all(s.leader in (1, 3) and 2 not in s.isr for s in states), states
    assert "Controlled shutdown of broker 2 succeeded" in cluster.broker(2).stderr()
    count = len(acked)
    assert wait_for(lambda: len(acked) >= count + 100)
    stop.set()
    worker.join(60)
    assert errors == []

    # The broker returns; a preferred election through the brokers gives it its leadership back.
    cluster.broker(2).start()
    assert wait_for(lambda: all(2 in cluster.state("calm", p).isr for p in range(3)), timeout=60)
    result = subprocess.run(
        [*mq_command, "preferred-replica-election", "--bootstrap-server", cluster.bootstrap()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Successfully completed preferred leader election for partitions calm-0, calm-1, calm-2\n"
    assert wait_for(lambda: all(cluster.state("calm", p).leader == 2 for p in range(3)))


def test_automatic_rebalance_returns_leadership_to_preferred_replicas(start_cluster) -> None:
    cluster = start_cluster("leader.imbalance.check.interval.seconds=1")
    create(cluster, NewTopic("balanced", -1, -1, replica_assignments={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}))
    victim = 1 if cluster.controller() != 1 else 2
    led_by_victim = victim - 1
    cluster.broker(victim).kill()
    assert wait_for(lambda: cluster.state("balanced", led_by_victim).leader not in (victim, -1))
    cluster.broker(victim).start()
    assert wait_for(lambda: cluster.state("balanced", led_by_victim).leader == victim, timeout=60)
    assert [cluster.state("balanced", p).leader for p in range(3)] == [1, 2, 3]
    topic_id = cluster.zk.get_topic_assignment("balanced").topic_id
    for broker_id in (1, 2, 3):  # every broker's Metadata answer carries the topic id
        with SyncAdmin(cluster.bootstrap(broker_id)) as admin:
            assert [t.topic_id for t in admin.call(AsyncAdmin.describe_topics, ["balanced"])] == [topic_id]


def test_a_broker_whose_session_expired_registers_again_and_the_controller_resigns(start_cluster) -> None:
    cluster = start_cluster()
    assert wait_for(lambda: cluster.controller() in (1, 2, 3))
    paused = cluster.controller()
    pid = cluster.broker(paused).process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: cluster.controller() not in (-1, paused), timeout=SESSION_TIMEOUT_MS / 1000 + 20)
        assert wait_for(lambda: paused not in cluster.zk.get_all_brokers())
    finally:
        os.kill(pid, signal.SIGCONT)
    successor = cluster.controller()
    assert wait_for(lambda: sorted(cluster.zk.get_all_brokers()) == [1, 2, 3], timeout=30)
    assert cluster.controller() == successor
    create(cluster, NewTopic("after-expiry", 1, 3, topic_configs={"min.insync.replicas": "3"}))
    assert wait_for(lambda: sorted(cluster.state("after-expiry").isr) == [1, 2, 3])
    produce(cluster.bootstrap(), "after-expiry", 50)
    assert "registering again" in cluster.broker(paused).stderr()
    assert read_values(cluster.bootstrap(paused), "after-expiry") == [f"m{i}".encode() for i in range(50)]
