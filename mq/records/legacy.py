"""Message sets v0/v1 (magic 0 and 1): building, deep iteration, and offset assignment of compressed wrappers.

Message layout::

    offset int64 | size int32 | crc uint32 (CRC-32 of magic..end) | magic int8 | attributes int8
    [timestamp int64: v1] | key length int32 (-1 = null) | key | value length int32 (-1 = null) | value

A compressed wrapper is a message with codec bits set, a null key and as value the compressed inner message set.
v1 inner offsets are relative (0..n-1) and the wrapper carries the absolute offset of the last inner message; a
wrapper offset of 0 means the inner offsets are already absolute. v0 inner offsets are absolute.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records.batch_header import (
    CODEC_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    Codec,
    TimestampType,
    iter_headers,
    parse_header,
)
from mq.records.compression import compress, decompress
from mq.records.crc import Buffer, crc32
from mq.records.record import Record

_PREFIX = struct.Struct(">qiIbb")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


def encode_message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One complete message (with its offset and size) and a correct CRC."""
    body = bytearray()
    body += bytes([magic, attributes & 0xFF])
    if magic == 1:
        body += _INT64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field))
            body += field
    return _INT64.pack(offset) + _INT32.pack(len(body) + 4) + _UINT32.pack(crc32(body)) + bytes(body)


class LegacyBatchBuilder:
    """Builds a v0/v1 message set: plain messages, or one compressed wrapper when a codec is given."""

    def __init__(
        self,
        magic: int,
        codec: Codec = Codec.NONE,
        base_offset: int = 0,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    ) -> None:
        if magic not in (0, 1):
            raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
        if codec == Codec.ZSTD:
            raise UnsupportedCompressionError("zstd compression needs message format v2")
        self.magic = magic
        self.codec = Codec(codec)
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type
        self._records: list[tuple[int, bytes | None, bytes | None]] = []

    def __len__(self) -> int:
        return len(self._records)

    def append(self, timestamp: int, key: bytes | None, value: bytes | None) -> None:
        self._records.append((timestamp, key, value))

    def build(self) -> bytes:
        type_bit = TIMESTAMP_TYPE_BIT if self.magic == 1 and self.timestamp_type == TimestampType.LOG_APPEND_TIME else 0
        if self.codec == Codec.NONE:
            return b"".join(
                encode_message(self.base_offset + i, self.magic, type_bit, ts, k, v)
                for i, (ts, k, v) in enumerate(self._records)
            )
        if not self._records:
            return b""
        return _wrap(self.magic, self.codec, type_bit, self.base_offset, self._records)


def _wrap(
    magic: int,
    codec: Codec,
    type_bit: int,
    base_offset: int,
    records: list[tuple[int, bytes | None, bytes | None]],
) -> bytes:
    inner = b"".join(
        encode_message(i if magic == 1 else base_offset + i, magic, 0, ts, k, v) for i, (ts, k, v) in enumerate(records)
    )
    max_timestamp = max((ts for ts, _, _ in records), default=-1)
    last = base_offset + len(records) - 1
    return encode_message(last, magic, int(codec) | type_bit, max_timestamp, None, compress(codec, inner, magic))


def _message_fields(buf: Buffer, header: BatchHeader) -> tuple[bytes | None, bytes | None]:
    position = header.position + LOG_OVERHEAD + 6 + (8 if header.magic == 1 else 0)
    fields: list[bytes | None] = []
    for _ in range(2):
        if position + 4 > header.end_position:
            raise CorruptRecordError(f"message at position {header.position} is truncated")
        (length,) = _INT32.unpack_from(buf, position)
        position += 4
        if length < 0:
            fields.append(None)
            continue
        if position + length > header.end_position:
            raise CorruptRecordError(f"message at position {header.position} is truncated")
        fields.append(bytes(buf[position : position + length]))
        position += length
    return fields[0], fields[1]


def wrapper_codec(header: BatchHeader) -> Codec:
    """The codec of a v0/v1 message; UnsupportedCompressionError for ids 4-7 (zstd needs v2)."""
    codec_id = header.attributes & CODEC_MASK
    if codec_id >= Codec.ZSTD:
        raise UnsupportedCompressionError(
            f"message at position {header.position} uses compression codec {codec_id}, unknown to format v{header.magic}"
        )
    return Codec(codec_id)


