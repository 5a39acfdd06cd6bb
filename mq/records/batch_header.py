"""Shallow view of a log entry: a v0/v1 message (possibly a compressed wrapper) or a v2 record batch.

Every entry starts with the same 17 bytes, so a reader can tell the format before interpreting anything else::

    0  int64  offset       v2: base offset; v0/v1: offset of the (last inner) message
    8  int32  size         bytes that follow this field (entry size = size + 12)
    12 ...                 v2: int32 partitionLeaderEpoch; v0/v1: uint32 CRC-32
    16 int8   magic        0, 1 or 2

v0/v1 continue with ``int8 attributes`` (17), v1 ``int64 timestamp`` (18), then key and value.
v2 continues (61-byte header)::

    17 uint32 crc (CRC-32C of bytes 21..end)   21 int16 attributes   23 int32 lastOffsetDelta
    27 int64 baseTimestamp   35 int64 maxTimestamp   43 int64 producerId   51 int16 producerEpoch
    53 int32 baseSequence    57 int32 recordsCount   61 records

Parsing a header never decodes records; ``validate`` checks the CRC over the bytes in place. The ``set_*`` functions
patch fields of an entry in a writable buffer (v2 fields outside the CRC need no recomputation).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

from mq.errors import CorruptRecordError
from mq.records.crc import Buffer, crc32, crc32c

LOG_OVERHEAD = 12
"""offset (8) + size (4): the bytes of an entry before its size-counted part."""
MAGIC_OFFSET = 16
HEADER_PREFIX_SIZE = 17
"""Bytes needed to know an entry's offset, size and magic."""
V2_HEADER_SIZE = 61
V2_CRC_START = 21
LEGACY_CRC_START = 16
MIN_SIZE_FIELD = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}
"""Smallest legal value of the size field per magic (an empty message / an empty batch)."""

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

