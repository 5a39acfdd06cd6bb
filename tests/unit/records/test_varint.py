"""Zigzag varints: known encodings, kafka-python as oracle, and round trips over the whole int32/int64 range."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from mq.errors import CorruptRecordError
from mq.records.varint import decode_varint, encode_varint

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def kafka_python_encoding(value: int) -> bytes:
    out = bytearray()
    kp_encode_varint(value, out.append)
    return bytes(out)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (5, "0a"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
        (2**63 - 1, "feffffffffffffffff01"),
        (-(2**63), "ffffffffffffffffff01"),
    ],
)
def test_known_encodings(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex("aa" + encoded + "bb"), 1) == (value, 1 + len(encoded) // 2)


@settings(max_examples=300, deadline=None)
@given(INT32)
@example(2**31 - 1)
@example(-(2**31))
def test_varint_round_trip_int32(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 5
    assert encoded == kafka_python_encoding(value)
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))
    assert kp_decode_varint(encoded, 0) == (value, len(encoded))


@settings(max_examples=300, deadline=None)
@given(INT64)
@example(2**63 - 1)
@example(-(2**63))
def test_varlong_round_trip_int64(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 10
    assert decode_varint(memoryview(b"\x00" + encoded), 1) == (value, len(encoded) + 1)
    assert decode_varint(bytearray(encoded), 0) == (value, len(encoded))


@pytest.mark.parametrize("data", ["", "80", "ffffffff", "8080808080808080"])
def test_truncated_varint_is_corrupt(data: str) -> None:
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varint(bytes.fromhex(data), 0)


def test_overlong_varint_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_varint(b"\x80" * 10 + b"\x00", 0)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_values_outside_int64_are_refused(value: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_varint(value)


def test_ten_byte_varints_keep_64_bits_as_java_does() -> None:
    assert decode_varint(b"\xff" * 9 + b"\x7f", 0) == (-(2**63), 10)
    assert decode_varint(b"\xfe" + b"\xff" * 8 + b"\x7f", 0) == (2**63 - 1, 10)
