"""Exactly-once consume-transform-produce on a 3-broker cluster while brokers are killed: a confluent-kafka app
(read_committed consumer in a group, transactional producer, offsets sent to each transaction) copies every input
record, transformed, to an output topic while the transaction coordinator and an output partition's leader are
killed -9 and restarted; a read_committed reader then sees each input exactly once and reaches the end. And a
coordinator killed between PrepareCommit and the markers: its successor completes the whole transaction."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from mq.protocol.api_keys import ApiKey
from tests.integration.conftest import BrokerProcess
from tests.integration.test_transactions import ask, read_all

pytestmark = pytest.mark.slow

CLUSTER_OVERRIDES = [
    "offsets.topic.replication.factor=3",  # the group's offsets survive a kill of their leader, as in production
    "offsets.topic.num.partitions=5",
    "transaction.state.log.num.partitions=5",
]
INPUT, OUTPUT, PARTITIONS = "ctp-in", "ctp-out", 3
RECORDS = 3000
GROUP = "ctp-group"
DOWN_S = 10.0
"""How long a killed broker stays down at most while the app goes on."""


def transform(value: bytes) -> bytes:
    """The app's transformation: each input's output names it, so a lost or duplicated input shows."""
    return b"out(" + value[::-1] + b")"


def bootstrap_of(brokers: list[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers if b.process is not None)


def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(topics).values():
        future.result(30)


class Abortable(Exception):
    """The transaction failed and must be aborted (the consumer rewinds to its committed offsets)."""


class Fatal(Exception):
    """This producer can go no further (fenced, say): the app instance closes and a new one starts."""


def attempt(what: str, call: Callable[[], Any], deadline: float, events: list[str]) -> Any:
    """``call`` retried while it fails retriably; an abortable failure raises Abortable, any other Fatal. Each
    failure is noted in ``events``."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            events.append(f"{time.strftime('%H:%M:%S')} {what}: {error}")
            if error.fatal():
                raise Fatal(str(error)) from exc
            if error.txn_requires_abort():
                raise Abortable(str(error)) from exc
            if not error.retriable() or time.monotonic() > deadline:
                raise Fatal(str(error)) from exc


