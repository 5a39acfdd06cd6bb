"""Broker processes started from real configuration files: a Kafka 0.8 server.properties (its keys renamed since
read as their successors, the ones mq does not use named once) and the shipped config/server.properties (a new
topic on it has no overrides)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.conftest import BrokerProcess, ZooKeeperProcess, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEED_ERA = ROOT / "tests" / "data" / "seed_era_server.properties"


def wait_listening(process: subprocess.Popen[bytes], port: int, stderr: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, stderr.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the broker did not listen:\n{stderr.read_text()}")


def test_a_kafka_08_server_properties_runs_a_broker(
    mq_command: list[str], zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    config = tmp_path / "server.properties"
    shutil.copy(SEED_ERA, config)
    port = free_port()
    stderr = tmp_path / "broker.stderr"
    args = [*mq_command, "server", "start", str(config)]
    for item in (
        f"zookeeper.connect={zookeeper.connect}/mq-{os.urandom(4).hex()}",
        f"log.dirs={tmp_path / 'kafka-logs'}",
        f"port={port}",
        f"advertised.port={port}",
    ):
        args += ["--override", item]
    with open(stderr, "wb") as err:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    try:
        wait_listening(process, port, stderr)
        bootstrap = f"127.0.0.1:{port}"
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        sent = [f"seed-{i}".encode() for i in range(10)]
        for value in sent:
            producer.send("seed-era", value)  # auto.create.topics.enable=true in the file
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        tp = TopicPartition("seed-era", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        received: list[bytes] = []
        while len(received) < len(sent):
            batch = consumer.poll(timeout_ms=10000)
            assert batch, f"only {len(received)} of {len(sent)} messages came back"
            received += [r.value for records in batch.values() for r in records]
        consumer.close()
        assert received == sent
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    logged = [re.fullmatch(r"\[[^]]+\] WARNING (.*) \(mq\.config\)", line) for line in stderr.read_text().splitlines()]
    lines = [match.group(1) for match in logged if match]  # the config's warnings, logged as the broker's other lines
    listeners = f"port and host.name in --override and {config}: deprecated (removed in Kafka 3.0); "
    assert lines.count(f"{listeners}read as listeners=PLAINTEXT://127.0.0.1:{port}") == 1, lines
    advertised = f"advertised.port and advertised.host.name in --override and {config}: deprecated"
    assert (
        lines.count(f"{advertised} (removed in Kafka 3.0); read as advertised.listeners=PLAINTEXT://127.0.0.1:{port}")
        == 1
    ), lines
    unused = [line for line in lines if line.startswith("Accepted but unused by mq: ")]
    assert unused == [
        "Accepted but unused by mq: fetch.purgatory.purge.interval.requests, "
        "producer.purgatory.purge.interval.requests, replica.lag.max.messages, replica.socket.receive.buffer.bytes, "
        "replica.socket.timeout.ms, zookeeper.sync.time.ms"
    ]


def test_a_new_topic_on_the_shipped_file_has_no_overrides(mq_command: list[str], tmp_path: Path) -> None:
    broker = BrokerProcess(mq_command, tmp_path / "broker")
    (broker.data_dir / "config").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "server.properties", broker.data_dir / "config" / "server.properties")
    broker.start()  # in data_dir, where `mq server start` reads config/server.properties by default
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("plain", 2, 1)])["plain"].result(15)
        resource = ConfigResource("topic", "plain")
        configs = admin.describe_configs([resource])[resource].result(15)
        assert {c.source for c in configs.values()} == {ConfigSource.DEFAULT_CONFIG.value}
        broker_resource = ConfigResource("broker", "0")
        broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(15)
        static = {c.name for c in broker_configs.values() if c.source == ConfigSource.STATIC_BROKER_CONFIG.value}
        assert {"broker.id", "listeners", "log.dirs", "offsets.topic.replication.factor"} <= static
        assert not {"log.segment.bytes", "num.partitions", "log.retention.hours"} & static
        admin.create_topics([NewTopic("tuned", 1, 1, config={"retention.ms": "60000"})])["tuned"].result(15)
        listed = subprocess.run(
            [*mq_command, "topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topics-with-overrides"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["Topic: tuned"]
        assert "Configs: retention.ms=60000" in listed.stdout
    finally:
        broker.stop()
