"""librdkafka with ``group.protocol=consumer`` (KIP-848) against a broker process: a group member consumes and commits,
a second member takes half the partitions once the first released them, and ConsumerGroupDescribe shows both; a group
of three consumes and keeps its epoch, members and assignment across a broker restart."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow


def member(bootstrap: str, group: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["kip848"])
    return consumer


def group_tool(mq_command: list[str], bootstrap: str, *args: str) -> list[str]:
    done = subprocess.run(
        [*mq_command, "consumer-groups", "--bootstrap-server", bootstrap, *args, "--format", "text"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_members_share_the_partitions_and_commit(broker, mq_command) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kip848", 4, 1)])["kip848"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce("kip848", value=str(i).encode(), partition=i % 4)
    assert producer.flush(15) == 0

    first = member(broker.bootstrap, "readers")
    received: set[int] = set()
    deadline = time.monotonic() + 30
    while len(received) < 100 and time.monotonic() < deadline:
        message = first.poll(0.5)
        if message is not None and message.error() is None:
            received.add(int(message.value()))
    assert received == set(range(100))
    first.commit(asynchronous=False)
    committed = first.committed([tp for tp in first.assignment()], timeout=15)
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(p, 25) for p in range(4)]

    second = member(broker.bootstrap, "readers")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(first.assignment()) == 2 and len(second.assignment()) == 2):
        first.poll(0.2)
        second.poll(0.2)
    split = [sorted(tp.partition for tp in c.assignment()) for c in (first, second)]
    assert sorted(p for half in split for p in half) == [0, 1, 2, 3] and [len(h) for h in split] == [2, 2]

    described = admin.describe_consumer_groups(["readers"])["readers"].result(15)
    assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members) == sorted(
        split
    )

    listed = group_tool(mq_command, broker.bootstrap, "--list", "--type", "--state")
    assert listed[1].split() == ["readers", "Consumer", "Stable"]
    members = group_tool(mq_command, broker.bootstrap, "--describe", "--group", "readers", "--members", "--verbose")
    rows = sorted(line.split() for line in members if line.startswith("readers"))
    assert sorted(row[-2:] for row in rows) == sorted(["2", f"kip848({','.join(map(str, half))})"] for half in split)
    offsets = group_tool(mq_command, broker.bootstrap, "--describe", "--group", "readers")
    member_ids = {row[1] for row in rows}
    assert sorted((line.split()[2], line.split()[3]) for line in offsets if line.startswith("readers")) == [
        (str(p), "25") for p in range(4)
    ]
    assert all(line.split()[6] in member_ids for line in offsets if line.startswith("readers"))
    second.close()
    first.close()


def test_a_classic_group_is_still_described_through_the_fallback(broker) -> None:
    """librdkafka asks ConsumerGroupDescribe first; GROUP_ID_NOT_FOUND sends it to DescribeGroups."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kip848", 1, 1)])["kip848"].result(15)
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "classic", "auto.offset.reset": "earliest"})
    classic.subscribe(["kip848"])
    deadline = time.monotonic() + 30
    while not classic.assignment() and time.monotonic() < deadline:
        classic.poll(0.2)
    described = admin.describe_consumer_groups(["classic"])["classic"].result(15)
    assert described.group_id == "classic" and not described.is_simple_consumer_group
    assert [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members] == [[0]]
    classic.close()


def describe(bootstrap: str, group: str) -> Any:
    """The group as ConsumerGroupDescribe v0 answers it."""
    host, port = bootstrap.split(":")

    async def send() -> Any:
        connection = BrokerConnection(host, int(port))
        try:
            body = {"group_ids": [group], "include_authorized_operations": False}
            return (await connection.send(ApiKey.CONSUMER_GROUP_DESCRIBE, body, 0)).groups[0]
        finally:
            await connection.close()

    return asyncio.run(send())


def membership(bootstrap: str, group: str) -> tuple[int, list[tuple[str, int, tuple[int, ...]]]] | None:
    """(group epoch, [(member id, member epoch, partitions)]) once the group is Stable, else None."""
    described = describe(bootstrap, group)
    if described.error_code != ErrorCode.NONE or described.group_state != "Stable":
        return None
    members = sorted(
        (m.member_id, m.member_epoch, tuple(sorted(p for t in m.assignment.topic_partitions for p in t.partitions)))
        for m in described.members
    )
    return described.group_epoch, members


