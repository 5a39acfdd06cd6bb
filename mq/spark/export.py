"""Topics to Parquet, exactly once across restarts: the offsets of every committed chunk travel with the output.

Layout (``CHECKPOINT`` is ``<output>/_mq_export`` unless given; names starting with ``_`` are hidden from Parquet
readers, Spark's and pyarrow's)::

    <output>/<partition dirs>/part-*.parquet     data files of committed chunks
    <output>/_mq_staging/<chunk>-<id>/...        Spark's output for a chunk being written
    CHECKPOINT/commits/<chunk, 20 digits>.json   one manifest per committed chunk

A manifest names its chunk's offset ranges ``{"topic": {"partition": [start, end]}}`` (end exclusive), its staging
directory, its data files relative to it, and the output's layout (directory columns, headers column; every run
must keep the first one's). Publishing it (a temporary file renamed into place) commits the chunk;
the files are moved into the output after that. A run:

1. recovers: files of committed chunks still in staging are moved into place (a kill came after the commit), staging
   directories no manifest names are deleted (a kill came before it), and so are unpublished manifests;
2. plans: per partition of the topics, from the largest end a manifest records (the log start offset for a
   partition never exported) to the high watermark at the start of the run;
3. exports chunks of at most ``max_offsets_per_chunk`` offsets (shared across partitions by their backlog): Spark
   reads the ranges through the ``mq`` source, writes Parquet into a new staging directory, and the chunk is
   committed as above.

Whatever instant a run is killed at, each chunk is either committed (the next run finishes moving its files) or not
(its output is discarded and its ranges read again), so kill -9 and a rerun leave the output of one clean run.
One export at a time may write to an output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mq.spark import register
from mq.spark.arrow_parquet import local_directory, write_ranges
from mq.spark.offsets import OffsetMap, OffsetRange, rate_limit, split_ranges
from mq.spark.options import read_options
from mq.spark.output_fs import HadoopFileSystem, OutputFileSystem, join, publish_text
from mq.spark.parquet_output import with_partition_columns
from mq.topic_partition import TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANIFEST_VERSION = 1
CHECKPOINT_NAME = "_mq_export"
STAGING_NAME = "_mq_staging"
COMMITS_NAME = "commits"
_MANIFEST_SUFFIX = ".json"
_CHUNK_DIGITS = 20

Ranges = dict[TopicPartition, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Manifest:
    """A committed chunk: offsets ``[start, end)`` per partition and the data files it wrote."""

    chunk: int
    staging: str
    """Name of the chunk's directory under ``_mq_staging``."""
    ranges: Ranges
    files: tuple[str, ...]
    """Data files, relative to the staging directory and to the output alike."""
    partition_by: tuple[str, ...] = ()
    include_headers: bool = False

    def to_json(self) -> str:
        ranges: dict[str, dict[str, list[int]]] = {}
        for tp in sorted(self.ranges):
            ranges.setdefault(tp.topic, {})[str(tp.partition)] = list(self.ranges[tp])
        document = {
            "version": MANIFEST_VERSION,
            "chunk": self.chunk,
            "staging": self.staging,
            "ranges": ranges,
            "files": list(self.files),
            "partitionBy": list(self.partition_by),
            "headers": self.include_headers,
        }
        return json.dumps(document, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Manifest:
        try:
            document = json.loads(text)
            if document["version"] != MANIFEST_VERSION:
                raise ValueError(f"unknown version {document['version']}")
            ranges: Ranges = {
                TopicPartition(topic, int(partition)): (int(bounds[0]), int(bounds[1]))
                for topic, partitions in document["ranges"].items()
                for partition, bounds in partitions.items()
            }
            return cls(
                int(document["chunk"]),
                str(document["staging"]),
                ranges,
                tuple(document["files"]),
                tuple(document["partitionBy"]),
                bool(document["headers"]),
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise ExportError(f"the export manifest {where} is unreadable: {exc}") from None


class ExportError(Exception):
    """The export cannot go on: an unreadable manifest, a topic that does not exist, offsets lost to retention."""


def check_layout(manifests: list[Manifest], partition_by: tuple[str, ...], include_headers: bool) -> None:
    """An output keeps the directory columns and the columns of its first chunk: ExportError for a run that differs."""
    if not manifests:
        return
    first = manifests[0]
    if (first.partition_by, first.include_headers) != (partition_by, include_headers):
        columns = ",".join(first.partition_by) or "none"
        headers = "with" if first.include_headers else "without"
        raise ExportError(
            f"the output is partitioned by {columns} and {headers} headers: run again with the same "
            "--partition-by and --include-headers, or export to a new directory"
        )


@dataclass(frozen=True, slots=True)
class Recovery:
    """What the commit log holds after recovery."""

    manifests: list[Manifest]
    moved_files: int
    """Files of committed chunks that an interrupted run had left in staging."""
    discarded: list[str]
    """Staging directories of chunks that were never committed."""

    @property
    def next_chunk(self) -> int:
        return max((m.chunk for m in self.manifests), default=-1) + 1

    def committed_ends(self) -> OffsetMap:
        """Per partition, the end of the last committed range."""
        ends: OffsetMap = {}
        for manifest in self.manifests:
            for tp, (_, end) in manifest.ranges.items():
                ends[tp] = max(ends.get(tp, end), end)
        return ends


class CommitLog:
    """The manifests of an output and the moves that complete a committed chunk."""

    def __init__(self, fs: OutputFileSystem, output: str, checkpoint: str | None = None) -> None:
        self.fs = fs
        self.output = output
        self.commits = join(checkpoint or join(output, CHECKPOINT_NAME), COMMITS_NAME)
        self.staging = join(output, STAGING_NAME)

    def _manifest_path(self, chunk: int) -> str:
        return join(self.commits, f"{chunk:0{_CHUNK_DIGITS}d}{_MANIFEST_SUFFIX}")

    def recover(self) -> Recovery:
        manifests: list[Manifest] = []
        for name, is_dir in sorted(self.fs.list_dir(self.commits)):
            path = join(self.commits, name)
            if name.startswith("."):
                if name.endswith(".tmp"):
                    self.fs.delete(path)  # a manifest whose publication was interrupted: never committed
                continue
            if not is_dir and name.endswith(_MANIFEST_SUFFIX) and name[: -len(_MANIFEST_SUFFIX)].isdigit():
                manifests.append(Manifest.from_json(self.fs.read_text(path), path))
        moved = sum(self._finish(manifest) for manifest in manifests)
        named = {m.staging for m in manifests}
        discarded = [name for name, _ in self.fs.list_dir(self.staging) if name not in named]
        for name in discarded:
            self.fs.delete(join(self.staging, name))
        return Recovery(manifests, moved, sorted(discarded))

    def new_staging(self, chunk: int) -> tuple[str, str]:
        """Name and path of a fresh staging directory for ``chunk``."""
        name = f"{chunk:0{_CHUNK_DIGITS}d}-{uuid.uuid4().hex[:12]}"
        return name, join(self.staging, name)

    def staged_files(self, staging: str) -> tuple[str, ...]:
        """The data files Spark wrote into ``staging`` (not ``_SUCCESS``, checksum or other hidden files)."""
        return tuple(
            f for f in self.fs.list_files(staging) if not any(part.startswith(("_", ".")) for part in f.split("/"))
        )

    def commit(self, manifest: Manifest) -> None:
        """Publish the manifest (the commit point), then move the chunk's files into the output. ExportError when
        the chunk's manifest exists already: another export writes to the same output."""
        self.fs.mkdirs(self.commits)
        path = self._manifest_path(manifest.chunk)
        if self.fs.exists(path):
            raise ExportError(f"chunk {manifest.chunk} is committed already: another export writes to {self.output}")
        publish_text(self.fs, path, manifest.to_json())
        self._finish(manifest)

    def _finish(self, manifest: Manifest) -> int:
        """Move the committed chunk's files still in staging into place; drop its staging directory. Idempotent."""
        staging = join(self.staging, manifest.staging)
        if not self.fs.exists(staging):
            return 0
        moved = 0
        for relative in manifest.files:
            source = join(staging, relative)
            if self.fs.exists(source):
                target = join(self.output, relative)
                self.fs.mkdirs(target.rpartition("/")[0])
                self.fs.rename(source, target)
                moved += 1
        self.fs.delete(staging)
        return moved


def chunk_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int | None
) -> Iterator[Ranges]:
    """Consecutive chunks covering ``[start, end)`` of every partition, each of at most about ``limit`` offsets."""
    position = dict(start)
    while any(position[tp] < end[tp] for tp in end):
        until = dict(end) if limit is None else rate_limit(position, end, limit)
        yield {tp: (position[tp], until[tp]) for tp in sorted(end) if position[tp] < until[tp]}
        position.update(until)


@dataclass(frozen=True, slots=True)
class ExportOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    output: str
    checkpoint: str | None = None
    partition_by: tuple[str, ...] = ("topic", "partition")
    include_headers: bool = False
    max_offsets_per_chunk: int | None = None
    fail_on_data_loss: bool = True
    source_options: Mapping[str, str] = field(default_factory=dict)
    """Further options of the ``mq`` source (``kafka.client.id``, ``minPartitions``, ...)."""
    spark_writer: bool = False
    """Write through Spark's Parquet writer even where the workers could write with pyarrow (``arrow_parquet``)."""


@dataclass(frozen=True, slots=True)
class ExportPlan:
    recovery: Recovery
    start: OffsetMap
    end: OffsetMap
    lost: dict[TopicPartition, tuple[int, int]]
    """Partitions whose committed end is no longer in the log: (committed end, log start offset or high watermark)."""

    @property
    def offsets(self) -> int:
        return sum(self.end[tp] - self.start[tp] for tp in self.end)


@dataclass(frozen=True, slots=True)
class ChunkCommitted:
    manifest: Manifest

    @property
    def offsets(self) -> int:
        return sum(end - start for start, end in self.manifest.ranges.values())


@dataclass(frozen=True, slots=True)
class ExportResult:
    plan: ExportPlan
    chunks: list[Manifest]

    @property
    def offsets(self) -> int:
        return sum(ChunkCommitted(m).offsets for m in self.chunks)


def plan_export(
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    fail_on_data_loss: bool,
) -> tuple[OffsetMap, dict[TopicPartition, tuple[int, int]]]:
    """Start offsets per partition, and the partitions whose committed end left the log (retention deleted offsets
    not yet exported, or the log is shorter than what was exported). ExportError for those with
    ``fail_on_data_loss``; else they restart at the log start offset (or wait for the log to pass the committed end)."""
    start: OffsetMap = {}
    lost: dict[TopicPartition, tuple[int, int]] = {}
    for tp in sorted(latest):
        begin = committed.get(tp, earliest[tp])
        if begin < earliest[tp]:
            lost[tp] = (begin, earliest[tp])
            begin = earliest[tp]
        elif begin > latest[tp]:
            lost[tp] = (begin, latest[tp])
            begin = latest[tp]
        start[tp] = begin
    if lost and fail_on_data_loss:
        tp, (committed_end, now) = next(iter(lost.items()))
        raise ExportError(
            f"{tp}: the output holds offsets up to {committed_end}, but the log now "
            f"{'starts at' if now > committed_end else 'ends at'} {now} (offsets were lost; "
            "--no-fail-on-data-loss goes on from the log)"
        )
    return start, lost


def _source_options(options: ExportOptions, ranges: Ranges) -> dict[str, str]:
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for tp, (start, end) in sorted(ranges.items()):
        assign.setdefault(tp.topic, []).append(tp.partition)
        starting.setdefault(tp.topic, {})[str(tp.partition)] = start
        ending.setdefault(tp.topic, {})[str(tp.partition)] = end
    return {
        **options.source_options,
        "kafka.bootstrap.servers": options.bootstrap_servers,
        "assign": json.dumps(assign),
        "startingOffsets": json.dumps(starting),
        "endingOffsets": json.dumps(ending),
        "includeHeaders": str(options.include_headers).lower(),
        "failOnDataLoss": str(options.fail_on_data_loss).lower(),
    }


def _log_offsets(options: ExportOptions) -> tuple[OffsetMap, OffsetMap]:
    """Log start offsets and high watermarks of every partition of the topics; ExportError for a missing topic."""
    from mq.spark.metadata import ClusterView

    read = read_options(
        {
            **options.source_options,
            "kafka.bootstrap.servers": options.bootstrap_servers,
            "subscribe": ",".join(options.topics),
        },
        streaming=False,
    )
    view = ClusterView(read.client)
    try:
        partitions = view.partitions(read)
        missing = sorted(set(options.topics) - {tp.topic for tp in partitions})
        if missing:
            raise ExportError(f"topic {', '.join(missing)} does not exist")
        return view.earliest(partitions, read.isolation_level), view.latest(partitions, read.isolation_level)
    finally:
        view.close()


def export(
    spark: SparkSession,
    options: ExportOptions,
    on_plan: Callable[[ExportPlan], None] = lambda plan: None,
    on_chunk: Callable[[ChunkCommitted], None] = lambda chunk: None,
) -> ExportResult:
    """Export the topics' offsets not yet in the output, up to the high watermarks at the start of the run."""
    register(spark)
    fs = HadoopFileSystem(spark, options.output)
    output = fs.qualify(options.output)
    checkpoint = fs.qualify(options.checkpoint) if options.checkpoint else None
    log = CommitLog(fs, output, checkpoint)
    recovery = log.recover()
    check_layout(recovery.manifests, options.partition_by, options.include_headers)
    earliest, latest = _log_offsets(options)
    start, lost = plan_export(recovery.committed_ends(), earliest, latest, options.fail_on_data_loss)
    plan = ExportPlan(recovery, start, dict(latest), lost)
    on_plan(plan)
    chunks: list[Manifest] = []
    columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if options.include_headers:
        columns.append("headers")
    with _concurrent_writers(spark):
        for number, ranges in enumerate(
            chunk_ranges(start, latest, options.max_offsets_per_chunk), recovery.next_chunk
        ):
            name, staging = log.new_staging(number)
            source = _source_options(options, ranges)
            directory = None if options.spark_writer else local_directory(spark, staging)
            if directory is not None:
                read = read_options(source, streaming=False)
                pieces = (OffsetRange(tp, first, end) for tp, (first, end) in sorted(ranges.items()))
                tasks = split_ranges(pieces, read.min_partitions, read.max_records_per_partition)
                write_ranges(spark, read, tasks, options.partition_by, directory, name)
            else:
                df = spark.read.format("mq").options(**source).load().select(*columns)
                writer = with_partition_columns(df, options.partition_by).write.mode("errorifexists")
                writer.partitionBy(*options.partition_by).parquet(staging)
            files = log.staged_files(staging)
            manifest = Manifest(number, name, ranges, files, options.partition_by, options.include_headers)
            log.commit(manifest)
            chunks.append(manifest)
            on_chunk(ChunkCommitted(manifest))
    return ExportResult(plan, chunks)


CONCURRENT_WRITERS_KEY = "spark.sql.maxConcurrentOutputFileWriters"
CONCURRENT_WRITERS = "16"
"""Output directories a task may write at once before Spark sorts its rows by the partition columns (its default, 0,
always sorts). A task reads one partition's offset range, so it writes one directory, or one per day with ``date``:
the sort is pure cost (an export wrote 480k rows/s with it, 670k without, same run)."""


@contextmanager
def _concurrent_writers(spark: SparkSession) -> Iterator[None]:
    """``CONCURRENT_WRITERS`` for the export's writes, unless the session sets its own; the setting is put back."""
    before = spark.conf.get(CONCURRENT_WRITERS_KEY)
    if before not in (None, "0"):
        yield
        return
    spark.conf.set(CONCURRENT_WRITERS_KEY, CONCURRENT_WRITERS)
    try:
        yield
    finally:
        spark.conf.set(CONCURRENT_WRITERS_KEY, before or "0")
