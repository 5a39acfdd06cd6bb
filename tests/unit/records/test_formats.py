"""Record formats against the reference byte examples and against an independent implementation (kafka-python)."""

from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from vectors import TS, V0_HELLO, V1_HELLO, V2_HELLO

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records import iter_records
from mq.records.batch_header import Codec, TimestampType, iter_headers, parse_header, validate
from mq.records.compression import compress, decompress
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.records.legacy import LegacyBatchBuilder, assign_offsets_compressed, encode_message
from mq.records.record import COMMIT, parse_control_key, parse_end_txn_marker

V0, V1, V2 = V0_HELLO, V1_HELLO, V2_HELLO
CODECS = {0: [0, 1, 2, 3], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3, 4]}
CASES = [(magic, codec) for magic, codecs in CODECS.items() for codec in codecs]


def sample_records(
    n: int, big: bool = False
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    records = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else (b"" if i % 5 == 1 else f"välue-{i}-".encode() * (200 if big else 1))
        headers = [] if i % 3 else [("h1", f"{i}".encode()), ("ключ", None)]
        records.append((TS + i * 13, key, value, headers))
    if big:
        records.append((TS, b"rand", os.urandom(70_000), []))
    return records


def test_reference_byte_examples() -> None:
    b0 = LegacyBatchBuilder(0)
    b0.append(TS, None, b"hello")
    assert b0.build() == V0
    b1 = LegacyBatchBuilder(1)
    b1.append(TS, None, b"hello")
    assert b1.build() == V1
    b2 = RecordBatchBuilder(partition_leader_epoch=0)
    b2.append(TS, None, b"hello")
    assert b2.build() == V2
    for data, crc in ((V0, 2275900082), (V1, 3390604020), (V2, 2417795805)):
        header = parse_header(data)
        assert header is not None and header.crc == crc
        validate(data, header)
        [record] = iter_records(data, header)
        assert (record.offset, record.key, record.value) == (0, None, b"hello")
        assert record.timestamp == (-1 if header.magic == 0 else TS)


@pytest.mark.parametrize(("magic", "codec"), CASES)
@pytest.mark.parametrize("big", [False, True])
def test_kafka_python_builds_mq_reads(magic: int, codec: int, big: bool) -> None:
    records = sample_records(40, big)
    if magic == 2:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 26,
        )
        for i, (ts, key, value, headers) in enumerate(records):
            builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    else:
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 26)
        for i, (ts, key, value, _) in enumerate(records):
            builder.append(i, timestamp=ts if magic else None, key=key, value=value)
    data = bytes(builder.build())
    got = [r for h in iter_headers(data) for r in iter_records(data, h)]
    for h in iter_headers(data):
        validate(data, h)
    assert [r.offset for r in got] == list(range(len(records)))
    for r, (ts, key, value, headers) in zip(got, records, strict=True):
        assert (r.key, r.value) == (key, value)
        assert r.timestamp == (ts if magic else -1)
        if magic == 2:
            assert list(r.headers) == headers
        else:
            assert r.is_valid


@pytest.mark.parametrize(("magic", "codec"), CASES)
@pytest.mark.parametrize("big", [False, True])
def test_mq_builds_kafka_python_reads(magic: int, codec: int, big: bool) -> None:
    records = sample_records(40, big)
    if magic == 2:
        builder: RecordBatchBuilder | LegacyBatchBuilder = RecordBatchBuilder(Codec(codec), base_offset=10)
        for ts, key, value, headers in records:
            builder.append(ts, key, value, headers)
    else:
        builder = LegacyBatchBuilder(magic, Codec(codec), base_offset=10)
        for ts, key, value, _ in records:
            builder.append(ts, key, value)
    data = builder.build()
    theirs = MemoryRecords(data)
    got = []
    while theirs.has_next():
        batch = theirs.next_batch()
        assert batch.validate_crc()
        got.extend(batch)
    assert [r.offset for r in got] == list(range(10, 10 + len(records)))
    for r, (ts, key, value, headers) in zip(got, records, strict=True):
        assert (r.key, r.value) == (key, value)
        if magic:
            assert r.timestamp == ts
        if magic == 2:
            assert list(r.headers) == headers


def test_v2_batch_fields() -> None:
    builder = RecordBatchBuilder(
        Codec.LZ4,
        base_offset=5,
        producer_id=9,
        producer_epoch=2,
        base_sequence=2147483646,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    for i in range(3):
        builder.append(TS + i, None, b"x")
    data = builder.build()
    header = parse_header(data)
    assert header is not None
    theirs = DefaultRecordBatch(data)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 2, 2147483646)
    assert header.last_offset == 7 and header.records_count == 3 and header.max_timestamp == TS + 2
    assert [r.sequence for r in iter_records(data, header)] == [2147483646, 2147483647, 0]
    assert {r.timestamp for r in iter_records(data, header)} == {TS + 2}


def test_control_batch() -> None:
    data = build_control_batch(COMMIT, producer_id=4, producer_epoch=1, coordinator_epoch=7, base_offset=3)
    header = parse_header(data)
    assert header is not None and header.is_control and header.is_transactional
    [record] = iter_records(data, header)
    assert parse_control_key(record.key) == COMMIT and parse_end_txn_marker(record.value) == 7
    assert DefaultRecordBatch(data).is_control_batch


def test_legacy_wrapper_offset_rules() -> None:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=TS, key=None, value=b"v%d" % i)
    producer_wrapper = bytes(builder.build())
    header = parse_header(producer_wrapper)
    assert header is not None
    assert [r.offset for r in iter_records(producer_wrapper, header)] == [0, 1, 2]
    assigned, count = assign_offsets_compressed(producer_wrapper, 1000)
    assert count == 3 and assigned[8:] == producer_wrapper[8:]
    assigned_header = parse_header(assigned)
    assert assigned_header is not None
    assert [r.offset for r in iter_records(assigned, assigned_header)] == [1000, 1001, 1002]
    v0 = LegacyBatchBuilder(0, Codec.SNAPPY, base_offset=0)
    for i in range(4):
        v0.append(-1, None, b"%d" % i)
    renumbered, count = assign_offsets_compressed(v0.build(), 50)
    renumbered_header = parse_header(renumbered)
    assert renumbered_header is not None
    validate(renumbered, renumbered_header)
    assert [r.offset for r in LegacyRecordBatch(renumbered, 0)] == [50, 51, 52, 53]


def test_errors() -> None:
    with pytest.raises(UnsupportedCompressionError):
        compress(Codec.ZSTD, b"x", 1)
    with pytest.raises(UnsupportedCompressionError):
        decompress(7, b"x")
    nested = LegacyBatchBuilder(1, Codec.GZIP)
    nested.append(TS, None, b"x")
    double = encode_message(0, 1, int(Codec.GZIP), TS, None, compress(Codec.GZIP, nested.build(), 1))
    header = parse_header(double)
    assert header is not None
    with pytest.raises(CorruptRecordError, match="nests compression"):
        list(iter_records(double, header))
    garbage = bytearray(V2)
    garbage[61:] = b"\xff" * len(garbage[61:])
    header = parse_header(bytes(garbage))
    assert header is not None
    with pytest.raises(CorruptRecordError):
        list(iter_records(bytes(garbage), header))
    with pytest.raises(CorruptRecordError, match="does not decompress"):
        decompress(Codec.GZIP, b"not gzip")
