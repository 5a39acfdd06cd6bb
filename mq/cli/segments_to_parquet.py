"""``mq segments-to-parquet``: the records of a copied log directory's segment files, written to Parquet by Spark."""

from __future__ import annotations

import click

from mq.cli.common import handle_errors, verbose_option
from mq.cli.spark_jobs import (
    master_option,
    parse_partition_by,
    partition_by_option,
    spark_errors,
    spark_session,
    task_progress,
)

HELP = """Read the segment files of a broker's log directory (a copy: no broker needs to run) and write their records
to Parquet, one Spark task per segment file.

Partition directories are named <topic>-<partition>; in each, the .log files are read (every message format
and codec) and every other file is skipped. Columns: key, value, topic, partition, offset, timestamp, timestampType
(and headers with --include-headers), as the mq data source reads them from a broker; transaction markers are not
records. A segment is read as a broker's recovery reads it: a torn or corrupt entry ends it, and the records before
it are kept; each such segment is reported on stderr. On a cluster (--master), every executor must be able to read
the log directory at the same path.

\b
Exit codes:
  0  the records were written (even if a corrupt tail was reported)
  1  the log directory holds no segment files, or the job failed
  2  bad usage
"""


@click.command("segments-to-parquet", help=HELP)
@click.option(
    "--log-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="REQUIRED: a broker's log directory (a copy).",
)
@click.option("--to", "to", required=True, help="REQUIRED: the Parquet output directory (any path Spark can write).")
@click.option("--topic", "topics", multiple=True, help="Read only this topic (repeatable); all topics by default.")
@partition_by_option("topic,partition")
@click.option("--include-headers", is_flag=True, help="Add the headers column (array of key/value structs).")
@click.option("--overwrite", is_flag=True, help="Replace the output directory if it exists (else it is an error).")
@click.option(
    "--max-message-size",
    type=click.IntRange(min=1),
    default=100 * 1024 * 1024,
    show_default=True,
    help="Largest entry in bytes; a larger size field is taken as corruption and ends the segment there.",
)
@master_option()
@verbose_option()
@handle_errors
def segments_to_parquet(
    log_dir: str,
    to: str,
    topics: tuple[str, ...],
    partition_by: str,
    include_headers: bool,
    overwrite: bool,
    max_message_size: int,
    master: str,
    verbose: bool,
) -> None:
    columns = parse_partition_by(partition_by)
    spark = spark_session(master, "mq segments-to-parquet")
    from mq.spark.segments import segments_to_parquet as run

    try:
        with task_progress(spark, "segments-to-parquet"), spark_errors():
            result = run(
                spark,
                log_dir,
                to,
                topics=topics,
                partition_by=columns,
                include_headers=include_headers,
                max_message_size=max_message_size,
                mode="overwrite" if overwrite else "errorifexists",
            )
    finally:
        spark.stop()
    for outcome in result.damaged:
        click.echo(
            f"Corrupt tail in {outcome.path}: {outcome.error}; "
            f"{outcome.size - outcome.valid_bytes} bytes after position {outcome.valid_bytes} were not read",
            err=True,
        )
    click.echo(f"Wrote {result.records} records from {len(result.segments)} segment files to {to}")
