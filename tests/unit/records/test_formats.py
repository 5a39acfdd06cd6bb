"""Record formats against the reference byte examples and against an independent implementation (kafka-python)."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch
from records_support import (
    MAGIC_CODECS,
    TS,
    as_tuples,
    expected,
    kafka_python_build,
    kafka_python_read,
    mq_build,
    mq_read,
    sample_records,
)
from vectors import V0_HELLO, V1_HELLO, V2_HELLO

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records import Codec, TimestampType, crc32c, iter_headers, iter_records, parse_header, validate
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.records.legacy import LegacyBatchBuilder
from mq.records.record import ABORT, COMMIT, parse_control_key, parse_end_txn_marker


def test_reference_byte_examples() -> None:
    b0 = LegacyBatchBuilder(0)
    b0.append(TS, None, b"hello")
    assert b0.build() == V0_HELLO
    b1 = LegacyBatchBuilder(1)
    b1.append(TS, None, b"hello")
    assert b1.build() == V1_HELLO
    b2 = RecordBatchBuilder(partition_leader_epoch=0)
    b2.append(TS, None, b"hello")
    assert b2.build() == V2_HELLO
    for data, crc, size in ((V0_HELLO, 2275900082, 31), (V1_HELLO, 3390604020, 39), (V2_HELLO, 2417795805, 73)):
        header = parse_header(data)
        assert header is not None and (header.crc, header.size) == (crc, size)
        validate(data, header)
        [record] = iter_records(data, header)
        assert (record.offset, record.key, record.value, record.headers) == (0, None, b"hello", ())
        assert record.timestamp == (-1 if header.magic == 0 else TS)
        assert record.crc == (None if header.magic == 2 else crc)
        assert record.is_valid and record.attributes == 0 and record.sequence == -1


def test_reference_examples_are_what_kafka_python_writes() -> None:
    hello = sample_records(1)
    hello[0].timestamp, hello[0].key, hello[0].value, hello[0].headers = TS, None, b"hello", []
    assert kafka_python_build(0, Codec.NONE, hello) == V0_HELLO
    assert kafka_python_build(1, Codec.NONE, hello) == V1_HELLO
    assert kafka_python_build(2, Codec.NONE, hello) == V2_HELLO


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_bytes_equal_kafka_python(magic: int) -> None:
    records = sample_records(30)
    assert mq_build(magic, Codec.NONE, records) == kafka_python_build(magic, Codec.NONE, records)


def test_v2_uncompressed_bytes_equal_kafka_python_but_for_the_leader_epoch() -> None:
    records = sample_records(30)
    builder = RecordBatchBuilder(partition_leader_epoch=0)
    for r in records:
        builder.append(r.timestamp, r.key, r.value, r.headers)
    assert builder.build() == kafka_python_build(2, Codec.NONE, records)


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS)
@pytest.mark.parametrize("big", [False, True], ids=["small", "big"])
def test_kafka_python_builds_mq_reads(magic: int, codec: Codec, big: bool) -> None:
    records = sample_records(40, big)
    data = kafka_python_build(magic, codec, records)
    got = mq_read(data)
    assert as_tuples(got) == expected(records, magic)
    assert all(r.is_valid for r in got)
    headers = list(iter_headers(data))
    assert len(headers) == (len(records) if magic < 2 and codec == Codec.NONE else 1)
    assert all(h.codec == codec and h.magic == magic for h in headers)


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS)
@pytest.mark.parametrize("big", [False, True], ids=["small", "big"])
def test_mq_builds_kafka_python_reads(magic: int, codec: Codec, big: bool) -> None:
    records = sample_records(40, big)
    data = mq_build(magic, codec, records, base_offset=10)
    assert kafka_python_read(data) == expected(records, magic, base_offset=10)
    assert as_tuples(mq_read(data)) == expected(records, magic, base_offset=10)


def test_v2_batch_fields() -> None:
    builder = RecordBatchBuilder(
        Codec.LZ4,
        base_offset=5,
        producer_id=9,
        producer_epoch=2,
        base_sequence=2147483646,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        partition_leader_epoch=4,
    )
    for i in range(3):
        builder.append(TS - i, None, b"x")
    data = builder.build()
    header = parse_header(data)
    assert header is not None
    theirs = DefaultRecordBatch(data)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 2, 2147483646)
    assert (theirs.leader_epoch, theirs.timestamp_type, theirs.compression_type) == (4, 1, 3)
    assert (header.offset, header.last_offset, header.records_count) == (5, 7, 3)
    assert (header.first_timestamp, header.max_timestamp) == (TS, TS)
    records = list(iter_records(data, header))
    assert [r.sequence for r in records] == [2147483646, 2147483647, 0]
    assert [r.offset for r in records] == [5, 6, 7]
    assert {r.timestamp for r in records} == {TS}


def test_v2_log_append_time_reports_the_batch_timestamp() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.append(TS, b"k", b"v")
    builder.append(TS + 5, b"k", b"v")
    data = bytearray(builder.build())
    header = parse_header(data)
    assert header is not None
    assert [r.timestamp for r in iter_records(data, header)] == [TS + 5, TS + 5]
    create = RecordBatchBuilder()
    create.append(TS, b"k", b"v")
    create.append(TS - 5, b"k", b"v")
    data = bytearray(create.build())
    header = parse_header(data)
    assert header is not None
    assert [r.timestamp for r in iter_records(data, header)] == [TS, TS - 5]
    assert header.max_timestamp == TS


def test_empty_v2_batch() -> None:
    data = RecordBatchBuilder(base_offset=3).build()
    header = parse_header(data)
    assert header is not None
    validate(data, header)
    assert (header.records_count, header.first_timestamp, header.max_timestamp, header.size) == (0, -1, -1, 61)
    assert list(iter_records(data, header)) == []


@pytest.mark.parametrize("kind", [ABORT, COMMIT])
def test_control_batch(kind: int) -> None:
    data = build_control_batch(kind, producer_id=4, producer_epoch=1, coordinator_epoch=7, base_offset=3, timestamp=TS)
    header = parse_header(data)
    assert header is not None and header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.offset, header.max_timestamp) == (4, 1, 3, TS)
    validate(data, header)
    [record] = iter_records(data, header)
    assert record.key == bytes([0, 0, 0, kind]) and record.value == bytes.fromhex("000000000007")
    assert parse_control_key(record.key) == kind and parse_end_txn_marker(record.value) == 7
    theirs = DefaultRecordBatch(data)
    assert theirs.is_control_batch and theirs.is_transactional


def test_control_key_other_types_and_short_fields() -> None:
    assert parse_control_key(bytes.fromhex("00000005")) == 5
    for bad in (None, b"\x00\x00\x01"):
        with pytest.raises(CorruptRecordError, match="shorter than 4 bytes"):
            parse_control_key(bad)
    with pytest.raises(CorruptRecordError, match="shorter than 6 bytes"):
        parse_end_txn_marker(b"\x00\x00\x00\x07")


def test_mixed_formats_in_one_buffer() -> None:
    records = sample_records(6)
    data = (
        mq_build(0, Codec.NONE, records[:2], base_offset=0)
        + mq_build(1, Codec.GZIP, records[2:4], base_offset=2)
        + mq_build(2, Codec.ZSTD, records[4:], base_offset=4)
    )
    got = mq_read(data)
    assert [r.offset for r in got] == list(range(6))
    assert [r.value for r in got] == [r.value for r in records]
    assert [r.timestamp for r in got] == [-1, -1] + [r.timestamp for r in records[2:]]


def v2_batch(area: bytes, count: int, attributes: int = 0) -> bytes:
    """A v2 batch header with a correct CRC around an arbitrary records area and count."""
    data = bytearray(V2_HELLO[:61]) + area
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">i", data, 57, count)
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return bytes(data)


HELLO_RECORD = V2_HELLO[61:]


@pytest.mark.parametrize(
    ("area", "count", "message"),
    [
        (HELLO_RECORD, 2, "past the end"),
        (HELLO_RECORD * 2, 1, "1 bytes after its 1 records|12 bytes after its 1 records"),
        (HELLO_RECORD, -1, "negative record count"),
        (b"\x00", 1, "has length 0"),
        (b"\x02\x00", 1, "past the end"),
        (HELLO_RECORD[:-1], 1, "has length 11, 10 bytes remain"),
        (bytes.fromhex("18000000010a68656c6c6f0000"), 1, "fields take 11 bytes"),
        (bytes.fromhex("14000000010a68656c6c6f"), 1, "past the end"),
        (bytes.fromhex("16000000010868656c6c6f00"), 1, "has -56 headers"),
        (bytes.fromhex("16000000030a68656c6c6f00"), 1, "invalid field length -2"),
        (bytes.fromhex("100000000101020101"), 1, "null header key"),
        (bytes.fromhex("0c000000010101"), 1, "has -1 headers"),
    ],
    ids=[
        "count-too-high",
        "count-too-low",
        "negative-count",
        "empty-record",
        "attributes-only",
        "truncated-record",
        "record-longer-than-fields",
        "record-shorter-than-fields",
        "value-length-too-short",
        "invalid-length",
        "null-header-key",
        "negative-header-count",
    ],
)
def test_malformed_v2_records_are_corrupt(area: bytes, count: int, message: str) -> None:
    data = v2_batch(area, count)
    header = parse_header(data)
    assert header is not None
    validate(data, header)
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_records(data, header))


def test_v2_batch_of_well_formed_records_built_by_hand() -> None:
    data = v2_batch(HELLO_RECORD * 2, 2)
    header = parse_header(data)
    assert header is not None
    assert [(r.offset, r.value) for r in iter_records(data, header)] == [(0, b"hello"), (0, b"hello")]


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_v2_undefined_codec_ids_are_unsupported(codec_id: int) -> None:
    data = v2_batch(HELLO_RECORD, 1, attributes=codec_id)
    header = parse_header(data)
    assert header is not None
    with pytest.raises(UnsupportedCompressionError, match=f"unknown compression codec {codec_id}"):
        list(iter_records(data, header))


def test_v2_compressed_area_that_does_not_decompress() -> None:
    data = v2_batch(b"not gzip at all", 1, attributes=int(Codec.GZIP))
    header = parse_header(data)
    assert header is not None
    with pytest.raises(CorruptRecordError, match="gzip data does not decompress"):
        list(iter_records(data, header))
