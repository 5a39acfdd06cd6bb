"""Checksums agree across implementations; corruption anywhere a checksum covers is always detected."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.codec import lz4_decode, snappy_decode, snappy_encode

from mq.errors import CorruptRecordError
from mq.records import iter_records
from mq.records.batch_header import Codec, parse_header, validate
from mq.records.compression import XERIAL_HEADER, compress, decompress
from mq.records.crc import CRC32C_IMPLEMENTATIONS, crc32
from mq.records.default_batch import RecordBatchBuilder
from mq.records.legacy import LegacyBatchBuilder
from mq.records.varint import decode_varint, encode_varint

RANDOM = os.urandom(64 * 1024)


@pytest.mark.parametrize("name", sorted(CRC32C_IMPLEMENTATIONS))
def test_crc32c_vectors(name: str) -> None:
    fn = CRC32C_IMPLEMENTATIONS[name]
    assert fn(b"123456789") == 0xE3069283
    assert fn(b"") == 0
    assert fn(memoryview(RANDOM)) == CRC32C_IMPLEMENTATIONS["crcmod"](RANDOM)


def test_crc32_vector() -> None:
    assert crc32(b"123456789") == 0xCBF43926


def test_several_implementations_are_checked() -> None:
    assert "crcmod" in CRC32C_IMPLEMENTATIONS and len(CRC32C_IMPLEMENTATIONS) >= 2


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))


def test_varint_truncated() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0)


record_lists = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**40),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(records=record_lists, codec=st.sampled_from(list(Codec)))
def test_v2_round_trip(records: list, codec: Codec) -> None:
    builder = RecordBatchBuilder(codec)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    data = builder.build()
    header = parse_header(data)
    assert header is not None and header.size == len(data)
    validate(data, header)
    got = [(r.timestamp, r.key, r.value, list(r.headers)) for r in iter_records(data, header)]
    assert got == [(ts, k, v, h) for ts, k, v, h in records]


def built(magic: int, codec: Codec) -> bytes:
    if magic == 2:
        builder = RecordBatchBuilder(codec)
        for i in range(5):
            builder.append(1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"x")])
        return builder.build()
    legacy = LegacyBatchBuilder(magic, codec)
    for i in range(5):
        legacy.append(1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i)
    return legacy.build()


@settings(max_examples=400, deadline=None)
@given(
    magic=st.sampled_from([0, 1, 2]),
    codec=st.sampled_from([Codec.NONE, Codec.GZIP, Codec.LZ4]),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    flip=st.integers(min_value=1, max_value=255),
)
def test_any_flipped_byte_is_detected(magic: int, codec: Codec, where: float, flip: int) -> None:
    data = bytearray(built(magic, codec))
    header = parse_header(bytes(data))
    assert header is not None
    covered_from = header.crc_start - 4  # the stored CRC itself, then everything it covers
    position = covered_from + int(where * (len(data) - covered_from))
    data[position] ^= flip
    with pytest.raises(CorruptRecordError):
        corrupted = parse_header(bytes(data))
        if corrupted is None or corrupted.size != len(data):
            raise CorruptRecordError("size changed")
        validate(bytes(data), corrupted)


@settings(max_examples=100, deadline=None)
@given(magic=st.sampled_from([0, 1, 2]), delta=st.integers(min_value=-20, max_value=20).filter(lambda d: d != 0))
def test_a_changed_size_field_is_detected(magic: int, delta: int) -> None:
    data = bytearray(built(magic, Codec.NONE))
    size = int.from_bytes(data[8:12], "big") + delta
    data[8:12] = size.to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordError):
        header = parse_header(bytes(data) + b"\x00" * 40)
        if header is None:
            raise CorruptRecordError("partial")
        validate(bytes(data) + b"\x00" * 40, header)


def test_lz4_header_checksum_quirk() -> None:
    assert compress(Codec.LZ4, b"payload", 0)[:7] == bytes.fromhex("04224d1860401a")
    assert compress(Codec.LZ4, b"payload", 1)[:7] == bytes.fromhex("04224d18604082")
    assert compress(Codec.LZ4, b"payload", 2)[:7] == bytes.fromhex("04224d18604082")
    for magic in (0, 1, 2):
        assert decompress(Codec.LZ4, compress(Codec.LZ4, RANDOM, magic), magic) == RANDOM
    assert lz4_decode(compress(Codec.LZ4, RANDOM * 3, 2)) == RANDOM * 3


def test_lz4_blocks_are_independent() -> None:
    framed = compress(Codec.LZ4, RANDOM * 4 + b"a" * 300_000, 2)
    assert framed[4] & 0x20


def test_snappy_xerial_framing_both_ways() -> None:
    data = RANDOM + b"abc" * 40_000
    ours = compress(Codec.SNAPPY, data)
    assert ours.startswith(XERIAL_HEADER)
    assert snappy_decode(ours) == data
    assert decompress(Codec.SNAPPY, snappy_encode(data, xerial_compatible=True, xerial_blocksize=32768)) == data
    assert decompress(Codec.SNAPPY, snappy_encode(data, xerial_compatible=False)) == data
