"""Faults around the brokers of a 3-broker cluster on a real ZooKeeper: a frozen ZooKeeper, and a controller killed
in the middle of its administrative work.

- ZooKeeper frozen (SIGSTOP of its JVM) for 10 s, well inside the brokers' 18 s ZooKeeper sessions: partitions whose
  leadership does not change keep being served. Every acks=all produce sent during the freeze is acknowledged
  within the bound below and consumed, and the consumer reads it before ZooKeeper resumes. The freeze uses a private
  ZooKeeper whose ``maxSessionTimeout`` admits 18 s sessions (the default, 20 ticks, would cut them to 10 s).
- The controller killed with SIGKILL in the middle of a topic deletion, a throttled partition reassignment and a
  preferred leader election, each on partitions whose replicas are the two other brokers: the successor finishes the
  work, and no partition is ever reported with two leaders in one leader epoch (a sampler reads each partition's
  state znode and every live broker's Metadata answer throughout).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from waiting import wait_for

from mq.client.connection import BrokerConnection
from mq.errors import KafkaError
from mq.protocol.api_keys import ApiKey
from mq.zk.codecs import ControllerInfo
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FREEZE_S = 10.0
SESSION_TIMEOUT_MS = 18_000
"""Comfortably above the freeze: no broker's session expires, so no leadership changes."""
MAX_LATENCY_S = 2.0
"""Bound on every acknowledgement and every read during the freeze: a broker that waits for ZooKeeper on its
request path takes the whole freeze (10 s) instead."""


def answers(zookeeper: Any) -> bool:
    """ZooKeeper answers the ``srvr`` command within half a second."""
    try:
        with socket.create_connection(("127.0.0.1", zookeeper.port), timeout=0.5) as connection:
            connection.sendall(b"srvr")
            return b"Mode:" in connection.recv(1024)
    except OSError:
        return False


@contextlib.contextmanager
def frozen(zookeeper: Any) -> Iterator[None]:
    """SIGSTOP the ZooKeeper JVM for the block (it answers nothing then); SIGCONT always follows."""
    assert zookeeper.process is not None
    os.kill(zookeeper.process.pid, signal.SIGSTOP)
    try:
        stat = Path(f"/proc/{zookeeper.process.pid}/stat")
        assert wait_for(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "T", 10), "SIGSTOP not taken"
        assert not answers(zookeeper), "ZooKeeper still answers"
        yield
    finally:
        os.kill(zookeeper.process.pid, signal.SIGCONT)