class Pipeline(threading.Thread):
    """The consume-transform-produce app of confluent-kafka's eos-transactions example, run until the group's
    committed offsets reach the end of the input. ``allowed`` gates how many inputs it may have committed so far
    (the test raises it), so it is still working when the brokers are killed."""

    def __init__(
        self, bootstrap: str, transactional_id: str, batch: int = 20, abort_every: int = 7, deadline_s: float = 90.0
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.batch = batch
        self.abort_every = abort_every
        """Every this many transactions, one is aborted after its records were delivered (and then redone)."""
        self.delivered_then_aborted = 0
        self.deadline = time.monotonic() + deadline_s
        self.allowed = 0
        self.committed: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        """The group's committed offset of each input partition, as this app last knew it."""
        self.in_transaction = threading.Event()
        self.transactions = self.commits = self.aborts = self.instances = 0
        self.failure: BaseException | None = None
        self.events: list[str] = []
        """What went wrong along the way (time, call, error), for the test's failure messages."""
        self.done = threading.Event()

    def note(self, event: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {event}")

    @property
    def progress(self) -> int:
        """Inputs whose offsets are committed (input offsets are dense from 0: offset = count)."""
        return sum(self.committed.values())

    def run(self) -> None:
        try:
            while self.progress < RECORDS:
                if time.monotonic() > self.deadline:
                    raise TimeoutError(f"the app committed {self.progress} of {RECORDS} inputs in time")
                self.instances += 1
                self.run_instance()
        except BaseException as exc:
            self.failure = exc
        finally:
            self.done.set()

    def run_instance(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 6000,
            }
        )
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id, "linger.ms": 5}
        )
        try:
            attempt("init", lambda: producer.init_transactions(10), self.deadline, self.events)
            consumer.subscribe(
                [INPUT],
                on_assign=lambda _, tps: self.note(f"assigned {sorted(tp.partition for tp in tps)}"),
                on_revoke=lambda _, tps: self.note(f"revoked {sorted(tp.partition for tp in tps)}"),
            )
            self.read_committed_offsets(consumer)
            while self.progress < RECORDS:
                try:
                    self.one_transaction(consumer, producer)
                except Abortable:
                    self.aborts += 1
                    attempt("abort", lambda: producer.abort_transaction(10), self.deadline, self.events)
                    self.rewind(consumer)
                finally:
                    self.in_transaction.clear()
        except (Fatal, Abortable):
            pass  # a new instance with the same transactional id fences this one and carries on
        finally:
            consumer.close()

    def one_transaction(self, consumer: Consumer, producer: Producer) -> None:
        room = min(self.batch, self.allowed - self.progress)
        if room <= 0:
            time.sleep(0.05)
            return
        messages = []
        for message in consumer.consume(room, 0.5):
            if message.error() is None:
                messages.append(message)
            else:
                self.note(f"consume: {message.error()}")
        if not messages:
            if time.monotonic() > self.deadline:
                raise Fatal("no input came")
            self.read_committed_offsets(consumer)  # done once every input is committed
            return
        attempt("begin", producer.begin_transaction, self.deadline, self.events)
        self.in_transaction.set()
        self.transactions += 1
        offsets: dict[int, int] = {}
        delivered: list[object] = []
        for message in messages:
            producer.produce(
                OUTPUT,
                value=transform(message.value()),
                partition=message.partition(),
                on_delivery=lambda error, _: error is None and delivered.append(None),
            )
            offsets[message.partition()] = message.offset() + 1
        positions = [TopicPartition(INPUT, p, offset) for p, offset in offsets.items()]
        attempt(
            "send offsets",
            lambda: producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 10),
            self.deadline,
            self.events,
        )
        if self.transactions % self.abort_every == 0:
            producer.flush(10)
            self.delivered_then_aborted += len(delivered)
            raise Abortable("the app gives this transaction up")
        attempt("commit", lambda: producer.commit_transaction(10), self.deadline, self.events)
        self.commits += 1
        self.committed.update(offsets)

    def read_committed_offsets(self, consumer: Consumer) -> None:
        """The group's committed offsets of every input partition, from its coordinator."""
        partitions = [TopicPartition(INPUT, p) for p in range(PARTITIONS)]
        while True:
            try:
                found = consumer.committed(partitions, 10)
                break
            except KafkaException as exc:
                self.note(f"committed: {exc.args[0]}")
                if time.monotonic() > self.deadline:
                    raise
        self.committed.update({tp.partition: max(tp.offset, 0) for tp in found})

    def rewind(self, consumer: Consumer) -> None:
        """Seek every assigned partition back to its committed offset: the aborted inputs are processed again."""
        self.read_committed_offsets(consumer)
        for tp in consumer.assignment():
            offset = self.committed[tp.partition] or OFFSET_BEGINNING
            consumer.seek(TopicPartition(INPUT, tp.partition, offset))

    def wait_for_progress(self, at_least: int, timeout: float = 60.0) -> None:
        wait_for(lambda: self.progress >= at_least or self.done.is_set(), timeout=timeout, interval=0.05)
        assert self.failure is None, (self.failure, self.events)
        assert self.progress >= at_least, f"the app stopped at {self.progress}: {self.events}"


def coordinator_of(bootstrap: str, key: str, key_type: int) -> int:
    """The broker FindCoordinator names for a group (``key_type`` 0) or a transactional id (1), once there is one."""
    found: list[int] = []

    def named() -> bool:
        node = int(ask(bootstrap, ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, 3).node_id)
        found.append(node)
        return node > 0

    assert wait_for(named, timeout=30, interval=0.2), found
    return found[-1]


def transactional_id_away_from_group(bootstrap: str) -> str:
    """A transactional id coordinated elsewhere than the app's group: the test never kills the group's coordinator. librdkafka 2.16 can wait forever in send_offsets_to_transaction, past its timeout, once the group
    coordinator it cached left the metadata (confluentinc/librdkafka#5511, #5456)."""
    group_coordinator = coordinator_of(bootstrap, GROUP, 0)
    for i in range(50):
        if coordinator_of(bootstrap, f"ctp-app-{i}", 1) != group_coordinator:
            return f"ctp-app-{i}"
    raise AssertionError("every transactional id tried shares the group's coordinator")


