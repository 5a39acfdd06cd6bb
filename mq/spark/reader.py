"""Batch and stream readers of the ``mq`` data source.

The driver plans one input partition per topic-partition offset range ``[start, end)`` (more when
``minPartitions`` asks); each executor task opens its own consumer, fetches exactly its range and yields Arrow
record batches in the declared schema. Stream offsets are ``{"topic": {"partition": next offset}}``.

Data loss (records a range should hold that the broker no longer has: retention, a deleted topic or partition, a
log truncated below the planned end) fails the query with ``failOnDataLoss=true`` and is skipped with a warning
otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from mq.client.consumer import AsyncConsumer, FetchedEntries
from mq.errors import CorruptRecordError, KafkaError, OffsetOutOfRangeError
from mq.records.columnar import RecordColumns, decode_entries
from mq.spark.metadata import ClusterView
from mq.spark.offsets import OffsetMap, OffsetRange, offsets_from_json, offsets_to_json, rate_limit, split_ranges
from mq.spark.options import ReadOptions
from mq.spark.segment_reader import columns_to_batch
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

MAX_RECORDS_PER_BATCH = 20_000
"""Records per Arrow batch a task yields (at most: one fetch's worth)."""


class DataLossError(RuntimeError):
    """Records a read should cover are gone, and ``failOnDataLoss`` is true."""


def report_data_loss(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost: aged out by retention, or the topic or partition deleted "
            'before it was read. Set the source option "failOnDataLoss" to "false" to skip such data.'
        )
    log.warning("%s. Some data may have been lost; skipping it (failOnDataLoss=false).", message)


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One task's work: offsets ``[start, end)`` of one partition."""

    range: OffsetRange


class _Reading:
    """What readers share: options, schema, the driver's lazily opened ``ClusterView``, and the executor's read."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._view: ClusterView | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_view"] = None  # a live connection stays where it was opened
        return state

    @property
    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(self.options.client)
        return self._view

    def close_view(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None

    def plan(self, start: OffsetMap, end: OffsetMap) -> list[RangePartition]:
        ranges = (OffsetRange(tp, start[tp], end[tp]) for tp in sorted(end) if tp in start)
        return [
            RangePartition(r)
            for r in split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return  # Spark reads one placeholder partition when a plan has none: nothing to read
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        yield from read_range(self.options, partition.range, arrow_schema)


class BatchReader(_Reading, DataSourceReader):
    """``spark.read.format("mq")``: offsets fixed when the query is planned."""

    def partitions(self) -> Sequence[InputPartition]:
        try:
            tps = self.view.partitions(self.options)
            start = self.view.resolve(self.options.starting, tps, self.options, "starting")
            end = self.view.resolve(self.options.ending, tps, self.options, "ending")
        finally:
            self.close_view()
        for tp in tps:
            if end[tp] < start[tp]:
                raise ValueError(f"the ending offset {end[tp]} of {tp} is before its starting offset {start[tp]}")
        return self.plan(start, end)


class StreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("mq")``: micro-batches between JSON offsets; with ``commitToGroup`` the processed
    offsets are committed to that consumer group."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        super().__init__(options, schema)
        self._target: OffsetMap | None = None
        self._latest: OffsetMap | None = None
        self._group_offsets: OffsetMap | None = None

    def initialOffset(self) -> dict[str, Any]:
        tps = self.view.partitions(self.options)
        return offsets_to_json(self.view.resolve(self.options.starting, tps, self.options, "starting"))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._fetch_latest()

    def _fetch_latest(self) -> OffsetMap:
        self._latest = self.view.latest(self.view.partitions(self.options), self.options.isolation_level)
        return self._latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: the latest offsets (frozen by availableNow), within ``limit``.

        ``start`` is the end of the last batch Spark completed, so it is committed to the group here too:
        ``commit`` trails by one batch and is never called for the last batch of a run."""
        begin = offsets_from_json(start, "start offsets")
        self._commit_group(begin)
        latest = self._target if self._target is not None else self._fetch_latest()
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            begin = begin | self.view.earliest(new, self.options.isolation_level)
            return offsets_to_json(rate_limit(begin, latest, limit.max_rows))
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start, "start offsets")
        until = offsets_from_json(end, "end offsets")
        fail = self.options.fail_on_data_loss
        new = [tp for tp in until if tp not in begin]
        if new:
            earliest = self.view.earliest(new, self.options.isolation_level)
            for tp, offset in sorted(earliest.items()):
                if offset != 0:
                    report_data_loss(f"added partition {tp} starts at offset {offset} instead of 0", fail)
            begin = begin | earliest
        gone = sorted(str(tp) for tp in begin if tp not in until)
        if gone:
            report_data_loss(f"partitions {', '.join(gone)} are gone", fail)
        for tp in sorted(until):
            if until[tp] < begin[tp]:
                report_data_loss(f"the offset of {tp} went back from {begin[tp]} to {until[tp]}", fail)
                begin[tp] = until[tp]
        return self.plan(begin, until)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(offsets_from_json(end, "end offsets"))

    def _commit_group(self, offsets: OffsetMap) -> None:
        group = self.options.commit_to_group
        if group is None or offsets == self._group_offsets:
            return
        try:
            self.view.commit_group(group, offsets)
        except KafkaError as exc:
            log.warning("could not commit offsets to group %r (tried again after the next batch): %s", group, exc)
            return
        self._group_offsets = dict(offsets)

    def stop(self) -> None:
        self.close_view()