class Cluster:
    """The brokers of ``start_cluster`` and a ZooKeeper client on their chroot."""

    def __init__(self, connect: str, brokers: list[Any]) -> None:
        self.connect = connect
        self.brokers = brokers
        self.store = ZooKeeperStore(connect)
        self.zk = KafkaZkClient(self.store)
        assert wait_for(lambda: sorted(self.zk.get_all_brokers()) == [1, 2, 3])
        assert wait_for(lambda: self.controller() in (1, 2, 3))

    def broker(self, broker_id: int) -> Any:
        return self.brokers[broker_id - 1]

    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.process is not None)

    def controller(self) -> int:
        data = self.store.get_or_none("/controller")
        return -1 if data is None else ControllerInfo.decode(data).broker_id

    def others(self) -> tuple[int, int]:
        """The two brokers that are not the controller."""
        first, second = (b for b in (1, 2, 3) if b != self.controller())
        return first, second

    def states(self, topic: str, partitions: int) -> dict[int, tuple[int, int, list[int]]]:
        """(leader, leader epoch, ISR) of each partition whose state znode exists."""
        found: dict[int, tuple[int, int, list[int]]] = {}
        for p in range(partitions):
            state = self.zk.get_partition_state(topic, p)
            if state is not None:
                found[p] = (state[0].leader, state[0].leader_epoch, state[0].isr)
        return found

    def create(self, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None) -> None:
        """Create the topic and wait until every partition has its full ISR."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap(), request_timeout_ms=60_000)
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments=assignment, topic_configs=configs or {})])
        admin.close()

        def in_sync() -> bool:
            states = self.states(topic, len(assignment))
            return len(states) == len(assignment) and all(
                sorted(states[p][2]) == sorted(replicas) for p, replicas in assignment.items()
            )

        assert wait_for(in_sync, 120, 0.5)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def make_cluster(cluster_on: Callable[[Any, list[str]], tuple[str, list[Any]]]) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(zookeeper: Any, overrides: list[str]) -> Cluster:
        made.append(Cluster(*cluster_on(zookeeper, overrides)))
        return made[-1]

    yield make
    for cluster in made:
        cluster.close()


# --- ZooKeeper frozen ---------------------------------------------------------------------------------------------


def test_produce_and_fetch_are_served_while_zookeeper_is_frozen(private_zookeeper, make_cluster) -> None:  # type: ignore[no-untyped-def]
    zookeeper = private_zookeeper({"maxSessionTimeout": "60000"})  # admits the 18 s sessions
    cluster = make_cluster(zookeeper, [f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"])
    topic, partitions = "steady", 3
    cluster.create(
        topic, {p: [1 + (p + i) % 3 for i in range(3)] for p in range(partitions)}, {"min.insync.replicas": "2"}
    )
    leadership = {p: s[:2] for p, s in cluster.states(topic, partitions).items()}

    sent: dict[int, float] = {}
    acked: dict[int, float] = {}
    errors: list[str] = []
    consumed: dict[int, float] = {}
    stop = threading.Event()
    produced_all = threading.Event()
    """The producer is done: every delivery report has come."""

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[int(msg.value())] = time.monotonic()
        else:
            errors.append(str(err))

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 1})
        i = 0
        while not stop.is_set():
            sent[i] = time.monotonic()
            producer.produce(topic, str(i).encode(), partition=i % partitions, on_delivery=delivered)
            producer.poll(0.02)
            i += 1
        producer.flush(60)
        produced_all.set()

    def consume() -> None:
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id=None, fetch_max_wait_ms=100)
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while not produced_all.is_set() or not acked.keys() <= consumed.keys():  # every acknowledged record
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    consumed[int(record.value)] = time.monotonic()
            if stop.is_set() and time.monotonic() > stopped_at + 60:
                break
        consumer.close()

    stopped_at = float("inf")
    workers = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for worker in workers:
        worker.start()
    try:
        assert wait_for(lambda: len(consumed) >= 100, 60), "no traffic before the freeze"
        with frozen(zookeeper):
            froze_at = time.monotonic()
            time.sleep(FREEZE_S / 3)
            fresh = read_from_start(cluster.bootstrap(), topic, froze_at + FREEZE_S - time.monotonic())
            fresh_done_at = time.monotonic()
            time.sleep(max(0.0, froze_at + FREEZE_S - time.monotonic()))
            resumed_at = time.monotonic()
        time.sleep(2)
    finally:
        stopped_at = time.monotonic()
        stop.set()
        for worker in workers:
            worker.join(120)

    assert errors == []
    assert fresh > 0 and fresh_done_at < resumed_at, "a client that connected during the freeze read nothing"
    during = [i for i, at in sent.items() if froze_at <= at <= resumed_at - MAX_LATENCY_S]
    assert len(during) > 100
    late = {
        i: round(acked.get(i, float("inf")) - sent[i], 2)
        for i in during
        if acked.get(i, float("inf")) - sent[i] >= MAX_LATENCY_S
    }
    worst = sorted(late.values())[-5:]
    assert late == {}, f"{len(late)} of {len(during)} acks=all produces took {MAX_LATENCY_S} s or more, up to {worst}"
    unread = [i for i in during if consumed.get(i, float("inf")) > resumed_at]
    assert unread == [], f"{len(unread)} of {len(during)} records produced during the freeze were read only after it"
    assert set(acked) <= set(consumed)
    after = {p: s[:2] for p, s in cluster.states(topic, partitions).items()}
    assert after == leadership, "leadership changed: the freeze was not harmless to the cluster"


def read_from_start(bootstrap: str, topic: str, within: float) -> int:
    """Records a new consumer (no group) reads from the start of partition 0 of ``topic`` within ``within`` s."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    deadline = time.monotonic() + within
    count = 0
    while count == 0 and time.monotonic() < deadline:
        count += sum(len(records) for records in consumer.poll(timeout_ms=200).values())
    consumer.close()
    return count


# --- the controller killed mid-work -------------------------------------------------------------------------------


