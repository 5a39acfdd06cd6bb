"""The broker's log files as an operator reads them: Kafka's files in a log dir, admin changes with their client,
logger levels changed at run time with ``mq configs --entity-type broker-loggers``, and the state-change logs of a
two-broker cluster on a real ZooKeeper merged by ``mq state-change-log-merger``."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import BrokerProcess, ZooKeeperProcess
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from waiting import wait_for

pytestmark = pytest.mark.slow

LOG_FILES = ["controller.log", "kafka-authorizer.log", "kafka-request.log", "log-cleaner.log", "server.log"]
LOG_FILES = sorted([*LOG_FILES, "state-change.log"])
TIMESTAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def logs_of(broker: BrokerProcess) -> Path:
    """LOG_DIR is relative: each broker writes under its own directory."""
    return broker.data_dir / "logs"


def mq(mq_command: list[str], *args: str) -> list[str]:
    result = subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_log_files_audit_lines_and_logger_levels_of_a_running_broker(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOG_DIR", "logs")
    broker = broker_factory("broker", ["broker.id=0"]).start()
    logs = logs_of(broker)
    assert sorted(p.name for p in logs.iterdir()) == LOG_FILES
    assert wait_for(lambda: "mq broker 0 started" in broker.stderr())  # stderr as without a log dir
    assert "mq broker 0 started" in text(logs / "server.log")
    assert "is the controller" in text(logs / "controller.log")
    assert "(kafka.controller)" not in text(logs / "server.log")

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="audit-client")
    try:
        admin.create_topics([NewTopic("audited", 2, 1)])
        admin.delete_topics(["audited"])
        admin.create_topics([NewTopic("logged", 1, 1)])
    finally:
        admin.close()
    admin_lines = [line for line in text(logs / "server.log").splitlines() if line.endswith("(kafka.admin)")]
    address = r"\(clientId=audit-client, address=127\.0\.0\.1:\d+\)"
    assert len(admin_lines) == 3, admin_lines
    assert re.search(
        rf"INFO Admin change by User:ANONYMOUS {address} with CreateTopics: created topic audited with 2 "
        r"partitions, replication factor 1 \(kafka\.admin\)$",
        admin_lines[0],
    )
    assert re.search(
        rf"Admin change by User:ANONYMOUS {address} with DeleteTopics: deleted topic audited", admin_lines[1]
    )
    state_changes = text(logs / "state-change.log")
    assert (
        "[Controller id=0 epoch=1] Changed partition audited-1 from NewPartition to OnlinePartition with state "
        "LeaderAndIsr(leader=0, leaderEpoch=0, isr=List(0), zkVersion=0) (state.change.logger)" in state_changes
    )
    assert "[Broker id=0] Leader audited-0 starts at leader epoch 0 from offset 0" in state_changes

    loggers = ["configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "broker-loggers"]
    described = mq(mq_command, *loggers, "--entity-name", "0", "--describe")
    assert described[:2] == ["Dynamic configs for broker-logger 0 are:", "  root=INFO sensitive=false synonyms={}"]
    assert "  kafka.request.logger=WARN sensitive=false synonyms={}" in described
    assert "Completed request" not in text(logs / "kafka-request.log")

    altered = mq(mq_command, *loggers, "--entity-name", "0", "--alter", "--add-config", "kafka.request.logger=DEBUG")
    assert altered == ["Completed updating config for broker-logger 0."]
    described = mq(mq_command, *loggers, "--describe")  # every broker: one here
    assert "  kafka.request.logger=DEBUG sensitive=false synonyms={}" in described
    assert wait_for(
        lambda: "DEBUG Completed request:RequestHeader(apiKey=DESCRIBE_CONFIGS" in text(logs / "kafka-request.log")
    )
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="logged-producer")
    try:
        producer.send("logged", b"one").get(15)  # Produce takes the immediate path: logged there too
    finally:
        producer.close()
    produced = re.compile(
        r"DEBUG Completed request:RequestHeader\(apiKey=PRODUCE, apiVersion=\d+, clientId=logged-producer"
    )
    assert wait_for(lambda: produced.search(text(logs / "kafka-request.log")))

    consumer = KafkaConsumer(
        "logged", bootstrap_servers=broker.bootstrap, group_id="readers", auto_offset_reset="earliest"
    )
    try:  # a member's commits are not admin changes
        assert wait_for(lambda: consumer.poll(200, max_records=1))
        consumer.commit()
    finally:
        consumer.close()
    groups = ["consumer-groups", "--bootstrap-server", broker.bootstrap, "--group", "readers", "--reset-offsets"]
    mq(mq_command, *groups, "--topic", "logged", "--to-earliest", "--execute")
    resets = [line for line in text(logs / "server.log").splitlines() if "outside any generation" in line]
    assert len(resets) == 1, resets
    assert re.search(
        r"Admin change by User:ANONYMOUS \(clientId=[^,]*, address=127\.0\.0\.1:\d+\) with OffsetCommit: committed "
        r"offsets of group readers outside any generation: logged-0=0 \(kafka\.admin\)$",
        resets[0],
    )

    mq(mq_command, *loggers, "--entity-name", "0", "--alter", "--delete-config", "kafka.request.logger")
    described = mq(mq_command, *loggers, "--entity-name", "0", "--describe")
    assert "  kafka.request.logger=INFO sensitive=false synonyms={}" in described  # the root's level
    assert "altered the config of broker logger '0': DELETE kafka.request.logger" in text(logs / "server.log")


def test_state_change_logs_of_a_cluster_merge_in_time_order(
    mq_command: list[str],
    zookeeper: ZooKeeperProcess,
    broker_factory: Callable[..., BrokerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOG_DIR", "logs")
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    brokers = [
        broker_factory(f"broker{i}", [f"zookeeper.connect={connect}", f"broker.id={i}"]).start() for i in (1, 2, 3)
    ]
    files = [logs_of(b) / "state-change.log" for b in brokers]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    mq(mq_command, "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "merged", "--partitions", "2",
       "--replication-factor", "3")  # fmt: skip
    assert wait_for(
        lambda: all(text(f).count("merged-") >= 2 and " starts at leader epoch 0 " in text(f) for f in files)
    )
    controller = next(b for b in brokers if "Changed partition merged-0" in text(logs_of(b) / "state-change.log"))
    assert "(kafka.controller)" in text(logs_of(controller) / "controller.log")

    merged = mq(mq_command, "state-change-log-merger", "--logs", ",".join(map(str, files)), "--topic", "merged")
    stamps = [TIMESTAMP.match(line).group(1) for line in merged]  # type: ignore[union-attr]
    assert stamps == sorted(stamps)
    every = [line for f in files for line in text(f).splitlines() if "merged-" in line]
    assert sorted(merged) == sorted(every)  # every line of the topic from the three brokers, nothing else
    assert all(any(f"[Broker id={i}]" in line for line in merged) for i in (1, 2, 3))
    assert any(re.search(r"\[Controller id=\d epoch=\d+\] Changed partition merged-1 ", line) for line in merged)

    one = mq(mq_command, "state-change-log-merger", "--logs", ",".join(map(str, files)), "--topic", "merged",
             "--partitions", "1")  # fmt: skip
    assert one and all("merged-1 " in line for line in one)
    assert one == [line for line in merged if "merged-1 " in line]
    before = mq(mq_command, "state-change-log-merger", "--logs", ",".join(map(str, files)), "--end-time",
                "2000-01-01 00:00:00,000")  # fmt: skip
    assert before == []
    window = mq(mq_command, "state-change-log-merger", "--logs", ",".join(map(str, files)), "--topic", "merged",
                "--start-time", stamps[-1])  # fmt: skip
    assert window == [line for line in merged if line.startswith(f"[{stamps[-1]}]")]


def test_a_daemon_writes_its_log_files_and_its_stderr_to_the_log_dir(mq_command: list[str], tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n", encoding="utf-8")
    logs = tmp_path / "logs"
    started = mq(mq_command, "server", "start", str(config), "--daemon", "--log-dir", str(logs))
    assert started[0].endswith(f"log {logs / 'server.out'})")
    try:
        assert sorted(p.name for p in logs.iterdir()) == sorted([*LOG_FILES, "server.out"])
        assert "started on 127.0.0.1" in text(logs / "server.log")
    finally:
        mq(mq_command, "server", "stop", "--config", str(config))
    assert "stopped" in text(logs / "server.log").splitlines()[-1]


def test_an_unreadable_logging_config_is_one_line(mq_command: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "logging.ini"
    bad.write_text("not an ini file\n", encoding="utf-8")
    args = ["server", "start", "--log-dir", str(tmp_path / "logs"), "--logging-config", str(bad)]
    result = subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 1
    assert not (tmp_path / "data").exists()  # refused before the broker read its config
    assert result.stderr.startswith("Error: cannot set up logging: ") and len(result.stderr.splitlines()) == 1
