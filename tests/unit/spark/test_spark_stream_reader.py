"""The stream reader's offset planning against a fake cluster view: latest offsets, availableNow targets, rate
limits, data loss and group commits; and the writer's schema checks and row conversion."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from mq.spark.offsets import OffsetRange
from mq.spark.options import read_options, write_options
from mq.spark.reader import DataLossError, RangePartition, StreamReader
from mq.spark.source import record_schema
from mq.spark.writer import _runs, check_write_schema
from mq.topic_partition import TopicPartition

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


class FakeView:
    """What the stream reader asks the cluster, answered from dicts the test changes."""

    def __init__(self) -> None:
        self.earliest_offsets: dict[TopicPartition, int] = {T0: 0, T1: 0}
        self.latest_offsets: dict[TopicPartition, int] = {T0: 10, T1: 4}
        self.commits: list[tuple[str, dict[TopicPartition, int]]] = []

    def partitions(self, read: Any) -> list[TopicPartition]:
        return sorted(self.latest_offsets)

    def resolve(
        self, spec: Any, partitions: Iterable[TopicPartition], read: Any, which: str
    ) -> dict[TopicPartition, int]:
        source = self.earliest_offsets if spec.kind == "earliest" else self.latest_offsets
        return {tp: source[tp] for tp in partitions}

    def earliest(self, partitions: Iterable[TopicPartition], isolation: str) -> dict[TopicPartition, int]:
        return {tp: self.earliest_offsets[tp] for tp in partitions}

    def latest(self, partitions: Iterable[TopicPartition], isolation: str) -> dict[TopicPartition, int]:
        return {tp: self.latest_offsets[tp] for tp in partitions}

    def commit_group(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.commits.append((group, dict(offsets)))

    def close(self) -> None:
        pass


def stream_reader(**options: str) -> tuple[StreamReader, FakeView]:
    opts = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "startingOffsets": "earliest", **options}
    reader = StreamReader(read_options(opts, streaming=True), record_schema(False))
    view = FakeView()
    reader._view = view  # type: ignore[assignment]
    return reader, view


def ranges(partitions: Iterable[Any]) -> list[tuple[int, int, int]]:
    return [(p.range.tp.partition, p.range.start, p.range.end) for p in partitions]


def test_batches_run_from_the_initial_offsets_to_the_latest() -> None:
    reader, _ = stream_reader()
    start = reader.initialOffset()
    assert start == {"t": {"0": 0, "1": 0}}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 10, "1": 4}}
    assert ranges(reader.partitions(start, end)) == [(0, 0, 10), (1, 0, 4)]
    assert reader.reportLatestOffset() == end
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new: the same offsets
    assert isinstance(reader.getDefaultReadLimit(), ReadAllAvailable)
    state = pickle.loads(pickle.dumps(reader))
    assert state._view is None and state.options == reader.options


def test_available_now_stops_at_the_offsets_of_its_start_and_respects_the_limit() -> None:
    reader, view = stream_reader(maxOffsetsPerTrigger="7")
    assert reader.getDefaultReadLimit() == ReadMaxRows(7)
    reader.prepareForTriggerAvailableNow()
    view.latest_offsets = {T0: 50, T1: 50}  # arrives after the run started
    start = reader.initialOffset()
    ends = []
    while True:
        end = reader.latestOffset(start, ReadMaxRows(7))
        if end == start:
            break
        ends.append(end)
        start = end
    assert ends == [{"t": {"0": 5, "1": 2}}, {"t": {"0": 10, "1": 4}}]  # 7 offsets shared 10:4, then the rest


def test_new_partitions_start_at_their_earliest_offset_and_a_late_start_is_data_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader, view = stream_reader(failOnDataLoss="false")
    view.latest_offsets[T2] = 9
    view.earliest_offsets[T2] = 3  # retention removed offsets 0..2 before the stream saw the partition
    start, end = {"t": {"0": 2, "1": 4}}, {"t": {"0": 5, "1": 4, "2": 9}}
    with caplog.at_level(logging.WARNING, logger="mq.spark.reader"):
        assert ranges(reader.partitions(start, end)) == [(0, 2, 5), (2, 3, 9)]
    assert "added partition t-2 starts at offset 3 instead of 0" in caplog.text
    strict, strict_view = stream_reader()
    strict_view.latest_offsets[T2] = 9
    strict_view.earliest_offsets[T2] = 3
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        strict.partitions(start, end)


def test_gone_partitions_and_offsets_that_went_back_are_data_loss(caplog: pytest.LogCaptureFixture) -> None:
    reader, _ = stream_reader(failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="mq.spark.reader"):
        assert ranges(reader.partitions({"t": {"0": 8, "1": 4}}, {"t": {"0": 3}})) == []
    assert "partitions t-1 are gone" in caplog.text
    assert "the offset of t-0 went back from 8 to 3" in caplog.text
    strict, _ = stream_reader()
    with pytest.raises(DataLossError, match="went back"):
        strict.partitions({"t": {"0": 8}}, {"t": {"0": 3}})


def test_processed_offsets_are_committed_to_the_group_once() -> None:
    reader, view = stream_reader(commitToGroup="g")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    reader.commit(start)
    reader.latestOffset(end, ReadAllAvailable())  # the last batch completed: its end is the new start
    reader.commit(end)
    assert view.commits == [("g", {T0: 0, T1: 0}), ("g", {T0: 10, T1: 4})]
    plain, plain_view = stream_reader()
    plain.latestOffset(plain.initialOffset(), ReadAllAvailable())
    assert plain_view.commits == []


def test_min_partitions_splits_stream_ranges() -> None:
    reader, _ = stream_reader(minPartitions="4")
    planned = reader.partitions({"t": {"0": 0, "1": 0}}, {"t": {"0": 30, "1": 10}})
    assert ranges(planned) == [(0, 0, 10), (0, 10, 20), (0, 20, 30), (1, 0, 10)]
    assert planned[0] == RangePartition(OffsetRange(T0, 0, 10))


HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_write_schema_rules() -> None:
    servers = {"kafka.bootstrap.servers": "127.0.0.1:1"}
    ok = StructType([StructField("topic", StringType()), StructField("value", BinaryType())])
    check_write_schema(ok, write_options(servers))
    for schema, options, message in [
        (StructType([StructField("value", BinaryType())]), servers, "topic option required"),
        (StructType([StructField("topic", StringType())]), servers, "'value' not found"),
        (StructType([StructField("topic", IntegerType()), StructField("value", BinaryType())]), servers, "topic"),
        (StructType([StructField("value", IntegerType())]), {**servers, "topic": "t"}, "value attribute type"),
        (
            StructType([StructField("value", StringType()), StructField("key", IntegerType())]),
            {**servers, "topic": "t"},
            "key",
        ),
        (
            StructType([StructField("value", StringType()), StructField("partition", StringType())]),
            {**servers, "topic": "t"},
            "partition attribute type must be an int",
        ),
        (
            StructType([StructField("value", StringType()), StructField("headers", StringType())]),
            {**servers, "topic": "t"},
            "headers attribute type",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            check_write_schema(schema, write_options(options))
    check_write_schema(
        StructType([StructField("value", StringType()), StructField("headers", HEADERS)]),
        write_options({**servers, "topic": "t"}),
    )


def test_rows_become_runs_per_topic_and_partition() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": ["a", None, "b", "a"],
            "key": ["k", None, "x", None],
            "value": [b"v", None, b"w", b"u"],
            "headers": [[{"key": "h", "value": b"1"}], None, [], []],
            "partition": [2, None, None, 2],
        }
    )

    def runs(rows: pa.RecordBatch, topic: str | None) -> list[tuple[Any, ...]]:
        return [(r.topic, r.partition, r.keys, r.values, r.headers) for r in _runs(rows, topic)]

    assert runs(batch.slice(0, 1), None) == [("a", 2, [b"k"], [b"v"], [[("h", b"1")]])]
    assert runs(batch, "fixed") == [
        ("fixed", 2, [b"k", None], [b"v", b"u"], [[("h", b"1")], []]),
        ("fixed", None, [None, b"x"], [None, b"w"], [[], []]),
    ]
    with pytest.raises(ValueError, match="null topic"):
        runs(batch, None)
    assert runs(batch.slice(2, 2), None) == [("b", None, [b"x"], [b"w"], None), ("a", 2, [None], [b"u"], None)]
    only_value = pa.RecordBatch.from_pydict({"value": ["text"]})
    assert runs(only_value, "t") == [("t", None, [None], [b"text"], None)]
