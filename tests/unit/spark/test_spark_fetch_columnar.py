"""The broker reader's columnar rows of fetched data equal the consumer's per-record rows: a batch starting below
the fetch position, control batches, an aborted transaction under read_committed, compressed and legacy batches."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from mq.client.consumer import ConsumerRecord, parse_records, select_entries
from mq.records.batch_header import Codec, TimestampType
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.records.legacy import LegacyBatchBuilder
from mq.records.record import ABORT, COMMIT
from mq.spark.reader import entry_columns
from mq.spark.segment_reader import columns_to_batch
from mq.spark.source import record_schema
from mq.topic_partition import TopicPartition

TP = TopicPartition("t", 3)


def batch(base_offset: int, count: int, codec: Codec = Codec.NONE, producer_id: int = -1, **kw: Any) -> bytes:
    builder = RecordBatchBuilder(codec=codec, base_offset=base_offset, producer_id=producer_id, **kw)
    for i in range(count):
        offset = base_offset + i
        key = None if offset % 3 == 0 else f"k{offset}".encode()
        headers = [("h", b"1"), ("n", None)][: offset % 3]
        builder.append(1_700_000_000_000 + offset, key, b"v" * (offset % 7) + str(offset).encode(), headers)
    return builder.build()


FETCHED = (
    batch(0, 5, Codec.GZIP)
    + batch(5, 3, producer_id=7, is_transactional=True)
    + batch(8, 2, Codec.LZ4, producer_id=8, is_transactional=True)
    + build_control_batch(ABORT, 7, 0, 0, base_offset=10, timestamp=1)
    + batch(11, 4, Codec.ZSTD, timestamp_type=TimestampType.LOG_APPEND_TIME)
    + build_control_batch(COMMIT, 8, 0, 0, base_offset=15, timestamp=1)
    + batch(16, 2, Codec.SNAPPY, producer_id=7, is_transactional=True)
    + batch(18, 3)
)
ABORTED = [(7, 5)]


def row(r: ConsumerRecord, include_headers: bool) -> dict[str, Any]:
    """The source's row of a consumer record, as the per-record reader built it."""
    out = {
        "key": r.key,
        "value": r.value,
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": datetime.fromtimestamp(r.timestamp / 1000, UTC),
        "timestampType": r.timestamp_type,
    }
    if include_headers:
        out["headers"] = [{"key": k, "value": v} for k, v in r.headers]
    return out


@pytest.mark.parametrize("include_headers", [False, True])
@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize(("position", "end"), [(0, 21), (3, 21), (6, 13), (12, 17), (19, 100)])
def test_columnar_rows_equal_the_consumer_records(
    include_headers: bool, read_committed: bool, position: int, end: int
) -> None:
    schema = to_arrow_schema(record_schema(include_headers), timezone="UTC")
    records, next_position = parse_records(TP, FETCHED + batch(21, 2)[:-3], position, ABORTED, read_committed)
    entries = select_entries(TP, FETCHED + batch(21, 2)[:-3], position, ABORTED, read_committed)
    rows = columns_to_batch(TP, entry_columns(entries, end, include_headers), schema).to_pylist()
    assert rows == [row(r, include_headers) for r in records if r.offset < end]
    assert entries.next_position == next_position == 21
    assert rows  # every case keeps some rows


def test_read_committed_skips_the_aborted_transaction_and_the_markers() -> None:
    entries = select_entries(TP, FETCHED, 3, ABORTED, read_committed=True)
    offsets = entry_columns(entries, 100, False).offset.to_pylist()
    assert offsets == [3, 4, 8, 9, *range(11, 15), *range(16, 21)]
    uncommitted = select_entries(TP, FETCHED, 3, ABORTED, read_committed=False)
    assert entry_columns(uncommitted, 100, False).offset.to_pylist() == [
        3,
        4,
        *range(5, 10),
        *range(11, 15),
        16,
        17,
        18,
        19,
        20,
    ]


def legacy(magic: int, base_offset: int, count: int, codec: Codec = Codec.NONE) -> bytes:
    builder = LegacyBatchBuilder(magic, codec, base_offset)
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None if i % 2 else b"k", f"m{base_offset + i}".encode())
    return builder.build()


@pytest.mark.parametrize("position", [0, 2, 5])
def test_legacy_entries_give_the_consumer_records(position: int) -> None:
    data = legacy(1, 0, 4, Codec.GZIP) + legacy(0, 4, 2) + batch(6, 2, Codec.GZIP)
    schema = to_arrow_schema(record_schema(True), timezone="UTC")
    records, _ = parse_records(TP, data, position)
    entries = select_entries(TP, data, position)
    rows = columns_to_batch(TP, entry_columns(entries, 8, True), schema).to_pylist()
    assert [r["offset"] for r in rows] == list(range(position, 8))
    assert rows == [row(r, True) for r in records]


def flipped(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def test_selection_stops_at_a_batch_whose_checksum_does_not_match() -> None:
    first, second, third = batch(0, 5), batch(5, 5), batch(10, 5)
    data = first + flipped(second, len(second) - 2) + third
    entries = select_entries(TP, data, 2)
    assert [h.offset for h in entries.headers] == [0]
    assert entries.corrupt is not None and entries.corrupt.offset == 5
    assert entries.next_position == 5  # the consumer never moves past it on its own
    error = entries.corrupt_error()
    assert "t-3: the record batch at offsets 5-9 is corrupt (stored crc = " in str(error)
    inside = select_entries(TP, data, 7)  # the position inside the corrupt batch
    assert inside.headers == [] and inside.next_position == 7 and inside.corrupt is not None
    unchecked = select_entries(TP, data, 2, check_crcs=False)
    assert [h.offset for h in unchecked.headers] == [0, 5, 10] and unchecked.corrupt is None
