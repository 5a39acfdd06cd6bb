"""``mq export``: topics to Parquet with Spark, exactly once across restarts (see ``mq.spark.export``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from mq.cli.common import EXIT_USAGE, ToolError, handle_errors, verbose_option
from mq.cli.spark_jobs import (
    master_option,
    parse_partition_by,
    partition_by_option,
    progress_bar,
    show_progress,
    spark_errors,
    spark_session,
)

HELP = """Export topics to Parquet with Spark, exactly once across restarts.

Every partition of the topics is read through the mq data source from where the output ends up to the high watermark
at the start of the run, in chunks of at most --max-offsets-per-chunk offsets. The offset ranges of each committed
chunk are kept with the output (in <to>/_mq_export, or --checkpoint), so a run that is stopped or killed at any
point and run again leaves the same rows as one clean run: none twice, none missing. Run it again later to export
what was produced since. Columns: key, value, topic, partition, offset, timestamp, timestampType (and headers with
--include-headers).

\b
Exit codes:
  0  the export is complete up to the high watermarks seen at the start
  1  a topic does not exist, offsets not yet exported were deleted from the log, or the job failed
  2  bad usage
"""


@click.command("export", help=HELP)
@click.option(
    "--bootstrap-server", required=True, metavar="HOST:PORT[,...]", help="REQUIRED: the brokers to read from."
)
@click.option("--topic", "topics", required=True, multiple=True, help="REQUIRED: a topic to export (repeatable).")
@click.option("--to", "to", required=True, help="REQUIRED: the Parquet output directory (any path Spark can write).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(("parquet",)),
    default="parquet",
    show_default=True,
    help="Output file format.",
)
@partition_by_option("topic,partition")
@click.option(
    "--checkpoint",
    default=None,
    metavar="DIR",
    help="Where the committed offset ranges are kept (default: <to>/_mq_export, so they travel with the output).",
)
@click.option(
    "--max-offsets-per-chunk",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Offsets read and committed at a time, shared across partitions; a restart repeats at most one chunk.",
)
@click.option("--include-headers", is_flag=True, help="Add the headers column (array of key/value structs).")
@click.option(
    "--fail-on-data-loss/--no-fail-on-data-loss",
    default=True,
    show_default=True,
    help="Fail when offsets not yet exported are no longer in the log (deleted by retention); else go on from the log.",
)
@click.option(
    "--spark-writer",
    is_flag=True,
    help="Write with Spark's Parquet writer even where the tasks write with pyarrow (a local master, a local output).",
)
@master_option()
@verbose_option()
@handle_errors
def export(
    bootstrap_server: str,
    topics: tuple[str, ...],
    to: str,
    output_format: str,
    partition_by: str,
    checkpoint: str | None,
    max_offsets_per_chunk: int,
    include_headers: bool,
    fail_on_data_loss: bool,
    spark_writer: bool,
    master: str,
    verbose: bool,
) -> None:
    from mq.spark.export import ExportError, ExportOptions
    from mq.spark.export import export as run

    options = ExportOptions(
        bootstrap_servers=bootstrap_server,
        topics=tuple(dict.fromkeys(topics)),
        output=to,
        checkpoint=checkpoint,
        partition_by=parse_partition_by(partition_by),
        include_headers=include_headers,
        max_offsets_per_chunk=max_offsets_per_chunk,
        fail_on_data_loss=fail_on_data_loss,
        spark_writer=spark_writer,
    )
    if not to.strip():
        raise ToolError("--to names no directory", EXIT_USAGE)
    spark = spark_session(master, "mq export")
    try:
        with _progress() as (on_plan, on_chunk), spark_errors():
            result = run(spark, options, on_plan, on_chunk)
    except ExportError as exc:
        raise ToolError(str(exc)) from None
    finally:
        spark.stop()
    plan = result.plan
    for tp, (committed, now) in plan.lost.items():
        click.echo(f"Warning: {tp}: offsets {min(committed, now)} to {max(committed, now)} were lost", err=True)
    if plan.recovery.discarded or plan.recovery.moved_files:
        click.echo(
            f"Recovered an interrupted run: {len(plan.recovery.discarded)} uncommitted chunks discarded, "
            f"{plan.recovery.moved_files} committed files moved into place",
            err=True,
        )
    click.echo(
        f"Exported {result.offsets} offsets of {len(plan.end)} partitions in {len(result.chunks)} chunks to {to}"
    )


@contextmanager
def _progress() -> Iterator[tuple[Callable[..., None], Callable[..., None]]]:
    """Callbacks for the plan and each committed chunk: a bar of offsets on stderr while it is a terminal."""
    if not show_progress():
        yield (lambda plan: None), (lambda chunk: None)
        return
    progress = progress_bar("offsets")
    task = progress.add_task("export", total=None)
    with progress:
        yield (
            lambda plan: progress.update(task, total=plan.offsets),
            lambda chunk: progress.advance(task, chunk.offsets),
        )