def _inner_messages(buf: Buffer, wrapper: BatchHeader, codec: Codec) -> tuple[bytes, list[BatchHeader]]:
    """The decompressed inner message set of a wrapper and the headers of its messages.

    CorruptRecordError for a null value, a truncated inner message, nested compression or a different magic.
    """
    _, value = _message_fields(buf, wrapper)
    if value is None:
        raise CorruptRecordError(f"compressed wrapper at position {wrapper.position} has a null value")
    inner = decompress(codec, value, wrapper.magic)
    headers = list(iter_headers(inner))
    consumed = headers[-1].end_position if headers else 0
    if consumed != len(inner):
        raise CorruptRecordError(f"compressed wrapper at position {wrapper.position} holds a truncated message")
    for h in headers:
        if h.attributes & CODEC_MASK:
            raise CorruptRecordError(f"compressed wrapper at position {wrapper.position} nests compression")
        if h.magic != wrapper.magic:
            raise CorruptRecordError(f"compressed wrapper at position {wrapper.position} mixes message formats")
    return inner, headers


def iter_legacy_records(buf: Buffer, header: BatchHeader) -> Iterator[Record]:
    """The message itself when uncompressed, else the wrapper's inner messages with absolute offsets.

    v1 inner offsets are shifted by ``wrapper offset - last inner offset`` when that is not negative (relative
    offsets); otherwise, as for a wrapper offset of 0 or v0, they are taken as absolute. Inner messages of a
    LogAppendTime wrapper all carry the wrapper's timestamp.
    """
    codec = wrapper_codec(header)
    if codec == Codec.NONE:
        key, value = _message_fields(buf, header)
        valid = crc32(memoryview(buf)[header.crc_start : header.end_position]) == header.crc
        yield Record(header.offset, header.max_timestamp, key, value, (), -1, header.crc, valid, header.attributes)
        return
    inner, headers = _inner_messages(buf, header, codec)
    if not headers:
        return
    shift = header.offset - headers[-1].offset if header.magic == 1 else 0
    if shift < 0:
        shift = 0
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    view = memoryview(inner)
    for h in headers:
        key, value = _message_fields(inner, h)
        valid = crc32(view[h.crc_start : h.end_position]) == h.crc
        timestamp = header.max_timestamp if log_append else h.max_timestamp
        yield Record(h.offset + shift, timestamp, key, value, (), -1, h.crc, valid, h.attributes)


def assign_offsets_compressed(entry: Buffer, base_offset: int) -> tuple[bytes, int]:
    """A producer's compressed wrapper with offsets from ``base_offset``, and its inner message count.

    v1 wrappers whose inner offsets are the relative 0..n-1 only get a new wrapper offset (no CRC covers it);
    anything else (v0, or v1 inner offsets that are not relative) is decompressed, renumbered and recompressed with
    the same codec, timestamp type and inner timestamps. CorruptRecordError when ``entry`` is not exactly one
    compressed message, holds no messages, or an inner message fails its CRC.
    """
    header = parse_header(entry, 0)
    if header is None or header.end_position != len(entry) or header.magic >= 2:
        raise CorruptRecordError("expected exactly one v0/v1 message")
    codec = wrapper_codec(header)
    if codec == Codec.NONE:
        raise CorruptRecordError("expected a compressed message")
    inner, headers = _inner_messages(entry, header, codec)
    count = len(headers)
    if count == 0:
        raise CorruptRecordError("compressed message set holds no messages")
    view = memoryview(inner)
    for h in headers:
        if crc32(view[h.crc_start : h.end_position]) != h.crc:
            raise CorruptRecordError(f"inner message at offset {h.offset} is corrupt (stored crc = {h.crc})")
    if header.magic == 1 and all(h.offset == i for i, h in enumerate(headers)):
        patched = bytearray(entry)
        _INT64.pack_into(patched, 0, base_offset + count - 1)
        return bytes(patched), count
    records = []
    for h in headers:
        key, value = _message_fields(inner, h)
        records.append((h.max_timestamp, key, value))
    type_bit = header.attributes & TIMESTAMP_TYPE_BIT if header.magic == 1 else 0
    return _wrap(header.magic, codec, type_bit, base_offset, records), count
