"""Kafka 0.8.1's quickstart (steps 3-6, with 0.8.0's kafka-create-topic.sh and kafka-list-topic.sh beside
kafka-topics.sh), line by line, on ZooKeeper and two brokers started from the seed-era
server.properties; the producer and consumer also run with the seed-era producer.properties and
consumer.properties. The steps share one cluster and run in order."""

from __future__ import annotations

import pytest
from waiting import wait_for

from .conftest import Runbook

pytestmark = pytest.mark.slow

MESSAGES = ["This is a message", "This is another message"]
REPLICATED = ["my test message 1", "my test message 2"]


def describe(runbook: Runbook, topic: str) -> list[str]:
    return runbook.out(f"mq topics --describe --zookeeper {{zk}} --topic {topic}")


def consume_from_beginning(runbook: Runbook, line: str, expected: list[str]) -> None:
    """Run a console-consumer line, read the lines it prints, then ^C it as the quickstart does."""
    consumer = runbook.start(line)
    printed = consumer.read_lines(len(expected))
    code, err = consumer.interrupt()
    assert printed == expected, err
    assert (code, err) == (0, f"Processed a total of {len(expected)} messages\n")


def test_step3_create_and_list_a_topic(runbook: Runbook) -> None:
    created = runbook.out("mq topics --create --zookeeper {zk} --replication-factor 1 --partitions 1 --topic test")
    assert created == ["Created topic test."]
    assert runbook.out("mq topics --list --zookeeper {zk}") == ["test"]


def test_step3_as_kafka_0_8_0_wrote_it(runbook: Runbook) -> None:
    """Kafka 0.8.0's quickstart: kafka-create-topic.sh --replica --partition, then kafka-list-topic.sh."""
    created = runbook.out("mq create-topic --zookeeper {zk} --replica 1 --partition 1 --topic test-0-8-0")
    assert created == ["creation succeeded!"]
    listed: list[list[str]] = []
    assert wait_for(
        lambda: listed.append(runbook.out("mq list-topic --zookeeper {zk}")) or "none" not in str(listed[-1])
    )
    lines = {line.split("\t")[0]: line for line in listed[-1]}
    assert list(lines) == ["topic: test", "topic: test-0-8-0"]
    for name, line in lines.items():
        broker = line.rsplit("isr: ", 1)[1]
        assert line == f"{name}\tpartition: 0\tleader: {broker}\treplicas: {broker}\tisr: {broker}"
        assert broker in ("0", "1")


def test_step4_and_5_produce_then_consume_from_the_beginning(runbook: Runbook) -> None:
    produced = runbook.sh("mq console-producer --broker-list {broker0} --topic test", stdin="\n".join(MESSAGES) + "\n")
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout == ""
    consume_from_beginning(runbook, "mq console-consumer --zookeeper {zk} --topic test --from-beginning", MESSAGES)


def test_seed_era_client_configs(runbook: Runbook) -> None:
    """The 0.8 producer.properties (snappy, request.required.acks=-1, sync) and consumer.properties (group mygid,
    ZooKeeper offsets) drive the same two console tools."""
    produced = runbook.sh(
        "mq console-producer --broker-list {broker0} --topic test --producer.config config/producer.properties",
        stdin="a third message\n",
    )
    assert produced.returncode == 0, produced.stderr
    consume_from_beginning(
        runbook,
        "mq console-consumer --zookeeper {zk} --topic test --consumer.config config/consumer.properties",
        [*MESSAGES, "a third message"],
    )


def test_step6_multi_broker_cluster_survives_its_leader(runbook: Runbook) -> None:
    created = runbook.out(
        "mq topics --create --zookeeper {zk} --replication-factor 2 --partitions 1 --topic my-replicated-topic"
    )
    assert created == ["Created topic my-replicated-topic."]
    assert wait_for(lambda: "Isr: " in describe(runbook, "my-replicated-topic")[-1])
    header, partition = describe(runbook, "my-replicated-topic")
    assert header.startswith("Topic: my-replicated-topic\t")
    assert header.endswith("\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: ")
    fields = dict(field.split(": ", 1) for field in partition.strip("\t").split("\t"))
    leader, follower = fields["Replicas"].split(",")
    assert fields == {
        "Topic": "my-replicated-topic",
        "Partition": "0",
        "Leader": leader,
        "Replicas": f"{leader},{follower}",
        "Isr": f"{leader},{follower}",
    }
    [test_partition] = describe(runbook, "test")[1:]
    [test_broker] = {f.split(": ")[1] for f in test_partition.split("\t") if f.startswith(("Replicas", "Isr"))}
    assert (
        test_partition
        == f"\tTopic: test\tPartition: 0\tLeader: {test_broker}\tReplicas: {test_broker}\tIsr: {test_broker}"
    )

    produced = runbook.sh(
        "mq console-producer --broker-list {broker0} --topic my-replicated-topic", stdin="\n".join(REPLICATED) + "\n"
    )
    assert produced.returncode == 0, produced.stderr
    line = "mq console-consumer --zookeeper {zk} --from-beginning --topic my-replicated-topic"
    consume_from_beginning(runbook, line, REPLICATED)

    runbook.brokers[int(leader)].kill()  # ps | grep server-1.properties; kill -9 <pid>
    moved = f"\tTopic: my-replicated-topic\tPartition: 0\tLeader: {follower}\tReplicas: {leader},{follower}\tIsr: {follower}"
    assert wait_for(lambda: describe(runbook, "my-replicated-topic")[1] == moved, 30)
    assert runbook.out("mq list-topic --zookeeper {zk} --topic my-replicated-topic") == [
        f"topic: my-replicated-topic\tpartition: 0\tleader: {follower}\treplicas: {leader},{follower}\tisr: {follower}"
    ]
    consume_from_beginning(runbook, line, REPLICATED)
