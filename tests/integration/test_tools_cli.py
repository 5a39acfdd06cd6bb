"""mq topics, console producer/consumer and get-offsets run as commands against a broker process."""

from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.slow


def mq(command: list[str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_topics_lifecycle(mq_command: list[str], broker) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    created = mq(
        mq_command, "topics", *b, "--create", "--topic", "orders", "--partitions", "3", "--config", "retention.ms=1000"
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic orders.\n"
    again = mq(mq_command, "topics", *b, "--create", "--topic", "orders", "--partitions", "3")
    assert again.returncode == 1
    assert again.stderr.strip() == "Error while executing topic command : Topic 'orders' already exists."
    assert mq(mq_command, "topics", *b, "--create", "--topic", "orders", "--if-not-exists").returncode == 0
    assert mq(mq_command, "topics", *b, "--list").stdout == "orders\n"
    described = mq(mq_command, "topics", *b, "--describe", "--topic", "ord.*").stdout.splitlines()
    header = described[0].split("\t")
    assert header[0] == "Topic: orders" and header[1].startswith("TopicId: ")
    assert header[2:] == ["PartitionCount: 3", "ReplicationFactor: 1", "Configs: retention.ms=1000"]
    assert described[1].startswith("\tTopic: orders\tPartition: 0\tLeader: ")
    assert len(described) == 4
    altered = mq(mq_command, "topics", *b, "--alter", "--topic", "orders", "--partitions", "5")
    assert altered.returncode == 0 and altered.stdout == ""
    assert "PartitionCount: 5" in mq(mq_command, "topics", *b, "--describe", "--topic", "orders").stdout
    assert mq(mq_command, "topics", *b, "--delete", "--topic", "orders").returncode == 0
    missing = mq(mq_command, "topics", *b, "--describe", "--topic", "orders")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error while executing topic command : Topic 'orders' does not exist as expected"
    usage = mq(mq_command, "topics", *b, "--list", "--describe")
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1


def test_console_round_trip_and_offsets(mq_command: list[str], broker) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    assert mq(mq_command, "topics", *b, "--create", "--topic", "lines", "--partitions", "1").returncode == 0
    produced = mq(
        mq_command,
        "console-producer",
        *b,
        "--topic",
        "lines",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--compression-codec",
        "snappy",
        stdin="a:1\nb:2\nc:3\n",
    )
    assert produced.returncode == 0, produced.stderr
    consumed = mq(
        mq_command,
        "console-consumer",
        *b,
        "--topic",
        "lines",
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == "Offset:0\ta\t1\nOffset:1\tb\t2\nOffset:2\tc\t3\n"
    assert consumed.stderr.strip().endswith("Processed a total of 3 messages")
    assert mq(mq_command, "get-offsets", *b, "--topic", "lines").stdout == "lines:0:3\n"
    assert mq(mq_command, "get-offsets", *b, "--topic", "lines", "--time", "-2").stdout == "lines:0:0\n"
    from_offset = mq(
        mq_command,
        "console-consumer",
        *b,
        "--topic",
        "lines",
        "--partition",
        "0",
        "--offset",
        "2",
        "--max-messages",
        "1",
    )
    assert from_offset.stdout == "3\n"
    bad = mq(mq_command, "console-producer", *b, "--topic", "lines", "--property", "parse.key=true", stdin="nokey\n")
    assert bad.returncode == 1 and bad.stderr.strip() == "Error: No key found on line 1: nokey"
    gone = mq(mq_command, "get-offsets", *b, "--topic", "lines", "--partitions", "4")
    assert gone.returncode == 1 and gone.stderr.strip() == "Error: partition 4 does not exist"


def test_producers_create_a_missing_topic_as_kafkas_do(mq_command: list[str], broker) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    produced = mq(mq_command, "console-producer", *b, "--topic", "fresh", stdin="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = mq(mq_command, "console-consumer", *b, "--topic", "fresh", "--from-beginning", "--max-messages", "3")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == "one\ntwo\nthree\n"
    perf = mq(
        mq_command,
        "perf",
        "producer",
        *b,
        "--topic",
        "fresh-perf",
        "--num-records",
        "50",
        "--record-size",
        "10",
        "--throughput",
        "-1",
    )
    assert perf.returncode == 0, perf.stderr
    assert "50 records sent" in perf.stdout
    assert mq(mq_command, "get-offsets", *b, "--topic", "fresh-perf").stdout == "fresh-perf:0:50\n"


def test_a_consumer_creates_a_missing_topic_only_with_allow_auto_create_topics(mq_command: list[str], broker) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    for topic, allow, group in (
        ("refused", "false", ["--group", "g1"]),
        ("allowed", "true", ["--group", "g2"]),
        ("refused-directly", "false", []),
        ("allowed-directly", "true", []),
    ):
        consumed = mq(
            mq_command,
            "console-consumer",
            *b,
            "--topic",
            topic,
            *group,
            "--timeout-ms",
            "1000",
            "--consumer-property",
            f"allow.auto.create.topics={allow}",
        )
        # without a group the partitions are looked up first: a topic that is not there is an error
        assert consumed.returncode == (1 if topic == "refused-directly" else 0), consumed.stderr
    listed = mq(mq_command, "topics", *b, "--list").stdout.split()
    assert listed == ["__consumer_offsets", "allowed", "allowed-directly"]
