"""Offset ranges written to Parquet by the Python workers themselves, with pyarrow: ``mq export``'s writer when the
session is local and the output on the local file system.

Spark's own Parquet writer takes the source's Arrow batches into the JVM, turns them into rows and encodes those row
by row: on two cores that cost more than the read itself. Here each task reads its range (``read_range``, columnar)
and hands the batches to pyarrow's C++ writer, so no row exists anywhere. The output is laid out as Spark lays it
out: hive-style directories of the partition columns (``topic=orders/partition=0``, ``date=2024-05-01``; those
columns are left out of the files), the session's ``spark.sql.parquet.compression.codec``, the source's columns and
types (timestamps as INT64 microseconds in UTC, which Spark and pyarrow read as timestamps). The files of task ``i``
are named ``part-<i>-<job>-<n>.<codec>.parquet``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql.pandas.types import to_arrow_schema

from mq.spark.offsets import OffsetRange
from mq.spark.options import ReadOptions
from mq.spark.parquet_output import MICROS_PER_DAY
from mq.spark.reader import read_range
from mq.spark.source import record_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CODEC_KEY = "spark.sql.parquet.compression.codec"
CODECS = {
    "none": "none",
    "uncompressed": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "zstd": "zstd",
    "brotli": "brotli",
    "lz4": "lz4",
    "lz4_raw": "lz4",
}
"""Spark's Parquet codec names and pyarrow's for the same codec (others: Spark's writer is used)."""


def local_directory(spark: SparkSession, path: str) -> str | None:
    """The local directory of ``path`` (a qualified ``file:`` path) when the session runs its tasks on this machine
    (a ``local`` master) and its Parquet codec is one pyarrow writes; else None (Spark's writer is used)."""
    parsed = urlparse(path)
    master = spark.sparkContext.master or ""
    if parsed.scheme != "file" or not master.startswith("local") or _codec(spark) is None:
        return None
    return parsed.path


def _codec(spark: SparkSession) -> str | None:
    """pyarrow's name of the session's Parquet codec; None when pyarrow does not write it."""
    return CODECS.get(str(spark.conf.get(CODEC_KEY, "snappy")).lower())


def write_ranges(
    spark: SparkSession,
    read: ReadOptions,
    ranges: list[OffsetRange],
    partition_by: tuple[str, ...],
    directory: str,
    job: str,
) -> None:
    """Write the records of ``ranges`` (one task each) under ``directory`` (``local_directory``)."""
    codec = _codec(spark)
    if codec is None:
        raise ValueError(f"pyarrow does not write the session's {CODEC_KEY}")
    if not ranges:
        return
    tasks = spark.sparkContext.parallelize(list(enumerate(ranges)), len(ranges))
    tasks.mapPartitions(lambda items: _write_task(items, read, partition_by, directory, codec, job)).collect()


def _write_task(
    items: Iterable[tuple[int, OffsetRange]],
    read: ReadOptions,
    partition_by: tuple[str, ...],
    directory: str,
    codec: str,
    job: str,
) -> Iterator[int]:
    """In a worker: write each range's records; yields each range's index once it is written."""
    source_schema = to_arrow_schema(record_schema(read.include_headers), timezone="UTC")
    dated = "date" in partition_by
    schema = source_schema.append(pa.field("date", pa.date32())) if dated else source_schema
    partitioning = ds.partitioning(pa.schema([schema.field(name) for name in partition_by]), flavor="hive")
    file_format = ds.ParquetFileFormat()
    for index, offsets in items:
        batches = read_range(read, offsets, source_schema)
        ds.write_dataset(
            (with_date(batch) for batch in batches) if dated else batches,
            directory,
            schema=schema,
            format=file_format,
            file_options=file_format.make_write_options(compression=codec),
            partitioning=partitioning if partition_by else None,
            basename_template=f"part-{index:05d}-{job}-{{i}}.{codec}.parquet",
            existing_data_behavior="overwrite_or_ignore",
            use_threads=False,
        )
        yield index


def with_date(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with the ``date`` column: the UTC day of each record's timestamp (floored, as Spark's
    ``date_from_unix_date(floor(unix_micros / day))``)."""
    micros = batch.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
    days = pa.array(np.floor_divide(micros, MICROS_PER_DAY).astype(np.int32)).cast(pa.date32())
    return batch.append_column("date", days)
