"""v0/v1 compressed wrappers: inner offsets and timestamps when reading, offset assignment when appending."""

from __future__ import annotations

import pytest
from kafka.record.legacy_records import LegacyRecordBatch
from records_support import TS, kafka_python_build, kafka_python_read, sample_records

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records import Codec, TimestampType, compress, iter_records, parse_header, validate
from mq.records.batch_header import TIMESTAMP_TYPE_BIT, set_log_append_time
from mq.records.legacy import LegacyBatchBuilder, assign_offsets_compressed, encode_message

LEGACY_CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def wrapper(magic: int, codec: Codec, wrapper_offset: int, inner_offsets: list[int], attributes: int = 0) -> bytes:
    """A wrapper around messages with the given inner offsets, values ``v<i>``, timestamps TS + i."""
    inner = b"".join(
        encode_message(offset, magic, 0, TS + i, None, b"v%d" % i) for i, offset in enumerate(inner_offsets)
    )
    timestamp = TS + len(inner_offsets) - 1
    return encode_message(
        wrapper_offset, magic, int(codec) | attributes, timestamp, None, compress(codec, inner, magic)
    )


def read(data: bytes | bytearray) -> list[tuple[int, int, bytes | None]]:
    header = parse_header(data)
    assert header is not None and header.size == len(data)
    validate(data, header)
    return [(r.offset, r.timestamp, r.value) for r in iter_records(data, header)]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v1_relative_inner_offsets(codec: Codec) -> None:
    assert [r[0] for r in read(wrapper(1, codec, 102, [0, 1, 2]))] == [100, 101, 102]


def test_v1_wrapper_offset_zero_means_absolute_inner_offsets() -> None:
    assert [r[0] for r in read(wrapper(1, Codec.GZIP, 0, [0, 1, 2]))] == [0, 1, 2]


def test_v1_inner_offsets_are_absolute_when_the_shift_would_be_negative() -> None:
    assert [r[0] for r in read(wrapper(1, Codec.GZIP, 6, [5, 6, 7]))] == [5, 6, 7]
    assert [r[0] for r in read(wrapper(1, Codec.GZIP, 17, [5, 6, 7]))] == [15, 16, 17]


def test_v0_inner_offsets_are_absolute() -> None:
    got = read(wrapper(0, Codec.SNAPPY, 7, [5, 6, 7]))
    assert got == [(5, -1, b"v0"), (6, -1, b"v1"), (7, -1, b"v2")]


def test_v1_create_time_keeps_inner_timestamps() -> None:
    assert [r[1] for r in read(wrapper(1, Codec.LZ4, 2, [0, 1, 2]))] == [TS, TS + 1, TS + 2]


def test_v1_log_append_time_gives_every_inner_message_the_wrapper_timestamp() -> None:
    data = bytearray(wrapper(1, Codec.LZ4, 2, [0, 1, 2]))
    header = parse_header(data)
    assert header is not None
    set_log_append_time(data, header, TS + 1000)
    assert [r[1] for r in read(data)] == [TS + 1000] * 3
    built = LegacyBatchBuilder(1, Codec.GZIP, timestamp_type=TimestampType.LOG_APPEND_TIME)
    built.append(TS + 9, None, b"a")
    built.append(TS + 3, None, b"b")
    data = bytearray(built.build())
    assert data[17] & TIMESTAMP_TYPE_BIT
    assert [r[1] for r in read(data)] == [TS + 9, TS + 9]


def test_v1_builder_writes_kafkas_wrapper() -> None:
    builder = LegacyBatchBuilder(1, Codec.GZIP, base_offset=40)
    for i in range(3):
        builder.append(TS + 10 - i, b"k", b"v%d" % i)
    data = builder.build()
    header = parse_header(data)
    assert header is not None and header.size == len(data)
    assert (header.offset, header.max_timestamp, header.codec) == (42, TS + 10, Codec.GZIP)
    inner = list(LegacyRecordBatch(data, 1))
    assert [r.offset for r in inner] == [40, 41, 42]
    assert LegacyBatchBuilder(1, Codec.GZIP).build() == b""


