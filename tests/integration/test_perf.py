"""``mq perf producer`` and ``mq perf consumer`` against a broker process, with both load generators."""

from __future__ import annotations

import re
import subprocess

import pytest

pytestmark = pytest.mark.slow

PRODUCER_FINAL = re.compile(
    r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg latency, "
    r"\d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)
CONSUMER_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, (\d+\.\d{4}), \d+\.\d{4}, (\d+), "
    r"\d+\.\d{4}, \d+, -?\d+, \d+\.\d{4}, \d+\.\d{4}$"
)
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
    "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
RECORDS = 3000


def mq(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("client", ["mq", "confluent"])
def test_produce_then_consume_prints_kafkas_lines(mq_command: list[str], broker, client: str) -> None:
    topic = f"perf-{client}"
    created = mq(mq_command, "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic)
    assert created.returncode == 0, created.stderr
    produced = mq(
        mq_command,
        *("perf", "producer", "--client", client, "--topic", topic, "--num-records", str(RECORDS)),
        *("--record-size", "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}"),
        "acks=all",
    )
    assert produced.returncode == 0, produced.stderr
    final = PRODUCER_FINAL.match(produced.stdout.splitlines()[-1])
    assert final is not None, produced.stdout
    assert int(final.group(1)) == RECORDS

    consumed = mq(
        mq_command,
        *("perf", "consumer", "--client", client, "--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--messages", str(RECORDS), "--timeout", "20000"),
    )
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()
    assert header == HEADER
    summary = CONSUMER_LINE.match(line)
    assert summary is not None, line
    assert int(summary.group(2)) == RECORDS
    assert summary.group(1) == f"{RECORDS * 100 / (1024 * 1024):.4f}"
