"""Zigzag varints of the v2 record format (protobuf ``sint32``/``sint64``).

``n`` is stored as ``(n << 1) ^ (n >> 63)`` in little-endian groups of 7 bits, the high bit of each byte marking
continuation: -1 -> ``01``, 0 -> ``00``, 5 -> ``0a``, 300 -> ``d8 04``. A varint (int32) takes at most 5 bytes, a
varlong (int64) at most 10; zigzag makes both encodings identical for values in the int32 range, so one pair of
functions serves both.
"""

from __future__ import annotations

from functools import cache

from mq.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
MAX_VARLONG_BYTES = 10


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed integer in the int64 range (ValueError outside it)."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} is outside the int64 range of a varlong")
    return encode_unsigned_varint((value << 1) ^ (value >> 63))


def encode_unsigned_varint(n: int) -> bytes:
    """Seven bits per byte, least significant first, high bit set on all but the last; ``n`` >= 0."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_varint(buf: Buffer, position: int) -> tuple[int, int]:
    """(value, position after it) of the zigzag varint at ``position``.

    CorruptRecordError if it runs past the end of ``buf`` or over 10 bytes.
    """
    try:
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
        result = byte & 0x7F
        shift = 7
        position += 1
        while True:
            byte = buf[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                result &= 0xFFFFFFFFFFFFFFFF
                return (result >> 1) ^ -(result & 1), position
            shift += 7
            if shift >= 7 * MAX_VARLONG_BYTES:
                raise CorruptRecordError(f"varint longer than {MAX_VARLONG_BYTES} bytes")
    except IndexError:
        raise CorruptRecordError("varint runs past the end of the record data") from None


@cache
def record_jumps() -> list[int]:
    """For the first two bytes of a v2 record, at index ``b0 | b1 << 8``: the bytes from the record's start to the
    next record's when its length varint takes 1 or 2 bytes (the sign ignored: callers check lengths), else -1.
    64 Ki entries, built once."""
    return [
        (b0 >> 1) + 1 if b0 < 0x80 else ((((b0 & 0x7F) | b1 << 7) >> 1) + 2 if b1 < 0x80 else -1)
        for b1 in range(256)
        for b0 in range(256)
    ]
