"""``mq transactions`` command lines over an in-memory admin: options, output formats, exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mq.cli.main import cli
from mq.client.admin import AbortTransactionSpec, TransactionListing
from mq.topic_partition import TopicPartition as TP
from tests.unit.tools.transaction_fakes import FakeTransactionAdmin, producer

BOOT = ("transactions", "--bootstrap-server", "b:9092")


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeTransactionAdmin:
    fake = FakeTransactionAdmin(
        listings={1: [TransactionListing("tx", 5, "Ongoing")]},
        producers={TP("t", 0): (producer(5, 1000, 42),)},
    )

    def connect(bootstrap: str, **config: Any) -> FakeTransactionAdmin:
        assert bootstrap == "b:9092"
        return fake

    monkeypatch.setattr("mq.client.sync.SyncAdmin", connect)
    return fake


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, [*BOOT, *args], catch_exceptions=False)


def test_list_prints_kafkas_table_and_json(admin: FakeTransactionAdmin) -> None:
    result = run("list", "--format", "text")
    assert result.exit_code == 0, result.output
    assert result.output == (
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"
        "tx             \t1          \t5         \tOngoing         \t\n"
    )
    result = run("list", "--duration-filter", "60000", "--format", "json")
    assert json.loads(result.output) == [
        {"TransactionalId": "tx", "Coordinator": 1, "ProducerId": 5, "TransactionState": "Ongoing"}
    ]
    assert admin.calls[-1] == ("list_transactions", ([], 60000))


def test_describe_producers_passes_the_broker_id(admin: FakeTransactionAdmin) -> None:
    result = run("describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "3", "--format", "text")
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()
    assert header.startswith("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\t")
    assert [cell.rstrip() for cell in row.split("\t")] == ["5", "2", "3", "7", "1000", "42", ""]
    assert admin.calls[-1] == ("describe_producers", ([TP("t", 0)], 3))


def test_abort_prints_nothing_and_writes_the_marker(admin: FakeTransactionAdmin) -> None:
    result = run("abort", "--topic", "t", "--partition", "0", "--start-offset", "42")
    assert (result.exit_code, result.output) == (0, "")
    assert admin.aborted == [AbortTransactionSpec(TP("t", 0), 5, 2, 3)]
    result = run(
        "abort",
        "--topic",
        "t",
        "--partition",
        "0",
        "--producer-id",
        "9",
        "--producer-epoch",
        "1",
        "--coordinator-epoch",
        "-1",
    )
    assert result.exit_code == 0, result.output
    assert admin.aborted[-1] == AbortTransactionSpec(TP("t", 0), 9, 1, 0)


def test_kafkas_refusals_exit_1_with_its_line(admin: FakeTransactionAdmin) -> None:
    result = run("abort", "--topic", "t", "--partition", "0")
    assert result.exit_code == 1
    assert result.output.startswith("Error: The transaction to abort must be identified either with --start-offset")
    result = run("find-hanging")
    assert result.exit_code == 1
    assert "Error: The `find-hanging` command requires either --topic or --broker-id" in result.output
    result = run("describe", "--transactional-id", "gone")
    assert result.exit_code == 1
    assert "Error: Failed to describe transaction state of transactional-id `gone`: " in result.output
    assert not admin.aborted


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("describe",), "Missing option '--transactional-id'"),
        (("describe-producers", "--topic", "t"), "Missing option '--partition'"),
        (("abort", "--topic", "t", "--partition", "x", "--start-offset", "1"), "'x' is not a valid integer"),
        (("abort", "--topic", "t", "--partition", "0", "--producer-id", "1", "--producer-epoch", "40000"), "40000"),
        (("find-hanging", "--topic", "t", "--max-transaction-timeout", "soon"), "'soon' is not a valid integer"),
        (("rollback",), "No such command 'rollback'"),
    ],
)
def test_bad_usage_exits_2(admin: FakeTransactionAdmin, args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert not admin.calls


def test_the_bootstrap_server_is_required() -> None:
    result = CliRunner().invoke(cli, ["transactions", "list"])
    assert result.exit_code == 2
    assert "Missing option '--bootstrap-server'" in result.output
    assert "transactions" in CliRunner().invoke(cli, ["--help"]).output
