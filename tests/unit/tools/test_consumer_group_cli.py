"""``mq consumer-groups`` and ``mq consumer-offset-checker`` command lines over an in-memory group admin."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mq.cli.main import cli
from mq.client.admin import AsyncAdmin, ClusterDescription
from mq.client.cluster import BrokerMetadata
from mq.tools import consumer_groups as tool
from mq.tools import offset_checker
from mq.topic_partition import TopicPartition as TP
from tests.unit.tools.group_fakes import FakeGroupAdmin, group, member

T0, T1 = TP("t", 0), TP("t", 1)


class FakeSync:
    def __init__(self, bootstrap: str, **config: Any) -> None:
        self.bootstrap = bootstrap

    def __enter__(self) -> FakeSync:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, method: Callable[..., Any], *args: Any) -> Any:
        assert method is AsyncAdmin.describe_cluster
        brokers = (BrokerMetadata(2, "h2", 9093, None), BrokerMetadata(1, "h1", 9092, None))
        return ClusterDescription("c", 1, brokers)


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeGroupAdmin:
    fake = FakeGroupAdmin(
        groups={
            "active": group("active", "Stable", member("c-1", T0, host="/h", client_id="c")),
            "idle": group("idle", "Empty"),
        },
        committed={"active": {T0: 3, T1: 1}, "idle": {T0: 2}},
        ends={T0: 5, T1: 4},
    )
    monkeypatch.setattr("mq.client.sync.SyncAdmin", FakeSync)
    monkeypatch.setattr(tool, "ClientGroupAdmin", lambda sync, isolation_level="read_uncommitted": fake)
    return fake


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


BOOT = ("--bootstrap-server", "b:9092")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("consumer-groups", *BOOT), "Command must include exactly one action"),
        (("consumer-groups", *BOOT, "--list", "--describe"), "Command must include exactly one action"),
        (("consumer-groups", "--list"), 'Missing required argument "[bootstrap-server]"'),
        (("consumer-groups", *BOOT, "--describe"), "Option [describe] takes one of these options"),
        (("consumer-groups", *BOOT, "--reset-offsets", "--group", "g", "--all-topics"), "requires one of the"),
        (("consumer-groups", *BOOT, "--reset-offsets", "--group", "g", "--to-earliest"), "One of the reset scopes"),
        (
            (
                "consumer-groups",
                *BOOT,
                "--reset-offsets",
                "--group",
                "g",
                "--to-earliest",
                "--to-latest",
                "--all-topics",
            ),
            "requires one of the",
        ),
        (
            (
                "consumer-groups",
                *BOOT,
                "--reset-offsets",
                "--group",
                "g",
                "--to-earliest",
                "--all-topics",
                "--dry-run",
                "--execute",
            ),
            "can't be used with",
        ),
        (("consumer-groups", *BOOT, "--list", "--state", "nope"), "Invalid state list 'nope'"),
        (("consumer-offset-checker", "--group", "g"), "Only one of --bootstrap-server or --zookeeper"),
    ],
)
def test_usage_errors_exit_2(admin: FakeGroupAdmin, args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_list_and_list_with_states(admin: FakeGroupAdmin) -> None:
    assert run("consumer-groups", *BOOT, "--list", "--format", "text").output == "active\nidle\n"
    result = run("consumer-groups", *BOOT, "--list", "--state", "Empty", "--format", "text")
    assert result.output == "GROUP           STATE\nidle            Empty\n"
    result = run("consumer-groups", *BOOT, "--list", "--state", "--format", "json")
    assert json.loads(result.stdout) == [
        {"group": "active", "state": "Stable", "type": "Classic"},
        {"group": "idle", "state": "Empty", "type": "Classic"},
    ]


def test_list_with_types_is_kafkas_group_type_table(admin: FakeGroupAdmin) -> None:
    admin.types["active"] = "consumer"
    result = run("consumer-groups", *BOOT, "--list", "--type", "--format", "text")
    assert result.output.splitlines() == [
        f"{'GROUP':<25} {'TYPE':<20}",
        f"{'active':<25} {'Consumer':<20}",
        f"{'idle':<25} {'Classic':<20}",
    ]
    result = run("consumer-groups", *BOOT, "--list", "--type", "CONSUMER", "--state", "--format", "text")
    assert result.output.splitlines() == [
        f"{'GROUP':<25} {'TYPE':<20} {'STATE':<20}",
        f"{'active':<25} {'Consumer':<20} {'Stable':<20}",
    ]
    result = run("consumer-groups", *BOOT, "--list", "--type", "share-ish")
    assert result.exit_code == 2
    assert "Invalid types list 'share-ish'. Valid types are: Consumer, Classic" in result.output
    result = run("consumer-groups", *BOOT, "--describe", "--group", "idle", "--type")
    assert result.exit_code == 2 and "Option [type] needs [list]" in result.output


def test_describe_text_is_kafkas_and_missing_group_fails(admin: FakeGroupAdmin) -> None:
    result = run("consumer-groups", *BOOT, "--describe", "--group", "idle", "--format", "text")
    assert result.exit_code == 0
    assert result.stderr == "\nConsumer group 'idle' has no active members.\n"
    assert (
        "idle            t               0          2               5               3               -" in result.output
    )
    result = run("consumer-groups", *BOOT, "--describe", "--group", "nope", "--format", "text")
    assert result.exit_code == 1
    assert result.stderr == "\nError: Consumer group 'nope' does not exist.\n" and result.stdout == ""


def test_describe_json_carries_lag_seconds(admin: FakeGroupAdmin) -> None:
    admin.timestamps[(T0, 3)] = 0
    result = run("consumer-groups", *BOOT, "--describe", "--all-groups", "--format", "json")
    assert result.stderr == "Consumer group 'idle' has no active members.\n"
    document = json.loads(result.stdout)
    assert [d["group"] for d in document] == ["active", "idle"]
    first = document[0]["rows"][0]
    assert (first["current_offset"], first["lag"], first["consumer_id"]) == (3, 2, "c-1")
    assert first["lag_seconds"] > 0


def test_describe_members_and_state(admin: FakeGroupAdmin) -> None:
    result = run(
        "consumer-groups", *BOOT, "--describe", "--group", "active", "--members", "--verbose", "--format", "text"
    )
    assert result.output.splitlines()[-1].endswith("1               t(0)")
    result = run("consumer-groups", *BOOT, "--describe", "--group", "active", "--state", "--format", "text")
    assert "broker1:9092 (1)" in result.output.splitlines()[-1]


def test_reset_dry_run_execute_export_and_active_group(admin: FakeGroupAdmin, tmp_path: Path) -> None:
    result = run("consumer-groups", *BOOT, "--reset-offsets", "--group", "idle", "--topic", "t", "--to-earliest")
    assert result.exit_code == 0
    assert "WARN: No action will be performed as the --execute option is missing." in result.output
    assert f"{'idle':<30} {'t':<30} {'1':<10} {'0':<15}" in result.output
    assert admin.altered == []
    result = run(
        "consumer-groups",
        *BOOT,
        "--reset-offsets",
        "--group",
        "idle",
        "--topic",
        "t:1",
        "--to-offset",
        "9",
        "--execute",
        "--export",
    )
    assert result.exit_code == 0
    assert "t,1,4\n\n" in result.output
    assert (
        "New offset (9) is higher than latest offset for topic partition t-1. Value will be set to 4" in result.output
    )
    assert admin.altered == [("idle", {T1: 4})]
    plan = tmp_path / "plan.csv"
    plan.write_text("t,0,1\n")
    result = run("consumer-groups", *BOOT, "--reset-offsets", "--group", "idle", "--from-file", str(plan), "--execute")
    assert result.exit_code == 0 and admin.altered[-1] == ("idle", {T0: 1})
    result = run(
        "consumer-groups", *BOOT, "--reset-offsets", "--group", "active", "--all-topics", "--to-latest", "--execute"
    )
    assert result.exit_code == 1
    assert (
        "Error: Assignments can only be reset if the group 'active' is inactive, but the current state is Stable."
        in result.output
    )


def test_delete(admin: FakeGroupAdmin) -> None:
    result = run("consumer-groups", *BOOT, "--delete", "--group", "idle")
    assert result.exit_code == 0
    assert "Deletion of requested consumer groups ('idle') was successful." in result.output


def test_offset_checker_lines_and_broker_info(admin: FakeGroupAdmin) -> None:
    result = run("consumer-offset-checker", "--group", "active", *BOOT, "--broker-info", "--format", "text")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Group           Topic                          Pid Offset          logSize         Lag             Owner",
        "active          t                              0   3               5               2               c-1",
        "active          t                              1   1               4               3               none",
        "BROKER INFO",
        "1 -> h1:9092",
        "2 -> h2:9093",
    ]


def test_offset_checker_unknown_offsets_and_extra_columns(admin: FakeGroupAdmin) -> None:
    description = admin.groups["idle"]
    report = offset_checker.check(admin, description, offset_checker.parse_topics("t"))
    assert [line.split() for line in offset_checker.lines(report)[1:]] == [
        ["idle", "t", "0", "2", "5", "3", "none"],
        ["idle", "t", "1", "unknown", "4", "unknown", "none"],
    ]
    admin.timestamps[(T0, 2)] = 1000
    report = tool.with_lag_seconds(admin, report, now_ms=3000)
    assert offset_checker.lines(report, extra=True)[1].split()[-1] == "2.000"
    assert offset_checker.check(admin, admin.groups["idle"], []).rows == []
