"""Kafka 0.8's operations chapter and system tools, line by line with the seed's flags, on ZooKeeper and two
brokers started from the seed-era server.properties: kafka-topics (create, alter, describe, delete),
console producer and consumer with the seed-era client configs, ConsumerOffsetChecker, VerifyConsumerRebalance,
ExportZkOffsets, UpdateOffsetsInZK, ImportZkOffsets, SimpleConsumerShell, GetOffsetShell, DumpLogSegments,
ReplayLogProducer, kafka-preferred-replica-election and kafka-reassign-partitions. The steps share one cluster
and run in order."""

from __future__ import annotations

import pytest
from waiting import wait_for

from .conftest import Runbook

pytestmark = pytest.mark.slow

HEADER = "Group           Topic                          Pid Offset          logSize         Lag             Owner"
MESSAGES = [f"message {i}" for i in range(6)]
ALTER_CONFIG_WARNING = [
    "WARNING: Altering topic configuration from this script has been deprecated and may be removed in future releases.",
    "         Going forward, please use kafka-configs.sh for this functionality",
]


def checker_row(group: str, topic: str, pid: int, offset: object, size: int, lag: object, owner: str) -> str:
    """One ConsumerOffsetChecker line: Kafka's format %-15s %-30s %-3s %-15s %-15s %-15s %s."""
    return f"{group:<15} {topic:<30} {pid!s:<3} {offset!s:<15} {size!s:<15} {lag!s:<15} {owner}"


def partition_fields(line: str) -> dict[str, str]:
    return dict(field.split(": ", 1) for field in line.strip("\t").split("\t"))


def test_adding_and_modifying_topics(runbook: Runbook) -> None:
    created = runbook.out(
        "mq topics --zookeeper {zk} --create --topic my_topic_name --partitions 2 --replication-factor 2"
        " --config retention.ms=86400000"
    )
    assert created == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To"
        " avoid issues it is best to use either, but not both.",
        "Created topic my_topic_name.",
    ]
    added = runbook.out("mq topics --zookeeper {zk} --alter --topic my_topic_name --partitions 4")
    assert added == [
        "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of the"
        " messages will be affected",
        "Adding partitions succeeded!",
    ]
    configured = runbook.out(
        "mq topics --zookeeper {zk} --alter --topic my_topic_name --config max.message.bytes=64000"
    )
    assert configured == [*ALTER_CONFIG_WARNING, "Updated config for topic my_topic_name."]
    removed = runbook.out("mq topics --zookeeper {zk} --alter --topic my_topic_name --deleteConfig retention.ms")
    assert removed == [*ALTER_CONFIG_WARNING, "Updated config for topic my_topic_name."]
    header, *partitions = runbook.out("mq topics --zookeeper {zk} --describe --topic my_topic_name")
    assert header.startswith("Topic: my_topic_name\t")
    assert header.endswith("\tPartitionCount: 4\tReplicationFactor: 2\tConfigs: max.message.bytes=64000")
    assert [partition_fields(line)["Partition"] for line in partitions] == ["0", "1", "2", "3"]
    assert all(sorted(partition_fields(line)["Replicas"].split(",")) == ["0", "1"] for line in partitions)
    deleted = runbook.out("mq topics --zookeeper {zk} --delete --topic my_topic_name")
    assert deleted == [
        "Topic my_topic_name is marked for deletion.",
        "Note: This will have no impact if delete.topic.enable is not set to true.",
    ]