_V2 = struct.Struct(">qiibIhiqqqhii")
_LEGACY = struct.Struct(">qiIbb")
_INT64 = struct.Struct(">q")
_PREFIX = struct.Struct(">qiiB")
"""base offset, size field, partition leader epoch (v2) or CRC (v0/v1), magic: the first 17 bytes of every entry."""
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class Codec(IntEnum):
    """Compression codec ids, as stored in the low three attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Meaning of an entry's timestamps; magic 0 has none."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(slots=True)
class BatchHeader:
    """Header fields of one entry at ``position`` in some buffer or file.

    For v0/v1 the producer, sequence and count fields are -1 and ``offset`` is the last offset of the entry.
    """

    position: int
    offset: int
    size: int
    """Total bytes of the entry, including the 12-byte log overhead."""
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    partition_leader_epoch: int

    @property
    def last_offset(self) -> int:
        return self.offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def end_position(self) -> int:
        return self.position + self.size

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wrapping at 2**31 - 1), or -1 without a producer sequence."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % 0x80000000

    @property
    def crc_start(self) -> int:
        """Position in the buffer of the first byte the CRC covers."""
        return self.position + (V2_CRC_START if self.magic >= 2 else LEGACY_CRC_START)


def is_transactional_batch(buf: Buffer) -> bool:
    """Whether ``buf`` starts with a v2 batch marked transactional (its attributes' low byte is at offset 22)."""
    return len(buf) > V2_CRC_START + 1 and buf[MAGIC_OFFSET] >= 2 and bool(buf[V2_CRC_START + 1] & TRANSACTIONAL_BIT)


def peek_size(buf: Buffer, position: int = 0) -> int | None:
    """Total size of the entry at ``position``, or None if fewer than 12 bytes remain."""
    if len(buf) - position < LOG_OVERHEAD:
        return None
    return int(_INT32.unpack_from(buf, position + 8)[0]) + LOG_OVERHEAD


def parse_header(
    buf: Buffer, position: int = 0, max_size: int | None = None, *, complete: bool = True
) -> BatchHeader | None:
    """The header of the entry at ``position``; None if the buffer ends before the whole entry does.

    With ``complete=False`` only the header's own bytes need to be present (61 for v2, 26 for v1, 18 for v0).

    Raises CorruptRecordError for an unknown magic or a size field below the format's minimum or above ``max_size``.
    The CRC is not checked here: see ``validate``.
    """
    available = len(buf) - position
    if available < HEADER_PREFIX_SIZE:
        return None
    offset, size_field, _, magic = _PREFIX.unpack_from(buf, position)
    if magic not in MIN_SIZE_FIELD:
        raise CorruptRecordError(f"invalid magic {magic} at position {position}")
    if size_field < MIN_SIZE_FIELD[magic]:
        raise CorruptRecordError(
            f"record size {size_field} at position {position} is less than the minimum record overhead "
            f"({MIN_SIZE_FIELD[magic]})"
        )
    size = size_field + LOG_OVERHEAD
    if max_size is not None and size > max_size:
        raise CorruptRecordError(f"record size {size} at position {position} exceeds the largest allowable {max_size}")
    if available < (size if complete else min(size, V2_HEADER_SIZE if magic >= 2 else 26)):
        return None
    if magic >= 2:
        (_, _, leader_epoch, _, crc, attrs, delta, first_ts, max_ts, pid, epoch, seq, count) = _V2.unpack_from(
            buf, position
        )
        return BatchHeader(
            position, offset, size, magic, crc, attrs, delta, first_ts, max_ts, pid, epoch, seq, count, leader_epoch
        )
    _, _, crc, _, attrs = _LEGACY.unpack_from(buf, position)
    attrs &= 0xFF
    timestamp = _INT64.unpack_from(buf, position + 18)[0] if magic == 1 else -1
    return BatchHeader(position, offset, size, magic, crc, attrs, 0, timestamp, timestamp, -1, -1, -1, -1, -1)


def iter_headers(buf: Buffer, position: int = 0, max_size: int | None = None) -> Iterator[BatchHeader]:
    """Headers of consecutive entries from ``position`` until the buffer ends or holds only part of an entry."""
    while True:
        header = parse_header(buf, position, max_size)
        if header is None:
            return
        yield header
        position += header.size


def compute_crc(buf: Buffer, header: BatchHeader) -> int:
    """The checksum of the entry's bytes as they are now (CRC-32C for v2, CRC-32 for v0/v1)."""
    view = memoryview(buf)[header.crc_start : header.end_position]
    return crc32c(view) if header.magic >= 2 else crc32(view)


def is_valid(buf: Buffer, header: BatchHeader) -> bool:
    return compute_crc(buf, header) == header.crc


def validate(buf: Buffer, header: BatchHeader) -> None:
    """Raise CorruptRecordError naming stored and computed CRC when the entry's checksum does not match."""
    computed = compute_crc(buf, header)
    if computed != header.crc:
        raise CorruptRecordError(
            f"record at position {header.position} is corrupt (stored crc = {header.crc}, computed crc = {computed})"
        )


def set_offset(buf: bytearray | memoryview, position: int, offset: int) -> None:
    """Write the entry's offset field (v2 base offset, v0/v1 wrapper offset); no CRC covers it."""
    _INT64.pack_into(buf, position, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Write a v2 batch's partition leader epoch (bytes 12..15, outside the CRC)."""
    _INT32.pack_into(buf, position + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, header: BatchHeader, timestamp_ms: int) -> None:
    """Mark the entry as LogAppendTime with ``timestamp_ms`` and recompute its CRC; updates ``header`` too."""
    position = header.position
    header.attributes |= TIMESTAMP_TYPE_BIT
    header.max_timestamp = timestamp_ms
    if header.magic >= 2:
        _INT16.pack_into(buf, position + 21, header.attributes)
        _INT64.pack_into(buf, position + 35, timestamp_ms)
    elif header.magic == 1:
        buf[position + 17] = header.attributes
        _INT64.pack_into(buf, position + 18, timestamp_ms)
        header.first_timestamp = timestamp_ms
    else:
        raise ValueError("magic 0 messages carry no timestamp")
    header.crc = compute_crc(buf, header)
    crc_position = position + (17 if header.magic >= 2 else 12)
    _UINT32.pack_into(buf, crc_position, header.crc)
