"""``mq state-change-log-merger``: merge several brokers' state-change logs by time (Kafka's StateChangeLogMerger)."""

from __future__ import annotations

from pathlib import Path

import click

from mq.cli.common import EXIT_USAGE, ToolError, handle_errors, verbose_option
from mq.tools.state_change_merger import (
    DATE_FORMAT,
    DEFAULT_END,
    DEFAULT_START,
    MergeFilter,
    MergerError,
    files_matching,
    merge,
    parse_partitions,
    parse_time,
)


@click.command("state-change-log-merger", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--logs", metavar="FILE1,FILE2,...", help="Comma-separated state change logs to merge.")
@click.option("--logs-regex", metavar="REGEX", help="Regex of the log files to merge, e.g. /tmp/state-change.log*.")
@click.option("--topic", metavar="TOPIC", help="Only the lines of this topic.")
@click.option("--partitions", metavar="0,1,2,...", help="Only the lines of these partitions (needs --topic).")
@click.option(
    "--start-time", default=DEFAULT_START, show_default=True, help=f"The earliest line's timestamp ({DATE_FORMAT})."
)
@click.option(
    "--end-time", default=DEFAULT_END, show_default=True, help=f"The latest line's timestamp ({DATE_FORMAT})."
)
@verbose_option()
@handle_errors
def state_change_log_merger(
    logs: str | None,
    logs_regex: str | None,
    topic: str | None,
    partitions: str | None,
    start_time: str,
    end_time: str,
    verbose: bool,
) -> None:
    """Merge the state-change.log files of several brokers into one history in time order, keeping the lines of a
    topic, its partitions and a time range.

    Exit codes: 0 success, 1 a file could not be read, 2 bad usage.
    """
    if (logs is None) == (logs_regex is None):
        raise ToolError('Provide arguments to exactly one of the two options "logs" or "logs-regex"', EXIT_USAGE)
    if partitions is not None and topic is None:
        raise ToolError('The option "topic" needs to be provided an argument when specifying partition ids', EXIT_USAGE)
    try:
        keep = MergeFilter(
            topic,
            parse_partitions(partitions) if partitions is not None else frozenset(),
            parse_time(start_time, "--start-time"),
            parse_time(end_time, "--end-time"),
        )
        paths = [Path(p) for p in logs.split(",") if p] if logs is not None else files_matching(logs_regex or "")
    except MergerError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    try:
        for line in merge(paths, keep):
            click.echo(line)
    except MergerError as exc:
        raise ToolError(str(exc)) from None
