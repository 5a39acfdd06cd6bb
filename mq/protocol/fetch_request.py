"""Fetch requests (v0-v18) read field by field into tuples, without kio's per-entity decoding.

Body layout after the request header (v12+ is flexible: compact strings and arrays, an unsigned varint of length
plus one, 0 meaning null; a tagged-field section after each partition, topic and forgotten topic and at the end)::

    replica_id int32 (v0-v14), max_wait_ms int32, min_bytes int32, max_bytes int32 (v3+), isolation_level int8 (v4+),
    session_id int32, session_epoch int32                                              (v7+)
    topics [topic string (v0-v12) | topic_id uuid (v13+),
            partitions [partition int32, current_leader_epoch int32 (v9+), fetch_offset int64,
                        last_fetched_epoch int32 (v12+), log_start_offset int64 (v5+), partition_max_bytes int32,
                        tags: replica_directory_id (tag 0, uuid, v17+), high_watermark (tag 1, int64, v18+)]]
    forgotten_topics_data [topic string (v7-v12) | topic_id uuid (v13+), partitions [int32]]       (v7+)
    rack_id string                                                                     (v11+)
    tags: cluster_id (tag 0, string, v12+),
          replica_state (tag 1, v15+: replica_id int32, replica_epoch int64, its own tagged-field section)

It refuses exactly what ``codec.decode_request`` refuses (the length guard, then kio): truncation, a null string
or array, a string that is not UTF-8, a varint longer than 5 bytes, and any tagged field the version does not
define; a tagged-field section is walked both by its sizes and by its values, and must make sense both ways. Bytes
after the body are ignored. A v0-v2 request has no response limit: its ``max_bytes`` reads as ``NO_RESPONSE_LIMIT``
(Kafka's ``Int.MaxValue``), its isolation level as read_uncommitted. From v13 topics are named by id: their names
read as "" and ``topic_ids`` holds the ids (forgotten topics keep theirs); from v15 the replica id comes from
replica_state (-1 without it).
"""

from __future__ import annotations

import struct
import uuid

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, RequestHeader, parse_request_header, peek_api
from mq.protocol.frame_fields import FIELD_ERRORS, MalformedField, count, skip_tagged_fields, string, uvarint

MIN_VERSION = 0
MAX_VERSION = 18
FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13
REPLICA_STATE_FROM = 15
"""The first version carrying the replica id in the replica_state tagged field rather than the body."""
DIRECTORY_ID_FROM = 17
HIGH_WATERMARK_FROM = 18
NO_RESPONSE_LIMIT = 0x7FFFFFFF
UNKNOWN_HIGH_WATERMARK = 0x7FFFFFFFFFFFFFFF
"""A partition's replica high watermark when the request carries none (Kafka's "feature not supported")."""

_COMMON_V0 = struct.Struct(">iii")
_COMMON_V3 = struct.Struct(">iiii")
_COMMON = struct.Struct(">iiiib")
_COMMON_V7 = struct.Struct(">iiiibii")
"""... then session_id, session_epoch."""
_COMMON_V15 = struct.Struct(">iiibii")
"""v7's without replica_id."""

FetchPartitionRequest = tuple[int, int, int, int, int, int, int]
"""(partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, partition_max_bytes,
replica high_watermark); -1 for a field the version does not carry, ``UNKNOWN_HIGH_WATERMARK`` for the last."""

_PARTITION_LAYOUTS = {
    0: struct.Struct(">iqi"),
    5: struct.Struct(">iqqi"),
    9: struct.Struct(">iiqqi"),
    12: struct.Struct(">iiqiqi"),
}
_PARTITION_LAYOUT = {
    version: _PARTITION_LAYOUTS[max(v for v in _PARTITION_LAYOUTS if v <= version)]
    for version in range(MIN_VERSION, MAX_VERSION + 1)
}
"""The partition entry's fixed fields, per version."""


