"""``mq perf producer`` / ``mq perf consumer`` flags: property sources, Kafka's spread values, usage errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from mq.cli import main as cli_main
from mq.tools import perf
from mq.tools.perf import ConsumerRun, ProducerRun


def run_cli(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["mq", "perf", *args])
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    return int(exited.value.code or 0)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    runs: list[Any] = []
    monkeypatch.setattr(perf, "run_producer", lambda run, out, warn: runs.append(run))
    monkeypatch.setattr(perf, "run_consumer", lambda run, out, warn: runs.append(run))
    return runs


PRODUCER = ("producer", "--topic", "t", "--num-records", "10", "--throughput", "-1")


def test_producer_props_spread_after_one_flag_win_over_the_config_file(
    monkeypatch: pytest.MonkeyPatch, captured: list[Any], tmp_path: Path
) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("acks=0\nlinger.ms=5\nbootstrap.servers=file:1\n")
    code = run_cli(
        monkeypatch,
        *PRODUCER,
        "--record-size",
        "7",
        "--producer.config",
        str(config),
        "--producer-props",
        "acks=all",
        "batch.size=1000",
        "--client",
        "confluent",
    )
    assert code == 0
    (run,) = captured
    assert isinstance(run, ProducerRun)
    assert dict(run.props) == {"acks": "all", "linger.ms": "5", "batch.size": "1000", "bootstrap.servers": "file:1"}
    assert (run.client, run.throughput, run.num_records) == ("confluent", -1.0, 10)
    assert {len(p) for p in run.payloads} == {7}
    assert all(p.isalpha() and p.isupper() for p in run.payloads)


def test_bootstrap_server_sets_bootstrap_servers(monkeypatch: pytest.MonkeyPatch, captured: list[Any]) -> None:
    argv = [*PRODUCER, "--record-size", "1", "--producer-props", "bootstrap.servers=a:1", "--bootstrap-server", "b:2"]
    assert run_cli(monkeypatch, *argv) == 0
    assert captured[0].props["bootstrap.servers"] == "b:2"
    assert captured[0].client == "mq"


def test_payload_file_is_split_on_the_delimiter(
    monkeypatch: pytest.MonkeyPatch, captured: list[Any], tmp_path: Path
) -> None:
    payloads = tmp_path / "payloads"
    payloads.write_bytes(b"one;two;;three")
    argv = [*PRODUCER, "--payload-file", str(payloads), "--payload-delimiter", ";", "--bootstrap-server", "h:1"]
    assert run_cli(monkeypatch, *argv) == 0
    assert captured[0].payloads == [b"one", b"two", b"three"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*PRODUCER, "--bootstrap-server", "h:1"], "either --record-size or --payload-file"),
        ([*PRODUCER, "--record-size", "1", "--payload-file", "x", "--bootstrap-server", "h:1"], "but not both"),
        ([*PRODUCER, "--record-size", "0", "--bootstrap-server", "h:1"], "--record-size should be greater than zero"),
        ([*PRODUCER, "--record-size", "1", "--producer-props", "acks"], "Invalid property: acks"),
        ([*PRODUCER, "--record-size", "1"], "bootstrap.servers is not set"),
        ([*PRODUCER, "--record-size", "1", "--producer.config", "/nonexistent/p"], "cannot read /nonexistent/p"),
        ([*PRODUCER, "--record-size", "1", "--bogus"], "No such option '--bogus'"),
        (["producer", "--topic", "t", "--record-size", "1"], "Missing option '--num-records'"),
        ([*PRODUCER, "--record-size", "1", "--client", "java", "--bootstrap-server", "h:1"], "'java' is not one of"),
        (["consumer", "--topic", "t", "--messages", "5"], 'Missing required argument "[bootstrap-server]"'),
        (["consumer", "--topic", "t", "--bootstrap-server", "h:1"], "Missing option '--messages'"),
        (
            ["consumer", "--topic", "t", "--messages", "5", "--bootstrap-server", "h:1", "--reporting-interval", "0"],
            "Reporting interval must be greater than 0.",
        ),
    ],
)
def test_bad_usage_prints_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch,
    captured: list[Any],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert run_cli(monkeypatch, *argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("Error: ") and message in err
    assert captured == []


def test_bad_producer_property_value_is_bad_usage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(run: ProducerRun, out: Any, warn: Any) -> None:
        raise ValueError("invalid value 'maybe' for producer property acks")

    monkeypatch.setattr(perf, "run_producer", fail)
    argv = [*PRODUCER, "--record-size", "1", "--producer-props", "acks=maybe", "--bootstrap-server", "h:1"]
    assert run_cli(monkeypatch, *argv) == 2
    assert capsys.readouterr().err == "Error: invalid value 'maybe' for producer property acks\n"


def test_failed_run_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fail(run: ConsumerRun, out: Any, warn: Any) -> None:
        raise perf.PerfError("Broker: Unknown topic or partition")

    monkeypatch.setattr(perf, "run_consumer", fail)
    assert run_cli(monkeypatch, "consumer", "--topic", "t", "--messages", "1", "--bootstrap-server", "h:1") == 1
    assert capsys.readouterr().err == "Error: Broker: Unknown topic or partition\n"


def test_consumer_defaults_and_flags(monkeypatch: pytest.MonkeyPatch, captured: list[Any], tmp_path: Path) -> None:
    assert run_cli(monkeypatch, "consumer", "--topic", "t", "--messages", "9", "--bootstrap-server", "h:1") == 0
    run = captured.pop()
    assert isinstance(run, ConsumerRun)
    assert run.group.startswith("perf-consumer-") and run.group[len("perf-consumer-") :].isdigit()
    assert (run.fetch_size, run.timeout_ms, run.reporting_interval_ms) == (1024 * 1024, 10_000, 5_000)
    assert not (run.detailed or run.hide_header or run.from_latest)
    config = tmp_path / "consumer.properties"
    config.write_text("bootstrap.servers=file:1\nfetch.min.bytes=100\n")
    argv = ["consumer", "--topic", "t", "--messages", "9", "--consumer.config", str(config), "--group", "g"]
    argv += ["--fetch-size", "4096", "--timeout", "50", "--show-detailed-stats", "--reporting-interval", "10"]
    argv += ["--hide-header", "--from-latest", "--client", "confluent"]
    assert run_cli(monkeypatch, *argv) == 0
    run = captured.pop()
    assert dict(run.props) == {"bootstrap.servers": "file:1", "fetch.min.bytes": "100"}
    assert (run.group, run.fetch_size, run.timeout_ms, run.reporting_interval_ms) == ("g", 4096, 50, 10)
    assert run.detailed and run.hide_header and run.from_latest and run.client == "confluent"
