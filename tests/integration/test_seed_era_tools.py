"""Kafka 0.8 runbooks against a broker: the seed-era producer.properties and consumer.properties drive
console-producer, console-consumer, perf and mirror with their 0.8 meaning."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import BrokerProcess, ZooKeeperProcess
from waiting import wait_for

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.consumer import AsyncConsumer
from mq.client.sync import SyncAdmin, SyncConsumer, SyncProducer
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data"


def mq(command: list[str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], input=stdin, capture_output=True, text=True, timeout=60)


def seed_file(tmp: Path, name: str, replacements: dict[str, str]) -> Path:
    text = (DATA / name).read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def zk_broker(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> Iterator[tuple[str, BrokerProcess]]:
    """A broker registered in a fresh ZooKeeper chroot, with topic ``s`` (1 partition)."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    broker = broker_factory("source", [f"zookeeper.connect={connect}", "broker.id=1"]).start()
    with SyncAdmin(broker.bootstrap) as admin:
        admin.call(AsyncAdmin.create_topics, [NewTopic("s", 1, 1)])
    yield connect, broker


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    with SyncConsumer(bootstrap, auto_offset_reset="earliest") as consumer:
        partitions = consumer.call(AsyncConsumer.partitions_for, topic)
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        values: list[bytes] = []
        assert wait_for(lambda: bool(values.extend(r.value for r in consumer.poll(200))) or len(values) >= count, 20)
        return values


