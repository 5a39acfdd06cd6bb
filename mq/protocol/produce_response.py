"""The Produce response (v0-v13), encoded by hand: it answers every produce request, so its cost is per request.

Layout (v9+ is flexible: compact lengths and a tagged-field section after each structure)::

    correlation_id int32 [tagged fields: v9+]
    responses: [name string (v0-v12) | topic_id uuid (v13+),
                partition_responses: [index int32, error_code int16, base_offset int64,
                                      log_append_time_ms int64 (v2+), log_start_offset int64 (v5+),
                                      record_errors [batch_index int32, batch_index_error_message nullable
                                                     string] (v8+),
                                      error_message nullable string (v8+),
                                      tags: current_leader (tag 0, v10+)]]
    throttle_time_ms int32 (v1+)
    tags: node_endpoints (tag 0, v10+)

KIP-951 (v10+): a partition answered NOT_LEADER_OR_FOLLOWER names its current leader, and the body the endpoints of
those leaders (``mq.protocol.response_writer``), so the client need not ask Metadata before it retries.

``encode_one_partition`` writes the common answer (one topic, one partition, no error message or record errors,
no throttle) from a layout cached per (version, topic): a Struct whose constant runs (the topic's array and name
prefix, the empty record_errors, null error_message and tagged-field sections, the zero throttle) are fixed bytes.
``with_throttle_time`` writes a client quota's throttle time into an encoded response (found by walking it, as
node endpoints may follow it).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from mq.errors import RecordError
from mq.protocol.frame_fields import I16, I32, I64, count, nullable_string, skip_tagged_fields, uvarint
from mq.protocol.response_writer import (
    NO_LEADER,
    NodeEndpoint,
    ResponseWriter,
    current_leader_value,
    node_endpoints_value,
)
from mq.records.varint import encode_unsigned_varint

MIN_VERSION = 0
MAX_VERSION = 13
FLEXIBLE_FROM = 9
CURRENT_LEADER_FROM = 10
"""The first version with KIP-951's current_leader and node_endpoints."""
TOPIC_IDS_FROM = 13
"""The first version naming topics by id."""

TopicKey = str | uuid.UUID
"""A topic as a response names it: by name before v13, by id from v13."""
LAYOUTS_FROM = 3
"""The first version ``encode_one_partition`` has a cached layout for (older ones are encoded in full)."""


@dataclass(frozen=True, slots=True)
class PartitionResponse:
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[RecordError, ...] = ()
    """The records of the refused batch at fault (sent from v8)."""
    current_leader: tuple[int, int] = NO_LEADER
    """(leader_id, leader_epoch) for NOT_LEADER_OR_FOLLOWER (sent from v10)."""