def test_consumer_position_tools(runbook: Runbook) -> None:
    """Produce with the seed producer.properties, consume with the seed consumer.properties (group mygid,
    consumer.id mycid, offsets in ZooKeeper), then the offset tools on that group."""
    assert runbook.out(
        "mq topics --zookeeper {zk} --create --topic my-topic --partitions 2 --replication-factor 2"
    ) == ["Created topic my-topic."]
    produced = runbook.sh(
        "mq console-producer --broker-list {broker0} --topic my-topic --producer.config config/producer.properties",
        stdin="\n".join(MESSAGES) + "\n",
    )
    assert produced.returncode == 0, produced.stderr
    sizes = [
        int(line.rsplit(":", 1)[1])
        for line in runbook.out("mq get-offsets --broker-list {broker0} --topic my-topic --time -1")
    ]
    assert sum(sizes) == len(MESSAGES)

    consumer = runbook.start(
        "mq console-consumer --zookeeper {zk} --topic my-topic --consumer.config config/consumer.properties"
    )
    assert sorted(consumer.read_lines(len(MESSAGES))) == MESSAGES
    assert runbook.out("mq verify-consumer-rebalance --zookeeper.connect {zk} --group mygid") == [
        "Rebalance operation successful !"
    ]
    owned = [checker_row("mygid", "my-topic", p, "unknown", sizes[p], "unknown", "mygid_mycid-0") for p in (0, 1)]
    # auto.commit.interval.ms=60000: nothing committed yet
    assert runbook.out("mq consumer-offset-checker --zookeeper {zk} --group mygid") == [HEADER, *owned]
    code, err = consumer.interrupt()
    assert code == 0, err  # auto.commit.enable=true: the offsets are committed at exit

    done = [checker_row("mygid", "my-topic", p, sizes[p], sizes[p], 0, "none") for p in (0, 1)]
    assert runbook.out("mq consumer-offset-checker --zkconnect {zk} --group mygid --topic my-topic") == [HEADER, *done]
    again = runbook.sh(
        "mq console-consumer --zookeeper {zk} --topic my-topic --consumer.config config/consumer.properties"
        " --from-beginning"
    )
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr.endswith(
        "Found previous offset information for this group mygid. Please use --delete-consumer-offsets to delete"
        " previous offsets metadata\n"
    )

    runbook.out("mq export-zk-offsets --zkconnect {zk} --group mygid --output-file offsets.txt")
    exported = (runbook.dir / "offsets.txt").read_text().splitlines()
    assert exported == [f"/consumers/mygid/offsets/my-topic/{p}:{sizes[p]}" for p in (0, 1)]

    rewound = runbook.out("mq update-offsets-in-zk earliest config/consumer.properties my-topic")
    assert rewound == [
        "updating partition 0 with new offset: 0",
        "updating partition 1 with new offset: 0",
        "updated the offset for 2 partitions",
    ]
    behind = [checker_row("mygid", "my-topic", p, 0, sizes[p], sizes[p], "none") for p in (0, 1)]
    assert runbook.out("mq consumer-offset-checker --zookeeper {zk} --group mygid --topic my-topic") == [
        HEADER,
        *behind,
    ]

    assert runbook.out("mq import-zk-offsets --zkconnect {zk} --input-file offsets.txt") == []
    assert runbook.out("mq consumer-offset-checker --zookeeper {zk} --group mygid --topic my-topic --broker-info") == [
        HEADER,
        *done,
        "BROKER INFO",
        runbook.line("0 -> {broker0}"),
        runbook.line("1 -> {broker1}"),
    ]


def test_simple_consumer_shell_get_offset_shell_and_dump_log_segments(runbook: Runbook) -> None:
    runbook.out("mq topics --zookeeper {zk} --create --topic shell --partitions 1 --replication-factor 1")
    runbook.out("mq console-producer --broker-list {broker0} --topic shell", stdin="a\nb\nc\n")
    shell = runbook.out(
        "mq simple-consumer-shell --broker-list {broker0} --topic shell --partition 0 --offset -2"
        " --print-offsets --no-wait-at-logend"
    )
    assert shell == [
        "next offset = 1",
        "a",
        "next offset = 2",
        "b",
        "next offset = 3",
        "c",
        "Terminating. Reached the end of partition (shell, 0) at offset 3",
    ]
    assert runbook.out("mq get-offsets --broker-list {broker0} --topic shell --time -1") == ["shell:0:3"]
    assert runbook.out("mq get-offsets --broker-list {broker0} --topic shell --time -2") == ["shell:0:0"]

    header = runbook.out("mq topics --zookeeper {zk} --describe --topic shell")[1]
    leader = partition_fields(header)["Leader"]
    segment = runbook.dir / f"kafka-logs-{leader}" / "shell-0" / "00000000000000000000.log"
    dumped = runbook.out(f"mq dump-segments --files {segment} --print-data-log --deep-iteration")
    assert dumped[:2] == [f"Dumping {segment}", "Starting offset: 0"]
    records = [line for line in dumped if line.startswith("| offset:") or line.startswith("offset:")]
    assert [line.split()[1 if line.startswith("offset") else 2] for line in records] == ["0", "1", "2"]
    assert [line.rsplit("payload: ", 1)[1] for line in records] == ["a", "b", "c"]


