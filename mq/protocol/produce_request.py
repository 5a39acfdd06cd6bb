"""Produce requests (v3-v9) read without copying their record sets.

Body layout after the request header; v9 is flexible (compact strings, arrays and bytes: unsigned varint length
plus one, 0 meaning null; a tagged-field section after each partition, each topic and the body):

    transactional_id  nullable string
    acks              int16
    timeout_ms        int32
    topic_data        [name string, partition_data [index int32, records nullable bytes]]

Record sets come back as memoryview slices of the frame: from a writable frame (the network layer's bytearray)
they are writable, so the log assigns offsets in place and writes them with no copy.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.serial.errors import DecodeError

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, RequestHeader, parse_request_header, peek_api, read_uvarint

FLEXIBLE_FROM = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class ProducePartition:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str
    partition_data: list[ProducePartition]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceTopic]


class _Cursor:
    """Reads the body's fields in order; any read past the end raises InvalidRequestError."""

    __slots__ = ("flexible", "position", "readonly", "view")

    def __init__(self, view: memoryview, position: int, flexible: bool) -> None:
        self.view = view
        self.readonly = view.toreadonly()  # kio's varint reader takes read-only buffers only
        self.position = position
        self.flexible = flexible

    def take(self, size: int) -> memoryview:
        start = self.position
        if size < 0 or start + size > len(self.view):
            raise InvalidRequestError(f"produce request truncated at byte {start}")
        self.position = start + size
        return self.view[start : self.position]

    def fixed(self, layout: struct.Struct) -> tuple[int, ...]:
        return layout.unpack(self.take(layout.size))

    def uvarint(self) -> int:
        try:
            value, self.position = read_uvarint(self.readonly, self.position)
        except (ValueError, DecodeError) as exc:
            raise InvalidRequestError(
                f"produce request holds a bad unsigned varint at byte {self.position}: {exc}"
            ) from None
        return value

    def length(self, legacy: struct.Struct) -> int:
        """A length prefix; -1 means null."""
        return self.uvarint() - 1 if self.flexible else self.fixed(legacy)[0]

    def count(self) -> int:
        """An array's element count; the arrays of a produce request are never null."""
        count = self.length(_I32)
        if count < 0:
            raise InvalidRequestError(f"produce request holds a null array at byte {self.position}")
        return count

    def string(self) -> str | None:
        size = self.length(_I16)
        if size < 0:
            return None
        try:
            return str(self.take(size), "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("produce request holds a string that is not valid UTF-8") from None

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())


def decode_produce_request(frame: bytes | bytearray) -> tuple[RequestHeader, ProduceRequest]:
    """Header and body of a Produce v3-v9 frame. Raises InvalidRequestError on malformed or truncated input."""
    api_key, version, _ = peek_api(frame)
    if api_key != ApiKey.PRODUCE or not 3 <= version <= FLEXIBLE_FROM:
        raise InvalidRequestError(f"not a produce request v3-v{FLEXIBLE_FROM}: api key {api_key} v{version}")
    view = memoryview(frame)
    flexible = version >= FLEXIBLE_FROM
    cursor = _Cursor(view, 0, flexible)
    header = parse_request_header(cursor.readonly, flexible)
    cursor.position = header.size
    transactional_id = cursor.string()
    acks, timeout_ms = cursor.fixed(_ACKS_TIMEOUT)
    topics: list[ProduceTopic] = []
    for _ in range(cursor.count()):
        name = cursor.string()
        if name is None:
            raise InvalidRequestError("produce request names a null topic")
        partitions: list[ProducePartition] = []
        for _ in range(cursor.count()):
            (index,) = cursor.fixed(_I32)
            size = cursor.length(_I32)
            partitions.append(ProducePartition(index, None if size < 0 else cursor.take(size)))
            cursor.skip_tagged_fields()
        topics.append(ProduceTopic(name, partitions))
        cursor.skip_tagged_fields()
    cursor.skip_tagged_fields()
    return header, ProduceRequest(transactional_id, acks, timeout_ms, topics)
