"""``mq broker-api-versions``: the API versions each broker supports and which this client can use
(kafka-broker-api-versions.sh)."""

from __future__ import annotations

import click

from mq.cli.admin_timeout import run_admin
from mq.cli.common import EXIT_FAILED, EXIT_USAGE, ToolError, admin_options, handle_errors
from mq.client.admin import AsyncAdmin
from mq.tools.broker_api_versions import error_line, node_api_versions_lines


@click.command("broker-api-versions", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (required).")
@admin_options()
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def broker_api_versions(
    bootstrap_server: str | None, command_config: str | None, timeout: float, verbose: bool
) -> None:
    """Print, for each broker of the cluster, the versions of every API it supports and the version this tool's
    client would use.

    Exit codes: 0 success, 1 a broker could not be asked or no answer within --timeout, 2 bad usage.
    """
    if bootstrap_server is None:
        raise ToolError('Missing required argument "[bootstrap-server]"', EXIT_USAGE)
    answers = run_admin(bootstrap_server, command_config, timeout, AsyncAdmin.broker_api_versions)
    failed = 0
    for broker, versions in answers.items():
        if isinstance(versions, Exception):
            failed += 1
            click.echo(error_line(broker, versions))
        else:
            for line in node_api_versions_lines(broker, versions):
                click.echo(line)
    if failed:
        raise ToolError(f"{failed} of {len(answers)} brokers could not be asked", EXIT_FAILED)
