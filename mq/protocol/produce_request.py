"""Produce requests (v0-v13) read without copying their record sets.

Body layout after the request header; v9+ is flexible (compact strings, arrays and bytes: unsigned varint length
plus one, 0 meaning null; a tagged-field section after each partition, each topic and the body):

    transactional_id  nullable string (v3+)
    acks              int16
    timeout_ms        int32
    topic_data        [name string (v0-v12) | topic_id uuid (v13+),
                       partition_data [index int32, records nullable bytes]]

v10-v12 read as v9 (they tell what the client accepts back: current leaders, TRANSACTION_ABORTABLE, an implicit
AddPartitionsToTxn for a transactional append); v13 names topics by id, read as ``ProduceTopic.topic_id`` with an
empty name, which the handler resolves.

Record sets come back as memoryview slices of the frame: from a writable frame (the network layer's bytearray)
they are writable, so the log assigns offsets in place and writes them with no copy.

``read_one_partition`` is the immediate path's reader for the frame clients send most (one topic with one
partition, no transactional id): it unpacks the frame at fixed offsets and builds no entity; for any other frame it
returns None and the caller uses ``decode_produce_request``, which alone refuses malformed frames
(InvalidRequestError). Where both read a frame they read the same values.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, RequestHeader, parse_request_header, peek_api
from mq.protocol.frame_fields import (
    FIELD_ERRORS,
    I16,
    I32,
    MalformedField,
    count,
    length,
    nullable_string,
    skip_tagged_fields,
    string,
    uvarint,
)

MAX_VERSION = 13
FLEXIBLE_FROM = 9
TOPIC_IDS_FROM = 13
TRANSACTIONAL_FROM = 3
"""The first version with a transactional_id (and the first whose records must be v2 batches)."""

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
    """The topic's name; empty in a v13+ request until the handler resolves ``topic_id``."""
    partition_data: list[ProducePartition]
    topic_id: uuid.UUID | None = None
    """The topic's id, as a v13+ request names it; None below v13."""


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceTopic]


def decode_produce_request(frame: bytes | bytearray) -> tuple[RequestHeader, ProduceRequest]:
    """Header and body of a Produce v0-v13 frame. Raises InvalidRequestError on malformed or truncated input."""
    api_key, version, _ = peek_api(frame)
    if api_key != ApiKey.PRODUCE or not 0 <= version <= MAX_VERSION:
        raise InvalidRequestError(f"not a produce request v0-v{MAX_VERSION}: api key {api_key} v{version}")
    flexible = version >= FLEXIBLE_FROM
    header = parse_request_header(frame, flexible)
    try:
        return header, _body(memoryview(frame), header.size, version)
    except FIELD_ERRORS as exc:
        raise InvalidRequestError(f"malformed ProduceRequest v{version}: {exc}") from None


def _body(view: memoryview, position: int, version: int) -> ProduceRequest:
    flexible = version >= FLEXIBLE_FROM
    transactional = version >= TRANSACTIONAL_FROM
    by_id = version >= TOPIC_IDS_FROM
    end = len(view)
    transactional_id = None
    if transactional:
        transactional_id, position = nullable_string(view, position, flexible, end)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, position)
    position += _ACKS_TIMEOUT.size
    topics: list[ProduceTopic] = []
    topic_count, position = count(view, position, flexible)
    for _ in range(topic_count):
        topic_id = None
        if by_id:
            if position + 16 > end:
                raise MalformedField("a topic id runs past the end")
            name, topic_id = "", uuid.UUID(bytes=bytes(view[position : position + 16]))
            position += 16
        else:
            name, position = string(view, position, flexible, end)
        partitions: list[ProducePartition] = []
        partition_count, position = count(view, position, flexible)
        for _ in range(partition_count):
            (index,) = I32.unpack_from(view, position)
            size, position = length(view, position + I32.size, flexible, I32)
            records = None
            if size < -1:
                raise MalformedField(f"a record set of length {size}")
            if size >= 0:
                if position + size > end:
                    raise MalformedField("a record set runs past the end")
                records = view[position : position + size]
                position += size
            partitions.append(ProducePartition(index, records))
            if flexible:
                position = skip_tagged_fields(view, position, end)
        topics.append(ProduceTopic(name, partitions, topic_id))
        if flexible:
            position = skip_tagged_fields(view, position, end)
    if flexible:
        skip_tagged_fields(view, position, end)
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


