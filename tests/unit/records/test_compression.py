"""Kafka's codec framings: snappy in xerial framing, lz4 frames with the magic-0 header-checksum quirk, gzip, zstd."""

from __future__ import annotations

import gzip
import os
import struct

import lz4.frame
import pytest
import xxhash
from kafka.codec import (
    lz4_decode,
    lz4_decode_old_kafka,
    lz4_encode,
    lz4_encode_old_kafka,
    snappy_decode,
    snappy_encode,
    zstd_decode,
    zstd_encode,
)

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records import Codec, compress, decompress
from mq.records.compression import XERIAL_HEADER

RANDOM = os.urandom(96 * 1024)
DATA = RANDOM + b"compressible " * 20_000
"""Over 64 KiB of each kind: several snappy and lz4 blocks, some of them stored raw."""
CODECS_BY_MAGIC = [(codec, magic) for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4) for magic in (0, 1, 2)] + [
    (Codec.ZSTD, 2)
]


def lz4_blocks(frame: bytes) -> list[int]:
    """The size words of the blocks of an LZ4 frame without optional header fields."""
    sizes = []
    position = 7
    while True:
        (size,) = struct.unpack_from("<I", frame, position)
        if size == 0:
            return sizes
        sizes.append(size)
        position += 4 + (size & 0x7FFFFFFF)


def xerial_blocks(framed: bytes) -> list[int]:
    sizes = []
    position = 16
    while position < len(framed):
        (size,) = struct.unpack_from(">i", framed, position)
        sizes.append(size)
        position += 4 + size
    assert position == len(framed)
    return sizes


@pytest.mark.parametrize(("codec", "magic"), CODECS_BY_MAGIC)
@pytest.mark.parametrize("data", [b"", b"x", DATA], ids=["empty", "one-byte", "large"])
def test_round_trip(codec: Codec, magic: int, data: bytes) -> None:
    framed = compress(codec, memoryview(data), magic)
    assert decompress(codec, framed, magic) == data
    assert decompress(codec, memoryview(bytearray(framed)), magic) == data


@pytest.mark.parametrize(("codec", "magic"), CODECS_BY_MAGIC)
def test_truncated_frames_are_corrupt(codec: Codec, magic: int) -> None:
    framed = compress(codec, DATA, magic)
    for cut in (0, 5, len(framed) // 2, len(framed) - 1):
        with pytest.raises(CorruptRecordError, match="does not decompress"):
            decompress(codec, framed[:cut], magic)


def test_lz4_header_checksum_quirk() -> None:
    headers = {magic: compress(Codec.LZ4, b"payload", magic)[:7] for magic in (0, 1, 2)}
    assert headers == {
        0: bytes.fromhex("04224d1860401a"),
        1: bytes.fromhex("04224d18604082"),
        2: bytes.fromhex("04224d18604082"),
    }
    descriptor = bytes.fromhex("6040")
    assert (xxhash.xxh32(descriptor).intdigest() >> 8) & 0xFF == 0x82
    assert (xxhash.xxh32(b"\x04\x22\x4d\x18" + descriptor).intdigest() >> 8) & 0xFF == 0x1A


def test_lz4_frames_interoperate_with_kafka_python() -> None:
    assert lz4_decode_old_kafka(compress(Codec.LZ4, DATA, 0)) == DATA
    assert decompress(Codec.LZ4, lz4_encode_old_kafka(DATA), 0) == DATA
    for magic in (1, 2):
        assert lz4_decode(compress(Codec.LZ4, DATA, magic)) == DATA
        assert decompress(Codec.LZ4, lz4_encode(DATA), magic) == DATA
    # Magic 0 readers accept either checksum.
    assert decompress(Codec.LZ4, compress(Codec.LZ4, DATA, 1), 0) == DATA


def test_lz4_header_checksum_is_verified_from_magic_1() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, compress(Codec.LZ4, DATA, 0), 1)


