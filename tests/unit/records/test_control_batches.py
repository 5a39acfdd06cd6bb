"""Transaction marker batches: Kafka's bytes (a vector built field by field from the documented layout, checked by
kafka-python's reader and its own CRC-32C) and recognising a marker among control and data batches."""

from __future__ import annotations

import struct

import pytest
from kafka.record._crc32c import crc as independent_crc32c
from kafka.record.default_records import DefaultRecordBatch

from mq.errors import CorruptRecordError
from mq.records import (
    ABORT,
    COMMIT,
    BatchHeader,
    EndTxnMarker,
    RecordBatchBuilder,
    build_control_batch,
    parse_control_key,
    parse_end_txn_marker,
    parse_header,
    read_end_txn_marker,
    validate,
)

TS = 1_600_000_000_000


def spec_marker(
    kind: int, producer_id: int, epoch: int, coordinator_epoch: int, base_offset: int, leader_epoch: int
) -> bytes:
    """A marker batch assembled from the v2 layout, with a CRC-32C from kafka-python's implementation."""
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, coordinator_epoch)
    # attributes 0, timestampDelta 0, offsetDelta 0, keyLength 4 (zigzag 0x08), key, valueLength 6 (0x0c), value,
    # headersCount 0; the record is prefixed by its length 16 (zigzag 0x20).
    body = b"\x00\x00\x00\x08" + key + b"\x0c" + value + b"\x00"
    record = bytes([len(body) * 2]) + body
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, TS, TS, producer_id, epoch, -1, 1) + record
    crc = independent_crc32c(after_crc)
    return struct.pack(">qiibI", base_offset, 49 + len(record), leader_epoch, 2, crc) + after_crc


@pytest.mark.parametrize("kind", [ABORT, COMMIT])
def test_marker_batch_matches_the_layout_byte_for_byte(kind: int) -> None:
    built = build_control_batch(kind, 4321, 3, 7, base_offset=100, timestamp=TS, partition_leader_epoch=5)
    assert built == spec_marker(kind, 4321, 3, 7, 100, 5)
    assert built[21:23] == b"\x00\x30", "attributes: transactional and control, uncompressed, CreateTime"


def test_kafka_python_reads_the_marker_as_a_control_record() -> None:
    built = build_control_batch(COMMIT, 4321, 3, 7, base_offset=100, timestamp=TS)
    batch = DefaultRecordBatch(built)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4321, 3, -1)
    [record] = list(batch)
    assert record.commit and record.version == 0 and record.offset == 100
    assert record.value == struct.pack(">hi", 0, 7)


@pytest.mark.parametrize("commit", [True, False])
def test_read_end_txn_marker(commit: bool) -> None:
    built = build_control_batch(COMMIT if commit else ABORT, 9, 2, 11, base_offset=40, timestamp=TS)
    header = header_of(built)
    assert header.is_control and header.is_transactional
    validate(built, header)
    marker = read_end_txn_marker(built, header)
    assert marker == EndTxnMarker(producer_id=9, producer_epoch=2, coordinator_epoch=11, commit=commit)
    assert marker.kind == (COMMIT if commit else ABORT)


def header_of(batch: bytes) -> BatchHeader:
    header = parse_header(batch)
    assert header is not None
    return header


def control_batch(key: bytes, value: bytes | None, records: int = 1) -> bytes:
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    for _ in range(records):
        builder.append(TS, key, value)
    return builder.build()


def test_a_data_batch_or_another_control_type_is_no_marker() -> None:
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True)
    builder.append(TS, b"k", b"v")
    data = builder.build()
    assert read_end_txn_marker(data, header_of(data)) is None
    leader_change = control_batch(struct.pack(">hh", 0, 3), b"\x00\x00")
    assert read_end_txn_marker(leader_change, header_of(leader_change)) is None


def test_a_control_batch_emptied_by_compaction_is_no_marker() -> None:
    emptied = control_batch(b"", None, records=0)
    header = header_of(emptied)
    assert header.is_control and header.records_count == 0
    assert read_end_txn_marker(emptied, header) is None


@pytest.mark.parametrize(
    ("key", "value", "records"),
    [
        (struct.pack(">hh", 0, COMMIT), struct.pack(">hi", 0, 1), 2),  # more than one record
        (struct.pack(">hh", -1, COMMIT), struct.pack(">hi", 0, 1), 1),  # negative key version
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1), 1),  # short key
        (struct.pack(">hh", 0, ABORT), struct.pack(">hh", 0, 1), 1),  # short value
        (struct.pack(">hh", 0, ABORT), struct.pack(">hi", -2, 1), 1),  # negative marker version
        (struct.pack(">hh", 0, ABORT), None, 1),  # null value
    ],
)
def test_malformed_markers_are_corrupt(key: bytes, value: bytes | None, records: int) -> None:
    batch = control_batch(key, value, records)
    with pytest.raises(CorruptRecordError):
        read_end_txn_marker(batch, header_of(batch))


def test_later_versions_are_read_at_the_version_0_positions() -> None:
    assert parse_control_key(struct.pack(">hh", 1, COMMIT) + b"extra") == COMMIT
    assert parse_end_txn_marker(struct.pack(">hi", 3, 42) + b"extra") == 42
