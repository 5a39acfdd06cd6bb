"""Consumer groups against a broker process, with each client library's group consumer in its own process
(tests/integration/group_member.py): partitions are shared out without overlap, a member killed with SIGKILL loses
its partitions to the others within the session timeout and nothing is lost, and committed offsets survive a
restart of the broker and of every member."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from waiting import wait_for

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")
LIBRARIES = ["kafka-python", "confluent-kafka", "aiokafka"]
TOPIC = "orders"
PARTITIONS = 6
GROUP = "billing"
REBALANCE_WAIT_S = 45.0


class Member:
    """A group member process and the events it printed."""

    def __init__(self, library: str, bootstrap: str, group: str = GROUP, instance: str | None = None) -> None:
        args = [sys.executable, str(MEMBER_SCRIPT), library, bootstrap, TOPIC, group]
        if instance is not None:
            args.append(instance)
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.append(json.loads(line))

    @property
    def assignments(self) -> list[list[int]]:
        return [e["assigned"] for e in list(self.events) if "assigned" in e]

    @property
    def assignment(self) -> list[int]:
        found = self.assignments
        return found[-1] if found else []

    @property
    def records(self) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if "v" in e]

    def values(self) -> set[str]:
        return {r["v"] for r in self.records}

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(5)


@pytest.fixture
def members() -> Any:
    started: list[Member] = []
    yield started
    for member in started:
        if member.process.poll() is None:
            member.process.kill()
            member.process.wait(10)


def produce(bootstrap: str, values: Iterable[int], partitions: int = PARTITIONS) -> list[str]:
    """Value ``v`` goes to partition ``v % partitions``."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    sent = [str(v) for v in values]
    for v in sent:
        producer.send(TOPIC, value=v.encode(), partition=int(v) % partitions).get(30)
    producer.close()
    return sent


def settled(group: list[Member]) -> bool:
    """Every member holds some partitions, and together they hold each partition exactly once."""
    held = [m.assignment for m in group]
    flat = [p for parts in held for p in parts]
    return all(held) and sorted(flat) == list(range(PARTITIONS))


def group_state(admin: KafkaAdminClient, group: str = GROUP) -> tuple[str, int]:
    described = admin.describe_groups([group])[group]
    return described["group_state"], len(described["members"])


