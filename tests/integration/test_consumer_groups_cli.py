"""mq consumer-groups and consumer-offset-checker against a broker process, with kafka-python consumers committing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTP

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.topic_partition import TopicPartition
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.slow

GROUP_TIMEOUTS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 200, "fetch_max_wait_ms": 100}
DESCRIBE_HEADER = "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID"


class Tool:
    """Runs ``mq <tool> <bootstrap or zookeeper> <arguments>``; arguments come as one space-separated string."""

    def __init__(self, command: list[str], tool: str, *connect: str) -> None:
        self.prefix = [*command, tool, *connect]

    def __call__(self, arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *arguments.split()], capture_output=True, text=True, timeout=60)


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 2) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for partition in range(partitions):
        for i in range(per_partition):
            producer.send(topic, f"{partition}-{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def member(bootstrap: str, group: str, topic: str, **config: Any) -> KafkaConsumer:
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **GROUP_TIMEOUTS,
        **config,
    )


def poll_until(consumer: KafkaConsumer, done: Callable[[list[Any]], bool], rounds: int = 100) -> list[Any]:
    records: list[Any] = []
    for _ in range(rounds):
        for batch in consumer.poll(timeout_ms=200).values():
            records.extend(batch)
        if done(records):
            break
    return records


def commit(consumer: KafkaConsumer, topic: str, offsets: dict[int, int]) -> None:
    consumer.commit({KafkaTP(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})


def rows(stdout: str) -> list[list[str]]:
    """The describe table's data rows, split on whitespace (the blank line and the header checked and dropped)."""
    lines = stdout.splitlines()
    assert lines[0] == "" and " ".join(lines[1].split()) == DESCRIBE_HEADER
    return [line.split() for line in lines[2:]]


