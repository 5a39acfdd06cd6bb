"""Failover without waiting for ZooKeeper sessions: 3 broker processes on a real ZooKeeper, a topic with RF 3 and
min.insync.replicas 2, and an idempotent acks=all confluent-kafka producer running throughout.

- kill -9 of the partition leader, then of the controller (which also leads the partition), with 30 s ZooKeeper
  sessions: the other brokers find the dead broker's port closed, so a new leader acknowledges writes long before
  the session expires; nothing acknowledged is lost and nothing is written twice.
- SIGSTOP of the leader (hung, not dead): replaced only when its session expires, and once resumed it has
  acknowledged nothing its successor lacks.
- SIGTERM of the controller while it leads the partition: the stop moves leadership and the controller role away
  before the listener closes, so the producer is never held up for long and the stop does not retry requests to
  itself.
- a broker whose registration is deleted while it serves registers again.
- SIGTERM with ZooKeeper gone: controlled shutdown gives up after its retries, the rest of the shutdown runs
  (clean-shutdown marker written) and the process exits 0.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, ZooKeeperProcess, start_cluster
from test_cluster_clients import index, read_log, value
from waiting import wait_for

from mq.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from mq.zk import paths
from mq.zk.codecs import ControllerInfo, PartitionState
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SESSION_TIMEOUT_MS = 30000
TOPIC = "failover"


@pytest.fixture(scope="module")
def long_session_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper of this module's own that grants the 30 s sessions the brokers ask for."""
    process = ZooKeeperProcess(
        tmp_path_factory.mktemp("zookeeper-long-sessions"), settings={"maxSessionTimeout": "60000"}
    )
    yield process.start()
    process.stop()


@dataclass
class AckedProducer:
    """An idempotent acks=all producer thread sending message i (``value(i)``) every few milliseconds; records when
    each message was sent and when it was acknowledged (monotonic seconds)."""

    bootstrap: str
    sent_at: list[float] = field(default_factory=list)
    acked: list[tuple[int, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> AckedProducer:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 120000,
            }
        )

        def delivered(err: object, msg: object) -> None:
            if err is None:
                self.acked.append((index(msg.value()), time.monotonic()))  # type: ignore[attr-defined]
            else:
                self.errors.append(str(err))

        i = 0
        while not self.stop.is_set():
            self.sent_at.append(time.monotonic())
            producer.produce(TOPIC, value(i), partition=0, on_delivery=delivered)
            producer.poll(0.005)
            i += 1
        assert producer.flush(150) == 0, "messages left undelivered"

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(180)

    def first_ack_of_message_sent_after(self, moment: float) -> float | None:
        """When the first message sent after ``moment`` was acknowledged (None while none is)."""
        times = [at for number, at in list(self.acked) if self.sent_at[number] > moment]
        return min(times) if times else None

    def longest_gap(self, start: float, end: float) -> float:
        """The longest time within [start, end] without an acknowledgement."""
        times = [start, *sorted(at for _, at in list(self.acked) if start < at < end), end]
        return max(b - a for a, b in itertools.pairwise(times))


class ClusterView:
    """A ZooKeeper client on the cluster's chroot: partition state and controller as the brokers wrote them."""

    def __init__(self, connect: str) -> None:
        self.store = ZooKeeperStore(connect)
        self.zk = KafkaZkClient(self.store)

    def state(self) -> PartitionState | None:
        found = self.zk.get_partition_state(TOPIC, 0)
        return None if found is None else found[0]

    def controller(self) -> int | None:
        data = self.store.get_or_none(paths.CONTROLLER)
        return None if data is None else ControllerInfo.decode(data).broker_id

    def close(self) -> None:
        self.store.close()


