"""mq jmx-tool as a process against an HTTP server in the test that serves a fixed Prometheus scrape."""

from __future__ import annotations

import itertools
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import free_port

pytestmark = pytest.mark.slow

SCRAPE = """\
# HELP kafka_server_brokertopicmetrics_messagesin_total Messages in.
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total 30.0
kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 10.0
kafka_server_brokertopicmetrics_messagesin_total{topic="payments"} 20.0
# TYPE kafka_network_requestmetrics_totaltimems summary
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.50"} 1.5
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"} 12.25
kafka_network_requestmetrics_totaltimems_count{request="Produce"} 7.0
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 0.0
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.25
"""


class Scrape(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/metrics":
            body, status, kind = SCRAPE.encode(), 200, "text/plain; version=0.0.4; charset=utf-8"
        elif self.path == "/late":  # topic "late" appears from the third scrape on
            late = next(self.server.late_scrapes) >= 2  # type: ignore[attr-defined]
            line = 'kafka_server_brokertopicmetrics_messagesin_total{topic="late"} 5.0\n' if late else ""
            body = SCRAPE.replace("# TYPE kafka_network", line + "# TYPE kafka_network").encode()
            status, kind = 200, "text/plain; version=0.0.4; charset=utf-8"
        elif self.path == "/html":
            body, status, kind = b"<html><body>Grafana</body></html>\n", 200, "text/html"
        else:
            body, status, kind = b"not found", 404, "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class ScrapeServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Scrape)
        self.late_scrapes = itertools.count()


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ScrapeServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def jmx_tool(mq_command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mq_command, "jmx-tool", *args], capture_output=True, text=True, timeout=60)


def test_one_time_csv_of_a_wildcard_query(mq_command: list[str], endpoint: str) -> None:
    done = jmx_tool(
        mq_command,
        "--jmx-url",
        f"{endpoint}/metrics",
        "--object-name",
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=*",
        "--one-time",
    )
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header == (
        '"time","kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders:Count",'
        '"kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=payments:Count"'
    )
    time, orders, payments = row.split(",")
    assert time.isdigit() and len(time) == 13
    assert (orders, payments) == ("10", "20")


def test_attributes_date_format_and_properties(mq_command: list[str], endpoint: str) -> None:
    done = jmx_tool(
        mq_command,
        "--jmx-url",
        endpoint,
        "--object-name",
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
        "--object-name",
        "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
        "--attributes",
        "99thPercentile,Count,Value",
        "--date-format",
        "yyyy-MM-dd'T'HH:mm:ss",
        "--report-format",
        "properties",
        "--reporting-interval",
        "-1",
    )
    assert done.returncode == 0, done.stderr
    time, *rest = done.stdout.splitlines()
    assert time.startswith("time=") and time[15] == "T" and len(time) == len("time=2024-01-01T00:00:00")
    assert rest == [
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:99thPercentile=12.25",
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:Count=7",
        "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions:Value=0",
    ]


def test_polls_until_stopped(mq_command: list[str], endpoint: str) -> None:
    args = [
        "--jmx-url",
        endpoint,
        "--object-name",
        "kafka.server:type=BrokerTopicMetrics,*",
        "--reporting-interval",
        "50",
    ]
    with subprocess.Popen([*mq_command, "jmx-tool", *args], stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        process.terminate()
    assert lines[0].startswith('"time","kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders:Count"')
    assert [line.rstrip("\n").split(",")[1:] for line in lines[1:]] == [["10", "20", "30"], ["10", "20", "30"]]
    assert int(lines[1].split(",")[0]) <= int(lines[2].split(",")[0])


def test_wait_retries_until_every_name_matches(mq_command: list[str], endpoint: str) -> None:
    late = "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=late"
    done = jmx_tool(mq_command, "--jmx-url", f"{endpoint}/late", "--object-name", late, "--wait", "--one-time")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f'"time","{late}:Count"'
    assert done.stdout.splitlines()[1].endswith(",5")
    assert done.stderr.splitlines() == ["Could not find all object names, retrying"] * 2


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--object-name", "kafka.server:type=Nothing,name=Here"], 1, "Could not find any objects names matching"),
        (["--jmx-url-path", "/missing"], 1, "HTTP 404"),
        (["--jmx-url-path", "/html"], 1, "is not a Prometheus metrics endpoint"),
        (["--attributes", "OneMinuteRate"], 2, "Not exported by the metrics endpoint: OneMinuteRate"),
        (["--object-name", "no-colon"], 2, "Invalid object name"),
        (["--date-format", "yyyy qq"], 2, "Illegal pattern character 'q'"),
    ],
)
def test_bad_input_is_one_line(mq_command: list[str], endpoint: str, args: list[str], code: int, message: str) -> None:
    url = f"{endpoint}/metrics"
    if args[0] == "--jmx-url-path":
        url, args = endpoint + args[1], args[2:]
    done = jmx_tool(mq_command, "--jmx-url", url, "--one-time", *args)
    assert done.returncode == code
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: ") and message in line


def test_unreachable_url_is_one_line(mq_command: list[str]) -> None:
    done = jmx_tool(mq_command, "--jmx-url", f"http://127.0.0.1:{free_port()}/metrics", "--one-time")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: Could not connect to http://127.0.0.1:") and "refused" in line