class FetchRequest:
    """A decoded Fetch body; ``topics`` and ``forgotten_topics`` keep the request's order."""

    __slots__ = (
        "forgotten_topics",
        "isolation_level",
        "max_bytes",
        "max_wait_ms",
        "min_bytes",
        "rack_id",
        "replica_id",
        "session_epoch",
        "session_id",
        "topic_ids",
        "topics",
    )

    def __init__(
        self,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
        session_id: int,
        session_epoch: int,
        topics: list[tuple[str, list[FetchPartitionRequest]]],
        forgotten_topics: list[tuple[str | uuid.UUID, list[int]]],
        rack_id: str,
        topic_ids: list[uuid.UUID] | None = None,
    ) -> None:
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.isolation_level = isolation_level
        self.session_id = session_id
        self.session_epoch = session_epoch
        self.topics = topics
        self.forgotten_topics = forgotten_topics
        self.rack_id = rack_id
        self.topic_ids = topic_ids
        """v13+: the id of each of ``topics`` (whose names the handler resolves); None below v13."""


def _no_tagged_fields(data: bytes, position: int) -> int:
    """A tagged-field section of an entity with no known tags: kio refuses any tag in it."""
    if data[position] == 0:
        return position + 1
    fields, position = uvarint(data, position)
    if fields:
        raise MalformedField("an unknown tagged field")
    return position


_REPLICA_STATE = struct.Struct(">iq")
_PARTITION_TAG_SIZES = {0: 16, 1: 8}
"""A partition's tagged fields: replica_directory_id (uuid), high_watermark (int64)."""


def _body_tagged_fields(data: bytes, position: int, version: int) -> int:
    """The body's tagged fields, walked by their sizes (the length guard) and by their values (kio); the replica
    id of a v15+ replica_state (-1 without one)."""
    end = len(data)
    fields, start = uvarint(data, position)
    position = start
    for _ in range(fields):  # by sizes: each field within the frame, cluster_id's string within its field
        tag, position = uvarint(data, position)
        size, position = uvarint(data, position)
        value_end = position + size
        if value_end > end:
            raise MalformedField("a tagged field runs past the end")
        if tag == 0:
            length, after = uvarint(data, position)
            if length - 1 > value_end - after:
                raise MalformedField("cluster_id runs past its tagged field")
        position = value_end
    position = start
    replica_id = -1
    for _ in range(fields):  # by values: the next tag follows each known value
        tag, position = uvarint(data, position)
        _, position = uvarint(data, position)
        if tag == 0:
            _, position = string(data, position, True, end)
        elif tag == 1 and version >= REPLICA_STATE_FROM:
            replica_id, _ = _REPLICA_STATE.unpack_from(data, position)
            position = _no_tagged_fields(data, position + _REPLICA_STATE.size)
        else:
            raise MalformedField(f"unknown tagged field {tag}")
    return replica_id


def _partition_tagged_fields(data: bytes, position: int, version: int) -> tuple[int, int]:
    """A v17+ partition's tagged fields (replica_directory_id, and from v18 high_watermark), walked by their sizes
    and by their values; (the high watermark, the position after them)."""
    if data[position] == 0:
        return UNKNOWN_HIGH_WATERMARK, position + 1
    end = len(data)
    skip_tagged_fields(data, position, end)  # by sizes: every field within the frame
    fields, position = uvarint(data, position)
    high_watermark = UNKNOWN_HIGH_WATERMARK
    for _ in range(fields):
        tag, position = uvarint(data, position)
        _, position = uvarint(data, position)
        if tag not in _PARTITION_TAG_SIZES or (tag == 1 and version < HIGH_WATERMARK_FROM):
            raise MalformedField(f"unknown tagged field {tag}")
        if tag == 1:
            (high_watermark,) = struct.unpack_from(">q", data, position)
        elif position + 16 > end:
            raise MalformedField("a uuid runs past the end")
        position += _PARTITION_TAG_SIZES[tag]
    return high_watermark, position


