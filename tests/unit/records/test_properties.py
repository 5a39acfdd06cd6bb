"""Property tests: random batches round-trip through mq and kafka-python, any single corrupted byte under a CRC is
detected, and damaged record data never raises anything but the record layer's own errors."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from records_support import (
    MAGIC_CODECS,
    Sample,
    as_tuples,
    expected,
    kafka_python_build,
    kafka_python_read,
    mq_build,
    mq_read,
    sample_lists,
    sample_records,
)

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records import Codec, TimestampType, iter_records, parse_header, validate
from mq.records.crc import crc32, crc32c
from mq.records.default_batch import RecordBatchBuilder

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

legacy_formats = st.sampled_from([(m, Codec(c)) for m, c in MAGIC_CODECS if m < 2])


@SETTINGS
@given(
    records=sample_lists,
    codec=st.sampled_from(list(Codec)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    producer=st.tuples(
        st.integers(min_value=-1, max_value=2**63 - 1),
        st.integers(min_value=-1, max_value=2**15 - 1),
        st.integers(min_value=-1, max_value=2**31 - 1),
    ),
    log_append_time=st.booleans(),
)
def test_v2_round_trip(
    records: list[Sample], codec: Codec, base_offset: int, producer: tuple[int, int, int], log_append_time: bool
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    builder = RecordBatchBuilder(
        codec,
        base_offset=base_offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for r in records:
        builder.append(r.timestamp, r.key, r.value, r.headers)
    data = builder.build()
    header = parse_header(data)
    assert header is not None and header.size == len(data)
    validate(data, header)
    max_timestamp = max(r.timestamp for r in records)
    assert (header.last_offset, header.max_timestamp) == (base_offset + len(records) - 1, max_timestamp)
    want = expected(records, 2, base_offset)
    if log_append_time:
        want = [(o, max_timestamp, k, v, h) for o, _, k, v, h in want]
    got = list(iter_records(data, header))
    assert as_tuples(got) == want
    sequences = [-1] * len(records) if base_sequence < 0 else [(base_sequence + i) % 2**31 for i in range(len(records))]
    assert [r.sequence for r in got] == sequences
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in theirs] == [(o, k, v, h) for o, _, k, v, h in want]


@SETTINGS
@given(records=sample_lists, fmt=legacy_formats, base_offset=st.integers(min_value=0, max_value=2**62))
def test_legacy_round_trip(records: list[Sample], fmt: tuple[int, Codec], base_offset: int) -> None:
    magic, codec = fmt
    data = mq_build(magic, codec, records, base_offset)
    want = expected(records, magic, base_offset)
    assert as_tuples(mq_read(data)) == want
    assert kafka_python_read(data) == want


@SETTINGS
@given(records=sample_lists, fmt=st.sampled_from(MAGIC_CODECS))
def test_kafka_python_batches_read_by_mq(records: list[Sample], fmt: tuple[int, Codec]) -> None:
    magic, codec = fmt
    assert as_tuples(mq_read(kafka_python_build(magic, codec, records))) == expected(records, magic)


def first_entry(data: bytes) -> bytes:
    header = parse_header(data)
    assert header is not None
    return data[: header.size]


BUILT = {fmt: first_entry(mq_build(*fmt, sample_records(8))) for fmt in MAGIC_CODECS}
"""One entry per format: a v2 batch, a v0/v1 compressed wrapper, or a single uncompressed v0/v1 message."""


@settings(max_examples=400, deadline=None)
@given(
    fmt=st.sampled_from(MAGIC_CODECS),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    flip=st.integers(min_value=1, max_value=255),
)
def test_any_flipped_byte_under_the_crc_is_detected(fmt: tuple[int, Codec], where: float, flip: int) -> None:
    data = bytearray(BUILT[fmt])
    header = parse_header(data)
    assert header is not None and header.size == len(data)
    stored_crc_at = header.crc_start - 4  # the stored CRC itself, then every byte it covers
    data[stored_crc_at + int(where * (len(data) - stored_crc_at))] ^= flip
    with pytest.raises(CorruptRecordError):  # a flipped magic byte already fails parse_header
        corrupted = parse_header(data)
        assert corrupted is not None
        validate(data, corrupted)


@settings(max_examples=100, deadline=None)
@given(fmt=st.sampled_from(MAGIC_CODECS), delta=st.integers(min_value=-40, max_value=40).filter(bool))
def test_a_changed_size_field_is_detected(fmt: tuple[int, Codec], delta: int) -> None:
    data = bytearray(BUILT[fmt])
    struct.pack_into(">i", data, 8, struct.unpack_from(">i", data, 8)[0] + delta)
    padded = bytes(data) + bytes(64)
    with pytest.raises(CorruptRecordError):
        header = parse_header(padded)
        assert header is not None
        validate(padded, header)


def reseal(data: bytearray) -> None:
    """Recompute the entry's CRC so that only deep iteration can notice damage."""
    if data[16] == 2:
        struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    else:
        struct.pack_into(">I", data, 12, crc32(memoryview(data)[16:]))


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(MAGIC_CODECS),
    damage=st.lists(
        st.tuples(st.floats(min_value=0, max_value=1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=4
    ),
)
def test_damaged_records_raise_only_record_errors(fmt: tuple[int, Codec], damage: list[tuple[float, int]]) -> None:
    data = bytearray(BUILT[fmt])
    first = 61 if fmt[0] == 2 else 16 + 2 + (8 if fmt[0] == 1 else 0)
    for where, flip in damage:
        data[first + int(where * (len(data) - first))] ^= flip
    reseal(data)
    header = parse_header(data)
    assert header is not None
    with contextlib.suppress(CorruptRecordError, UnsupportedCompressionError):
        list(iter_records(data, header))
