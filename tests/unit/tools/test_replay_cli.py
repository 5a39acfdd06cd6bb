"""``mq replay-log-producer`` flags: clusters, bounds, producer properties and usage errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mq.cli import replay as cli
from mq.cli.common import ToolError
from mq.tools.replay import Bound, ReplayOptions


def _options(**given: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "broker_list": "src:9092",
        "zookeeper": None,
        "inputtopic": "in",
        "outputtopic": "out",
        "messages": -1,
        "threads": 1,
        "reporting_interval": 5000,
        "sync": False,
        "properties": (),
        "start": "earliest",
        "end": "end",
        "rate": None,
        "target_bootstrap_server": None,
        "state_file": None,
        "resume": False,
        "exactly_once": False,
    }
    options.update(given)
    return options


def test_defaults_copy_the_whole_log_within_one_cluster_idempotently() -> None:
    replay = cli._options(_options())
    assert (replay.source, replay.target) == ("src:9092", "src:9092")
    assert (replay.start, replay.end) == (Bound("earliest"), Bound("end"))
    assert replay.producer == {"acks": -1, "enable_idempotence": True, "linger_ms": 5}
    assert replay.state_file is None and not replay.resume


def test_window_rate_target_and_state_file() -> None:
    replay = cli._options(
        _options(
            start="5",
            end="@1700000000000",
            rate=250.0,
            target_bootstrap_server="dst:9092",
            state_file="s.json",
            resume=True,
            messages=7,
            threads=3,
        )
    )
    assert (replay.source, replay.target) == ("src:9092", "dst:9092")
    assert (replay.start, replay.end) == (Bound("offset", 5), Bound("time", 1_700_000_000_000))
    assert (replay.rate, replay.state_file, replay.resume, replay.messages, replay.threads) == (
        250.0,
        Path("s.json"),
        True,
        7,
        3,
    )


def test_producer_properties_override_the_defaults() -> None:
    replay = cli._options(_options(properties=("linger.ms=50", "compression.type=gzip"), sync=False))
    assert replay.producer == {"acks": -1, "enable_idempotence": True, "linger_ms": 50, "compression": "gzip"}
    assert cli._options(_options(sync=True)).producer["linger_ms"] == 0


def test_acks_one_turns_the_default_idempotence_off() -> None:
    replay = cli._options(_options(properties=("acks=1",)))
    assert replay.producer["acks"] == 1
    assert replay.producer["enable_idempotence"] is False


def test_a_bootstrap_servers_property_names_the_target() -> None:
    replay = cli._options(_options(properties=("bootstrap.servers=other:1",)))
    assert (replay.source, replay.target) == ("src:9092", "other:1")


def test_zookeeper_finds_the_source_and_broker_list_is_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "bootstrap_from_zookeeper", lambda connect: f"from-{connect}")
    replay = cli._options(_options(zookeeper="zk:2181", broker_list="dst:9092"))
    assert (replay.source, replay.target) == ("from-zk:2181", "dst:9092")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"broker_list": None}, "broker-list"),
        ({"broker_list": "nonsense"}, "host:port"),
        ({"target_bootstrap_server": "a:1,b"}, "host:port"),
        ({"zookeeper": "zk:2181", "target_bootstrap_server": "x:1"}, "--target-bootstrap-server"),
        ({"outputtopic": "in"}, "same topic"),
        ({"threads": 0}, "--threads"),
        ({"messages": -2}, "--messages"),
        ({"rate": 0.0}, "--rate"),
        ({"sync": True, "exactly_once": True}, "--sync and --exactly-once"),
        ({"start": "none"}, "--from"),
        ({"end": "yesterday"}, "--to"),
        ({"properties": ("acks",)}, "key=value"),
        ({"properties": ("acks=1", "enable.idempotence=true")}, "acks=all"),
        ({"properties": ("linger.ms=soon",)}, "linger.ms"),
    ],
)
def test_usage_errors(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=message) as caught:
        cli._options(_options(**given))
    assert caught.value.exit_code == 2


def test_same_topic_on_another_cluster_is_allowed() -> None:
    replay = cli._options(_options(outputtopic="in", target_bootstrap_server="dst:9092"))
    assert replay.target == "dst:9092"


def test_the_command_reports_a_usage_error_in_one_line_with_exit_2() -> None:
    result = CliRunner().invoke(
        cli.replay_log_producer,
        ["--broker-list", "b:1", "--inputtopic", "a", "--outputtopic", "b", "--from", "bogus"],
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: invalid --from 'bogus': expected an offset, @<epoch ms>, an ISO-8601 datetime, or earliest"
    ]


def test_the_command_runs_the_replay_and_prints_kafkas_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from mq.tools.replay import PartitionSummary, ReplaySummary

    seen: list[ReplayOptions] = []

    class FakeReplay:
        def __init__(self, options: ReplayOptions, report: Any) -> None:
            seen.append(options)

        async def run(self) -> ReplaySummary:
            partitions = (PartitionSummary(0, 0, 3, 0, 2, 3, 0), PartitionSummary(1, 2, 2, None, None, 0, 0))
            return ReplaySummary("a", "b", 3, 30, 1.5, (3,), partitions, True)

    monkeypatch.setattr(cli, "ReplayLogProducer", FakeReplay)
    args = ["--broker-list", "b:1", "--inputtopic", "a", "--outputtopic", "b", "--format", "text"]
    result = CliRunner().invoke(cli.replay_log_producer, args)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Sent 3 messages",
        "Replayed 3 records (30 bytes) from a to b in 1.50 s (2.0 records/s)",
        "Partition 0: window 0-3, copied offsets 0-2 (3 records), 0 already copied",
        "Partition 1: window 2-2, copied offsets - (0 records), 0 already copied",
    ]
    assert seen[0].input_topic == "a"


def test_a_stopped_replay_prints_its_summary_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from mq.tools.replay import ReplaySummary

    class StoppedReplay:
        def __init__(self, options: ReplayOptions, report: Any) -> None:
            pass

        async def run(self) -> ReplaySummary:
            return ReplaySummary("a", "b", 0, 0, 0.1, (0,), (), True, stopped=True)

    monkeypatch.setattr(cli, "ReplayLogProducer", StoppedReplay)
    args = ["--broker-list", "b:1", "--inputtopic", "a", "--outputtopic", "b", "--format", "json"]
    result = CliRunner().invoke(cli.replay_log_producer, args)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert '"stopped": true' in lines[0]
    assert lines[1] == "Error: stopped before the end of the window; --resume continues from replay-a-b.json"
