"""Compression codecs as Kafka frames them inside messages and batches.

* gzip: a standard gzip stream; readers accept concatenated members and, like ``java.util.zip.GZIPInputStream``,
  ignore bytes after the last member that do not start another one.
* snappy: written in xerial (snappy-java) stream framing — ``82 53 4e 41 50 50 59 00`` + BE int32 version 1 + BE
  int32 compatible version 1, then ``[BE int32 length][raw snappy block]`` per 32 KiB of input; read from xerial
  framing (a repeated header between blocks is skipped) or, without the magic, as one raw block.
* lz4: LZ4 frames of independent 64 KiB blocks, no checksums, no content size (FLG ``0x60``, BD ``0x40``). Magic 0
  carries Kafka's old header checksum computed over magic + descriptor (``0x1a`` for this descriptor instead of
  ``0x82``); it is written for magic 0, and readers of magic 0 do not verify it. Frames with dependent blocks are
  rejected, as Kafka's reader does.
* zstd: standard zstd frames, allowed in v2 batches only.

Every failure to decode raises CorruptRecordError; an unknown codec id, or zstd below magic 2,
UnsupportedCompressionError. With a ``limit``, data that would decompress to more bytes raises CorruptRecordError
before more than about that much is produced (a small payload can expand a thousandfold).
"""

from __future__ import annotations

import struct
import zlib

import lz4.block
import lz4.frame
import snappy
import zstandard

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records.batch_header import Codec

Buffer = bytes | bytearray | memoryview

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
GZIP_MAGIC = b"\x1f\x8b"
LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_DESCRIPTOR = b"\x60\x40"
"""FLG (version 01, independent blocks) and BD (64 KiB blocks) of every frame mq writes."""
LZ4_BROKEN_CHECKSUM = 0x1A
"""Header checksum Kafka writes for magic 0 with ``LZ4_DESCRIPTOR`` (the correct one is 0x82)."""
_LZ4_BLOCK_SIZES = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}
_LZ4_INDEPENDENT = 0x20
_BE_INT32 = struct.Struct(">i")
_LE_UINT32 = struct.Struct("<I")
_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=3)
_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()
_DECODE_ERRORS = (
    ValueError,
    RuntimeError,
    zlib.error,
    zstandard.ZstdError,
    snappy.UncompressError,
    lz4.block.LZ4BlockError,
)


