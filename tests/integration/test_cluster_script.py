"""scripts/cluster.sh as a developer runs it: start 3 brokers on ZooKeeper, use the printed bootstrap, stop."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MQ_PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=180, env=env)


def processes_under(base: Path) -> list[str]:
    """Command lines of live processes that mention the base dir (ZooKeeper's config, brokers' log dirs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                zombie = (entry / "stat").read_text().split(") ")[-1].startswith("Z")
            except OSError:
                continue
            if str(base) in cmdline and not zombie:
                found.append(cmdline)
    return found


def test_start_produce_consume_stop(tmp_path: Path) -> None:
    base = tmp_path / "cluster"
    started = run("start", "3", "--base-dir", str(base))
    try:
        assert started.returncode == 0, started.stderr
        bootstrap = started.stdout.strip().splitlines()[-1]
        state = json.loads((base / "cluster.json").read_text())
        assert bootstrap == ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
        assert [b["broker_id"] for b in state["brokers"]] == [1, 2, 3]
        assert len(processes_under(base)) == 4

        status = run("status", "--base-dir", str(base))
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        assert [line.split()[0] for line in lines] == ["zookeeper", "broker", "broker", "broker"]
        assert all("running (pid" in line for line in lines)

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("through-script", 3, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5)
        sent = [producer.send("through-script", f"v{i}".encode(), key=f"k{i}".encode()).get(30) for i in range(90)]
        producer.close()
        assert {m.partition for m in sent} == {0, 1, 2}
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        partitions = [TopicPartition("through-script", p) for p in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        values: set[bytes] = set()
        while len(values) < 90:
            records = consumer.poll(timeout_ms=10000)
            assert records, f"{len(values)} of 90"
            values.update(r.value for batch in records.values() for r in batch)
        consumer.close()
        assert values == {f"v{i}".encode() for i in range(90)}

        again = run("start", "3", "--base-dir", str(base))
        assert again.returncode == 1
        assert "already runs" in again.stderr
    finally:
        stopped = run("stop", "--base-dir", str(base))
    assert stopped.returncode == 0, stopped.stderr
    assert processes_under(base) == []
    status = run("status", "3", "--base-dir", str(base))
    assert status.returncode == 1
    assert all(line.endswith("stopped") for line in status.stdout.splitlines())
    for i in (1, 2, 3):  # a clean shutdown each: Kafka's marker file is left in the log dir
        assert (base / f"broker-{i}" / "kafka-logs" / ".kafka_cleanshutdown").exists()


def test_failed_start_reports_and_leaves_nothing_running(tmp_path: Path) -> None:
    base = tmp_path / "cluster"
    started = run("start", "2", "--base-dir", str(base), "--override", "no.such.key=1")
    assert started.returncode == 1
    assert started.stdout == ""
    assert re.search(r"^Error: Broker [12] exited during start-up;", started.stderr, re.M)  # whichever died first
    assert "no.such.key" in started.stderr  # the tail of the broker's log says why
    assert processes_under(base) == []

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = run("start", "1", "--base-dir", str(tmp_path / "other"), "--port", str(port))
    assert busy.returncode == 1
    assert f"Error: Port {port} (broker 1) is already in use" in busy.stderr
    assert processes_under(tmp_path) == []
