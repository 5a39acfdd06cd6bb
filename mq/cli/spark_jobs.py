"""What the Spark pipeline commands share: ``--master`` and ``--partition-by``, and progress on a terminal.

Progress shows on stderr only when it is a terminal; piped or redirected, the commands print nothing but their
summary line and the problems they met.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mq.cli.common import EXIT_USAGE, ToolError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.progress import Progress

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_MASTER = "local[*]"
_POLL_SECONDS = 0.5


def master_option() -> Callable[[F], F]:
    return click.option(
        "--master",
        default=DEFAULT_MASTER,
        show_default=True,
        help="Spark master URL: local[N], spark://host:port, yarn, k8s://... (mq must be installed on the executors).",
    )


def partition_by_option(default: str) -> Callable[[F], F]:
    return click.option(
        "--partition-by",
        "partition_by",
        default=default,
        show_default=True,
        metavar="COLUMNS",
        help="Comma-separated directory columns of the Parquet output, from topic, partition, date "
        "(UTC day of the record timestamp); 'none' for a flat directory.",
    )


def parse_partition_by(text: str) -> tuple[str, ...]:
    from mq.spark.parquet_output import parse_partition_by as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise ToolError(f"--partition-by: {exc}", EXIT_USAGE) from None


def spark_session(master: str, app_name: str) -> SparkSession:
    """The session of a pipeline command (Parquet timestamps as microseconds); a missing PySpark is an error naming
    the extra to install."""
    try:
        from mq.spark import session
    except ImportError as exc:
        raise ToolError(f"PySpark is not installed ({exc}): pip install 'mq[spark]'") from None
    return session(master, app_name, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"})


@contextmanager
def spark_errors() -> Iterator[None]:
    """A failed Spark job or query becomes one line: the first line of Spark's message."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        raise ToolError(f"Spark: {lines[0]}") from exc


def show_progress() -> bool:
    return sys.stderr.isatty()


def progress_bar(unit: str) -> Progress:
    """A transient bar on stderr: description, bar, ``done/total unit``, elapsed time."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit))
    return Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True), transient=True)


@contextmanager
def task_progress(spark: SparkSession, description: str) -> Iterator[None]:
    """A bar of the finished tasks of the running Spark stages, on stderr while it is a terminal."""
    if not show_progress():
        yield
        return
    progress = progress_bar("tasks")
    task = progress.add_task(description, total=None)
    tracker = spark.sparkContext.statusTracker()
    done = threading.Event()

    def poll() -> None:
        while not done.wait(_POLL_SECONDS):
            infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            stages = [s for s in infos if s is not None]
            if stages:
                total: int = sum(s.numTasks for s in stages)
                completed: int = sum(s.numCompletedTasks for s in stages)
                progress.update(task, total=total, completed=completed)

    poller = threading.Thread(target=poll, name="spark-progress", daemon=True)
    with progress:
        poller.start()
        try:
            yield
        finally:
            done.set()
            poller.join()