def _codec(codec: Codec | int, magic: int) -> Codec:
    try:
        checked = Codec(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec {int(codec)}") from None
    if checked == Codec.ZSTD and magic < 2:
        raise UnsupportedCompressionError(f"zstd compression needs message format v2, not v{magic}")
    return checked


def compress(codec: Codec | int, data: Buffer, magic: int = 2) -> bytes:
    """``data`` compressed and framed as Kafka writes ``codec`` for message format ``magic``."""
    codec = _codec(codec, magic)
    if codec == Codec.GZIP:
        gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
        return gzip.compress(data) + gzip.flush()
    if codec == Codec.SNAPPY:
        return _xerial_compress(data)
    if codec == Codec.LZ4:
        return _lz4_compress(data, magic)
    if codec == Codec.ZSTD:
        return bytes(_ZSTD_COMPRESSOR.compress(data))
    return bytes(data)


class _TooLarge(ValueError):
    pass


def decompress(codec: Codec | int, data: Buffer, magic: int = 2, limit: int | None = None) -> bytes:
    """The bytes inside a ``codec`` frame of message format ``magic``, at most ``limit`` of them."""
    codec = _codec(codec, magic)
    bound = -1 if limit is None else limit
    try:
        if codec == Codec.GZIP:
            return _gunzip(data, bound)
        if codec == Codec.SNAPPY:
            return _xerial_decompress(data, bound)
        if codec == Codec.LZ4:
            return _lz4_decompress(data, magic, bound)
        if codec == Codec.ZSTD:
            return _unzstd(data, bound)
        return bytes(data)
    except _TooLarge:
        raise CorruptRecordError(f"{codec.name.lower()} data decompresses to more than {limit} bytes") from None
    except _DECODE_ERRORS as exc:
        raise CorruptRecordError(f"{codec.name.lower()} data does not decompress: {exc}") from None


def _check(produced: int, limit: int) -> None:
    """_TooLarge when ``produced`` bytes exceed ``limit`` (-1: no limit)."""
    if 0 <= limit < produced:
        raise _TooLarge


def _gunzip(data: Buffer, limit: int = -1) -> bytes:
    parts = []
    produced = 0
    rest: Buffer = data
    while True:
        member = zlib.decompressobj(31)
        parts.append(member.decompress(rest, max(limit + 1 - produced, 1) if limit >= 0 else 0))
        produced += len(parts[-1])
        _check(produced, limit)
        if member.unconsumed_tail:
            raise _TooLarge
        if not member.eof:
            raise ValueError("truncated gzip stream")
        rest = member.unused_data
        if rest[:2] != GZIP_MAGIC:
            return b"".join(parts)


def _unzstd(data: Buffer, limit: int = -1) -> bytes:
    if limit >= 0:  # a bounded pass first: a frame need not declare its size, and the decompressor has no bound
        reader = _ZSTD_DECOMPRESSOR.stream_reader(data, read_across_frames=True)
        produced = 0
        while chunk := reader.read(1 << 20):
            produced += len(chunk)
            _check(produced, limit)
    parts = []
    rest: Buffer = data
    while True:
        frame = _ZSTD_DECOMPRESSOR.decompressobj()
        parts.append(frame.decompress(rest))
        if not frame.eof:
            raise ValueError("truncated zstd frame")
        rest = frame.unused_data
        if not rest:
            return b"".join(parts)


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK):
        block: bytes = snappy.compress(view[start : start + XERIAL_BLOCK])
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its leading little-endian base-128 varint)."""
    length = shift = 0
    for byte in block[:5]:
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length
        shift += 7
    raise ValueError("invalid snappy length preamble")


def _xerial_decompress(data: Buffer, limit: int = -1) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        _check(_snappy_length(view), limit)
        raw: bytes = snappy.uncompress(view)
        return raw
    parts = []
    produced = 0
    position = 0
    end = len(view)
    while position < end:
        if view[position : position + 8] == XERIAL_MAGIC:
            position += len(XERIAL_HEADER)
            continue
        if position + 4 > end:
            raise ValueError("truncated xerial block length")
        (length,) = _BE_INT32.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > end:
            raise ValueError(f"xerial block of {length} bytes runs past the end of the data")
        produced += _snappy_length(view[position : position + length])
        _check(produced, limit)
        parts.append(snappy.uncompress(view[position : position + length]))
        position += length
    return b"".join(parts)


def _lz4_compress(data: Buffer, magic: int) -> bytes:
    framed: bytes = lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if magic == 0:
        assert framed[4:6] == LZ4_DESCRIPTOR
        framed = framed[:6] + bytes((LZ4_BROKEN_CHECKSUM,)) + framed[7:]
    return framed


def _lz4_decompress(data: Buffer, magic: int, limit: int = -1) -> bytes:
    view = memoryview(data)
    if len(view) < 7 or view[:4] != LZ4_MAGIC:
        raise ValueError("not an LZ4 frame")
    flags = view[4]
    if flags >> 6 != 1:
        raise ValueError(f"unsupported LZ4 frame version {flags >> 6}")
    if not flags & _LZ4_INDEPENDENT:
        raise ValueError("dependent block stream is unsupported")
    if magic >= 1:
        if limit >= 0:
            bounded = lz4.frame.LZ4FrameDecompressor()
            _check(len(bounded.decompress(view, limit + 1)), limit)
        out: bytes = lz4.frame.decompress(view)
        return out
    return _lz4_blocks(view, limit)


def _lz4_blocks(view: memoryview, limit: int = -1) -> bytes:
    """The blocks of an LZ4 frame of independent blocks, without verifying the header checksum (magic 0)."""
    flags, descriptor = view[4], view[5]
    max_block = _LZ4_BLOCK_SIZES.get((descriptor >> 4) & 0x7)
    if max_block is None:
        raise ValueError(f"invalid LZ4 block descriptor {descriptor:#04x}")
    position = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0) + 1
    block_checksum = 4 if flags & 0x10 else 0
    parts: list[bytes] = []
    produced = 0
    end = len(view)
    while True:
        if position + 4 > end:
            raise ValueError("truncated LZ4 frame")
        (size,) = _LE_UINT32.unpack_from(view, position)
        position += 4
        if size == 0:
            return b"".join(parts)
        length = size & 0x7FFFFFFF
        if length > max_block or position + length > end:
            raise ValueError(f"LZ4 block of {length} bytes is too large or truncated")
        block = view[position : position + length]
        parts.append(bytes(block) if size & 0x80000000 else lz4.block.decompress(block, uncompressed_size=max_block))
        produced += len(parts[-1])
        _check(produced, limit)
        position += length + block_checksum
