"""Reading raw segment files of a Kafka log directory into Arrow record batches, without a broker and without Spark.

A log directory holds one directory per partition, ``<topic>-<partition>``, each with segment files named by their
base offset (``00000000000000000042.log``). ``find_segments`` lists the ``.log`` files (index, time index, snapshot,
checkpoint and any other files are skipped, as are directories that are not partition directories or are marked
for deletion). ``read_segment`` reads one segment as log recovery does: entries are taken from position 0 while each
is whole, within ``max_message_size``, of a known magic, passes its CRC and decodes; the first entry that fails ends
the segment, and the ``SegmentOutcome`` says where and why. Every magic (v0, v1, v2) and codec is read; control
batches (transaction markers) are not data and yield no rows.

Rows have the columns of the ``mq`` source: key, value, topic, partition, offset, timestamp (UTC, microseconds),
timestampType (-1 none, 0 CreateTime, 1 LogAppendTime), and headers (list of key/value structs) when asked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mq.errors import CorruptRecordError, KafkaError
from mq.records import BatchHeader, validate
from mq.records.columnar import HEADERS_TYPE, EntryDecodeError, RecordColumns, concat_columns, decode_entries
from mq.storage.entry_scan import scan_entries
from mq.storage.file_names import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, LOG_SUFFIX, offset_from_file_name
from mq.topic_partition import TopicPartition

DEFAULT_MAX_MESSAGE_SIZE = 100 * 1024 * 1024
"""Largest entry taken as valid; a larger size field is corruption (as a broker's recovery treats it)."""
ROWS_PER_BATCH = 32_768
_READ_CHUNK_BYTES = 1 << 20

ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field("headers", HEADERS_TYPE)
SPARK_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
)
SPARK_HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"


def arrow_schema(include_headers: bool) -> pa.Schema:
    return pa.schema([*ARROW_FIELDS, HEADERS_FIELD] if include_headers else ARROW_FIELDS)


def spark_schema(include_headers: bool) -> str:
    return f"{SPARK_SCHEMA}, {SPARK_HEADERS_COLUMN}" if include_headers else SPARK_SCHEMA


def columns_to_batch(tp: TopicPartition, rows: RecordColumns, schema: pa.Schema) -> pa.RecordBatch:
    """``rows`` of ``tp`` as a batch of ``schema``: the source's columns, timestamps in µs UTC; ``headers`` (cast
    to the schema's list type) exactly when the schema has that column."""
    n = len(rows)
    arrays = [
        rows.key,
        rows.value,
        pa.repeat(pa.scalar(tp.topic, pa.string()), n),
        pa.array(np.full(n, tp.partition, np.int32)),
        rows.offset,
        pc.multiply_checked(rows.timestamp, 1000).cast(schema.field("timestamp").type),
        rows.timestamp_type,
    ]
    if len(schema) > len(arrays):
        if rows.headers is None:
            raise ValueError("the schema has headers but the rows were decoded without them")
        arrays.append(rows.headers.cast(schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One ``.log`` file of partition ``tp``; ``size`` in bytes when it was listed."""

    path: str
    tp: TopicPartition
    base_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class SegmentOutcome:
    """How reading one segment ended: ``valid_bytes`` of ``size`` were read; ``error`` says why reading stopped
    early (None when the whole file was read)."""

    path: str
    size: int
    valid_bytes: int
    records: int
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.valid_bytes == self.size


def partition_of_dir(name: str) -> TopicPartition | None:
    """``orders-3`` -> orders/3; None for anything that is not a live partition directory."""
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
        return None
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def find_segments(log_dir: str | Path, topics: Sequence[str] = ()) -> list[SegmentFile]:
    """The segment files under ``log_dir`` (of ``topics`` only, when given), ordered by partition and base offset.

    Raises FileNotFoundError / NotADirectoryError when ``log_dir`` is not a directory."""
    root = Path(log_dir)
    if not root.is_dir():
        raise NotADirectoryError(f"{log_dir} is not a directory")
    wanted = set(topics)
    segments: list[SegmentFile] = []
    for entry in root.iterdir():
        tp = partition_of_dir(entry.name)
        if tp is None or not entry.is_dir() or (wanted and tp.topic not in wanted):
            continue
        for file in entry.iterdir():
            if not file.name.endswith(LOG_SUFFIX) or not file.is_file():
                continue
            try:
                base_offset = offset_from_file_name(file.name)
            except ValueError:
                continue
            segments.append(SegmentFile(str(file), tp, base_offset, file.stat().st_size))
    segments.sort(key=lambda s: (s.tp, s.base_offset))
    return segments


class _Rows:
    """Decoded rows of one partition, turned into a RecordBatch of the source's columns."""

    def __init__(self, tp: TopicPartition, include_headers: bool) -> None:
        self.tp = tp
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self.parts: list[RecordColumns] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, columns: RecordColumns) -> None:
        self.parts.append(columns)
        self.count += len(columns)

    def batch(self) -> pa.RecordBatch:
        rows = concat_columns(self.parts, self.include_headers)
        self.parts = []
        self.count = 0
        return columns_to_batch(self.tp, rows, self.schema)


def read_segment(
    segment: SegmentFile,
    report: Callable[[SegmentOutcome], None],
    *,
    include_headers: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    rows_per_batch: int = ROWS_PER_BATCH,
) -> Iterator[pa.RecordBatch]:
    """Record batches of the segment's rows in offset order; ``report`` gets the outcome once the file is read.

    Entries are decoded columnar (``mq.records.columnar``) about ``rows_per_batch`` rows at a time. An entry's
    records are all emitted or none: an entry that passes its CRC but does not decode ends the segment before any of
    its rows."""
    rows = _Rows(segment.tp, include_headers)
    pending: list[tuple[bytes, BatchHeader]] = []
    pending_rows = 0
    valid_bytes = 0
    records = 0
    error: str | None = None

    def decode() -> str | None:
        """Move the rows of the pending entries into ``rows``; the error of an entry that does not decode."""
        nonlocal pending_rows, valid_bytes, records
        try:
            decoded, done, failure = decode_entries(pending, include_headers), len(pending), None
        except EntryDecodeError as exc:
            decoded, done, failure = exc.decoded, exc.index, str(exc)
        rows.add(decoded)
        records += len(decoded)
        valid_bytes += sum(header.size for _, header in pending[:done])
        pending.clear()
        pending_rows = 0
        return failure

    with open(segment.path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        try:
            for chunk, _, header in scan_entries(file.fileno(), size, _READ_CHUNK_BYTES, max_message_size):
                validate(chunk, header)
                if header.offset < segment.base_offset:
                    raise CorruptRecordError(
                        f"offset {header.offset} is below the segment's base offset {segment.base_offset}"
                    )
                pending.append((chunk, header))
                pending_rows += max(header.records_count, 1)
                if pending_rows >= rows_per_batch:
                    error = decode()
                    if len(rows) >= rows_per_batch:
                        yield rows.batch()
                    if error is not None:
                        break
        except KafkaError as exc:
            error = str(exc)
        if pending:
            error = decode() or error  # a pending entry comes before the one that stopped the scan
    if len(rows):
        yield rows.batch()
    if error is not None:
        error = f"position {valid_bytes}: {error}"
    elif valid_bytes < size:
        error = f"position {valid_bytes}: a partial entry ({size - valid_bytes} bytes) ends the file"
    report(SegmentOutcome(segment.path, size, valid_bytes, records, error))
