"""``mq delete-records``: delete the records of partitions below given offsets (kafka-delete-records.sh)."""

from __future__ import annotations

from pathlib import Path

import click

from mq.cli.admin_timeout import run_admin
from mq.cli.common import EXIT_FAILED, EXIT_USAGE, ToolError, admin_options, handle_errors
from mq.tools.delete_records import COMPLETED, EXECUTING, OffsetJsonError, parse_offset_json, render_deleted


@click.command("delete-records", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (required).")
@click.option(
    "--offset-json-file",
    type=click.Path(dir_okay=False),
    help='Offsets per partition (required): {"partitions": [{"topic": T, "partition": P, "offset": O}], '
    '"version": 1}; offset -1 is the high watermark.',
)
@admin_options()
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def delete_records(
    bootstrap_server: str | None,
    offset_json_file: str | None,
    command_config: str | None,
    timeout: float | None,
    verbose: bool,
) -> None:
    """Delete the records of each listed partition below its offset (the log start offset moves up to it).

    Exit codes: 0 every partition done, 1 some partition failed (its line says why) or no answer within --timeout,
    2 bad usage.
    """
    if bootstrap_server is None:
        raise ToolError('Missing required argument "[bootstrap-server]"', EXIT_USAGE)
    if offset_json_file is None:
        raise ToolError('Missing required argument "[offset-json-file]"', EXIT_USAGE)
    try:
        requested = parse_offset_json(Path(offset_json_file).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot read {offset_json_file}: {exc.strerror}", EXIT_USAGE) from None
    except OffsetJsonError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None

    click.echo(EXECUTING)
    results = run_admin(
        bootstrap_server, command_config, timeout, lambda admin: admin.delete_records_each(dict(requested))
    )
    click.echo(COMPLETED)
    lines, failed = render_deleted(requested, results)
    for line in lines:
        click.echo(line)
    if failed:
        raise ToolError(f"{failed} of {len(requested)} partitions failed", EXIT_FAILED)
