"""A request body's fields read by position: the readers shared by the decoders written by hand (Produce, Fetch),
the request header and the length guard.

Each reader takes the frame (bytes, bytearray or a memoryview of bytes) and a position and returns (value,
position after it). Lengths are Kafka's: a legacy string has an int16 length and an array or bytes field an int32
one, -1 meaning null; a flexible version writes an unsigned varint of length plus one, 0 meaning null. An unsigned
varint takes at most 5 bytes, as kio reads it.

A value the protocol forbids raises MalformedField (a ValueError, as UnicodeDecodeError is); a read past the end of
the frame raises IndexError or struct.error. ``FIELD_ERRORS`` names them all for the caller to turn into its own
refusal.
"""

from __future__ import annotations

import struct

Frame = bytes | bytearray | memoryview

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


class MalformedField(ValueError):
    """A field whose value the protocol forbids (a null where none may be, a varint over 5 bytes, ...)."""


FIELD_ERRORS = (ValueError, IndexError, struct.error)


def uvarint(data: Frame, position: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes."""
    value = data[position]
    if value < 0x80:
        return value, position + 1
    value = shift = 0
    for i in range(5):
        byte = data[position + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position + i + 1
        shift += 7
    raise MalformedField("an unsigned varint longer than 5 bytes")


def length(data: Frame, position: int, flexible: bool, legacy: struct.Struct) -> tuple[int, int]:
    """The length of a string (``legacy`` I16) or of an array or bytes field (I32); -1 means null."""
    if flexible:
        value, position = uvarint(data, position)
        return value - 1, position
    return legacy.unpack_from(data, position)[0], position + legacy.size


def count(data: Frame, position: int, flexible: bool) -> tuple[int, int]:
    """The element count of an array that may not be null."""
    if flexible and 0 < (first := data[position]) < 0x80:  # a one-byte varint: fewer than 127 elements
        return first - 1, position + 1
    value, position = length(data, position, flexible, I32)
    if value < 0:
        raise MalformedField("a null array")
    return value, position


def nullable_string(data: Frame, position: int, flexible: bool, end: int) -> tuple[str | None, int]:
    """A string whose bytes end by ``end``, or None."""
    if flexible and (first := data[position]) < 0x80:  # a one-byte varint: shorter than 127 bytes
        size, position = first - 1, position + 1
    else:
        size, position = length(data, position, flexible, I16)
    if size < 0:
        if size < -1:
            raise MalformedField(f"a string of length {size}")
        return None, position
    stop = position + size
    if stop > end:
        raise MalformedField("a string runs past the end")
    return str(data[position:stop], "utf-8"), stop


def string(data: Frame, position: int, flexible: bool, end: int) -> tuple[str, int]:
    """A string that may not be null, its bytes ending by ``end``."""
    value, position = nullable_string(data, position, flexible, end)
    if value is None:
        raise MalformedField("a null string")
    return value, position


def skip_tagged_fields(data: Frame, position: int, end: int) -> int:
    """Past a tagged-field section whose fields all end by ``end``."""
    if data[position] == 0:
        return position + 1
    fields, position = uvarint(data, position)
    for _ in range(fields):
        _, position = uvarint(data, position)
        size, position = uvarint(data, position)
        position += size
        if position > end:
            raise MalformedField("a tagged field runs past the end")
    return position
