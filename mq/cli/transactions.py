"""``mq transactions``: list, describe, find and abort transactions, with Kafka's kafka-transactions flags and
output tables."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from mq.cli.common import (
    EXIT_FAILED,
    ToolError,
    admin_options,
    admin_settings,
    default_format,
    echo_json,
    format_option,
    handle_errors,
    print_table,
    verbose_option,
)
from mq.tools import transactions as tool
from mq.topic_partition import TopicPartition

F = TypeVar("F", bound=Callable[..., Any])

_SHORT = click.IntRange(-(2**15), 2**15 - 1)
_INT = click.IntRange(-(2**31), 2**31 - 1)


@dataclass(frozen=True, slots=True)
class _Connection:
    bootstrap_server: str
    command_config: str | None
    timeout: float | None


@click.group("transactions", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--bootstrap-server",
    required=True,
    metavar="HOST:PORT[,...]",
    help="Brokers to connect to (comma-separated host:port entries).",
)
@admin_options()
@click.pass_context
def transactions(ctx: click.Context, bootstrap_server: str, command_config: str | None, timeout: float | None) -> None:
    """Analyze the transactional state of producers in the cluster; detect and recover from hanging transactions
    (Kafka's kafka-transactions). --bootstrap-server and --command-config come before the subcommand, as Kafka's
    take them.

    \b
    Output: --format text prints Kafka's tab-separated tables, table a rich table, json one object per row keyed by
    Kafka's column names.

    \b
    Exit codes: 0 success; 1 the operation failed, or arguments Kafka's tool refuses after parsing them (abort
    without --start-offset or --producer-id, find-hanging without --topic or --broker-id, ...), each with Kafka's
    line; 2 bad usage (a missing or malformed option).
    """
    ctx.obj = _Connection(bootstrap_server, command_config, timeout)


def _output_options(fn: F) -> F:
    return format_option()(verbose_option()(fn))


@contextmanager
def _admin(connection: _Connection) -> Iterator[tool.TransactionAdmin]:
    from mq.client.sync import SyncAdmin

    settings = admin_settings(connection.command_config, connection.timeout)
    with SyncAdmin(connection.bootstrap_server, **settings) as admin:
        yield admin


def _run(
    connection: _Connection, action: Callable[[tool.TransactionAdmin], tool.Table], output_format: str | None
) -> None:
    try:
        with _admin(connection) as admin:
            table = action(admin)
    except tool.TransactionsError as exc:
        raise ToolError(str(exc), EXIT_FAILED) from None
    _render(table, output_format or default_format())


def _render(table: tool.Table, output_format: str) -> None:
    if output_format == "json":
        echo_json(table.documents())
    elif output_format == "table":
        print_table(table.headers, table.cells())
    else:
        for line in table.lines():
            click.echo(line)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@transactions.command("list")
@click.option(
    "--duration-filter",
    type=int,
    metavar="MS",
    help="Only transactions running longer than this many ms (a negative value: all); needs brokers on Kafka 3.8+ "
    "(ListTransactions v1).",
)
@_output_options
@click.pass_obj
@handle_errors
def list_command(
    connection: _Connection, duration_filter: int | None, output_format: str | None, verbose: bool
) -> None:
    """List transactions."""
    _run(connection, lambda admin: tool.list_transactions(admin, duration_filter), output_format)


@transactions.command("describe")
@click.option("--transactional-id", required=True, metavar="ID", help="The transactional id.")
@_output_options
@click.pass_obj
@handle_errors
def describe_command(connection: _Connection, transactional_id: str, output_format: str | None, verbose: bool) -> None:
    """Describe the state of an active transactional-id."""
    _run(connection, lambda admin: tool.describe_transaction(admin, transactional_id, _now_ms()), output_format)


@transactions.command("describe-producers")
@click.option("--broker-id", type=_INT, metavar="ID", help="Describe the producer state on this replica's broker.")
@click.option("--topic", required=True, metavar="TOPIC", help="Topic name.")
@click.option("--partition", required=True, type=_INT, metavar="P", help="Partition number.")
@_output_options
@click.pass_obj
@handle_errors
def describe_producers_command(
    connection: _Connection,
    broker_id: int | None,
    topic: str,
    partition: int,
    output_format: str | None,
    verbose: bool,
) -> None:
    """Describe the states of active producers for a topic partition."""
    tp = TopicPartition(topic, partition)
    _run(connection, lambda admin: tool.describe_producers(admin, tp, broker_id), output_format)


@transactions.command("abort")
@click.option("--topic", required=True, metavar="TOPIC", help="Topic name.")
@click.option("--partition", required=True, type=_INT, metavar="P", help="Partition number.")
@click.option(
    "--start-offset",
    type=int,
    metavar="OFFSET",
    help="Brokers on 3.0 and above: the start offset of the transaction to abort (its producer is looked up).",
)
@click.option("--producer-id", type=int, metavar="ID", help="Brokers older than 3.0: the producer id.")
@click.option("--producer-epoch", type=_SHORT, metavar="EPOCH", help="Brokers older than 3.0: the producer epoch.")
@click.option("--coordinator-epoch", type=_INT, metavar="EPOCH", help="Brokers older than 3.0: the coordinator epoch.")
@verbose_option()
@click.pass_obj
@handle_errors
def abort_command(
    connection: _Connection,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
    verbose: bool,
) -> None:
    """Abort a hanging transaction (requires administrative privileges): writes an ABORT marker on the partition.

    Prints nothing when the marker was written.
    """
    tp = TopicPartition(topic, partition)
    try:
        with _admin(connection) as admin:
            spec = tool.abort_spec(admin, tp, start_offset, producer_id, producer_epoch, coordinator_epoch)
            tool.abort(admin, spec)
    except tool.TransactionsError as exc:
        raise ToolError(str(exc), EXIT_FAILED) from None


@transactions.command("find-hanging")
@click.option("--broker-id", type=_INT, metavar="ID", help="Broker id to search for hanging transactions.")
@click.option(
    "--max-transaction-timeout",
    type=_INT,
    default=tool.DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    show_default=True,
    metavar="MINUTES",
    help="Maximum transaction timeout in minutes, to limit the scope of the search.",
)
@click.option("--topic", metavar="TOPIC", help="Topic name to limit the search to (required with --partition).")
@click.option("--partition", type=_INT, metavar="P", help="Partition number.")
@_output_options
@click.pass_obj
@handle_errors
def find_hanging_command(
    connection: _Connection,
    broker_id: int | None,
    max_transaction_timeout: int,
    topic: str | None,
    partition: int | None,
    output_format: str | None,
    verbose: bool,
) -> None:
    """Find hanging transactions: open longer than the maximum transaction timeout, yet unknown to their
    coordinator or not including the partition there."""

    def search(admin: tool.TransactionAdmin) -> tool.Table:
        return tool.find_hanging(admin, _now_ms(), broker_id, topic, partition, max_transaction_timeout)

    _run(connection, search, output_format)
