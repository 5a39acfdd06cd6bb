"""Zigzag varints of the v2 record format (protobuf ``sint32``/``sint64``).

``n`` is stored as ``(n << 1) ^ (n >> 63)`` in little-endian groups of 7 bits, the high bit of each byte marking
continuation: -1 -> ``01``, 0 -> ``00``, 5 -> ``0a``, 300 -> ``d8 04``.
"""

from __future__ import annotations

from mq.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview


def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed 64-bit integer."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_varint(buf: Buffer, position: int) -> tuple[int, int]:
    """(value, position after it) of the zigzag varint at ``position``; CorruptRecordError if it runs off the end."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if position >= end or shift > 63:
            raise CorruptRecordError("varint runs past the end of the record data")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
