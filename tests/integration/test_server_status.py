"""``mq server status`` and ``mq monitor`` against broker processes: a healthy standalone broker, a 3-broker cluster
on a real ZooKeeper losing and regaining a follower, and a lag alarm posted to a webhook served by this test."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import BrokerProcess, ZooKeeperProcess, free_port
from kafka import KafkaConsumer, KafkaProducer
from waiting import wait_for

from mq.zk.zk_store import ZooKeeperStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def run(command: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout)


def test_status_of_a_healthy_local_broker(mq_command: list[str], broker: BrokerProcess, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:{broker.port}\nlog.dirs={broker.log_dir}\n", encoding="utf-8")
    created = run(mq_command, "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "t",
                  "--partitions", "2", "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    with KafkaConsumer(bootstrap_servers=broker.bootstrap) as consumer:  # one established client connection
        consumer.topics()
        local = run(mq_command, "server", "status", "--config", str(config), "--timeout", "20")
        document = run(mq_command, "server", "status", "--config", str(config), "--format", "json")
    assert local.returncode == 0, local.stderr
    lines = local.stdout.splitlines()
    assert "Under-replicated partitions: 0 (none)" in lines and "Offline partitions: 0 (none)" in lines
    assert "Status: healthy" in lines
    assert any(line.startswith("Version: ") and "unknown" not in line for line in lines)
    assert any(line.startswith("Uptime: ") and "(started " in line for line in lines)
    assert f"Controller: {json.loads(document.stdout)['controller_id']}" in lines
    status = json.loads(document.stdout)
    assert document.returncode == 0 and status["healthy"] is True
    assert status["brokers"] == [status["broker_id"]] and status["partitions_led"] == {str(status["broker_id"]): 2}
    assert status["connections"] >= 1 and status["uptime_seconds"] >= 0
    (log_dir,) = status["log_dirs"]
    assert log_dir["log_dir"] == str(broker.log_dir) and log_dir["free_bytes"] > 0 and log_dir["error"] is None
    remote = run(mq_command, "server", "status", "--bootstrap-server", broker.bootstrap, "--format", "json")
    assert remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout)["version"] is None and json.loads(remote.stdout)["uptime_seconds"] is None
    assert json.loads(remote.stdout)["connections"] is None


class MetricsPage(BaseHTTPRequestHandler):
    """A Prometheus text page with a start time and two listeners' connection counts."""

    def do_GET(self) -> None:
        body = (
            b"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1767225600.5\n"
            b'connection_count{listener="A"} 2.0\nconnection_count{listener="B"} 1.0\n'
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_remote_broker_s_uptime_and_connections_come_from_its_metrics_page(
    mq_command: list[str], broker: BrokerProcess
) -> None:
    server = HTTPServer(("127.0.0.1", 0), MetricsPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        result = run(mq_command, "server", "status", "--bootstrap-server", broker.bootstrap, "--metrics-url", url)
        unreadable = run(mq_command, "server", "status", "--bootstrap-server", broker.bootstrap, "--metrics-url",
                         f"http://127.0.0.1:{free_port()}/")  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    assert "Connections: 3" in result.stdout.splitlines()
    assert any(
        line.startswith("Uptime: ") and "(started 2026-01-01T00:00:00+00:00)" in line
        for line in result.stdout.splitlines()
    )
    assert unreadable.returncode == 1 and unreadable.stderr.startswith("Error: cannot read http://127.0.0.1:")


def test_status_of_an_unreachable_broker_and_bad_usage(mq_command: list[str], tmp_path: Path) -> None:
    port = free_port()
    unreachable = run(mq_command, "server", "status", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "2")
    assert unreachable.returncode == 1 and unreachable.stdout == ""
    assert unreachable.stderr.startswith("Error: timed out after 2 s") and unreachable.stderr.count("\n") == 1
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'logs'}\n", encoding="utf-8")
    stopped = run(mq_command, "server", "status", "--config", str(config))
    assert (stopped.returncode, stopped.stdout) == (1, "")
    assert (
        stopped.stderr == f"Error: No mq server runs for this config (no live pid in {tmp_path}/logs/mq-server.pid)\n"
    )
    wrong = run(mq_command, "server", "status", "--format", "yaml")
    assert wrong.returncode == 2


def test_status_follows_a_follower_that_dies_and_catches_up(
    mq_command: list[str],
    cluster_on: Callable[[ZooKeeperProcess, list[str]], tuple[str, list[BrokerProcess]]],
    zookeeper: ZooKeeperProcess,
) -> None:
    connect, brokers = cluster_on(zookeeper, ["replica.lag.time.max.ms=3000"])
    created = run(mq_command, "topics", "--bootstrap-server", brokers[0].bootstrap, "--create", "--topic", "r",
                  "--partitions", "2", "--replication-factor", "3")  # fmt: skip
    assert created.returncode == 0, created.stderr

    def status(broker: BrokerProcess) -> subprocess.CompletedProcess[str]:
        return run(mq_command, "server", "status", "--bootstrap-server", broker.bootstrap, "--timeout", "10",
                   "--format", "json")  # fmt: skip

    assert wait_for(lambda: status(brokers[0]).returncode == 0, timeout=30)
    led = json.loads(status(brokers[0]).stdout)["partitions_led"]
    follower_id, follower = next((i, b) for i, b in enumerate(brokers, start=1) if str(i) not in led)  # 2 leaders
    survivor = next(b for b in brokers if b is not follower)
    follower.kill()
    assert wait_for(lambda: status(survivor).returncode == 1, timeout=60, interval=0.5)
    unhealthy = status(survivor)
    assert json.loads(unhealthy.stdout)["under_replicated_partitions"] == ["r-0", "r-1"]
    assert json.loads(unhealthy.stdout)["offline_partitions"] == []
    store = ZooKeeperStore(connect)
    try:  # as Kafka, a broker refuses to start while its killed predecessor's registration lives (its session)
        assert wait_for(lambda: store.get_or_none(f"/brokers/ids/{follower_id}") is None, timeout=30)
    finally:
        store.close()
    follower.start()
    assert wait_for(lambda: status(survivor).returncode == 0, timeout=90, interval=0.5)


class Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        assert self.headers["Content-Type"] == "application/json"
        type(self).received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    handler = type("Handler", (Hook,), {"received": received})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    server.server_close()


def test_a_lag_alarm_fires_when_the_group_stops_and_resolves_when_it_resumes(
    mq_command: list[str], broker: BrokerProcess, webhook: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, received = webhook
    rules = tmp_path / "rules.toml"
    rules.write_text(
        f'webhook = "{url}"\n[[rules]]\nname = "lagging"\nmetric = "group_lag_seconds"\nthreshold = 2\n'
        'group = "readers"\ncommand = "cat >> alarms.jsonl"\n',
        encoding="utf-8",
    )
    created = run(mq_command, "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "lag",
                  "--partitions", "1", "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    consumer = KafkaConsumer("lag", bootstrap_servers=broker.bootstrap, group_id="readers",
                             auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    consuming, done = threading.Event(), threading.Event()
    consuming.set()
    commits: list[float] = []

    def produce() -> None:
        while not done.is_set():
            producer.send("lag", b"x")
            producer.flush()
            time.sleep(0.1)

    producing = threading.Thread(target=produce)
    producing.start()
    monitor = subprocess.Popen(
        [*mq_command, "monitor", "--bootstrap-server", broker.bootstrap, "--rules", str(rules), "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:

        def consume_until(condition: Callable[[], bool], timeout: float) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if condition():
                    return True
                if consuming.is_set() and consumer.poll(timeout_ms=100):
                    consumer.commit()
                    commits.append(time.monotonic())
                elif not consuming.is_set():
                    time.sleep(0.1)
            return False

        assert consume_until(lambda: len(commits) >= 5, timeout=60)
        keeping_up_since = commits[-1]
        consume_until(lambda: commits[-1] - keeping_up_since > 4, timeout=30)  # several evaluations, lag < 2 s
        assert received == []
        consuming.clear()
        assert consume_until(lambda: bool(received), timeout=60)
        (fired,) = received
        assert (fired["rule"], fired["state"], fired["labels"]) == (
            "lagging",
            "firing",
            {"group": "readers", "topic": "lag"},
        )
        assert fired["value"] > 2 and fired["threshold"] == 2 and fired["metric"] == "group_lag_seconds"
        consuming.set()
        assert consume_until(lambda: len(received) == 2, timeout=60)
        assert received[1]["state"] == "resolved"
        assert received[1]["value"] < 2  # caught up but for the records produced since the last poll
    finally:
        done.set()
        producing.join()
        monitor.terminate()
        out, err = monitor.communicate(timeout=30)
        consumer.close()
        producer.close()
    assert [json.loads(line)["state"] for line in (tmp_path / "alarms.jsonl").read_text().splitlines()] == [
        "firing",
        "resolved",
    ]
    assert [line.split()[1:3] for line in out.splitlines()] == [["FIRING", "lagging"], ["RESOLVED", "lagging"]], err


def test_monitor_once_exit_codes_and_rule_file_errors(
    mq_command: list[str], broker: BrokerProcess, tmp_path: Path
) -> None:
    created = run(mq_command, "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "once",
                  "--partitions", "1", "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    rules = tmp_path / "rules.json"

    def once(*rule: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        rules.write_text(json.dumps({"rules": list(rule)}), encoding="utf-8")
        return run(mq_command, "monitor", "--bootstrap-server", broker.bootstrap, "--rules", str(rules), "--once")

    quiet = once({"name": "offline", "metric": "offline_partitions", "threshold": 0},
                 {"name": "disk", "metric": "log_dir_bytes", "threshold": 1 << 40})  # fmt: skip
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    firing = once({"name": "disk", "metric": "log_dir_used_percent", "operator": ">=", "threshold": 0})
    assert firing.returncode == 1 and "FIRING disk " in firing.stdout
    assert f"log_dir={broker.log_dir}" in firing.stdout
    unknown = once({"name": "x", "metric": "lag", "threshold": 1})
    assert unknown.returncode == 2 and unknown.stderr.startswith(f"Error: {rules}: rule 'x': unknown metric 'lag'")
    assert unknown.stderr.count("\n") == 1
    bad = once({"name": "x", "metric": "group_lag_records", "threshold": "lots"})
    assert bad.returncode == 2 and bad.stderr == f"Error: {rules}: rule 'x': threshold must be a number, not 'lots'\n"
    missing = run(mq_command, "monitor", "--bootstrap-server", broker.bootstrap, "--once")
    assert missing.returncode == 2 and missing.stderr == 'Error: Missing required argument "[rules]"\n'