def test_inner_message_crc_is_reported() -> None:
    inner = bytearray(encode_message(0, 1, 0, TS, None, b"good") + encode_message(1, 1, 0, TS, None, b"bad!"))
    inner[-1] ^= 0xFF
    data = encode_message(1, 1, int(Codec.GZIP), TS, None, compress(Codec.GZIP, bytes(inner), 1))
    header = parse_header(data)
    assert header is not None
    assert [r.is_valid for r in iter_records(data, header)] == [True, False]
    with pytest.raises(CorruptRecordError, match="inner message at offset 1 is corrupt"):
        assign_offsets_compressed(data, 0)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_assign_offsets_v1_rewrites_only_the_wrapper_offset(codec: Codec) -> None:
    records = sample_records(5)
    produced = kafka_python_build(1, codec, records)
    assert [r[0] for r in read(produced)] == [0, 1, 2, 3, 4]
    assigned, count = assign_offsets_compressed(memoryview(produced), 1000)
    assert count == 5
    assert assigned[:8] == (1004).to_bytes(8, "big") and assigned[8:] == produced[8:]
    assert [r[0] for r in kafka_python_read(assigned)] == [1000, 1001, 1002, 1003, 1004]
    assert [r[0] for r in read(assigned)] == [1000, 1001, 1002, 1003, 1004]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_assign_offsets_v1_with_absolute_inner_offsets_recompresses(codec: Codec) -> None:
    produced = wrapper(1, codec, 9, [7, 8, 9], attributes=TIMESTAMP_TYPE_BIT)
    assigned, count = assign_offsets_compressed(produced, 50)
    assert count == 3
    header = parse_header(assigned)
    assert header is not None
    assert (header.offset, header.codec, header.timestamp_type) == (52, codec, TimestampType.LOG_APPEND_TIME)
    assert [(r.offset, r.value) for r in LegacyRecordBatch(assigned, 1)] == [(50, b"v0"), (51, b"v1"), (52, b"v2")]
    assert read(assigned) == [(50, TS + 2, b"v0"), (51, TS + 2, b"v1"), (52, TS + 2, b"v2")]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_assign_offsets_v0_renumbers_inner_messages(codec: Codec) -> None:
    records = sample_records(4)
    produced = kafka_python_build(0, codec, records)
    assigned, count = assign_offsets_compressed(produced, 50)
    assert count == 4
    assert [(r[0], r[3]) for r in kafka_python_read(assigned)] == [(50 + i, r.value) for i, r in enumerate(records)]
    assert [(r[0], r[2]) for r in read(assigned)] == [(50 + i, r.value) for i, r in enumerate(records)]
    header = parse_header(assigned)
    assert header is not None and header.offset == 53 and header.codec == codec


def test_assign_offsets_rejects_what_is_not_one_compressed_message() -> None:
    plain = LegacyBatchBuilder(1)
    plain.append(TS, None, b"x")
    one = wrapper(1, Codec.GZIP, 0, [0])
    for bad in (plain.build(), one + one, one[:-1], wrapper(1, Codec.GZIP, 0, [])):
        with pytest.raises(CorruptRecordError):
            assign_offsets_compressed(bad, 0)


def test_nested_compression_is_rejected() -> None:
    nested = LegacyBatchBuilder(1, Codec.GZIP)
    nested.append(TS, None, b"x")
    double = encode_message(0, 1, int(Codec.GZIP), TS, None, compress(Codec.GZIP, nested.build(), 1))
    header = parse_header(double)
    assert header is not None
    with pytest.raises(CorruptRecordError, match="nests compression"):
        list(iter_records(double, header))


INNER = encode_message(0, 1, 0, TS, None, b"hello") + encode_message(1, 1, 0, TS, None, b"world")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (compress(Codec.GZIP, INNER[:-2], 1), "truncated message"),
        (compress(Codec.GZIP, encode_message(0, 0, 0, TS, None, b"x"), 1), "mixes message formats"),
        (b"plain bytes", "does not decompress"),
        (None, "null value"),
    ],
    ids=["truncated", "other-magic", "not-gzip", "null"],
)
def test_malformed_wrappers_are_corrupt(value: bytes | None, message: str) -> None:
    data = encode_message(1, 1, int(Codec.GZIP), TS, None, value)
    header = parse_header(data)
    assert header is not None
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_records(data, header))


@pytest.mark.parametrize("codec_id", [4, 5, 6, 7])
def test_legacy_codec_ids_beyond_lz4_are_unsupported(codec_id: int) -> None:
    data = encode_message(0, 1, codec_id, TS, None, b"whatever")
    header = parse_header(data)
    assert header is not None
    with pytest.raises(UnsupportedCompressionError):
        list(iter_records(data, header))
    with pytest.raises(UnsupportedCompressionError):
        LegacyBatchBuilder(1, Codec.ZSTD)
