"""Members that join one consumer group at the same moment settle in a single generation, as against Kafka: every
member reports the same generation, the assignments are disjoint and cover every partition, and the group then
stays in that generation. A session timeout below ``group.min.session.timeout.ms`` is refused, as Kafka refuses it."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer
from conftest import BrokerProcess
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import InvalidSessionTimeoutError

pytestmark = pytest.mark.slow

TOPIC = "joined"
PARTITIONS = 4
MEMBERS = 4
GROUP = "together"
SETTLE_S = 15.0
"""Kafka settles such a group after one initial rebalance delay and one rebalance round."""
CGMD_MAGIC = b"CGMDv2:"
STAY_S = 4.0
"""How long the settled generation must then last: several heartbeat intervals."""


@dataclass(frozen=True)
class View:
    """What one member last reported: its generation and its partitions."""

    generation: int
    partitions: frozenset[int]


class Members:
    """Group members, each polling in its own thread and recording its view after every poll."""

    def __init__(self) -> None:
        self.views: dict[int, View] = {}
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, count: int, member: Callable[[int], None]) -> None:
        for index in range(count):
            thread = threading.Thread(target=self._run, args=(member, index), daemon=True)
            self.threads.append(thread)
        for thread in self.threads:
            thread.start()

    def _run(self, member: Callable[[int], None], index: int) -> None:
        try:
            member(index)
        except BaseException as exc:
            self.errors.append(exc)

    def record(self, index: int, generation: int, partitions: frozenset[int]) -> None:
        with self._lock:
            self.views[index] = View(generation, partitions)

    def snapshot(self) -> dict[int, View]:
        with self._lock:
            return dict(self.views)

    def settled(self) -> int | None:
        """The generation every member reports with a complete, disjoint assignment; None while there is none."""
        views = self.snapshot()
        if len(views) < MEMBERS:
            return None
        generations = {v.generation for v in views.values()}
        held = [p for v in views.values() for p in v.partitions]
        if len(generations) != 1 or any(not v.partitions for v in views.values()):
            return None
        if sorted(held) != list(range(PARTITIONS)):
            return None
        generation = generations.pop()
        return generation if generation > 0 else None

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


def wait_settled(members: Members, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        generation = members.settled()
        if generation is not None:
            return generation
        time.sleep(0.1)
    return None


def kafka_python_member(settings: dict[str, int]) -> Callable[[str, Members], Callable[[int], None]]:
    """A KafkaConsumer polling in a loop, as in kafka-python's own group test. It learns the topic's partitions
    before its first poll, so a leader never assigns from empty metadata and then rejoins because the metadata
    changed (kafka-python 3.0 can drop the answer of a join that completes across a poll timeout)."""

    def make(bootstrap: str, members: Members) -> Callable[[int], None]:
        def run(index: int) -> None:
            consumer = KafkaConsumer(
                TOPIC,
                bootstrap_servers=bootstrap,
                group_id=GROUP,
                client_id=f"member-{index}",
                heartbeat_interval_ms=500,
                **settings,
            )
            try:
                assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
                while not members.stop.is_set():
                    consumer.poll(timeout_ms=200)
                    generation = consumer._coordinator.generation_if_stable()
                    partitions = frozenset(tp.partition for tp in consumer.assignment())
                    members.record(index, generation.generation_id if generation is not None else -1, partitions)
            finally:
                consumer.close()

        return run

    return make


def librdkafka_generation(metadata: bytes) -> int:
    """The generation in librdkafka's serialized group metadata (``CGMDv2:`` then the generation as an int32 in
    the machine's byte order)."""
    assert metadata.startswith(CGMD_MAGIC), metadata
    return int(struct.unpack_from("=i", metadata, len(CGMD_MAGIC))[0])


def confluent_member(bootstrap: str, members: Members) -> Callable[[int], None]:
    """A librdkafka consumer polling in a loop."""

    def run(index: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": f"member-{index}",
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not members.stop.is_set():
                consumer.poll(0.1)
                partitions = frozenset(tp.partition for tp in consumer.assignment())
                members.record(index, librdkafka_generation(consumer.consumer_group_metadata()), partitions)
        finally:
            consumer.close()

    return run


def create_topic(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    admin.close()


def group_state(broker: BrokerProcess) -> tuple[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        described = admin.describe_groups([GROUP])[GROUP]
    finally:
        admin.close()
    return described["group_state"], len(described["members"])


def check_members_settle(broker: BrokerProcess, member: Callable[[str, Members], Callable[[int], None]]) -> None:
    """The members settle in one generation within SETTLE_S, the broker reports the group Stable with all of them,
    and the generation lasts STAY_S."""
    create_topic(broker)
    members = Members()
    members.start(MEMBERS, member(broker.bootstrap, members))
    try:
        generation = wait_settled(members, SETTLE_S)
        assert generation is not None, (members.snapshot(), members.errors)
        assert group_state(broker) == ("Stable", MEMBERS)
        deadline = time.monotonic() + STAY_S
        while time.monotonic() < deadline:
            assert members.settled() == generation, members.snapshot()
            time.sleep(0.1)
    finally:
        members.join()
    assert not members.errors


KAFKA_PYTHON_CASES = {
    "no-initial-delay": ([], {}),
    "shipped-initial-delay": (["group.initial.rebalance.delay.ms=3000"], {}),
    # kafka-python's own test_group: short session and request timeouts, on a broker configured as its fixture is
    "kafka-python-fixture": (
        ["group.min.session.timeout.ms=1000"],
        {"session_timeout_ms": 3000, "request_timeout_ms": 4000},
    ),
}


@pytest.mark.parametrize("case", list(KAFKA_PYTHON_CASES))
def test_kafka_python_members_joining_together_settle_in_one_generation(
    broker_factory: Callable[..., BrokerProcess], case: str
) -> None:
    overrides, settings = KAFKA_PYTHON_CASES[case]
    broker = broker_factory(overrides=overrides).start()
    check_members_settle(broker, kafka_python_member(settings))


@pytest.mark.parametrize("delay_ms", [0, 3000])
def test_confluent_members_joining_together_settle_in_one_generation(
    broker_factory: Callable[..., BrokerProcess], delay_ms: int
) -> None:
    broker = broker_factory(overrides=[f"group.initial.rebalance.delay.ms={delay_ms}"]).start()
    check_members_settle(broker, confluent_member)


def test_a_session_timeout_below_the_broker_minimum_is_refused(broker_factory: Callable[..., BrokerProcess]) -> None:
    """kafka-python's own group test asks for a 3 s session; a broker with the shipped group.min.session.timeout.ms
    (6 s, as Kafka's) refuses the join instead of forming a group, as Kafka does."""
    broker = broker_factory().start()
    create_topic(broker)
    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=broker.bootstrap,
        group_id=GROUP,
        heartbeat_interval_ms=500,
        **KAFKA_PYTHON_CASES["kafka-python-fixture"][1],
    )
    try:
        with pytest.raises(InvalidSessionTimeoutError):
            deadline = time.monotonic() + SETTLE_S
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
        assert not consumer.assignment()
    finally:
        consumer.close()
