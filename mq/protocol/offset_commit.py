"""OffsetCommit (v2-v9) read and answered without kio's entities, for the immediate path.

Request body after the header (v8+ flexible: compact strings and arrays, an unsigned varint of length plus one, 0
meaning null; a tagged-field section after each partition, each topic and the body)::

    group_id string, generation_id_or_member_epoch int32, member_id string,
    group_instance_id nullable string                                          (v7+)
    retention_time_ms int64                                                    (v2-v4)
    topics [name string,
            partitions [partition_index int32, committed_offset int64,
                        committed_leader_epoch int32 (v6+), committed_metadata nullable string]]

Response body: throttle_time_ms int32 (v3+), topics [name string, partitions [partition_index int32, error_code
int16]], flexible as the request from v8.

``read_offset_commit`` reads only frames the full decoder (``codec.decode_request``) reads alike: it returns None
for anything else (a null where none may be, a tagged field, a truncation, text that is not UTF-8, a retention time
kio cannot hold), and the general path answers or refuses that frame.
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import Any

from mq.protocol.codec import InvalidRequestError, parse_request_header
from mq.protocol.frame_fields import FIELD_ERRORS, I32, I64, count, nullable_string, string
from mq.protocol.response_writer import ResponseWriter

MIN_VERSION = 2
MAX_VERSION = 9
FLEXIBLE_FROM = 8

_OFFSET = struct.Struct(">iq")
_OFFSET_EPOCH = struct.Struct(">iqi")
_PARTITION_ERROR = struct.Struct(">ih")
_MAX_TIMEDELTA_MS = (2**63 - 1) // 1000
"""The largest retention time kio reads (it converts it to microseconds in an int64)."""


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """A decoded request; ``topics`` keeps the request's order: (name, [(partition, offset, leader epoch,
    metadata)]), the epoch -1 where the version carries none."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_ms: int
    """-1: the broker's default (and always from v5)."""
    topics: list[tuple[str, list[tuple[int, int, int, str | None]]]]


def read_offset_commit(frame: bytearray, version: int) -> OffsetCommit | None:
    """The request in ``frame`` (OffsetCommit ``version``, 2-9), or None when the full decoder must decide."""
    flexible = version >= FLEXIBLE_FROM
    try:
        header = parse_request_header(frame, flexible)
    except InvalidRequestError:
        return None
    end = len(frame)
    try:
        group_id, at = string(frame, header.size, flexible, end)
        (generation_id,) = I32.unpack_from(frame, at)
        member_id, at = string(frame, at + 4, flexible, end)
        group_instance_id = None
        if version >= 7:
            group_instance_id, at = nullable_string(frame, at, flexible, end)
        retention_ms = -1
        if version <= 4:
            (retention_ms,) = I64.unpack_from(frame, at)
            if abs(retention_ms) > _MAX_TIMEDELTA_MS:
                return None
            at += 8
        layout = _OFFSET_EPOCH if version >= 6 else _OFFSET
        topics: list[tuple[str, list[tuple[int, int, int, str | None]]]] = []
        topic_count, at = count(frame, at, flexible)
        for _ in range(topic_count):
            name, at = string(frame, at, flexible, end)
            partitions: list[tuple[int, int, int, str | None]] = []
            partition_count, at = count(frame, at, flexible)
            for _ in range(partition_count):
                fields = layout.unpack_from(frame, at)
                metadata, at = nullable_string(frame, at + layout.size, flexible, end)
                epoch = fields[2] if version >= 6 else -1
                partitions.append((fields[0], fields[1], epoch, metadata))
                if flexible and not _no_tags(frame, at):
                    return None
                at += flexible
            topics.append((name, partitions))
            if flexible and not _no_tags(frame, at):
                return None
            at += flexible
        if flexible and not _no_tags(frame, at):
            return None
    except FIELD_ERRORS:
        return None
    return OffsetCommit(group_id, generation_id, member_id, group_instance_id, retention_ms, topics)


def offset_commit_of(body: Any) -> OffsetCommit:
    """The request kio decoded (any version), as ``read_offset_commit`` reads it."""
    retention = getattr(body, "retention_time", None)
    return OffsetCommit(
        body.group_id,
        getattr(body, "generation_id_or_member_epoch", -1),  # v1+
        getattr(body, "member_id", ""),  # v1+
        getattr(body, "group_instance_id", None),
        -1 if retention is None else retention // datetime.timedelta(milliseconds=1),
        [
            (
                t.name,
                [
                    (
                        p.partition_index,
                        p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _no_tags(frame: bytearray, at: int) -> bool:
    """An empty tagged-field section at ``at`` (IndexError past the end)."""
    return frame[at] == 0


def encode_offset_commit_response(
    version: int, correlation_id: int, topics: list[tuple[str, list[tuple[int, int]]]]
) -> bytes:
    """The response frame (size prefix included) answering each (partition, error code) of each topic."""
    w = ResponseWriter(flexible=version >= FLEXIBLE_FROM)
    w.run += I32.pack(correlation_id)
    w.tags()  # the response header's
    if version >= 3:
        w.run += I32.pack(0)  # throttle_time_ms
    w.array_length(len(topics))
    for name, partitions in topics:
        w.string(name)
        w.array_length(len(partitions))
        for partition, error in partitions:
            w.run += _PARTITION_ERROR.pack(partition, error)
            w.tags()
        w.tags()
    w.tags()
    return w.finish_bytes()
