"""librdkafka with ``group.protocol=consumer`` (KIP-848) against a broker process: a group member consumes and commits,
a second member takes half the partitions once the first released them, and ConsumerGroupDescribe shows both."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

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


def test_members_share_the_partitions_and_commit(broker) -> None:
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