OnePartition = tuple[str | None, bool, int, int, str | uuid.UUID, int, memoryview | None]
"""(client_id, has a transactional_id, acks, timeout_ms, topic name (v3-v12) or id (v13+), partition index,
records)."""


_LEGACY_HEAD = struct.Struct(">hhiih")
"""transactional_id length, acks, timeout_ms, topic count, topic name length (v3-v8)."""
_LEGACY_PARTITION = struct.Struct(">iii")
"""partition count, partition index, records length (v3-v8)."""
_FLEXIBLE_HEAD = struct.Struct(">BBhiBB")
"""Header tag count, transactional_id length, acks, timeout_ms, topic count, topic name length, when each varint is
one byte (v9-v12)."""
_TOPIC_ID_HEAD = struct.Struct(">BBhiB16s")
"""Header tag count, transactional_id length, acks, timeout_ms, topic count, topic id (v13+)."""
_FLEXIBLE_PARTITION = struct.Struct(">Bi")
"""partition count, partition index (v9+)."""
_NO_TAGS = b"\0\0\0"
"""Three empty tagged-field sections: the partition's, the topic's and the body's."""


def read_one_partition(frame: bytearray, version: int) -> OnePartition | None:
    """The fields of the Produce ``version`` (3-13) frame clients send most: one topic with one partition, no
    transactional id, one-byte lengths and counts, no tagged fields; read with one unpack per structure and no
    entity. None for any other frame, and for every frame of v0-v2, which ``decode_produce_request`` reads (or
    refuses)."""
    if version < TRANSACTIONAL_FROM:
        return None
    end = len(frame)
    try:
        (size,) = I16.unpack_from(frame, _CLIENT_ID_LENGTH)
        at = _CLIENT_ID_LENGTH + 2 + max(size, 0)
        if size < -1:
            return None
        client_id = None if size < 0 else frame[_CLIENT_ID_LENGTH + 2 : at].decode("utf-8")
        topic: str | uuid.UUID
        if version >= TOPIC_IDS_FROM:
            tags, null, acks, timeout_ms, topics, topic_id = _TOPIC_ID_HEAD.unpack_from(frame, at)
            at += _TOPIC_ID_HEAD.size
            common = tags == 0 and null == 0 and topics == 2
            size = 0
            topic = uuid.UUID(bytes=topic_id)
        elif version >= FLEXIBLE_FROM:
            tags, null, acks, timeout_ms, topics, size = _FLEXIBLE_HEAD.unpack_from(frame, at)
            at += _FLEXIBLE_HEAD.size
            common = tags == 0 and null == 0 and topics == 2 and 0 < size < 0x80
            size -= 1
        else:
            null, acks, timeout_ms, topics, size = _LEGACY_HEAD.unpack_from(frame, at)
            at += _LEGACY_HEAD.size
            common = null == -1 and topics == 1 and size >= 0
        if not common or at + size > end:
            return None
        if version < TOPIC_IDS_FROM:
            topic = frame[at : at + size].decode("utf-8")
            at += size
        if version >= FLEXIBLE_FROM:
            partitions, index = _FLEXIBLE_PARTITION.unpack_from(frame, at)
            size, at = uvarint(frame, at + _FLEXIBLE_PARTITION.size)
            size -= 1
            common = partitions == 2 and frame[at + max(size, 0) : at + max(size, 0) + 3] == _NO_TAGS
        else:
            partitions, index, size = _LEGACY_PARTITION.unpack_from(frame, at)
            at += _LEGACY_PARTITION.size
            common = partitions == 1 and size >= -1 and at + size <= end
    except FIELD_ERRORS:
        return None
    if not common:
        return None
    records = None if size < 0 else memoryview(frame)[at : at + size]
    return client_id, False, acks, timeout_ms, topic, index, records
