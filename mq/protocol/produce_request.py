"""Produce requests (v3-v9) read without copying their record sets.

Body layout after the request header; v9 is flexible (compact strings, arrays and bytes: unsigned varint length
plus one, 0 meaning null; a tagged-field section after each partition, each topic and the body):

    transactional_id  nullable string
    acks              int16
    timeout_ms        int32
    topic_data        [name string, partition_data [index int32, records nullable bytes]]

Record sets come back as memoryview slices of the frame: from a writable frame (the network layer's bytearray)
they are writable, so the log assigns offsets in place and writes them with no copy.

``read_one_partition`` is the immediate path's reader for the common request, one topic with one partition: it
walks the frame with plain offsets and builds no entity; for any other shape it returns None and the caller uses
``decode_produce_request``. Both refuse the same frames (InvalidRequestError) and read the same values.
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
_CLIENT_ID_LENGTH = 8
"""Offset of the header's client_id length (after api_key, api_version, correlation_id)."""


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


OnePartition = tuple[str | None, bool, int, int, str, int, memoryview | None]
"""(client_id, has a transactional_id, acks, timeout_ms, topic name, partition index, records)."""


_LEGACY_HEAD = struct.Struct(">hhiih")
"""transactional_id length, acks, timeout_ms, topic count, topic name length (v3-v8)."""
_LEGACY_PARTITION = struct.Struct(">iii")
"""partition count, partition index, records length (v3-v8)."""
_FLEXIBLE_HEAD = struct.Struct(">BBhiBB")
"""Header tag count, transactional_id length, acks, timeout_ms, topic count, topic name length, when each varint is
one byte (v9)."""
_FLEXIBLE_PARTITION = struct.Struct(">Bi")
"""partition count, partition index (v9)."""
_NO_TAGS = b"\0\0\0"
"""Three empty tagged-field sections: the partition's, the topic's and the body's."""


def read_one_partition(frame: bytearray, version: int) -> OnePartition | None:
    """The fields of a Produce ``version`` (3-9) frame naming one topic with one partition; None for any other
    number of topics or partitions. Raises InvalidRequestError where ``decode_produce_request`` does.

    The frame clients send (no transactional id, one-byte lengths and counts, no tagged fields) is read with one
    unpack per structure; any other frame is read field by field."""
    end = len(frame)
    if end >= _CLIENT_ID_LENGTH + 2:
        (size,) = _I16.unpack_from(frame, _CLIENT_ID_LENGTH)
        at = _CLIENT_ID_LENGTH + 2 + max(size, 0)
        if size >= -1 and at + _FLEXIBLE_HEAD.size + _LEGACY_HEAD.size <= end:
            client_id = None if size < 0 else _text(frame, _CLIENT_ID_LENGTH + 2, size, end)
            if version >= FLEXIBLE_FROM:
                tags, null, acks, timeout_ms, topics, size = _FLEXIBLE_HEAD.unpack_from(frame, at)
                at += _FLEXIBLE_HEAD.size
                common = tags == 0 and null == 0 and topics == 2 and 0 < size < 0x80
                size -= 1
            else:
                null, acks, timeout_ms, topics, size = _LEGACY_HEAD.unpack_from(frame, at)
                at += _LEGACY_HEAD.size
                common = null == -1 and topics == 1 and size >= 0
            if common and at + size + _LEGACY_PARTITION.size <= end:
                name = _text(frame, at, size, end)
                at += size
                if version >= FLEXIBLE_FROM:
                    partitions, index = _FLEXIBLE_PARTITION.unpack_from(frame, at)
                    size, at = _uvarint(frame, at + _FLEXIBLE_PARTITION.size)
                    size -= 1
                    common = partitions == 2 and frame[at + max(size, 0) : at + max(size, 0) + 3] == _NO_TAGS
                else:
                    partitions, index, size = _LEGACY_PARTITION.unpack_from(frame, at)
                    at += _LEGACY_PARTITION.size
                    common = partitions == 1 and at + size <= end
                if common:
                    records = None if size < 0 else memoryview(frame)[at : at + size]
                    return client_id, False, acks, timeout_ms, name, index, records
    return _read_fields(frame, version)


