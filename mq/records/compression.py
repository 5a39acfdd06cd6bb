"""Compression codecs as Kafka frames them inside messages and batches.

* gzip: a standard gzip stream.
* snappy: written in xerial (snappy-java) stream framing — ``82 53 4e 41 50 50 59 00`` + BE int32 version 1 + BE
  int32 compatible version 1, then ``[BE int32 length][raw snappy block]`` per 32 KiB of input; read from xerial
  framing (a repeated header is skipped) or, without the magic, as one raw block.
* lz4: LZ4 frames with independent 64 KiB blocks (FLG ``0x60``, BD ``0x40``). Magic 0 carries Kafka's old header
  checksum computed over magic + descriptor (``0x1a`` for this descriptor instead of ``0x82``); it is written for
  magic 0 and readers of magic 0 do not verify it.
* zstd: a standard zstd frame, allowed in v2 batches only.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.block
import lz4.frame
import zstandard

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records.batch_header import Codec

Buffer = bytes | bytearray | memoryview

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_BROKEN_CHECKSUM = 0x1A
"""Header checksum Kafka writes for magic 0 with FLG 0x60 / BD 0x40 (correct: 0x82)."""
_LZ4_BLOCK_SIZES = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}
_BE_INT32 = struct.Struct(">i")
_LE_UINT32 = struct.Struct("<I")
_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=3)


def compress(codec: Codec, data: Buffer, magic: int = 2) -> bytes:
    """``data`` compressed and framed as Kafka writes ``codec`` for message format ``magic``."""
    if codec == Codec.GZIP:
        out = zlib.compressobj(6, zlib.DEFLATED, 31)
        return bytes(out.compress(data) + out.flush())
    if codec == Codec.SNAPPY:
        return _xerial_compress(data)
    if codec == Codec.LZ4:
        framed: bytes = lz4.frame.compress(
            bytes(data), block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
        )
        if magic == 0:
            framed = framed[:6] + bytes([LZ4_BROKEN_CHECKSUM]) + framed[7:]
        return framed
    if codec == Codec.ZSTD:
        if magic < 2:
            raise UnsupportedCompressionError("zstd compression requires message format v2")
        return bytes(_ZSTD_COMPRESSOR.compress(data))
    if codec == Codec.NONE:
        return bytes(data)
    raise UnsupportedCompressionError(f"unknown compression codec {int(codec)}")


def decompress(codec: Codec | int, data: Buffer, magic: int = 2) -> bytes:
    """The bytes inside a ``codec`` frame; CorruptRecordError when the frame does not decode."""
    try:
        codec = Codec(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec {int(codec)}") from None
    if codec == Codec.ZSTD and magic < 2:
        raise UnsupportedCompressionError("zstd compression requires message format v2")
    try:
        if codec == Codec.GZIP:
            return zlib.decompress(data, 47)
        if codec == Codec.SNAPPY:
            return _xerial_decompress(data)
        if codec == Codec.LZ4:
            return _lz4_decompress_unchecked(data) if magic == 0 else bytes(lz4.frame.decompress(bytes(data)))
        if codec == Codec.ZSTD:
            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))
        return bytes(data)
    except (zlib.error, RuntimeError, ValueError, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(f"{codec.name} data does not decompress: {exc}") from None


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    position = 0
    while position < len(view):
        if bytes(view[position : position + 8]) == XERIAL_MAGIC:
            position += len(XERIAL_HEADER)
            continue
        if position + 4 > len(view):
            raise ValueError("truncated xerial block length")
        (length,) = _BE_INT32.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > len(view):
            raise ValueError("truncated xerial block")
        out += cramjam.snappy.decompress_raw(view[position : position + length])
        position += length
    return bytes(out)


def _lz4_decompress_unchecked(data: Buffer) -> bytes:
    """An LZ4 frame of independent blocks, without verifying the header checksum (Kafka's magic 0 quirk)."""
    view = memoryview(data)
    if bytes(view[:4]) != LZ4_MAGIC or len(view) < 7:
        raise ValueError("not an LZ4 frame")
    flags, descriptor = view[4], view[5]
    if not flags & 0x20:
        raise ValueError("dependent LZ4 blocks are not supported")
    max_block = _LZ4_BLOCK_SIZES.get((descriptor >> 4) & 0x7)
    if max_block is None:
        raise ValueError("invalid LZ4 block size")
    position = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0) + 1
    block_checksum = 4 if flags & 0x10 else 0
    out = bytearray()
    while True:
        if position + 4 > len(view):
            raise ValueError("truncated LZ4 frame")
        (size,) = _LE_UINT32.unpack_from(view, position)
        position += 4
        if size == 0:
            return bytes(out)
        length = size & 0x7FFFFFFF
        block = view[position : position + length]
        if len(block) != length:
            raise ValueError("truncated LZ4 block")
        out += block if size & 0x80000000 else lz4.block.decompress(block, uncompressed_size=max_block)
        position += length + block_checksum