def setup_topic(command: list[str], bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    created = Tool(command, "topics", "--bootstrap-server", bootstrap)(
        f"--create --topic {topic} --partitions {partitions}"
    )
    assert created.returncode == 0, created.stderr
    produce(bootstrap, topic, per_partition, partitions)


def test_describe_reset_and_delete_a_kafka_python_group(mq_command: list[str], broker_factory: Any) -> None:
    broker = broker_factory().start()
    groups = Tool(mq_command, "consumer-groups", "--bootstrap-server", broker.bootstrap)
    setup_topic(mq_command, broker.bootstrap, "orders", 2, 10)
    consumer = member(broker.bootstrap, "billing", "orders", client_id="billing-app")
    poll_until(consumer, lambda records: len(records) >= 20)
    commit(consumer, "orders", {0: 7, 1: 10})

    active = groups("--describe --group billing --format text")
    assert active.returncode == 0 and active.stderr == "", active.stderr
    table = rows(active.stdout)
    assert [r[:6] for r in table] == [
        ["billing", "orders", "0", "7", "10", "3"],
        ["billing", "orders", "1", "10", "10", "0"],
    ]
    assert all(r[6] != "-" and r[8] == "billing-app" for r in table)

    refused = groups("--reset-offsets --group billing --all-topics --to-earliest --execute")
    assert refused.returncode == 1
    assert (
        "Error: Assignments can only be reset if the group 'billing' is inactive, but the current state is Stable."
        in refused.stderr.splitlines()
    )

    with SyncAdmin(broker.bootstrap) as admin, pytest.raises(KafkaError) as refusal:
        admin.call(AsyncAdmin.alter_group_offsets, "billing", {TopicPartition("orders", 0): 0})
    assert refusal.value.code == ErrorCode.UNKNOWN_MEMBER_ID

    checker = Tool(mq_command, "consumer-offset-checker", "--bootstrap-server", broker.bootstrap)
    checked = checker("--group billing --broker-info --format text")
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert (
        lines[0]
        == "Group           Topic                          Pid Offset          logSize         Lag             Owner"
    )
    assert lines[1].split() == ["billing", "orders", "0", "7", "10", "3", table[0][6]]
    assert lines[3] == "BROKER INFO" and lines[4].endswith(f" -> 127.0.0.1:{broker.port}") and len(lines) == 5

    consumer.close()
    broker.stop()
    broker.start()

    empty = groups("--describe --group billing --format text")
    assert empty.returncode == 0, empty.stderr
    assert empty.stderr == "\nConsumer group 'billing' has no active members.\n"
    assert rows(empty.stdout) == [
        ["billing", "orders", "0", "7", "10", "3", "-", "-", "-"],
        ["billing", "orders", "1", "10", "10", "0", "-", "-", "-"],
    ]
    assert groups("--list --state --format text").stdout.splitlines() == [
        "GROUP           STATE",
        "billing         Empty",
    ]

    dry = groups("--reset-offsets --group billing --all-topics --to-earliest --dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[1:] == [
        "GROUP                          TOPIC                          PARTITION  NEW-OFFSET     ",
        "billing                        orders                         0          0              ",
        "billing                        orders                         1          0              ",
    ]
    assert [r[3] for r in rows(groups("--describe --group billing --format text").stdout)] == ["7", "10"]

    done = groups("--reset-offsets --group billing --topic orders:0 --to-offset 2 --execute")
    assert done.returncode == 0, done.stderr
    (document,) = json.loads(groups("--describe --group billing --format json").stdout)
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in document["rows"]] == [(0, 2, 8), (1, 10, 0)]
    assert document["rows"][0]["lag_seconds"] >= 0 and document["rows"][1]["lag_seconds"] == 0

    resumed = member(broker.bootstrap, "billing", "orders")
    # a member that joins before it has the topic's metadata is assigned nothing until it rejoins with it
    records = poll_until(resumed, lambda records: len(records) >= 8, rounds=300)
    assert sorted((r.partition, r.offset) for r in records) == [(0, offset) for offset in range(2, 10)]
    resumed.close()

    deleted = groups("--delete --group billing")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout == "Deletion of requested consumer groups ('billing') was successful.\n"
    gone = groups("--describe --group billing --format text")
    assert gone.returncode == 1
    assert gone.stderr.strip() == "Error: Consumer group 'billing' does not exist."


def test_status_and_delete_offsets(mq_command: list[str], broker: Any) -> None:
    groups = Tool(mq_command, "consumer-groups", "--bootstrap-server", broker.bootstrap)
    setup_topic(mq_command, broker.bootstrap, "clicks", 2, 5)
    consumer = member(broker.bootstrap, "stats", "clicks")
    poll_until(consumer, lambda records: len(records) >= 10)
    commit(consumer, "clicks", {0: 5, 1: 1})

    busy = groups("--delete --group stats")
    assert busy.returncode == 1
    assert "Error: Deletion of some consumer groups failed:" in busy.stderr
    assert busy.stdout.startswith("* Group 'stats' could not be deleted due to: ")
    consumer.close()

    status = groups("--describe --group stats --status --samples 2 --interval 0.1 --format json")
    assert status.returncode == 0, status.stderr
    (document,) = json.loads(status.stdout)
    assert [(r["partition"], r["lag"], r["status"]) for r in document["rows"]] == [(0, 0, "OK"), (1, 4, "STOP")]

    removed = groups("--delete-offsets --group stats --topic clicks:1")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines()[0] == "Request succeed for deleting offsets with topic clicks:1 group stats"
    assert removed.stdout.splitlines()[-1].split() == ["clicks", "1", "Successful"]
    assert [r[2:4] for r in rows(groups("--describe --group stats --format text").stdout)] == [["0", "5"]]