def encode_produce_response(
    version: int,
    correlation_id: int,
    topics: list[tuple[TopicKey, list[PartitionResponse]]],
    throttle_time_ms: int = 0,
    node_endpoints: list[NodeEndpoint] | None = None,
) -> bytes:
    """The framed response for ``version`` (0-13); below v8 without record_errors and error_message, below v10
    without current leaders and ``node_endpoints``. Topics are keyed by id from v13 (a name below)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"produce response version {version} is not supported")
    w = ResponseWriter(flexible=version >= FLEXIBLE_FROM)
    leaders = version >= CURRENT_LEADER_FROM
    w.run += I32.pack(correlation_id)
    w.tags()
    w.array_length(len(topics))
    for topic, partitions in topics:
        if isinstance(topic, uuid.UUID):
            w.run += topic.bytes
        else:
            w.string(topic)
        w.array_length(len(partitions))
        for p in partitions:
            w.run += I32.pack(p.index) + I16.pack(p.error_code) + I64.pack(p.base_offset)
            if version >= 2:
                w.run += I64.pack(p.log_append_time_ms)
            if version >= 5:
                w.run += I64.pack(p.log_start_offset)
            if version >= 8:
                w.array_length(len(p.record_errors))
                for record_error in p.record_errors:
                    w.run += I32.pack(record_error.batch_index)
                    w.string(record_error.message)
                    w.tags()
                w.string(p.error_message)
            if leaders and p.current_leader != NO_LEADER:
                w.tagged([(0, current_leader_value(p.current_leader))])
            else:
                w.tags()
        w.tags()
    if version >= 1:
        w.run += I32.pack(throttle_time_ms)
    if leaders and node_endpoints:
        w.tagged([(0, node_endpoints_value(node_endpoints))])
    else:
        w.tags()
    return w.finish_bytes()


def with_throttle_time(frame: bytes, version: int, throttle_time_ms: int) -> bytes:
    """``frame``, an encoded response of ``version``, with its throttle_time_ms set to ``throttle_time_ms``; v0 has
    no throttle time: unchanged."""
    if version == 0:
        return frame
    at = _throttle_position(frame, version)
    return frame[:at] + I32.pack(throttle_time_ms) + frame[at + 4 :]


def _throttle_position(frame: bytes, version: int) -> int:
    """Where throttle_time_ms starts in ``frame`` (after the size field, the header and every topic)."""
    flexible = version >= FLEXIBLE_FROM
    end = len(frame)
    at = 8
    if flexible:
        at = skip_tagged_fields(frame, at, end)
    topics, at = count(frame, at, flexible)
    fixed = 14 + (8 if version >= 2 else 0) + (8 if version >= 5 else 0)
    for _ in range(topics):
        if version >= TOPIC_IDS_FROM:
            at += 16
        else:
            size, at = uvarint(frame, at) if flexible else (I16.unpack_from(frame, at)[0] + 1, at + 2)
            at += size - 1
        partitions, at = count(frame, at, flexible)
        for _ in range(partitions):
            at += fixed
            if version >= 8:
                errors, at = count(frame, at, flexible)
                for _ in range(errors):
                    _, at = nullable_string(frame, at + 4, flexible, end)
                    if flexible:
                        at = skip_tagged_fields(frame, at, end)
                _, at = nullable_string(frame, at, flexible, end)
            if flexible:
                at = skip_tagged_fields(frame, at, end)
        if flexible:
            at = skip_tagged_fields(frame, at, end)
    return at


_Layout = tuple[struct.Struct, int, bytes, bytes]
"""(struct, frame size after the size field, bytes from after correlation_id to the partition, bytes after the
partition's offsets)."""
_LAYOUTS: dict[tuple[int, TopicKey], _Layout] = {}
_LAYOUTS_KEPT = 4096
"""Cached layouts at most (one per version and topic produced to); the cache starts over beyond that."""


def encode_one_partition(
    version: int,
    correlation_id: int,
    topic: TopicKey,
    index: int,
    error_code: int,
    base_offset: int,
    log_append_time_ms: int,
    log_start_offset: int,
) -> bytes:
    """``encode_produce_response`` of one topic with one partition carrying no message and no record errors."""
    if version < LAYOUTS_FROM:
        answer = PartitionResponse(index, error_code, base_offset, log_append_time_ms, log_start_offset)
        return encode_produce_response(version, correlation_id, [(topic, [answer])])
    layout = _LAYOUTS.get((version, topic))
    if layout is None:
        layout = _layout(version, topic)
    packer, size, head, tail = layout
    if version >= 5:
        return packer.pack(
            size, correlation_id, head, index, error_code, base_offset, log_append_time_ms, log_start_offset, tail
        )
    return packer.pack(size, correlation_id, head, index, error_code, base_offset, log_append_time_ms, tail)


def _layout(version: int, topic: TopicKey) -> _Layout:
    if not LAYOUTS_FROM <= version <= MAX_VERSION:
        raise ValueError(f"produce response version {version} is not supported")
    if version >= FLEXIBLE_FROM:
        if isinstance(topic, uuid.UUID):
            key = topic.bytes  # v13+: the topic id
        else:
            name = topic.encode("utf-8")
            key = encode_unsigned_varint(len(name) + 1) + name
        head = b"\0" + encode_unsigned_varint(2) + key + encode_unsigned_varint(2)
        tail = b"\1\0\0" + b"\0" + I32.pack(0) + b"\0"  # partition: record_errors, error_message, tags; topic tags
    else:
        name = str(topic).encode("utf-8")
        head = I32.pack(1) + I16.pack(len(name)) + name + I32.pack(1)
        tail = (I32.pack(0) + I16.pack(-1) if version >= 8 else b"") + I32.pack(0)
    offsets = "qqq" if version >= 5 else "qq"
    packer = struct.Struct(f">ii{len(head)}sih{offsets}{len(tail)}s")
    if len(_LAYOUTS) >= _LAYOUTS_KEPT:
        _LAYOUTS.clear()
    layout = _LAYOUTS[version, topic] = (packer, packer.size - 4, head, tail)
    return layout
