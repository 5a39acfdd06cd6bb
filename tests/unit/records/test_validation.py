"""Deep validation of produced entries: every kind of fault inside a batch with a valid CRC is refused, naming the
record; valid batches of every shape pass, whichever walk (Python for small batches, vectorised for large) runs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vectors import V0_HELLO, V1_HELLO, V2_HELLO

from mq.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, KafkaError
from mq.records import validation
from mq.records.batch_header import Codec, TimestampType, parse_header
from mq.records.compression import compress
from mq.records.default_batch import RecordBatchBuilder, assemble_batch
from mq.records.legacy import LegacyBatchBuilder, encode_message
from mq.records.validation import (
    NO_RULES,
    UNIFORM_MIN_RECORDS,
    VECTOR_MIN_RECORDS,
    RecordRules,
    _uniform,
    _walk,
    validate_records,
)
from mq.records.varint import encode_varint

TS = 1_700_000_000_000
SMALL, UNIFORM, LARGE = 5, UNIFORM_MIN_RECORDS + 4, VECTOR_MIN_RECORDS + 300
"""Record counts that take the Python walk, the uniform check (then the Python walk) and the vectorised walk."""


def field(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def record(
    index: int,
    value: bytes | None = b"value",
    key: bytes | None = b"key",
    headers: list[tuple[bytes, bytes | None]] | None = None,
    *,
    ts_delta: int = 0,
    offset_delta: int | None = None,
    header_count: int | None = None,
    length_adjust: int = 0,
    key_length: bytes | None = None,
) -> bytes:
    """One v2 record encoded here (independently of mq's builder), with optional faults."""
    headers = headers or []
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(index if offset_delta is None else offset_delta)
    body += (key_length + (key or b"")) if key_length is not None else field(key)
    body += field(value)
    body += encode_varint(len(headers) if header_count is None else header_count)
    for k, v in headers:
        body += field(k) + field(v)
    return encode_varint(len(body) + length_adjust) + body


def batch(
    records: list[bytes], count: int | None = None, codec: Codec = Codec.NONE, area: bytes | None = None
) -> bytes:
    """A v2 batch with a correct CRC around ``records`` (or a raw ``area``), claiming ``count`` records."""
    count = len(records) if count is None else count
    data = b"".join(records) if area is None else area
    if codec != Codec.NONE and area is None:
        data = compress(codec, data, 2)
    return assemble_batch(0, -1, int(codec), count - 1, TS, TS, -1, -1, -1, count, data)


def check(data: bytes, rules: RecordRules = NO_RULES) -> None:
    header = parse_header(data)
    assert header is not None
    validate_records(data, header, rules)


def refused(data: bytes, kind: type[KafkaError] = InvalidRecordError) -> KafkaError:
    with pytest.raises(kind) as caught:
        check(data)
    return caught.value


def good(n: int, **kwargs: object) -> list[bytes]:
    return [record(i, **kwargs) for i in range(n)]  # type: ignore[arg-type]


# --- valid batches --------------------------------------------------------------------------------------------


def test_reference_vectors_pass() -> None:
    for vector in (V0_HELLO, V1_HELLO, V2_HELLO):
        check(vector)


@pytest.mark.parametrize("count", [1, SMALL, UNIFORM_MIN_RECORDS, VECTOR_MIN_RECORDS, LARGE, 9000])
@pytest.mark.parametrize("codec", list(Codec))
def test_built_batches_pass(count: int, codec: Codec) -> None:
    rng = random.Random(count)
    builder = RecordBatchBuilder(codec)
    for i in range(count):
        headers = [("h", b"x"), ("n", None)] if i % 5 == 0 else []
        key = None if i % 3 == 0 else b"k%d" % i
        value = None if i % 11 == 0 else bytes(rng.randrange(300) if i % 97 else 9000)  # some take 3 length bytes
        builder.append(TS + rng.randrange(-100_000, 100_000), key, value, headers)
    check(builder.build())


@pytest.mark.parametrize("count", [SMALL, UNIFORM_MIN_RECORDS, LARGE, 9000])
def test_uniform_batches_pass(count: int) -> None:
    """Same-size records (the shape most producers send), offset deltas of 1, 2 and 3 varint bytes."""
    for key in (None, b"", b"k" * 70):
        check(batch([record(i, b"v" * 100, key, ts_delta=i % 60) for i in range(count)]))
    late = [record(i, b"v" * 100, ts_delta=0 if i < count // 2 else 100_000) for i in range(count)]
    check(batch(late))  # same sizes but for a longer timestamp delta from the middle on
    late[-1] = record(count - 1, b"v" * 100, ts_delta=100_000, offset_delta=0)
    assert index_of(refused(batch(late))) == count - 1


@pytest.mark.parametrize("count", [UNIFORM_MIN_RECORDS, 64, 65, 8192, 8193])
def test_the_uniform_check_takes_same_size_records_and_declines_any_changed_framing_byte(count: int) -> None:
    records = [record(i, b"v" * 20, b"k", ts_delta=i % 60) for i in range(count)]
    area = b"".join(records)
    frame = bytearray(b"head" + area + b"tail")  # as a produce request's record set lies in its frame
    assert _uniform(memoryview(frame)[4:-4], count) == (1, bytes(2 * (i % 60) for i in range(count)))
    last = len(area) - len(records[-1])
    value_at = len(records[-1]) - 1 - 20 - 1  # the value length varint, before 20 value bytes and the header count
    framing = [0, 2, 3, len(records[0]) - 1, last, last + 2, last + 3, last + value_at, len(area) - 1]
    for position in framing:  # length, timestamp and offset deltas, value length, header count of first and last
        changed = bytearray(area)
        changed[position] ^= 0x80 if position in (2, last + 2) else 0x01
        assert _uniform(memoryview(changed), count) is None, position
    changed = bytearray(area)
    changed[len(records[0]) - 2] ^= 0x01  # a value byte: not framing
    assert _uniform(bytes(changed), count) is not None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_legacy_sets_pass(magic: int, codec: Codec) -> None:
    builder = LegacyBatchBuilder(magic, codec)
    for i in range(20):
        builder.append(TS + i, None if i % 2 else b"k", b"v" * i)
    data = builder.build()
    header = parse_header(data)
    while header is not None:
        validate_records(data, header)
        header = parse_header(data, header.end_position)


# --- faults inside v2 batches ---------------------------------------------------------------------------------


def index_of(error: KafkaError) -> int:
    assert error.record_errors, error
    return error.record_errors[0].batch_index


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_truncated_record(count: int) -> None:
    records = good(count)
    records[-1] = records[-1][:-2]
    assert index_of(refused(batch(records))) == count - 1


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
@pytest.mark.parametrize("adjust", [-1, 1, 3])
def test_wrong_record_length(count: int, adjust: int) -> None:
    records = good(count)
    records[2] = record(2, length_adjust=adjust)
    assert index_of(refused(batch(records))) == 2


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_bad_varints(count: int) -> None:
    too_long = good(count)
    too_long[3] = record(3, key_length=b"\x80" * 5 + b"\x00")
    assert index_of(refused(batch(too_long))) == 3
    negative = good(count)
    negative[1] = record(1, key_length=encode_varint(-2))
    assert index_of(refused(batch(negative))) == 1
    over_32_bits = good(count)
    over_32_bits[0] = record(0, key_length=b"\xff\xff\xff\xff\x7f")
    assert index_of(refused(batch(over_32_bits))) == 0


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
@pytest.mark.parametrize("header_count", [0, 2, -1, 1000])
def test_header_count_wrong(count: int, header_count: int) -> None:
    records = good(count)
    records[4] = record(4, headers=[(b"h", b"v")], header_count=header_count)
    assert index_of(refused(batch(records))) == 4


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_negative_header_key_length(count: int) -> None:
    records = good(count)
    bad = bytearray(record(1, headers=[(b"h", b"v")]))
    bad[-5] = 0x03  # the header key length varint: -2
    records[1] = bytes(bad)
    assert index_of(refused(batch(records))) == 1


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_record_count_mismatch(count: int) -> None:
    records = good(count)
    assert index_of(refused(batch(records, count + 1))) == count  # the area ends before the claimed record
    assert "remain" in str(refused(batch(records, count - 1)))
    assert "claims" in str(refused(batch(records, 10**9)))


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_offset_delta_gaps_and_order(count: int) -> None:
    gap = good(count)
    gap[3] = record(3, offset_delta=4)
    assert index_of(refused(batch(gap))) == 3
    swapped = good(count)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    assert index_of(refused(batch(swapped))) == 1


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_compressed_payload(codec: Codec) -> None:
    garbage = random.Random(1).randbytes(500)
    error = refused(batch([], 10, codec, area=garbage))
    assert "decompress" in str(error) or "not an LZ4 frame" in str(error)
    truncated = compress(codec, b"".join(good(50)), 2)[:-7]
    refused(batch([], 50, codec, area=truncated))


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_decompression_bombs(codec: Codec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "MAX_DECOMPRESSED", 10_000)
    assert "more than 10000 bytes" in str(refused(batch([], 1, codec, area=compress(codec, bytes(50_000), 2))))
    check(batch(good(50), codec=codec))
    if codec != Codec.ZSTD:
        bomb = encode_message(0, 1, int(codec), TS, None, compress(codec, bytes(50_000), 1))
        assert "more than" in str(refused(bomb))


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_compressed_payload_with_bad_framing(codec: Codec, count: int) -> None:
    records = good(count)
    records[count // 2] = record(count // 2, length_adjust=2)
    assert index_of(refused(batch(records, codec=codec))) == count // 2
    check(batch(good(count), codec=codec))


# --- v0/v1 ----------------------------------------------------------------------------------------------------


def wrapper(magic: int, inner: bytes, codec: Codec = Codec.GZIP) -> bytes:
    return encode_message(9, magic, int(codec), TS, None, compress(codec, inner, magic))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrapper_with_corrupt_inner_message(magic: int) -> None:
    inner = [bytearray(encode_message(i, magic, 0, TS, None, b"v%d" % i)) for i in range(4)]
    inner[2][-1] ^= 0xFF
    error = refused(wrapper(magic, b"".join(inner)), CorruptRecordError)
    assert index_of(error) == 2


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrapper_inner_faults(magic: int) -> None:
    other_magic = encode_message(1, 1 - magic, 0, TS, None, b"x")
    assert index_of(refused(wrapper(magic, encode_message(0, magic, 0, TS, None, b"a") + other_magic))) == 1
    nested = encode_message(0, magic, int(Codec.GZIP), TS, None, compress(Codec.GZIP, b"", magic))
    assert index_of(refused(wrapper(magic, nested))) == 0
    partial = encode_message(0, magic, 0, TS, None, b"abc")[:-2]
    refused(wrapper(magic, partial))
    refused(wrapper(magic, b""))
    garbage = encode_message(9, magic, int(Codec.GZIP), TS, None, b"\x1f\x8b not gzip at all")
    refused(garbage)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_framing(magic: int) -> None:
    message = bytearray(encode_message(0, magic, 0, TS, b"key", b"value"))
    key_at = 18 if magic == 0 else 26
    message[key_at : key_at + 4] = (4).to_bytes(4, "big")  # the key claims one byte of the value
    from mq.records.crc import crc32

    message[12:16] = crc32(bytes(message[16:])).to_bytes(4, "big")
    assert index_of(refused(bytes(message))) == 0


# --- rules ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_records_without_keys_on_a_compacted_topic(count: int) -> None:
    records = [record(i, key=None if i in (1, 3) else b"k") for i in range(count)]
    with pytest.raises(InvalidRecordError) as caught:
        check(batch(records), RecordRules(require_keys=True))
    assert [e.batch_index for e in caught.value.record_errors] == [1, 3]
    check(batch(good(count)), RecordRules(require_keys=True))
    with pytest.raises(InvalidRecordError):
        check(batch([record(i, key=None) for i in range(count)]), RecordRules(require_keys=True))


@pytest.mark.parametrize("count", [SMALL, UNIFORM, LARGE])
def test_timestamps_out_of_range(count: int) -> None:
    records = [record(i, ts_delta=120_000 if i == 2 else 0) for i in range(count)]
    rules = RecordRules(now=TS, max_timestamp_difference=60_000)
    with pytest.raises(InvalidTimestampError) as caught:
        check(batch(records), rules)
    assert [e.batch_index for e in caught.value.record_errors] == [2]
    check(batch(records), RecordRules(now=TS + 60_000, max_timestamp_difference=60_000))


# --- the two walks agree --------------------------------------------------------------------------------------


def outcome(data: bytes, vectorised: bool) -> tuple[str, int | None] | None:
    """How validation ends: None (valid) or the error's class and first record index."""
    try:
        if vectorised:
            check(data)
        else:
            area = data[61:]
            end = _walk(area, 0, 0, parse_header(data).records_count, None, None)  # type: ignore[union-attr]
            if end != len(area):
                raise InvalidRecordError("trailing bytes")
    except KafkaError as exc:
        return type(exc).__name__, exc.record_errors[0].batch_index if exc.record_errors else None
    return None


@settings(max_examples=150, deadline=None)
@given(
    uniform=st.booleans(),
    mutations=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_vectorised_walk_agrees_with_the_python_walk(uniform: bool, mutations: list[tuple[int, int]]) -> None:
    rng = random.Random(len(mutations))
    records = [record(i, b"v" * (40 if uniform else rng.randrange(60))) for i in range(LARGE)]
    area = bytearray(b"".join(records))
    for where, byte in mutations:
        area[where % len(area)] = byte
    data = batch([], LARGE, area=bytes(area))
    assert outcome(data, vectorised=True) == outcome(data, vectorised=False)


@pytest.mark.parametrize("count", [SMALL, LARGE])
def test_producer_log_append_time_entries(count: int) -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    for _ in range(count):
        builder.append(TS, b"k", b"v")
    stamped = builder.build()
    with pytest.raises(InvalidTimestampError) as caught:
        check(stamped, RecordRules(log_append_time=True))
    assert [e.batch_index for e in caught.value.record_errors] == list(range(count))
    check(stamped)  # a CreateTime topic takes it: its records' timestamp is the batch's
    legacy = LegacyBatchBuilder(1, Codec.GZIP, timestamp_type=TimestampType.LOG_APPEND_TIME)
    legacy.append(TS, b"k", b"v")
    with pytest.raises(InvalidTimestampError):
        check(legacy.build(), RecordRules(log_append_time=True))