def cluster_with_topic(
    zookeeper: ZooKeeperProcess,
    broker_factory: Callable[..., BrokerProcess],
    led_by_controller: bool = False,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
) -> tuple[list[BrokerProcess], ClusterView]:
    """The 3 brokers, their ClusterView once a controller is elected, and the topic (1 partition, RF 3,
    min.insync.replicas 2; with ``led_by_controller`` the controller is its preferred leader) with a full ISR."""
    connect, brokers = start_cluster(zookeeper, broker_factory, [f"zookeeper.session.timeout.ms={session_timeout_ms}"])
    view = ClusterView(connect)
    assert wait_for(lambda: view.controller() is not None)
    controller = view.controller()
    assert controller is not None
    replicas = [controller] + [b for b in (1, 2, 3) if b != controller] if led_by_controller else [1, 2, 3]
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers)})
    topic = NewTopic(TOPIC, 1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(60)
    assert wait_for(lambda: (s := view.state()) is not None and len(s.isr) == 3 and s.leader == replicas[0])
    return brokers, view


@pytest.fixture
def led_by_controller(
    long_session_zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> Iterator[tuple[list[BrokerProcess], ClusterView, int]]:
    """``cluster_with_topic`` whose partition the controller leads: the brokers, the view, the controller's id."""
    brokers, view = cluster_with_topic(long_session_zookeeper, broker_factory, led_by_controller=True)
    controller = view.controller()
    assert controller is not None
    yield brokers, view, controller
    view.close()


def check_log(bootstrap: str, producer: AckedProducer) -> None:
    """Every acknowledged message is in the log, exactly once, and the producer saw no error."""
    numbers = [n for _, n in read_log(bootstrap, TOPIC)]
    assert len(numbers) == len(set(numbers)), "a message was written twice"
    assert {n for n, _ in producer.acked} <= set(numbers), "an acknowledged message was lost"
    assert producer.errors == []


def kill_and_check_failover(brokers: list[BrokerProcess], view: ClusterView, victim: int) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = AckedProducer(bootstrap).start()
    try:
        assert wait_for(lambda: len(producer.acked) >= 200, timeout=60)
        killed_at = time.monotonic()
        brokers[victim - 1].kill()
        bound = SESSION_TIMEOUT_MS / 3000
        assert wait_for(lambda: producer.first_ack_of_message_sent_after(killed_at) is not None, timeout=bound), (
            f"no acknowledgement within {bound:.0f} s of the kill; partition state {view.state()}, "
            f"errors {producer.errors[-3:]}"
        )
        state = view.state()
        assert state is not None and state.leader not in (victim, -1)
        acked = len(producer.acked)
        assert wait_for(lambda: len(producer.acked) >= acked + 200, timeout=60)
    finally:
        producer.finish()
    check_log(bootstrap, producer)


def test_leader_kill_fails_over_before_the_session_expires(
    long_session_zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> None:
    brokers, view = cluster_with_topic(long_session_zookeeper, broker_factory)
    try:
        state = view.state()
        assert state is not None
        kill_and_check_failover(brokers, view, state.leader)
    finally:
        view.close()


def test_controller_kill_fails_over_before_the_session_expires(
    led_by_controller: tuple[list[BrokerProcess], ClusterView, int],
) -> None:
    brokers, view, controller = led_by_controller
    kill_and_check_failover(brokers, view, controller)
    assert wait_for(lambda: view.controller() not in (None, controller), timeout=5)


def test_a_paused_leader_is_replaced_only_when_its_session_expires_and_loses_nothing(
    long_session_zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> None:
    """A hung leader (SIGSTOP) answers no ping, which proves nothing: its successor is elected when its 4 s session
    expires, not at once. Resumed, it must not have acknowledged anything its successor lacks."""
    brokers, view = cluster_with_topic(long_session_zookeeper, broker_factory, session_timeout_ms=4000)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = AckedProducer(bootstrap).start()
    try:
        assert wait_for(lambda: len(producer.acked) >= 200, timeout=60)
        state = view.state()
        assert state is not None
        process = brokers[state.leader - 1].process
        assert process is not None
        paused_at = time.monotonic()
        os.kill(process.pid, signal.SIGSTOP)
        try:
            assert wait_for(lambda: (s := view.state()) is not None and s.leader not in (state.leader, -1), timeout=30)
            elected_after = time.monotonic() - paused_at
        finally:
            os.kill(process.pid, signal.SIGCONT)
        assert elected_after > 2.0, f"the paused leader was replaced after {elected_after:.1f} s"
        acked = len(producer.acked)
        assert wait_for(lambda: len(producer.acked) >= acked + 200, timeout=90)
        assert wait_for(lambda: (s := view.state()) is not None and sorted(s.isr) == [1, 2, 3], timeout=60)
    finally:
        producer.finish()
        view.close()
    check_log(bootstrap, producer)


def test_stopping_the_controller_hands_over_without_stalling_producers(
    led_by_controller: tuple[list[BrokerProcess], ClusterView, int],
) -> None:
    brokers, view, controller = led_by_controller
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = AckedProducer(bootstrap).start()
    try:
        assert wait_for(lambda: len(producer.acked) >= 200, timeout=60)
        stopping_at = time.monotonic()
        assert brokers[controller - 1].stop() == 0
        stopped_at = time.monotonic()
        assert wait_for(lambda: producer.first_ack_of_message_sent_after(stopped_at + 1.0) is not None, timeout=30)
        gap = producer.longest_gap(stopping_at, stopped_at + 1.0)
    finally:
        producer.finish()
    assert stopped_at - stopping_at < 8.0, f"the stop took {stopped_at - stopping_at:.1f} s"
    assert gap < 3.0, f"the producer waited {gap:.1f} s for an acknowledgement"
    assert view.controller() not in (None, controller)
    stderr = brokers[controller - 1].stderr()
    assert f"to broker {controller} failed" not in stderr, "the stopping controller retried requests to itself"
    assert "Traceback" not in stderr
    check_log(bootstrap, producer)


def test_sigterm_with_zookeeper_gone_exits_cleanly_within_the_retry_bound(
    tmp_path: Path, broker_factory: Callable[..., BrokerProcess]
) -> None:
    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper").start()
    try:
        brokers, view = cluster_with_topic(zookeeper, broker_factory, led_by_controller=True)
        controller = view.controller()
        view.close()
        assert controller is not None
        assert zookeeper.process is not None
        zookeeper.process.kill()
        zookeeper.process.wait(30)
        zookeeper.process = None
        # conftest's brokers retry controlled shutdown every 500 ms, 3 times (controlled.shutdown.max.retries)
        bound = 3 * 0.5 + 10.0
        stopping = [brokers[controller - 1], brokers[controller % 3]]  # the controller and another broker
        started = time.monotonic()
        for broker in stopping:
            broker.terminate()
        for broker in stopping:
            assert broker.process is not None
            assert broker.process.wait(bound) == 0, broker.stderr()[-3000:]
            broker.process = None
        assert time.monotonic() - started < bound
        for broker_id in (controller, controller % 3 + 1):
            broker = brokers[broker_id - 1]
            assert (broker.log_dir / CLEAN_SHUTDOWN_FILE).exists()
            stderr = broker.stderr()
            assert "did not move every partition; stopping anyway" in stderr
            assert f"mq broker {broker_id} stopped" in stderr, "the shutdown did not run to its end"
    finally:
        zookeeper.stop()


def test_a_broker_whose_registration_is_deleted_while_it_serves_registers_again(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> None:
    connect, brokers = start_cluster(zookeeper, broker_factory, [])
    view = ClusterView(connect)
    try:
        path = paths.broker(2)
        assert wait_for(lambda: view.store.exists(path) is not None)
        first = view.store.exists(path)
        assert first is not None
        view.store.delete(path)
        assert wait_for(lambda: (stat := view.store.exists(path)) is not None and stat.czxid != first.czxid)
        assert wait_for(lambda: sorted(view.zk.get_all_brokers()) == [1, 2, 3])
        assert "registered again" in brokers[1].stderr()
    finally:
        view.close()