def test_replay_log_producer(runbook: Runbook) -> None:
    replayed = runbook.sh(
        "mq replay-log-producer --zookeeper {zk} --broker-list {broker0} --inputtopic shell --outputtopic shell-copy"
        " --messages 3 --threads 1 --sync"
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.splitlines()[0] == "Sent 3 messages"  # one line per thread
    assert runbook.out(
        "mq simple-consumer-shell --broker-list {broker0} --topic shell-copy --offset -2 --no-wait-at-logend"
    ) == ["a", "b", "c", "Terminating. Reached the end of partition (shell-copy, 0) at offset 3"]


def test_balancing_leadership_and_reassigning_partitions(runbook: Runbook) -> None:
    runbook.out("mq topics --zookeeper {zk} --create --topic foo1 --replica-assignment 0,1")
    (runbook.dir / "topics-to-move.json").write_text('{"topics": [{"topic": "foo1"}],\n "version":1\n}\n')
    generated = runbook.out(
        'mq reassign-partitions --zookeeper {zk} --topics-to-move-json-file topics-to-move.json --broker-list "1"'
        " --generate"
    )
    current = (
        '{"version":1,"partitions":[{"topic":"foo1","partition":0,"replicas":[0],"log_dirs":["any"]},'
        '{"topic":"foo1","partition":1,"replicas":[1],"log_dirs":["any"]}]}'
    )
    proposed = current.replace('"replicas":[0]', '"replicas":[1]')
    assert generated == [
        "Current partition replica assignment",
        current,
        "",
        "Proposed partition reassignment configuration",
        proposed,
    ]
    (runbook.dir / "expand-cluster-reassignment.json").write_text(proposed)
    executed = runbook.out(
        "mq reassign-partitions --zookeeper {zk} --reassignment-json-file expand-cluster-reassignment.json --execute"
    )
    assert executed == [
        "Current partition replica assignment",
        "",
        current,
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started reassignment of partitions.",
    ]
    verify = (
        "mq reassign-partitions --zookeeper {zk} --reassignment-json-file expand-cluster-reassignment.json --verify"
    )
    completed = [
        "Status of partition reassignment: ",
        "Reassignment of partition foo1-0 completed successfully",
        "Reassignment of partition foo1-1 completed successfully",
    ]
    seen: list[list[str]] = []
    assert wait_for(lambda: seen.append(runbook.out(verify)) or seen[-1] == completed, 30), seen[-1]
    _, *partitions = runbook.out("mq topics --zookeeper {zk} --topic foo1 --describe")
    assert [partition_fields(line)["Replicas"] for line in partitions] == ["1", "1"]

    runbook.out("mq topics --zookeeper {zk} --create --topic bar --replica-assignment 0:1")
    assert wait_for(
        lambda: partition_fields(runbook.out("mq topics --zookeeper {zk} --describe --topic bar")[1])["Isr"] == "0,1"
    )
    (runbook.dir / "bar.json").write_text('{"partitions": [{"topic": "bar", "partition": 0}]}')
    elected = runbook.out("mq preferred-replica-election --zookeeper {zk} --path-to-json-file bar.json")
    assert elected == [
        'Created preferred replica election path with {"version":1,"partitions":[{"topic":"bar","partition":0}]}',
        "Successfully started preferred replica election for partitions Set([bar,0])",
    ]
    everything = runbook.out("mq preferred-replica-election --zookeeper {zk}")
    assert everything[-1].startswith("Successfully started preferred replica election for partitions Set(")