def output_leader_besides(bootstrap: str, spared: int) -> int:
    """The leader of an output partition other than broker ``spared`` (after a preferred leader election if it leads
    them all)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for _ in range(2):
        partitions = admin.list_topics(OUTPUT, timeout=10).topics[OUTPUT].partitions.values()
        leaders = {int(p.leader) for p in partitions} - {spared, -1}
        if leaders:
            return min(leaders)
        tps = [TopicPartition(OUTPUT, p) for p in range(PARTITIONS)]
        admin.elect_leaders(ElectionType.PREFERRED, tps).result(30)
    raise AssertionError(f"broker {spared} leads every output partition")


def killed_and_restarted(app: Pipeline, broker: BrokerProcess, allowed: int) -> bool:
    """kill -9 ``broker`` while the app has a transaction open, let the app go on to ``allowed`` inputs, and start
    the broker again once the app committed 200 more or after ``DOWN_S``; whether the app committed them meanwhile."""
    assert app.in_transaction.wait(30)
    broker.kill()
    before = app.progress
    app.allowed = allowed
    progressed = wait_for(lambda: app.progress >= before + 200 or app.done.is_set(), timeout=DOWN_S, interval=0.05)
    broker.start()
    return progressed


def test_consume_transform_produce_loses_and_duplicates_nothing_across_broker_kills(cluster_on, zookeeper) -> None:
    _, brokers = cluster_on(zookeeper, CLUSTER_OVERRIDES)
    bootstrap = bootstrap_of(brokers)
    replicated = {"min.insync.replicas": "2"}
    create_topics(
        bootstrap,
        [NewTopic(INPUT, PARTITIONS, 3, config=replicated), NewTopic(OUTPUT, PARTITIONS, 3, config=replicated)],
    )
    inputs = [b"in-%05d" % i for i in range(RECORDS)]
    feeder = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    for i, value in enumerate(inputs):
        feeder.produce(INPUT, value=value, partition=i % PARTITIONS)
    assert feeder.flush(30) == 0

    transactional_id = transactional_id_away_from_group(bootstrap)
    app = Pipeline(bootstrap, transactional_id)
    app.allowed = RECORDS // 5
    app.start()
    app.wait_for_progress(RECORDS // 10)
    coordinator = coordinator_of(bootstrap, transactional_id, 1)
    assert coordinator != coordinator_of(bootstrap, GROUP, 0)
    while_coordinator_down = killed_and_restarted(app, brokers[coordinator - 1], RECORDS // 2)
    app.wait_for_progress(RECORDS // 2 - 100)
    output_leader = output_leader_besides(bootstrap, coordinator_of(bootstrap, GROUP, 0))
    while_leader_down = killed_and_restarted(app, brokers[output_leader - 1], RECORDS * 4 // 5)
    app.allowed = RECORDS
    app.join(90)
    assert app.failure is None, app.failure
    assert app.progress == RECORDS
    print(
        f"{app.commits} commits, {app.aborts} aborts, {app.instances} app instances; progress with the coordinator "
        f"down: {while_coordinator_down}, with the output leader down: {while_leader_down}"
    )

    expected = Counter(transform(v) for v in inputs)
    committed = read_all(bootstrap, OUTPUT, PARTITIONS, "read_committed", RECORDS)
    assert Counter(committed) == expected  # every input exactly once: nothing lost, nothing duplicated
    assert app.delivered_then_aborted > 0
    uncommitted = read_all(bootstrap, OUTPUT, PARTITIONS, "read_uncommitted", RECORDS + app.delivered_then_aborted)
    assert set(uncommitted) == set(expected)  # aborted attempts stay in the log: read_uncommitted sees them too
    assert len(uncommitted) >= RECORDS + app.delivered_then_aborted
    stable_equals_end(bootstrap, OUTPUT, PARTITIONS, timeout=10)


def stable_equals_end(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    """Every partition's last stable offset becomes its high watermark within ``timeout`` seconds: no transaction
    is left open."""
    committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw", "isolation.level": "read_uncommitted"})

    def stable() -> bool:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            try:
                if committed.get_watermark_offsets(tp, 5) != uncommitted.get_watermark_offsets(tp, 5):
                    return False
            except KafkaException:
                return False  # the partition has no leader yet
        return True

    try:
        assert wait_for(stable, timeout=timeout, interval=0.2), f"{topic}: an open transaction holds the LSO back"
    finally:
        committed.close()
        uncommitted.close()


def transaction_state(broker: BrokerProcess, transactional_id: str) -> str:
    described = ask(broker.bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
    return str(described.transaction_states[0].transaction_state)


COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)


def committed_offset(consumer: Consumer, tp: TopicPartition, timeout: float = 60) -> int:
    """``consumer``'s group's committed offset of ``tp``, asked again while the group's coordinator moves (librdkafka
    hands NOT_COORDINATOR to the caller of ``committed`` when the broker it knew as the coordinator no longer is)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.committed([tp], 10)[0].offset)
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_coordinator_killed_between_prepare_and_complete_leaves_a_whole_transaction(
    cluster_on, zookeeper, commit: bool
) -> None:
    """The markers of a prepared transaction cannot all be written (the only replica of one of its partitions is
    down) when its coordinator is killed -9: once both brokers are back, read_committed readers see all of it
    (commit) or none of it (abort), its offsets are committed with it, and the last stable offset moves on."""
    _, brokers = cluster_on(zookeeper, CLUSTER_OVERRIDES)
    bootstrap = bootstrap_of(brokers)
    transactional_id = "prepared"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(30)
    coordinator = coordinator_of(bootstrap, transactional_id, 1)
    stalled_on, flowing_on = [b for b in (1, 2, 3) if b != coordinator]
    create_topics(
        bootstrap,
        [
            NewTopic("stalled", 1, replica_assignment=[[stalled_on]]),  # its markers wait for that broker
            NewTopic("flowing", 1, replica_assignment=[[flowing_on, coordinator, stalled_on]]),
            NewTopic("source", 1, 3),
        ],
    )
    group = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "prepared-group", "isolation.level": "read_committed"}
    )
    producer.begin_transaction()
    values = {topic: [b"%s-%d" % (topic.encode(), i) for i in range(50)] for topic in ("stalled", "flowing")}
    for topic, topic_values in values.items():
        for value in topic_values:
            producer.produce(topic, value=value)
    producer.send_offsets_to_transaction([TopicPartition("source", 0, 42)], group.consumer_group_metadata(), 30)
    assert producer.flush(30) == 0
    brokers[stalled_on - 1].kill()
    if commit:
        producer.commit_transaction(60)  # answered once PrepareCommit is stored: the markers follow
    else:
        producer.abort_transaction(60)
    prepared = "PrepareCommit" if commit else "PrepareAbort"
    assert transaction_state(brokers[coordinator - 1], transactional_id) == prepared  # no marker on "stalled" yet
    brokers[coordinator - 1].kill()
    brokers[stalled_on - 1].start()
    brokers[coordinator - 1].start()

    expected = values["stalled"] + values["flowing"] if commit else []
    for topic in ("stalled", "flowing"):
        stable_equals_end(bootstrap, topic, 1, timeout=60)  # the successor wrote every marker
    seen = read_all(bootstrap, "stalled", 1, "read_committed", len(expected) // 2)
    seen += read_all(bootstrap, "flowing", 1, "read_committed", len(expected) // 2)
    assert sorted(seen) == sorted(expected)
    committed = committed_offset(group, TopicPartition("source", 0))  # read with require_stable
    assert committed == (42 if commit else OFFSET_INVALID)
    group.close()

    successor = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    successor.init_transactions(60)  # the coordinator completed the transaction: the id is free for the next one
    successor.begin_transaction()
    successor.produce("stalled", value=b"next")
    successor.commit_transaction(60)
    assert read_all(bootstrap, "stalled", 1, "read_committed", len(expected) // 2 + 1)[-1] == b"next"