async def _reported_leaders(port: int, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    connection = BrokerConnection("127.0.0.1", port, request_timeout_ms=5_000, connect_timeout_ms=2_000)
    try:
        body = {
            "topics": [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        response = await connection.send(ApiKey.METADATA, body)
    finally:
        await connection.close()
    return {
        (t.name, int(p.partition_index)): (int(p.leader_id), int(p.leader_epoch))
        for t in response.topics
        for p in t.partitions
    }


class LeadershipSampler:
    """Every ``interval`` s until stopped: each partition's (leader, epoch) from its state znode and from every live
    broker's Metadata answer. ``conflicts`` lists every (partition, epoch) ever reported with two leaders."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int, interval: float = 0.3) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.claims: dict[tuple[int, int], set[tuple[int, str]]] = defaultdict(set)
        self.samples = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LeadershipSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise self.error

    def _record(self, partition: int, leader: int, epoch: int, source: str) -> None:
        if leader >= 0:
            self.claims[(partition, epoch)].add((leader, source))

    def sample(self) -> None:
        for p, (leader, epoch, _) in self.cluster.states(self.topic, self.partitions).items():
            self._record(p, leader, epoch, "zookeeper")
        for broker_id in (1, 2, 3):
            broker = self.cluster.broker(broker_id)
            if broker.process is None:
                continue
            try:
                reported = asyncio.run(_reported_leaders(broker.port, [self.topic]))
            except (KafkaError, OSError):
                continue  # killed or starting: nothing reported
            for (_, p), (leader, epoch) in reported.items():
                self._record(p, leader, epoch, f"broker {broker_id}")
        self.samples += 1

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self.sample()
        except BaseException as exc:
            self.error = exc

    @property
    def conflicts(self) -> dict[tuple[int, int], set[tuple[int, str]]]:
        return {key: found for key, found in self.claims.items() if len({leader for leader, _ in found}) > 1}


def converged(cluster: Cluster, topic: str, partitions: int, live: list[int]) -> bool:
    """Every live broker reports each partition's leader and epoch as its state znode has them."""
    expected = {(topic, p): (s[0], s[1]) for p, s in cluster.states(topic, partitions).items()}
    for broker_id in live:
        try:
            reported = asyncio.run(_reported_leaders(cluster.broker(broker_id).port, [topic]))
        except (KafkaError, OSError):
            return False
        if reported != expected:
            return False
    return len(expected) == partitions


def run_tool(mq_command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=120)


def kill_controller(cluster: Cluster, pending: Callable[[], bool]) -> int:
    """kill -9 the controller, check that its work was still ``pending`` (no successor can act before the dead
    broker's ZooKeeper session expires), and wait until another broker holds /controller. Returns the killed id."""
    victim = cluster.controller()
    cluster.broker(victim).kill()
    assert pending(), "the work was over before the controller died: the test must give it more to do"
    assert wait_for(lambda: cluster.controller() not in (-1, victim), 60), "no successor was elected"
    return victim


def kill_controller_once_requested(cluster: Cluster, mq_command: list[str], znode: str, *args: str) -> int:
    """Run the tool ``args`` (it writes the request ``znode``) and kill the controller the moment the request
    appears, so it dies with the work just begun or not begun; the tool must succeed. Returns the killed id."""
    tool = subprocess.Popen([*mq_command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: cluster.store.exists(znode) is not None, 60, 0.001), f"{znode} never appeared"
        victim = kill_controller(cluster, lambda: cluster.store.exists(znode) is not None)
    finally:
        _, err = tool.communicate(timeout=60)
    assert tool.returncode == 0, err
    return victim


def test_a_successor_finishes_a_topic_deletion_the_killed_controller_began(
    zookeeper, make_cluster, mq_command: list[str]
) -> None:  # type: ignore[no-untyped-def]
    cluster = make_cluster(zookeeper, [])
    a, b = cluster.others()
    partitions = 200
    cluster.create("doomed", {p: [a, b] if p % 2 else [b, a] for p in range(partitions)})

    def logs(broker_id: int) -> list[Path]:
        return list(cluster.broker(broker_id).log_dir.glob("doomed-*"))

    assert wait_for(lambda: len(logs(a)) == len(logs(b)) == partitions, 60)
    with LeadershipSampler(cluster, "doomed", partitions) as sampler:
        victim = kill_controller_once_requested(
            cluster, mq_command, "/admin/delete_topics/doomed",
            "topics", "--zookeeper", cluster.connect, "--delete", "--topic", "doomed",
        )  # fmt: skip
        assert wait_for(lambda: "doomed" not in cluster.zk.get_all_topics(), 90), "the successor left the topic"
        assert wait_for(lambda: cluster.zk.get_topics_marked_for_deletion() == [], 30)
        assert wait_for(lambda: logs(a) == logs(b) == [], 60), (logs(a), logs(b))
        cluster.broker(victim).start()
        assert wait_for(lambda: sorted(cluster.zk.get_all_brokers()) == [1, 2, 3])
        assert logs(victim) == []
    assert sampler.samples > 0
    assert sampler.conflicts == {}


def test_a_successor_finishes_a_throttled_reassignment(
    zookeeper, make_cluster, mq_command: list[str], tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    cluster = make_cluster(zookeeper, ["replication.quota.window.num=2", "replication.quota.window.size.seconds=1"])
    a, b = cluster.others()
    cluster.create("moving", {0: [a]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", linger_ms=5)
    for _ in range(6_000):
        producer.send("moving", b"m" * 1_000, partition=0)
    producer.flush(60)
    producer.close()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [a, b]}]}))

    def verify() -> str:
        return run_tool(
            mq_command, "reassign-partitions", "--zookeeper", cluster.connect,
            "--verify", "--reassignment-json-file", str(plan),
        ).stdout  # fmt: skip

    with LeadershipSampler(cluster, "moving", 1) as sampler:
        executed = run_tool(
            mq_command, "reassign-partitions", "--zookeeper", cluster.connect,
            "--execute", "--reassignment-json-file", str(plan), "--throttle", "1000000",
        )  # fmt: skip
        assert executed.returncode == 0, executed.stderr
        assert wait_for(lambda: cluster.zk.get_topic_assignment("moving").partitions[0] == [a, b], 30)  # type: ignore[union-attr]
        assert "Reassignment of partition moving-0 is still in progress" in verify()
        victim = kill_controller(cluster, lambda: cluster.store.exists("/admin/reassign_partitions") is not None)
        assert wait_for(lambda: "Reassignment of partition moving-0 completed successfully" in verify(), 120, 2.0)
        assert wait_for(lambda: cluster.store.exists("/admin/reassign_partitions") is None, 30)
        assert wait_for(lambda: sorted(cluster.states("moving", 1)[0][2]) == sorted([a, b]), 30)
        assert cluster.zk.get_topic_assignment("moving").partitions == {0: [a, b]}  # type: ignore[union-attr]
        cluster.broker(victim).start()
        assert wait_for(lambda: converged(cluster, "moving", 1, [1, 2, 3]), 60)
    assert sampler.samples > 0
    assert sampler.conflicts == {}


def test_a_successor_finishes_a_preferred_leader_election(zookeeper, make_cluster, mq_command: list[str]) -> None:  # type: ignore[no-untyped-def]
    cluster = make_cluster(zookeeper, ["auto.leader.rebalance.enable=false"])
    a, b = cluster.others()
    partitions = 100
    assignment = {p: [a, b] if p % 2 else [b, a] for p in range(partitions)}
    cluster.create("tilted", assignment)
    assert cluster.broker(a).stop() == 0  # controlled shutdown: b leads every partition
    assert all(s[0] == b for s in cluster.states("tilted", partitions).values())
    cluster.broker(a).start()
    assert wait_for(lambda: all(a in s[2] for s in cluster.states("tilted", partitions).values()), 60)
    assert [p for p, s in cluster.states("tilted", partitions).items() if s[0] != assignment[p][0]] != []

    with LeadershipSampler(cluster, "tilted", partitions) as sampler:
        victim = kill_controller_once_requested(
            cluster, mq_command, "/admin/preferred_replica_election",
            "preferred-replica-election", "--zookeeper", cluster.connect,
        )  # fmt: skip

        def preferred() -> bool:
            states = cluster.states("tilted", partitions)
            return all(states[p][0] == replicas[0] for p, replicas in assignment.items())

        assert wait_for(preferred, 60), cluster.states("tilted", partitions)
        assert wait_for(lambda: cluster.store.exists("/admin/preferred_replica_election") is None, 30)
        cluster.broker(victim).start()
        assert wait_for(lambda: converged(cluster, "tilted", partitions, [1, 2, 3]), 60)
    assert sampler.samples > 0
    assert sampler.conflicts == {}