def decode_fetch_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, FetchRequest]:
    """Header and body of a Fetch v0-v18 frame; raises InvalidRequestError where ``decode_request`` does."""
    data = bytes(frame)
    api_key, version, _ = peek_api(data)
    if api_key != ApiKey.FETCH or not MIN_VERSION <= version <= MAX_VERSION:
        raise InvalidRequestError(f"not a fetch request v{MIN_VERSION}-v{MAX_VERSION}: api key {api_key} v{version}")
    flexible = version >= FLEXIBLE_FROM
    header = parse_request_header(data, flexible)
    try:
        return header, _body(data, header.size, version, flexible)
    except FIELD_ERRORS as exc:
        raise InvalidRequestError(f"malformed FetchRequest v{version}: {exc}") from None


def _body(data: bytes, position: int, version: int, flexible: bool) -> FetchRequest:
    end = len(data)
    if version >= REPLICA_STATE_FROM:
        fixed = (-1, *_COMMON_V15.unpack_from(data, position))
        position += _COMMON_V15.size
    elif version >= 7:
        fixed = _COMMON_V7.unpack_from(data, position)
        position += _COMMON_V7.size
    elif version < 3:
        fixed = (*_COMMON_V0.unpack_from(data, position), NO_RESPONSE_LIMIT, 0, 0, -1)
        position += _COMMON_V0.size
    elif version == 3:
        fixed = (*_COMMON_V3.unpack_from(data, position), 0, 0, -1)
        position += _COMMON_V3.size
    else:
        fixed = (*_COMMON.unpack_from(data, position), 0, -1)
        position += _COMMON.size
    replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = fixed
    layout = _PARTITION_LAYOUT[version]
    unpack, size = layout.unpack_from, layout.size
    by_id = version >= TOPIC_IDS_FROM
    topics: list[tuple[str, list[FetchPartitionRequest]]] = []
    topic_ids: list[uuid.UUID] | None = [] if by_id else None
    topic_count, position = count(data, position, flexible)
    for _ in range(topic_count):
        if topic_ids is not None:
            topic_ids.append(_uuid(data, position))
            topic, position = "", position + 16
        else:
            topic, position = string(data, position, flexible, end)
        partitions: list[FetchPartitionRequest] = []
        n, position = count(data, position, flexible)
        for _ in range(n):
            fields = unpack(data, position)
            position += size
            if version >= 12:
                p, leader_epoch, offset, last_fetched, log_start, max_partition = fields
            elif version >= 9:
                p, leader_epoch, offset, log_start, max_partition = fields
                last_fetched = -1
            elif version >= 5:
                p, offset, log_start, max_partition = fields
                leader_epoch = last_fetched = -1
            else:
                p, offset, max_partition = fields
                leader_epoch = last_fetched = log_start = -1
            high_watermark = UNKNOWN_HIGH_WATERMARK
            if version >= DIRECTORY_ID_FROM:
                high_watermark, position = _partition_tagged_fields(data, position, version)
            elif flexible:
                position = _no_tagged_fields(data, position)
            partitions.append((p, leader_epoch, offset, last_fetched, log_start, max_partition, high_watermark))
        topics.append((topic, partitions))
        if flexible:
            position = _no_tagged_fields(data, position)
    forgotten: list[tuple[str | uuid.UUID, list[int]]] = []
    rack_id = ""
    if version >= 7:
        topic_count, position = count(data, position, flexible)
        for _ in range(topic_count):
            forgotten_topic: str | uuid.UUID
            if by_id:
                forgotten_topic, position = _uuid(data, position), position + 16
            else:
                forgotten_topic, position = string(data, position, flexible, end)
            n, position = count(data, position, flexible)
            if position + 4 * n > end:
                raise MalformedField("forgotten partitions run past the end")
            forgotten.append((forgotten_topic, list(struct.unpack_from(f">{n}i", data, position))))
            position += 4 * n
            if flexible:
                position = _no_tagged_fields(data, position)
        if version >= 11:
            rack_id, position = string(data, position, flexible, end)
    if flexible:
        state_replica_id = _body_tagged_fields(data, position, version)
        if version >= REPLICA_STATE_FROM:
            replica_id = state_replica_id
    return FetchRequest(
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten,
        rack_id,
        topic_ids,
    )


def _uuid(data: bytes, position: int) -> uuid.UUID:
    if position + 16 > len(data):
        raise MalformedField("a uuid runs past the end")
    return uuid.UUID(bytes=data[position : position + 16])
