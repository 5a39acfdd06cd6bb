"""Raw segment files of a copied log directory as a Spark data source (``mq-segments``), and the job that writes
them to Parquet.

The source plans one input partition, hence one Spark task, per ``.log`` file; each task reads its file with
``segment_reader.read_segment`` and sends Arrow batches. Options: ``path`` (the log directory, required), ``topics``
(comma-separated; all topics when absent), ``includeHeaders`` (true/false), ``maxMessageSize`` (bytes).

How each segment ended (read to the end, or stopped at a corrupt or torn entry) comes back to the driver through an
accumulator bound to the source class that ``segments_to_parquet`` registers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mq.spark.parquet_output import with_partition_columns
from mq.spark.segment_reader import (
    DEFAULT_MAX_MESSAGE_SIZE,
    SegmentFile,
    SegmentOutcome,
    find_segments,
    read_segment,
    spark_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_NAME = "mq-segments"

Outcomes = dict[str, SegmentOutcome]


class OutcomesParam(AccumulatorParam[Outcomes]):
    """Outcomes keyed by segment path: a retried task replaces its earlier attempt's outcome."""

    def zero(self, value: Outcomes) -> Outcomes:
        return {}

    def addInPlace(self, value1: Outcomes, value2: Outcomes) -> Outcomes:
        value1.update(value2)
        return value1


@dataclass(frozen=True, slots=True)
class SegmentOptions:
    log_dir: str
    topics: tuple[str, ...]
    include_headers: bool
    max_message_size: int

    @classmethod
    def parse(cls, options: Any) -> SegmentOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        log_dir = opts.get("path", "")
        if not log_dir:
            raise ValueError(f"the {SOURCE_NAME} source needs a path: the log directory")
        headers = opts.get("includeheaders", "false").strip().lower()
        if headers not in ("true", "false"):
            raise ValueError(f"option includeHeaders must be true or false, not {headers!r}")
        try:
            max_message_size = int(opts.get("maxmessagesize", DEFAULT_MAX_MESSAGE_SIZE))
        except ValueError:
            raise ValueError(f"option maxMessageSize must be an integer, not {opts['maxmessagesize']!r}") from None
        topics = tuple(t.strip() for t in opts.get("topics", "").split(",") if t.strip())
        return cls(log_dir, topics, headers == "true", max_message_size)


class SegmentPartition(InputPartition):
    def __init__(self, segment: SegmentFile) -> None:
        super().__init__(segment.path)
        self.segment = segment


class SegmentsReader(DataSourceReader):
    """Plans one partition per segment file; ``read`` runs on an executor and reports the file's outcome."""

    def __init__(self, options: SegmentOptions, outcomes: Accumulator[Outcomes] | None) -> None:
        self.options = options
        self.outcomes = outcomes

    def partitions(self) -> Sequence[InputPartition]:
        return [SegmentPartition(s) for s in find_segments(self.options.log_dir, self.options.topics)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SegmentPartition)
        outcomes = self.outcomes

        def report(outcome: SegmentOutcome) -> None:
            if outcomes is not None:
                outcomes.add({outcome.path: outcome})

        yield from read_segment(
            partition.segment,
            report,
            include_headers=self.options.include_headers,
            max_message_size=self.options.max_message_size,
        )


class SegmentsDataSource(DataSource):
    """``spark.read.format("mq-segments").load("/copy/of/kafka-logs")``."""

    outcomes: Accumulator[Outcomes] | None = None
    """Set on the class that ``reporting_source`` makes; None on this one (outcomes are then dropped)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return spark_schema(SegmentOptions.parse(self.options).include_headers)

    def reader(self, schema: Any) -> DataSourceReader:
        return SegmentsReader(SegmentOptions.parse(self.options), self.outcomes)


def reporting_source(outcomes: Accumulator[Outcomes]) -> type[SegmentsDataSource]:
    """A subclass of the source whose readers add each segment's outcome to ``outcomes``. It is made here, not
    importable by name, so Spark ships it (with the accumulator) by value to the planner and the executors."""
    return type("SegmentsDataSource", (SegmentsDataSource,), {"outcomes": outcomes, "__module__": __name__})


@dataclass(frozen=True, slots=True)
class SegmentsResult:
    segments: list[SegmentFile]
    outcomes: list[SegmentOutcome]
    """One per segment read, in the order of ``segments``."""

    @property
    def records(self) -> int:
        return sum(o.records for o in self.outcomes)

    @property
    def damaged(self) -> list[SegmentOutcome]:
        return [o for o in self.outcomes if o.error is not None]


def segments_to_parquet(
    spark: SparkSession,
    log_dir: str,
    to: str,
    *,
    topics: Sequence[str] = (),
    partition_by: tuple[str, ...] = (),
    include_headers: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    mode: str = "errorifexists",
) -> SegmentsResult:
    """Write the records of every segment file under ``log_dir`` to Parquet at ``to``.

    Raises FileNotFoundError when no segment file is found (of ``topics``, when given)."""
    segments = find_segments(log_dir, topics)
    if not segments:
        which = f" of topic {', '.join(topics)}" if topics else ""
        raise FileNotFoundError(f"no segment files{which} under {log_dir}")
    outcomes = spark.sparkContext.accumulator({}, OutcomesParam())
    spark.dataSource.register(reporting_source(outcomes))
    df = (
        spark.read.format(SOURCE_NAME)
        .option("topics", ",".join(topics))
        .option("includeHeaders", str(include_headers).lower())
        .option("maxMessageSize", str(max_message_size))
        .load(log_dir)
    )
    with_partition_columns(df, partition_by).write.mode(mode).partitionBy(*partition_by).parquet(to)
    seen: Outcomes = outcomes.value
    return SegmentsResult(segments, [seen[s.path] for s in segments if s.path in seen])