def test_a_group_of_three_consumes_and_keeps_its_epoch_and_assignment_across_a_broker_restart(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kip848", 6, 1)])["kip848"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(60):
        producer.produce("kip848", value=str(i).encode(), partition=i % 6)
    assert producer.flush(15) == 0

    members = [member(broker.bootstrap, "trio") for _ in range(3)]
    received: dict[int, set[int]] = {i: set() for i in range(3)}

    def poll_all() -> None:
        for i, consumer in enumerate(members):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                received[i].add(int(message.value()))

    def stable_three() -> tuple[int, list[tuple[str, int, tuple[int, ...]]]] | None:
        poll_all()
        found = membership(broker.bootstrap, "trio")
        return found if found is not None and len(found[1]) == 3 and all(len(m[2]) == 2 for m in found[1]) else None

    assert wait_for(stable_three, 60)
    assert wait_for(lambda: (poll_all(), set().union(*received.values()) == set(range(60)))[1], 30)
    before = stable_three()
    assert before is not None
    epoch, assigned = before
    assert sorted(p for _, _, ps in assigned for p in ps) == list(range(6))
    assert all(member_epoch == epoch for _, member_epoch, _ in assigned)

    broker.stop()
    broker.start()
    after: list[Any] = []
    assert wait_for(lambda: after.append(membership(broker.bootstrap, "trio")) or after[-1] is not None, 30)
    assert after[-1] == before  # loaded from __consumer_offsets: same epoch, members and assignment

    for i in range(60, 90):
        producer.produce("kip848", value=str(i).encode(), partition=i % 6)
    assert producer.flush(15) == 0
    assert wait_for(lambda: (poll_all(), set().union(*received.values()) >= set(range(90)))[1], 30)
    assert membership(broker.bootstrap, "trio") == before  # the members went on at their epochs
    for consumer in members:
        consumer.close()


def test_a_static_member_replaced_under_its_instance_id_keeps_its_partitions_without_a_rebalance(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kip848", 4, 1)])["kip848"].result(15)

    def static(instance: str) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "statics",
                "group.protocol": "consumer",
                "group.instance.id": instance,
            }
        )
        consumer.subscribe(["kip848"])
        return consumer

    members = {"s1": static("s1"), "s2": static("s2")}

    def settled() -> tuple[int, list[tuple[str, int, tuple[int, ...]]]] | None:
        for consumer in members.values():
            consumer.poll(0.1)
        found = membership(broker.bootstrap, "statics")
        return found if found is not None and len(found[1]) == 2 and all(len(m[2]) == 2 for m in found[1]) else None

    assert wait_for(settled, 60)
    before = settled()
    assert before is not None
    instances = {m.instance_id: m for m in describe(broker.bootstrap, "statics").members}
    assert set(instances) == {"s1", "s2"}
    held = sorted(p for t in instances["s1"].assignment.topic_partitions for p in t.partitions)
    members.pop("s1").close()  # leaves with epoch -2: its partitions wait for it
    members["s1"] = static("s1")
    after: list[Any] = []
    assert wait_for(lambda: (after.append(settled()), after[-1] is not None)[1], 30)
    replaced = {m.instance_id: m for m in describe(broker.bootstrap, "statics").members}
    assert sorted(p for t in replaced["s1"].assignment.topic_partitions for p in t.partitions) == held
    assert after[-1][0] == before[0]  # the group epoch did not move: no rebalance
    for consumer in members.values():
        consumer.close()


def test_a_regex_subscription_consumes_the_matching_topics_and_takes_up_new_ones(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in ("rx-a", "skipped"):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for name in ("rx-a", "skipped"):
        producer.produce(name, value=name.encode())
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "by-regex",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.subscribe(["^rx-.*"])
    seen: set[str] = set()

    def poll_until(wanted: set[str]) -> None:
        deadline = time.monotonic() + 40
        while not wanted <= seen and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value().decode())

    poll_until({"rx-a"})
    admin.create_topics([NewTopic("rx-b", 1, 1)])["rx-b"].result(15)
    producer.produce("rx-b", value=b"rx-b")
    assert producer.flush(15) == 0
    poll_until({"rx-a", "rx-b"})
    assert seen == {"rx-a", "rx-b"}
    assert describe(broker.bootstrap, "by-regex").members[0].subscribed_topic_regex == "(^rx-.*)"  # librdkafka's form
    consumer.close()