def test_lz4_frames_have_independent_64k_blocks() -> None:
    framed = compress(Codec.LZ4, DATA, 2)
    assert framed[4:6] == bytes.fromhex("6040")
    sizes = lz4_blocks(framed)
    assert len(sizes) == -(-len(DATA) // 65536)
    assert any(size & 0x80000000 for size in sizes) and not all(size & 0x80000000 for size in sizes)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_lz4_dependent_blocks_are_rejected(magic: int) -> None:
    linked = lz4.frame.compress(DATA, block_linked=True)
    assert not linked[4] & 0x20
    with pytest.raises(CorruptRecordError, match="dependent block"):
        decompress(Codec.LZ4, linked, magic)


@pytest.mark.parametrize("magic", [0, 1])
def test_lz4_optional_frame_fields_are_accepted(magic: int) -> None:
    framed = lz4.frame.compress(DATA, block_linked=False, store_size=True, content_checksum=True)
    if magic == 0:
        framed = framed[:14] + b"\x00" + framed[15:]  # any header checksum is accepted for magic 0
    assert decompress(Codec.LZ4, framed, magic) == DATA


def test_lz4_corrupt_block_is_corrupt_for_magic_0() -> None:
    framed = bytearray(compress(Codec.LZ4, b"abc" * 1000, 0))
    framed[11:20] = b"\xff" * 9
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, bytes(framed), 0)


def test_snappy_xerial_framing_matches_kafka_python() -> None:
    ours = compress(Codec.SNAPPY, DATA)
    assert ours.startswith(XERIAL_HEADER) and b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001") == XERIAL_HEADER
    assert len(xerial_blocks(ours)) == -(-len(DATA) // 32768)
    assert snappy_decode(ours) == DATA
    assert ours == snappy_encode(DATA, xerial_compatible=True, xerial_blocksize=32768)


def test_snappy_reads_xerial_and_raw_blocks() -> None:
    assert decompress(Codec.SNAPPY, snappy_encode(DATA, xerial_compatible=True, xerial_blocksize=32768)) == DATA
    assert decompress(Codec.SNAPPY, snappy_encode(DATA, xerial_compatible=False)) == DATA
    concatenated = compress(Codec.SNAPPY, b"first ") + compress(Codec.SNAPPY, b"second")
    assert decompress(Codec.SNAPPY, concatenated) == b"first second"


def test_gzip_is_standard_and_reads_concatenated_members() -> None:
    assert gzip.decompress(compress(Codec.GZIP, DATA)) == DATA
    assert decompress(Codec.GZIP, gzip.compress(DATA)) == DATA
    two = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decompress(Codec.GZIP, two) == b"one two"
    assert decompress(Codec.GZIP, two + b"\x00\x00") == b"one two"


def test_zstd_interoperates_and_needs_v2() -> None:
    assert zstd_decode(compress(Codec.ZSTD, DATA)) == DATA
    assert decompress(Codec.ZSTD, zstd_encode(DATA)) == DATA
    assert decompress(Codec.ZSTD, zstd_encode(b"one ") + zstd_encode(b"two")) == b"one two"
    for magic in (0, 1):
        with pytest.raises(UnsupportedCompressionError):
            compress(Codec.ZSTD, b"x", magic)
        with pytest.raises(UnsupportedCompressionError):
            decompress(Codec.ZSTD, zstd_encode(b"x"), magic)


@pytest.mark.parametrize("codec_id", [5, 6, 7, 99])
def test_unknown_codec_ids_are_unsupported(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionError, match=f"unknown compression codec {codec_id}"):
        decompress(codec_id, b"x")
    with pytest.raises(UnsupportedCompressionError):
        compress(codec_id, b"x")


def test_none_passes_bytes_through() -> None:
    assert compress(Codec.NONE, memoryview(b"abc")) == b"abc"
    assert decompress(Codec.NONE, bytearray(b"abc")) == b"abc"


@pytest.mark.parametrize(
    ("magic", "codec"), [(m, c) for m in (0, 1, 2) for c in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4)] + [(2, Codec.ZSTD)]
)
def test_a_limit_stops_decompression(magic: int, codec: Codec) -> None:
    data = bytes(300_000)
    framed = compress(codec, data, magic)
    assert decompress(codec, framed, magic, len(data)) == data
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, framed, magic, len(data) - 1)