def test_seed_files_in_console_tools_perf_and_mirror(
    zk_broker: tuple[str, BrokerProcess],
    broker_factory: Callable[..., BrokerProcess],
    mq_command: list[str],
    tmp_path: Path,
) -> None:
    connect, source = zk_broker
    producer_file = seed_file(
        tmp_path,
        "seed_era_producer.properties",
        {"metadata.broker.list=127.0.0.1:9092": f"metadata.broker.list={source.bootstrap}"},
    )
    consumer_file = seed_file(
        tmp_path, "seed_era_consumer.properties", {"zookeeper.connect=127.0.0.1:2181": f"zookeeper.connect={connect}"}
    )
    lines = [f"line-{i}" for i in range(5)]

    produced = mq(
        mq_command,
        *("console-producer", "--broker-list", source.bootstrap, "--topic", "s"),
        *("--producer.config", str(producer_file)),
        stdin="\n".join(lines) + "\n",
    )
    assert produced.returncode == 0, produced.stderr
    assert "Warning: producer property request.required.acks is deprecated (Kafka 0.8); use acks" in produced.stderr
    assert read_all(source.bootstrap, "s", 5) == [line.encode() for line in lines]
    [segment] = (source.log_dir / "s-0").glob("*.log")
    dumped = mq(mq_command, "dump-segments", "--files", str(segment))
    assert dumped.returncode == 0, dumped.stderr
    codecs = [
        line.split("compresscodec: ")[1].split()[0] for line in dumped.stdout.splitlines() if "compresscodec" in line
    ]
    assert codecs and set(codecs) == {"SNAPPY"}, dumped.stdout
    flagged = mq(
        mq_command,
        *("console-producer", "--broker-list", source.bootstrap, "--topic", "g", "--compression-codec", "gzip"),
        *("--producer.config", str(producer_file)),
        stdin="one\n",
    )
    assert flagged.returncode == 0, flagged.stderr
    dumped = mq(mq_command, "dump-segments", "--files", str(source.log_dir / "g-0" / segment.name))
    assert "compresscodec: GZIP" in dumped.stdout, dumped.stdout  # an option given wins over the file

    consumed = mq(
        mq_command,
        *("console-consumer", "--bootstrap-server", source.bootstrap, "--topic", "s", "--max-messages", "5"),
        *("--consumer.config", str(consumer_file)),
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines
    assert "Warning: consumer property auto.offset.reset=smallest is deprecated (Kafka 0.8)" in consumed.stderr

    perf_produced = mq(
        mq_command,
        *("perf", "producer", "--topic", "p", "--num-records", "40", "--record-size", "10", "--throughput", "-1"),
        *("--producer.config", str(producer_file)),
    )
    assert perf_produced.returncode == 0, perf_produced.stderr
    perf_consumed = mq(
        mq_command,
        *("perf", "consumer", "--bootstrap-server", source.bootstrap, "--topic", "p", "--messages", "40"),
        *("--timeout", "20000", "--consumer.config", str(consumer_file)),
    )
    assert perf_consumed.returncode == 0, perf_consumed.stderr

    target = broker_factory("target").start()
    (tmp_path / "mirror").mkdir()
    mirror_consumer_file = seed_file(
        tmp_path / "mirror",
        "seed_era_consumer.properties",
        {"zookeeper.connect=127.0.0.1:2181": f"zookeeper.connect={connect}", "group.id=mygid": "group.id=mirror"},
    )
    target_file = seed_file(
        tmp_path / "mirror",
        "seed_era_producer.properties",
        {"metadata.broker.list=127.0.0.1:9092": f"metadata.broker.list={target.bootstrap}"},
    )
    mirror = subprocess.Popen(
        [
            *mq_command,
            *("mirror", "--consumer.config", str(mirror_consumer_file), "--producer.config", str(target_file)),
            *("--whitelist", "s", "--num.producers", "2", "--queue.size", "100"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert read_all(target.bootstrap, "s", 5) == [line.encode() for line in lines]
    finally:
        mirror.send_signal(signal.SIGTERM)
        _, err = mirror.communicate(timeout=60)
    assert mirror.returncode == 0, err
    assert "Note: --num.producers is not needed" in err
    assert "Note: --queue.size is not needed" in err
    # The 0.8 file makes the source a ZooKeeper-coordinated group; its auto.commit.enable=true wins, with Kafka's line.
    assert "Property auto.commit.enable is overridden to true - data loss or message reordering is possible." in err
    store = ZooKeeperStore(connect)
    try:
        assert ZkConsumerGroups(store).offsets("mirror") == {TopicPartition("s", 0): 5}
    finally:
        store.close()


def test_simple_consumer_shell_and_get_offsets(broker: BrokerProcess, mq_command: list[str]) -> None:
    with SyncAdmin(broker.bootstrap) as admin:
        admin.call(AsyncAdmin.create_topics, [NewTopic("shell", 2, 1)])
        [metadata] = admin.call(AsyncAdmin.describe_topics, ["shell"])
    leader = str(metadata.partitions[0].leader)
    with SyncProducer(broker.bootstrap) as producer:
        for i in range(4):
            producer.send("shell", f"v{i}".encode(), f"k{i}".encode(), partition=1)
        producer.flush()
    shell = ["simple-consumer-shell", "--broker-list", broker.bootstrap, "--topic", "shell"]

    read = mq(mq_command, *shell, "--partition", "1", "--offset", "1", "--print-offsets", "--no-wait-at-logend")
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == [
        "next offset = 2",
        "v1",
        "next offset = 3",
        "v2",
        "next offset = 4",
        "v3",
        "Terminating. Reached the end of partition (shell, 1) at offset 4",
    ]
    keyed = mq(
        mq_command,
        *shell,
        *("--partition", "1", "--max-messages", "2", "--property", "print.key=true", "--property", "key.separator=:"),
        *(
            "--clientId",
            "ops",
            "--fetchsize",
            "100",
            "--max-wait-ms",
            "200",
            "--formatter",
            "kafka.tools.DefaultMessageFormatter",
        ),
    )
    assert keyed.returncode == 0, keyed.stderr
    assert keyed.stdout.splitlines() == ["k0:v0", "k1:v1"]
    empty = mq(mq_command, *shell, "--no-wait-at-logend", "--skip-message-on-error", "--replica", leader)
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == "Terminating. Reached the end of partition (shell, 0) at offset 0\n"
    at_end = mq(mq_command, *shell, "--partition", "1", "--offset", "-1", "--no-wait-at-logend")
    assert at_end.stdout == "Terminating. Reached the end of partition (shell, 1) at offset 4\n"
    other = mq(mq_command, *shell, "--replica", "5")
    assert other.returncode == 1 and other.stderr == "Error: replica 5 does not exist for partition (shell, 0)\n"
    missing = mq(mq_command, *shell, "--partition", "5")
    assert missing.returncode == 1 and missing.stderr == "Error: partition 5 does not exist for topic shell\n"
    bad = mq(mq_command, *shell, "--offset", "-3")
    assert bad.returncode == 1 and bad.stderr == "Error: Invalid starting offset: -3\n"
    no_topic = mq(mq_command, *shell[:3], "--topic", "nope")
    assert no_topic.returncode == 1
    assert no_topic.stderr.startswith(
        "Error: no valid topic metadata for topic: nope, what we get from server is only:"
    )

    offsets = ["get-offsets", "--broker-list", broker.bootstrap, "--topic", "shell", "--max-wait-ms", "5000"]
    latest = mq(mq_command, *offsets, "--offsets", "3")
    assert latest.returncode == 0, latest.stderr
    assert latest.stdout == "shell:0:0\nshell:1:4\n"
    assert latest.stderr == "Note: --offsets 3: the broker answers one offset per partition\n"
    earliest = mq(mq_command, *offsets, "--time", "-2", "--partitions", "1")
    assert (earliest.stdout, earliest.stderr) == ("shell:1:0\n", "")