@pytest.mark.parametrize("library", LIBRARIES)
def test_group_shares_partitions_survives_a_kill_and_resumes_after_restart(broker, members, library: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    members.extend(Member(library, broker.bootstrap) for _ in range(3))
    assert wait_for(lambda: settled(members) and group_state(admin) == ("Stable", 3), REBALANCE_WAIT_S), [
        m.assignments for m in members
    ]

    first = produce(broker.bootstrap, range(60))
    assert wait_for(lambda: set().union(*(m.values() for m in members)) >= set(first), 30)
    for member in members:
        assert {r["p"] for r in member.records} <= set(member.assignment)
    consumed = [v for m in members for v in (r["v"] for r in m.records)]
    assert sorted(consumed, key=int) == first  # disjoint: every message read once

    victim, survivors = members[0], members[1:]
    victim.kill()
    second = produce(broker.bootstrap, range(60, 120))
    assert wait_for(lambda: set().union(*(m.values() for m in survivors)) >= set(second), REBALANCE_WAIT_S), [
        m.assignments for m in survivors
    ]
    assert sorted(p for m in survivors for p in m.assignment) == list(range(PARTITIONS))
    assert group_state(admin) == ("Stable", 2)

    for member in survivors:
        member.stop()
    admin.close()
    broker.stop()
    broker.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    committed = admin.list_group_offsets(GROUP)[GROUP]
    assert {tp.partition: o.offset for tp, o in committed.items() if tp.topic == TOPIC} == dict.fromkeys(
        range(PARTITIONS), 20
    )
    assert group_state(admin) == ("Empty", 0)

    third = produce(broker.bootstrap, range(120, 180))
    resumed = Member(library, broker.bootstrap)
    members.append(resumed)
    assert wait_for(lambda: resumed.values() >= set(third), REBALANCE_WAIT_S)
    assert sorted(resumed.values(), key=int) == third  # nothing before the committed offsets is read again
    admin.close()


def test_static_member_rejoins_without_rebalance_and_the_old_member_id_is_fenced(broker, members) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    members.extend(Member("confluent-kafka", broker.bootstrap, instance=f"static-{i}") for i in range(2))
    assert wait_for(lambda: settled(members) and group_state(admin) == ("Stable", 2), REBALANCE_WAIT_S)
    stay, restart = members
    before = admin.describe_groups([GROUP])[GROUP]["members"]
    old_member_id = next(m["member_id"] for m in before if m["group_instance_id"] == "static-1")
    kept_assignments = len(stay.assignments)
    previous = restart.assignment

    restart.kill()
    again = Member("confluent-kafka", broker.bootstrap, instance="static-1")
    members.append(again)
    assert wait_for(lambda: again.assignment, REBALANCE_WAIT_S)
    assert again.assignment == previous
    after = admin.describe_groups([GROUP])[GROUP]
    assert after["group_state"] == "Stable"
    new_member_id = next(m["member_id"] for m in after["members"] if m["group_instance_id"] == "static-1")
    assert new_member_id != old_member_id
    assert len(stay.assignments) == kept_assignments  # the other member never saw a rebalance

    sent = produce(broker.bootstrap, range(24))
    assert wait_for(lambda: stay.values() | again.values() >= set(sent), 30)
    assert {r["p"] for r in again.records} <= set(previous)

    fenced = heartbeat_as(broker.bootstrap, old_member_id, "static-1")
    assert fenced == ErrorCode.FENCED_INSTANCE_ID
    admin.close()


def request(bootstrap: str, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
    """One request over mq's own client to the first broker of ``bootstrap``; returns the response."""

    async def send() -> Any:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        connection = BrokerConnection(host, int(port))
        try:
            return await connection.send(api_key, body, version)
        finally:
            await connection.close()

    return asyncio.run(send())


def heartbeat_as(bootstrap: str, member_id: str, instance_id: str) -> int:
    body = {"group_id": GROUP, "generation_id": 1, "member_id": member_id, "group_instance_id": instance_id}
    return int(request(bootstrap, ApiKey.HEARTBEAT, 4, body).error_code)


def coordinator_of(bootstrap: str, group: str) -> int:
    response = request(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    return int(response.node_id) if response.error_code == 0 else -1


def committed_offsets(admin: KafkaAdminClient, group: str) -> dict[int, int]:
    try:
        committed = admin.list_group_offsets(group)[group]
    except KafkaError:
        return {}
    return {tp.partition: o.offset for tp, o in committed.items() if tp.topic == TOPIC}


def test_group_follows_its_coordinator_when_the_coordinator_broker_is_killed(
    zookeeper, broker_factory, members
) -> None:
    """Cluster mode: the group's coordinator is the leader of its ``__consumer_offsets`` partition (RF 3); after a
    kill -9 of that broker the partition's new leader loads the group and its offsets, and the members go on."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    extra = [
        "zookeeper.session.timeout.ms=4000",
        "offsets.topic.replication.factor=3",
        "offsets.topic.num.partitions=3",
    ]
    brokers = [
        broker_factory(f"broker{i}", [f"zookeeper.connect={connect}", f"broker.id={i}", *extra]).start()
        for i in (1, 2, 3)
    ]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    members.extend(Member("kafka-python", bootstrap) for _ in range(2))
    assert wait_for(lambda: settled(members) and group_state(admin) == ("Stable", 2), REBALANCE_WAIT_S)
    offsets_topic = admin.describe_topics(["__consumer_offsets"])[0]
    assert offsets_topic["is_internal"]
    assert {len(p["replica_nodes"]) for p in offsets_topic["partitions"]} == {3}
    first = produce(bootstrap, range(60))
    assert wait_for(lambda: set().union(*(m.values() for m in members)) >= set(first), 30)
    assert wait_for(lambda: committed_offsets(admin, GROUP) == dict.fromkeys(range(PARTITIONS), 10), 30)

    coordinator = coordinator_of(bootstrap, GROUP)
    assert coordinator in (1, 2, 3)
    brokers[coordinator - 1].kill()
    alive = ",".join(b.bootstrap for b in brokers if b.process is not None)
    assert wait_for(lambda: coordinator_of(alive, GROUP) not in (-1, coordinator), REBALANCE_WAIT_S)
    second = produce(alive, range(60, 120))
    assert wait_for(lambda: set().union(*(m.values() for m in members)) >= set(second), REBALANCE_WAIT_S)
    admin.close()
    admin = KafkaAdminClient(bootstrap_servers=alive, request_timeout_ms=10000)
    assert wait_for(lambda: committed_offsets(admin, GROUP) == dict.fromkeys(range(PARTITIONS), 20), 30)
    admin.close()


def test_offset_commit_and_fetch_survive_a_broker_restart_without_a_group(broker) -> None:
    """A standalone commit (generation -1, no member) is stored and read back after a restart."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(TOPIC, 2, 1)])
    produce(broker.bootstrap, range(10), partitions=2)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="manual", enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(3, "note", -1)})
    consumer.close()
    admin.close()
    broker.stop()
    broker.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    committed = admin.list_group_offsets("manual")["manual"]
    assert {tp: (o.offset, o.metadata) for tp, o in committed.items()} == {TopicPartition(TOPIC, 0): (3, "note")}
    assert admin.delete_groups(["manual"])
    assert admin.list_group_offsets("manual")["manual"] == {}
    admin.close()


def test_offsets_of_a_deleted_topic_disappear(broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic("doomed", 1, 1)])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="manual", enable_auto_commit=False)
    kept, doomed = TopicPartition(TOPIC, 0), TopicPartition("doomed", 0)
    consumer.commit({kept: OffsetAndMetadata(0, "", -1), doomed: OffsetAndMetadata(0, "", -1)})
    consumer.close()
    assert set(admin.list_group_offsets("manual")["manual"]) == {kept, doomed}
    admin.delete_topics(["doomed"])
    assert wait_for(lambda: set(admin.list_group_offsets("manual")["manual"]) == {kept}, 30)
    admin.close()
