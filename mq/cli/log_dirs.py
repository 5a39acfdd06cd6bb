"""``mq log-dirs``: describe the log directories of brokers and the replicas in them (kafka-log-dirs.sh)."""

from __future__ import annotations

import sys

import click

from mq.cli.admin_timeout import run_admin
from mq.cli.common import EXIT_FAILED, EXIT_USAGE, ToolError, admin_options, handle_errors
from mq.client.admin import AsyncAdmin, LogDirDescription
from mq.tools.log_dirs import (
    QUERYING,
    BrokerListError,
    brokers_to_query,
    log_dirs_document,
    parse_broker_list,
    parse_topic_list,
    received_line,
    render_document,
)


@click.command("log-dirs", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (required).")
@click.option("--describe", is_flag=True, help="Describe the log directories of the brokers (required).")
@click.option("--broker-list", default="", metavar="0,1,2", help="Brokers to query (default: every broker).")
@click.option("--topic-list", default="", metavar="T1,T2", help="Topics whose replicas to list (default: all).")
@admin_options()
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def log_dirs(
    bootstrap_server: str | None,
    describe: bool,
    broker_list: str,
    topic_list: str,
    command_config: str | None,
    timeout: float | None,
    verbose: bool,
) -> None:
    """Print each broker's log directories, their errors and the size and lag of every replica in them.

    Exit codes: 0 success, 1 a listed broker does not exist or no answer within --timeout, 2 bad usage.
    """
    if bootstrap_server is None:
        raise ToolError('Missing required argument "[bootstrap-server]"', EXIT_USAGE)
    if not describe:
        raise ToolError('Missing required argument "[describe]"', EXIT_USAGE)
    try:
        wanted = parse_broker_list(broker_list)
    except BrokerListError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    topics = parse_topic_list(topic_list)

    async def query(admin: AsyncAdmin) -> tuple[list[int], dict[int, tuple[LogDirDescription, ...]]]:
        cluster = await admin.describe_cluster()
        brokers = brokers_to_query(wanted, [b.node_id for b in cluster.brokers])
        click.echo(QUERYING)
        return brokers, await admin.describe_log_dir_descriptions(brokers)

    try:
        brokers, descriptions = run_admin(bootstrap_server, command_config, timeout, query)
    except BrokerListError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_FAILED)
    click.echo(received_line(brokers))
    click.echo(render_document(log_dirs_document(descriptions, topics)))