def _read_fields(frame: bytearray, version: int) -> OnePartition | None:
    """``read_one_partition`` for any frame, field by field."""
    end = len(frame)
    if end < _CLIENT_ID_LENGTH + 2:
        raise InvalidRequestError(f"request header truncated: {end} bytes")
    flexible = version >= FLEXIBLE_FROM
    (size,) = _I16.unpack_from(frame, _CLIENT_ID_LENGTH)
    at = _CLIENT_ID_LENGTH + 2
    client_id = None
    if size >= 0:
        client_id = _text(frame, at, size, end)
        at += size
    elif size != -1:
        raise InvalidRequestError(f"invalid client_id length {size}")
    if flexible:
        at = _skip_tags(frame, at)
        size, at = _uvarint(frame, at)
        size -= 1
    else:
        size, at = _legacy(_I16, frame, at, end)
    transactional = size >= 0
    if transactional:
        _text(frame, at, size, end)
        at += size
    if at + 6 > end:
        raise InvalidRequestError(f"produce request truncated at byte {at}")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, at)
    at += 6
    topics, at = _count(frame, at, end, flexible)
    if topics != 1:
        return None
    if flexible:
        size, at = _uvarint(frame, at)
        size -= 1
    else:
        size, at = _legacy(_I16, frame, at, end)
    if size < 0:
        raise InvalidRequestError("produce request names a null topic")
    name = _text(frame, at, size, end)
    at += size
    partitions, at = _count(frame, at, end, flexible)
    if partitions != 1:
        return None
    index, at = _legacy(_I32, frame, at, end)
    if flexible:
        size, at = _uvarint(frame, at)
        size -= 1
    else:
        size, at = _legacy(_I32, frame, at, end)
    records = None
    if size >= 0:
        if at + size > end:
            raise InvalidRequestError(f"produce request truncated at byte {at}")
        records = memoryview(frame)[at : at + size]
        at += size
    if flexible:
        for _ in range(3):  # after the partition, the topic and the body
            at = _skip_tags(frame, at, end)
    return client_id, transactional, acks, timeout_ms, name, index, records


def _legacy(layout: struct.Struct, frame: bytearray, at: int, end: int) -> tuple[int, int]:
    if at + layout.size > end:
        raise InvalidRequestError(f"produce request truncated at byte {at}")
    return layout.unpack_from(frame, at)[0], at + layout.size


def _count(frame: bytearray, at: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (never null in a produce request)."""
    if flexible:
        count, after = _uvarint(frame, at)
        count -= 1
    else:
        count, after = _legacy(_I32, frame, at, end)
    if count < 0:
        raise InvalidRequestError(f"produce request holds a null array at byte {at}")
    return count, after


def _text(frame: bytearray, at: int, size: int, end: int) -> str:
    if at + size > end:
        raise InvalidRequestError(f"produce request truncated at byte {at}")
    try:
        return frame[at : at + size].decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequestError("produce request holds a string that is not valid UTF-8") from None


def _uvarint(frame: bytearray, at: int) -> tuple[int, int]:
    """An unsigned varint: one or two bytes read here, longer ones by the reader the full decoder uses."""
    try:
        first = frame[at]
    except IndexError:
        raise InvalidRequestError(f"produce request truncated at byte {at}") from None
    if first < 0x80:
        return first, at + 1
    if at + 1 < len(frame) and frame[at + 1] < 0x80:
        return (first & 0x7F) | frame[at + 1] << 7, at + 2
    try:
        return read_uvarint(memoryview(frame).toreadonly(), at)
    except (ValueError, DecodeError, IndexError) as exc:
        raise InvalidRequestError(f"produce request holds a bad unsigned varint at byte {at}: {exc}") from None


def _skip_tags(frame: bytearray, at: int, end: int | None = None) -> int:
    """Past a tagged-field section; with ``end``, a field running past it is refused (the body's sections), without
    it the next read refuses it (the header's, as ``parse_request_header`` reads it)."""
    count, at = _uvarint(frame, at)
    for _ in range(count):
        _, at = _uvarint(frame, at)
        size, at = _uvarint(frame, at)
        if end is not None and at + size > end:
            raise InvalidRequestError(f"produce request truncated at byte {at}")
        at += size
    return at
