"""mq delete-records, log-dirs and broker-api-versions run as commands against a broker process (data produced with
kafka-python); test_cli.py runs them against a server that never answers."""

from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

pytestmark = pytest.mark.slow


def mq(command: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout)


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, batch_size=1)
    for i in range(count):
        for partition in range(partitions):
            producer.send(topic, f"{partition}-{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def broker_id(bootstrap: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    [node] = admin.describe_cluster()["brokers"]
    admin.close()
    return int(node["broker_id"])


def offsets_read(bootstrap: str, tp: TopicPartition) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=2000)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    offsets = [record.offset for record in consumer]
    consumer.close()
    return offsets


def test_delete_records_per_partition_outcomes(mq_command: list[str], broker, tmp_path: Path) -> None:
    produce(broker.bootstrap, "dr", 3, 10)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "dr", "partition": 0, "offset": 3},
                    {"topic": "dr", "partition": 1, "offset": 11},
                    {"topic": "dr", "partition": 2, "offset": -1},
                ],
                "version": 1,
            }
        )
    )
    result = mq(
        mq_command, "delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(offsets)
    )
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: dr-0\tlow_watermark: 3",
        "partition: dr-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server.",
        "partition: dr-2\tlow_watermark: 10",
    ]
    assert len(result.stderr.splitlines()) == 1
    assert offsets_read(broker.bootstrap, TopicPartition("dr", 0)) == list(range(3, 10))
    assert offsets_read(broker.bootstrap, TopicPartition("dr", 1)) == list(range(10))
    assert offsets_read(broker.bootstrap, TopicPartition("dr", 2)) == []

    offsets.write_text('{"partitions":[{"topic":"dr","partition":1,"offset":4}],"version":1}')
    done = mq(mq_command, "delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(offsets))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "partition: dr-1\tlow_watermark: 4"
    offsets.write_text(
        '{"partitions":[{"topic":"dr","partition":1,"offset":4},{"topic":"dr","partition":1,"offset":5}]}'
    )
    duplicate = mq(
        mq_command, "delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(offsets)
    )
    assert duplicate.returncode == 2
    assert duplicate.stderr == "Error: Offset json file contains duplicate topic partitions: dr-1\n"


def test_log_dirs_describe(mq_command: list[str], broker) -> None:
    produce(broker.bootstrap, "ld1", 2, 5)
    produce(broker.bootstrap, "ld2", 1, 5)
    b = ["--bootstrap-server", broker.bootstrap]
    node = broker_id(broker.bootstrap)
    result = mq(mq_command, "log-dirs", *b, "--describe", "--topic-list", "ld1,ld2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        f"Received log directory information from brokers {node}",
    ]
    assert len(lines) == 3
    document = json.loads(lines[2])
    assert lines[2] == json.dumps(document, separators=(",", ":"))
    [broker_entry] = document["brokers"]
    assert document["version"] == 1 and broker_entry["broker"] == node
    [log_dir] = broker_entry["logDirs"]
    assert log_dir["logDir"] == str(broker.log_dir) and log_dir["error"] is None
    on_disk = {p.name: sum(f.stat().st_size for f in p.glob("*.log")) for p in broker.log_dir.iterdir() if p.is_dir()}
    assert {p["partition"]: p["size"] for p in log_dir["partitions"]} == {
        name: on_disk[name] for name in ("ld1-0", "ld1-1", "ld2-0")
    }
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
    assert list(log_dir["partitions"][0]) == ["partition", "size", "offsetLag", "isFuture"]

    only = json.loads(mq(mq_command, "log-dirs", *b, "--describe", "--topic-list", "ld2").stdout.splitlines()[2])
    assert [p["partition"] for p in only["brokers"][0]["logDirs"][0]["partitions"]] == ["ld2-0"]
    missing = mq(mq_command, "log-dirs", *b, "--describe", "--broker-list", f"{node},7")
    assert missing.returncode == 1
    assert missing.stderr == (
        f"ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: {node}\n"
    )
    assert mq(mq_command, "log-dirs", *b).returncode == 2


def advertised_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 over a plain socket: what the broker advertises, read without mq's client."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        client_id = b"probe"
        body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            data += sock.recv(65536)
    correlation_id, error, count = struct.unpack_from(">ihi", data, 4)
    assert (correlation_id, error) == (7, 0)
    return {key: (low, high) for key, low, high in (struct.unpack_from(">hhh", data, 14 + 6 * i) for i in range(count))}


def test_broker_api_versions(mq_command: list[str], broker) -> None:
    from mq.client.connection import client_versions

    result = mq(mq_command, "broker-api-versions", "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{broker.bootstrap} (id: {broker_id(broker.bootstrap)} rack: null) -> ("
    assert lines[-1] == ")"
    entries = [line.removeprefix("\t").removesuffix(",") for line in lines[1:-1]]
    assert all(line.startswith("\t") for line in lines[1:-1])
    assert all(line.endswith(",") for line in lines[1:-2]) and not lines[-2].endswith(",")
    pattern = re.compile(r"(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: (\d+)\]|UNSUPPORTED)")
    seen: dict[int, tuple[int, int] | None] = {}
    for entry in entries:
        match = pattern.fullmatch(entry)
        assert match, entry
        key = int(match[2])
        if match[3] is None:
            seen[key] = None
            continue
        low, high = int(match[3]), int(match[4] or match[3])
        seen[key] = (low, high)
        ours = client_versions(key)
        assert ours is not None and int(match[5]) == min(ours[1], high)
    assert list(seen) == sorted(seen)
    advertised = advertised_versions(broker.bootstrap)
    assert {k: v for k, v in seen.items() if v is not None} == advertised
    assert entries[0].startswith("Produce(0): ") and "Fetch(1): " in entries[1]
    assert any(e.startswith("DeleteRecords(21): ") for e in entries)