def test_members_and_state_of_a_two_member_group(mq_command: list[str], broker: Any) -> None:
    groups = Tool(mq_command, "consumer-groups", "--bootstrap-server", broker.bootstrap)
    setup_topic(mq_command, broker.bootstrap, "views", 3, 1)
    first = member(broker.bootstrap, "viewers", "views", client_id="one")
    second = member(broker.bootstrap, "viewers", "views", client_id="two")

    def stable() -> bool:
        """Both members hold their share of one generation (under load, settling has taken more than 20 s of
        interleaved polls: the wait is bounded by time, and a group that never settles fails here)."""
        first.poll(timeout_ms=100)
        second.poll(timeout_ms=100)
        mine, theirs = first.assignment(), second.assignment()
        return bool(mine and theirs and not mine & theirs and len(mine | theirs) == 3)

    assert wait_for(stable, timeout=60, interval=0)
    members = groups("--describe --group viewers --members --verbose")
    assert members.returncode == 0, members.stderr
    lines = members.stdout.splitlines()
    assert lines[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    by_client = {line.split()[3]: line.split() for line in lines[2:]}
    assert sorted(by_client) == ["one", "two"]
    assigned = {f"views({','.join(str(tp.partition) for tp in sorted(c.assignment()))})" for c in (first, second)}
    assert {row[5] for row in by_client.values()} == assigned
    assert sum(int(row[4]) for row in by_client.values()) == 3
    state = groups("--describe --group viewers --state --format text")
    assert state.stdout.splitlines()[2].split()[-3:] == ["range", "Stable", "2"]
    first.close()
    second.close()


def test_offset_checker_finds_brokers_in_zookeeper(mq_command: list[str], zookeeper: Any, broker_factory: Any) -> None:
    connect = f"{zookeeper.connect}/mq-checker"
    broker = broker_factory("zk", [f"zookeeper.connect={connect}", "broker.id=7"]).start()
    setup_topic(mq_command, broker.bootstrap, "audit", 1, 4)
    consumer = member(broker.bootstrap, "auditors", "audit")
    poll_until(consumer, lambda records: len(records) >= 4)
    commit(consumer, "audit", {0: 3})
    consumer.close()
    checker = Tool(mq_command, "consumer-offset-checker", "--zookeeper", connect)
    checked = checker("--group auditors --topic audit --broker-info --format text")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[1:] == [
        "auditors        audit                          0   3               4               1               none",
        "BROKER INFO",
        f"7 -> 127.0.0.1:{broker.port}",
    ]


def test_a_confluent_kafka_group_is_described_with_its_assignments(mq_command: list[str], broker: Any) -> None:
    groups = Tool(mq_command, "consumer-groups", "--bootstrap-server", broker.bootstrap)
    setup_topic(mq_command, broker.bootstrap, "events", 4, 3)
    config = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "rd",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200,
        "partition.assignment.strategy": "roundrobin",
    }
    consumers = [confluent_kafka.Consumer({**config, "client.id": f"rd-{i}"}) for i in range(2)]
    for consumer in consumers:
        consumer.subscribe(["events"])
    read = 0
    for _ in range(200):
        for consumer in consumers:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                read += 1
                consumer.commit(message, asynchronous=False)
        if read >= 12 and all(len(c.assignment()) == 2 for c in consumers):
            break
    members = groups("--describe --group rd --members --verbose --format text")
    assert members.returncode == 0, members.stderr
    by_client = {line.split()[3]: line.split() for line in members.stdout.splitlines()[2:]}
    assert sorted(by_client) == ["rd-0", "rd-1"]
    for i, consumer in enumerate(consumers):
        owned = ",".join(str(tp.partition) for tp in sorted(consumer.assignment(), key=lambda tp: tp.partition))
        assert by_client[f"rd-{i}"][4:] == ["2", f"events({owned})"]
    described = rows(groups("--describe --group rd --format text").stdout)
    assert sorted((r[2], r[3], r[5]) for r in described) == [(str(p), "3", "0") for p in range(4)]
    assert {r[8] for r in described} == {"rd-0", "rd-1"}
    for consumer in consumers:
        consumer.close()
