"""The broker's metrics listener, scraped over HTTP as Prometheus does: kcat's records show in the counters, the
request metrics and the log gauges; /health and /ready; a taken port refuses the start."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from waiting import wait_for

from tests.integration.conftest import BrokerProcess, free_port

pytestmark = pytest.mark.slow


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(text: str, name: str, labels: str = "") -> float:
    """The value of ``name{labels}`` (labels exactly as exposed, e.g. ``topic="t"``; empty: no labels)."""
    pattern = "^" + re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, f"{name}{{{labels}}} not in the scrape"
    return float(found.group(1))


def test_scrape_after_kcat_produce(broker_factory: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    broker = broker_factory(overrides=[f"metrics.listener=http://127.0.0.1:{port}"]).start()
    assert get(port, "/health") == (200, "ok\n")
    records = 50
    kcat = shutil.which("kcat")
    assert kcat is not None
    data = b"".join(b"v%d\n" % i for i in range(records))
    produced = subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", "met"], input=data, capture_output=True)
    assert produced.returncode == 0, produced.stderr
    status, text = get(port, "/metrics")
    assert status == 200
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", 'topic="met"') >= records
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total") >= records
    assert sample(text, "kafka_server_brokertopicmetrics_bytesin_total", 'topic="met"') > 0
    produce_requests = [
        float(v)
        for v in re.findall(
            r'^kafka_network_requestmetrics_requests_total\{request="Produce",version="\d+"\} (\S+)$', text, re.M
        )
    ]
    assert produce_requests and sum(produce_requests) >= 1
    assert sample(text, "kafka_network_requestmetrics_totaltimems", 'quantile="0.99",request="Produce"') > 0
    assert sample(text, "kafka_network_requestmetrics_totaltimems_count", 'request="Produce"') >= 1
    assert sample(text, "kafka_log_log_logendoffset", 'partition="0",topic="met"') == records
    assert sample(text, "kafka_server_replicamanager_partitioncount") >= 1
    assert sample(text, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(text, "process_open_fds") > 0
    assert get(port, "/ready")[0] == 200
    assert get(port, "/nothing")[0] == 404


def test_server_status_reads_uptime_and_connections_from_the_metrics(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess]
) -> None:
    port = free_port()
    broker = broker_factory(overrides=[f"metrics.listener=http://127.0.0.1:{port}"]).start()
    args = ["server", "status", "--bootstrap-server", broker.bootstrap, "--format", "json"]
    plain = subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["uptime_seconds"] is None  # a remote broker tells no uptime over the Kafka protocol
    metrics = [*args, "--metrics-url", f"http://127.0.0.1:{port}/metrics"]
    with socket.create_connection(("127.0.0.1", broker.port)):  # a client's connection, open while status runs
        assert wait_for(lambda: sample(get(port, "/metrics")[1], "kafka_server_socket_server_metrics_connection_count",
                                       'listener="PLAINTEXT",networkProcessor="0"') >= 1)  # fmt: skip
        status = subprocess.run([*mq_command, *metrics], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    assert document["uptime_seconds"] >= 0 and document["connections"] >= 1


def test_taken_port_refuses_the_start(broker_factory: Callable[..., BrokerProcess]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = broker_factory(overrides=[f"metrics.listener=http://127.0.0.1:{port}"])
        with pytest.raises(RuntimeError, match="exited"):
            broker.start()
    lines = [line for line in broker.stderr().splitlines() if "metrics.listener" in line]
    assert len(lines) == 1, broker.stderr()