def read_range(options: ReadOptions, offsets: OffsetRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Record batches of offsets ``[start, end)`` of one partition, fetched by a consumer of this task's own.

    Fetched batches are decoded columnar (``mq.records.columnar``), never a Python object per record. Offsets with no
    record (compaction, transaction markers) are passed over; a start below the log start offset or an end above the
    high watermark is data loss."""
    loop = asyncio.new_event_loop()
    consumer = loop.run_until_complete(_open_consumer(options))
    tp, end = offsets.tp, offsets.end
    include_headers = "headers" in schema.names
    try:
        consumer.assign([tp])
        position = offsets.start
        consumer.seek(tp, position)
        deadline = time.monotonic() + options.poll_timeout_ms / 1000
        while position < end:
            try:
                fetched = loop.run_until_complete(consumer.poll_entries(1000))
            except OffsetOutOfRangeError:
                position = _after_out_of_range(loop, consumer, tp, position, end, options.fail_on_data_loss)
                consumer.seek(tp, position)
                continue
            for entries in fetched:
                if entries.headers:
                    batch = columns_to_batch(tp, entry_columns(entries, end, include_headers), schema)
                    for first in range(0, batch.num_rows, MAX_RECORDS_PER_BATCH):
                        yield batch.slice(first, MAX_RECORDS_PER_BATCH)
                if entries.corrupt is not None:
                    consumer.seek(tp, _past_corrupt(entries, end, options.fail_on_data_loss))
            moved = max(position, consumer.known_positions().get(tp, position))
            if moved > position:
                position, deadline = moved, time.monotonic() + options.poll_timeout_ms / 1000
                continue
            highwater = consumer.highwater(tp)
            if highwater is not None and highwater <= position < end:
                report_data_loss(
                    f"{tp} ends at offset {highwater}, before the planned end {end}", options.fail_on_data_loss
                )
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no record of {tp} at offset {position} arrived within {options.poll_timeout_ms} ms"
                )
    finally:
        loop.run_until_complete(consumer.close())
        loop.close()


def entry_columns(entries: FetchedEntries, end: int, include_headers: bool) -> RecordColumns:
    """The rows of fetched ``entries`` with offsets in ``[entries.position, end)`` (offsets ascend in a fetch)."""
    rows = decode_entries([(entries.data, header) for header in entries.headers], include_headers)
    offsets = rows.offset.to_numpy(zero_copy_only=False)
    first, stop = np.searchsorted(offsets, [entries.position, end]).tolist()
    if first == 0 and stop == len(rows):
        return rows
    count = stop - first
    return RecordColumns(
        rows.offset.slice(first, count),
        rows.timestamp.slice(first, count),
        rows.timestamp_type.slice(first, count),
        rows.key.slice(first, count),
        rows.value.slice(first, count),
        None if rows.headers is None else rows.headers.slice(first, count),
    )


async def _open_consumer(options: ReadOptions) -> AsyncConsumer:
    return AsyncConsumer(
        options.client.bootstrap_servers,
        client_id=options.client.client_id,
        auto_offset_reset="none",
        isolation_level=options.isolation_level,
        max_partition_fetch_bytes=options.max_partition_fetch_bytes,
        fetch_max_bytes=options.fetch_max_bytes,
        request_timeout_ms=options.client.request_timeout_ms,
        decode_records=False,
    )


def _past_corrupt(entries: FetchedEntries, end: int, fail: bool) -> int:
    """Where to go on after the corrupt batch of ``entries``: past it when ``failOnDataLoss`` is false (logged with
    the offsets skipped); otherwise the task fails with CorruptRecordError naming the partition and offsets."""
    error = entries.corrupt_error()
    if fail:
        raise CorruptRecordError(f'{error}. Set the source option "failOnDataLoss" to "false" to skip corrupt batches.')
    header = entries.corrupt
    assert header is not None
    first = entries.next_position
    after = max(int(header.next_offset), first + 1)
    log.warning(
        "%s; skipping offsets %d to %d (%d records at most) (failOnDataLoss=false)",
        error,
        first,
        min(after, end) - 1,
        min(after, end) - first,
    )
    return after


def _after_out_of_range(
    loop: asyncio.AbstractEventLoop, consumer: AsyncConsumer, tp: TopicPartition, position: int, end: int, fail: bool
) -> int:
    """Where to go on after the broker said ``position`` is out of range: the log start, when it is above it."""
    consumer.seek_to_beginning(tp)
    earliest = loop.run_until_complete(consumer.position(tp))
    if earliest <= position:
        raise OffsetOutOfRangeError(f"offset {position} of {tp} is out of range, though the log starts at {earliest}")
    report_data_loss(f"offsets {position} to {min(earliest, end) - 1} of {tp} are no longer in the log", fail)
    return earliest
