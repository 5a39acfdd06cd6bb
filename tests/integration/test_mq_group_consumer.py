"""mq's group consumer against a broker process: shared assignments, rebalances, committed offsets, kafka-python and
confluent-kafka members in the same group, and ``mq console-consumer --group``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.consumer import ConsumerRecord
from mq.client.group_consumer import AsyncGroupConsumer
from mq.client.producer import AsyncProducer
from mq.topic_partition import TopicPartition

pytestmark = pytest.mark.slow

FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 200, "fetch_max_wait_ms": 100}
ALL = [TopicPartition("events", p) for p in range(6)]


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, partitions, 1)])


async def produce(bootstrap: str, topic: str, per_partition: dict[int, int], acks: int = 1) -> None:
    async with AsyncProducer(bootstrap, acks=acks, linger_ms=0, retries=50, retry_backoff_ms=200) as producer:
        futures = [
            await producer.send(topic, f"{p}-{i}".encode(), partition=p)
            for p, count in per_partition.items()
            for i in range(count)
        ]
        await producer.flush()
        await asyncio.gather(*futures)


class Member:
    """A group consumer polling in the background and keeping what it read."""

    def __init__(
        self, consumer: AsyncGroupConsumer, topics: list[str] | None = None, pattern: str | None = None
    ) -> None:
        self.consumer = consumer
        consumer.subscribe(topics, pattern=pattern)
        self.records: list[ConsumerRecord] = []
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.records.extend(await self.consumer.poll(100))

    def assignment(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    async def stop(self) -> None:
        """Cancel the polling (raising what it failed with, if it failed) and close the consumer."""
        self.task.cancel()
        done, _ = await asyncio.wait([self.task], timeout=10)
        assert done, "the polling task ignored its cancellation"
        if not self.task.cancelled() and self.task.exception() is not None:
            raise self.task.exception()  # type: ignore[misc]
        await self.consumer.close()


async def eventually(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def splits_everything(assignments: list[set[TopicPartition]], everything: list[TopicPartition]) -> bool:
    """Every member has partitions, no partition twice, all of them covered."""
    return (
        all(assignments)
        and sum(map(len, assignments)) == len(everything)
        and set().union(*assignments) == set(everything)
    )


def run(main: Callable[[], Awaitable[None]]) -> None:
    async def limited() -> None:
        async with asyncio.timeout(90):
            await main()

    asyncio.run(limited())


def test_members_split_the_partitions_and_take_over_from_one_that_leaves(broker: Any) -> None:
    async def main() -> None:
        await create_topic(broker.bootstrap, "events", 6)
        members = [
            Member(AsyncGroupConsumer(broker.bootstrap, group_id="split", **FAST_GROUP), ["events"]) for _ in range(3)
        ]
        try:
            await eventually(
                lambda: (
                    splits_everything([m.assignment() for m in members], ALL)
                    and len({m.consumer.generation_id for m in members}) == 1
                )
            )
            assert all(len(m.assignment()) == 2 for m in members)
            leaving, *staying = members
            await leaving.stop()
            await eventually(lambda: splits_everything([m.assignment() for m in staying], ALL))
            await produce(broker.bootstrap, "events", dict.fromkeys(range(6), 2))
            await eventually(lambda: sum(len(m.records) for m in staying) == 12)
            for member in staying:
                assert {TopicPartition(r.topic, r.partition) for r in member.records} <= member.assignment()
        finally:
            for member in members:
                await member.stop()

    run(main)


def test_committed_offsets_survive_a_restart(broker: Any) -> None:
    async def main() -> None:
        await create_topic(broker.bootstrap, "events", 6)
        await produce(broker.bootstrap, "events", {0: 5, 1: 5})
        config = FAST_GROUP | {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
        first = Member(AsyncGroupConsumer(broker.bootstrap, group_id="resume", **config), ["events"])
        await eventually(lambda: len(first.records) == 10)
        await first.consumer.commit({ALL[0]: 3, ALL[1]: 5})
        assert await first.consumer.committed(ALL[:3]) == {ALL[0]: 3, ALL[1]: 5, ALL[2]: None}
        await first.stop()

        second = Member(AsyncGroupConsumer(broker.bootstrap, group_id="resume", **config), ["events"])
        await eventually(lambda: len(second.records) == 2)
        assert [(r.partition, r.offset) for r in second.records] == [(0, 3), (0, 4)]
        await second.consumer.commit()
        await second.stop()

        await produce(broker.bootstrap, "events", {1: 1})
        auto_commit = config | {"enable_auto_commit": True}
        third = Member(AsyncGroupConsumer(broker.bootstrap, group_id="resume", **auto_commit), pattern="ev.*")
        await eventually(lambda: len(third.records) == 1)
        assert [(r.partition, r.offset, r.value) for r in third.records] == [(1, 5, b"1-0")]
        await third.stop()  # auto commit commits on close
        async with AsyncGroupConsumer(broker.bootstrap, group_id="resume") as reader:
            committed = await reader.committed(ALL)
        assert committed == {ALL[0]: 5, ALL[1]: 6, **dict.fromkeys(ALL[2:], 0)}

    run(main)


def test_a_static_member_restarts_into_its_old_partitions_without_a_rebalance(broker: Any) -> None:
    async def main() -> None:
        await create_topic(broker.bootstrap, "events", 6)

        def static(instance: str) -> Member:
            consumer = AsyncGroupConsumer(broker.bootstrap, group_id="static", group_instance_id=instance, **FAST_GROUP)
            return Member(consumer, ["events"])

        leader = static("a")
        await eventually(lambda: len(leader.assignment()) == 6)
        follower = static("b")
        members = [leader, follower]
        try:
            await eventually(lambda: splits_everything([m.assignment() for m in members], ALL))
            generation = follower.consumer.generation_id
            before = leader.assignment()
            await leader.stop()  # a static member does not leave the group
            restarted = static("a")
            members = [restarted, follower]
            await eventually(lambda: restarted.assignment() == before)
            assert restarted.consumer.generation_id == generation
            await asyncio.sleep(1)  # several heartbeats: the follower is not asked to rejoin
            assert follower.consumer.generation_id == generation
            assert splits_everything([m.assignment() for m in members], ALL)
        finally:
            for member in members:
                await member.stop()

    run(main)


def test_members_follow_the_group_to_a_new_coordinator(zookeeper: Any, broker_factory: Any) -> None:
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    overrides = ["zookeeper.session.timeout.ms=4000", "offsets.topic.replication.factor=3"]
    overrides += ["offsets.topic.num.partitions=3", f"zookeeper.connect={connect}"]
    brokers = [broker_factory(f"broker{i}", [*overrides, f"broker.id={i}"]).start() for i in (1, 2, 3)]
    bootstrap = ",".join(b.bootstrap for b in brokers)

    async def main() -> None:
        async with AsyncAdmin(bootstrap) as admin:
            for _ in range(100):
                if len((await admin.describe_cluster()).brokers) == 3:
                    break
                await asyncio.sleep(0.1)
            await admin.create_topics([NewTopic("events", 6, 3)])
        config = FAST_GROUP | {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
        members = [Member(AsyncGroupConsumer(bootstrap, group_id="moving", **config), ["events"]) for _ in range(2)]
        try:
            # acks=all: every acknowledged record is on the followers that take over from the killed broker
            await produce(bootstrap, "events", dict.fromkeys(range(6), 1), acks=-1)
            await eventually(lambda: sum(len(m.records) for m in members) == 6)
            generation = members[0].consumer.generation_id
            for member in members:
                await member.consumer.commit()
            coordinator = members[0].consumer.coordinator.coordinator_id
            assert coordinator is not None
            brokers[coordinator - 1].kill()
            await produce(bootstrap, "events", dict.fromkeys(range(6), 1), acks=-1)
            await eventually(lambda: sum(len(m.records) for m in members) == 12, timeout=60)
            await eventually(
                lambda: all(m.consumer.coordinator.coordinator_id not in (None, coordinator) for m in members),
                timeout=60,
            )
            assert all(m.consumer.generation_id == generation for m in members)  # no rebalance was needed
            for member in members:
                await member.consumer.commit()
            committed = await members[0].consumer.committed(ALL)
            assert committed == dict.fromkeys(ALL, 2)
        finally:
            for member in members:
                await member.stop()

    run(main)


class ThreadMember:
    """A kafka-python or confluent-kafka consumer in the group, polling on its own thread."""

    def __init__(self, client: str, bootstrap: str, group: str) -> None:
        self.client = client
        self.consumer: Any
        if client == "kafka-python":
            self.consumer = KafkaConsumer(
                "events",
                bootstrap_servers=bootstrap,
                group_id=group,
                session_timeout_ms=6000,
                heartbeat_interval_ms=200,
                auto_offset_reset="earliest",
            )
        else:
            self.consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 200,
                    "auto.offset.reset": "earliest",
                    "partition.assignment.strategy": "range,roundrobin",
                }
            )
            self.consumer.subscribe(["events"])
        self.assigned: set[TopicPartition] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.client == "kafka-python":
                self.consumer.poll(timeout_ms=100)
            else:
                self.consumer.poll(0.1)
            self.assigned = {TopicPartition(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
@pytest.mark.parametrize("leader", ["mq", "other"])
def test_mq_and_other_clients_share_a_group(broker: Any, client: str, leader: str) -> None:
    async def main() -> None:
        await create_topic(broker.bootstrap, "events", 6)
        await produce(broker.bootstrap, "events", dict.fromkeys(range(6), 1))
        members: list[Member] = []
        other: ThreadMember | None = None

        def join_mq() -> None:
            config = FAST_GROUP | {"auto_offset_reset": "earliest"}
            members.append(Member(AsyncGroupConsumer(broker.bootstrap, group_id="mixed", **config), ["events"]))

        try:
            if leader == "mq":
                join_mq()
                await eventually(lambda: len(members[0].assignment()) == 6)
                other = await asyncio.to_thread(ThreadMember, client, broker.bootstrap, "mixed")
            else:
                other = await asyncio.to_thread(ThreadMember, client, broker.bootstrap, "mixed")
                await eventually(lambda: other is not None and len(other.assigned) == 6)
                join_mq()
            assert other is not None
            [ours] = members
            await eventually(lambda: splits_everything([ours.assignment(), other.assigned], ALL))
            assert len(ours.assignment()) == 3  # range over two members
            # the other client may have committed past the records of partitions it handed over: read them again
            ours.consumer.seek_to_beginning()
            expected = {f"{tp.partition}-0".encode() for tp in ours.assignment()}
            await eventually(lambda: expected <= {r.value for r in ours.records})
        finally:
            for member in members:
                await member.stop()
            if other is not None:
                await asyncio.to_thread(other.close)

    run(main)


def mq_cli(mq_command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=60)


def test_console_consumer_with_a_group_commits_what_it_printed(mq_command: list[str], broker: Any) -> None:
    run(lambda: create_topic(broker.bootstrap, "events", 2))
    run(lambda: produce(broker.bootstrap, "events", {0: 3, 1: 2}))
    common = ["console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "events", "--group", "cli"]
    first = mq_cli(mq_command, *common, "--from-beginning", "--max-messages", "5")
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.splitlines()) == ["0-0", "0-1", "0-2", "1-0", "1-1"]
    run(lambda: produce(broker.bootstrap, "events", {1: 1}))
    again = mq_cli(mq_command, *common, "--from-beginning", "--timeout-ms", "3000", "--property", "print.offset=true")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Offset:2\t1-0\n"
    assert again.stderr.strip().endswith("Processed a total of 1 messages")
    clash = mq_cli(mq_command, *common, "--consumer-property", "group.id=other")
    assert clash.returncode == 2 and "do not match" in clash.stderr
    run(lambda: create_topic(broker.bootstrap, "extra", 1))
    run(lambda: produce(broker.bootstrap, "extra", {0: 1}))
    include = ["console-consumer", "--bootstrap-server", broker.bootstrap, "--whitelist", "ev.*, extra"]
    for group in (["--group", "cli-pattern"], []):
        matched = mq_cli(mq_command, *include, *group, "--from-beginning", "--max-messages", "7")
        assert matched.returncode == 0, matched.stderr
        assert sorted(matched.stdout.splitlines()) == ["0-0", "0-0", "0-1", "0-2", "1-0", "1-0", "1-1"]
