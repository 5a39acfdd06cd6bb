"""The Fetch response, encoded in pieces so record data can be sent straight from log files.

``encode_fetch_response`` returns the complete framed response as a list of ``bytes`` runs and ``FileRegion``s,
in wire order; the frame's size prefix (first 4 bytes) already counts the regions' lengths. Layout (v0-v18)::

    correlation_id int32 [tagged fields: v12+]
    throttle_time_ms int32 (v1+), error_code int16 (v7+), session_id int32 (v7+)
    responses: [topic string (v0-12) | topic_id uuid (v13+),
                partitions: [partition_index int32, error_code int16, high_watermark int64,
                             last_stable_offset int64 (v4+), log_start_offset int64 (v5+),
                             aborted_transactions nullable [producer_id int64, first_offset int64] (v4+),
                             preferred_read_replica int32 (v11+), records nullable bytes,
                             tags (v12+): current_leader (tag 1)]
                [tags v12+]]
    tags (v12+): node_endpoints (tag 0, v16+)

Arrays, strings and bytes use int32/int16 lengths before v12 and unsigned-varint (length + 1) from v12 on. KIP-951
(v16+): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its current leader, and the body
those leaders' endpoints (``mq.protocol.response_writer``). v17 and v18 answer as v16.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from mq.protocol.frame_fields import I16, I32, I64
from mq.protocol.response_writer import (
    NO_LEADER,
    FileRegion,
    NodeEndpoint,
    ResponseWriter,
    current_leader_value,
    node_endpoints_value,
)

MIN_VERSION = 0
MAX_VERSION = 18
TRANSACTIONS_FROM = 4
"""The first version whose partitions carry last_stable_offset and aborted_transactions."""
TOPIC_IDS_FROM = 13
NODE_ENDPOINTS_FROM = 16
"""The first version with node_endpoints, and whose not-leader answers name the current leader (KIP-951)."""


@dataclass
class FetchPartition:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: bytes | FileRegion | None = None
    current_leader: tuple[int, int] = NO_LEADER
    """(leader_id, leader_epoch), sent from v12 when not the default."""


@dataclass
class FetchTopic:
    name: str
    topic_id: uuid.UUID | None = None
    partitions: list[FetchPartition] = field(default_factory=list)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: list[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    positions: list[int] | None = None,
    node_endpoints: list[NodeEndpoint] | None = None,
) -> list[bytes | FileRegion]:
    """The framed response for ``version`` (0-18) as pieces in wire order. ``positions``, for a response without
    file regions, gets the offset in the frame of each partition's error_code (high_watermark, last_stable_offset
    and log_start_offset follow it). ``node_endpoints`` are sent from v16."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"fetch response version {version} is not supported")
    w = ResponseWriter(flexible=version >= 12)
    w.run += I32.pack(correlation_id)
    w.tags()
    if version >= 1:
        w.run += I32.pack(throttle_time_ms)
    if version >= 7:
        w.run += I16.pack(error_code) + I32.pack(session_id)
    w.array_length(len(topics))
    for topic in topics:
        if version >= 13:
            w.run += (topic.topic_id or uuid.UUID(int=0)).bytes
        else:
            w.string(topic.name)
        w.array_length(len(topic.partitions))
        for p in topic.partitions:
            w.run += I32.pack(p.partition_index)
            if positions is not None:
                positions.append(len(w.run))
            w.run += I16.pack(p.error_code) + I64.pack(p.high_watermark)
            if version >= TRANSACTIONS_FROM:
                w.run += I64.pack(p.last_stable_offset)
                if version >= 5:
                    w.run += I64.pack(p.log_start_offset)
                aborted = p.aborted_transactions
                w.array_length(None if aborted is None else len(aborted))
                for producer_id, first_offset in aborted or ():
                    w.run += I64.pack(producer_id) + I64.pack(first_offset)
                    w.tags()
            if version >= 11:
                w.run += I32.pack(p.preferred_read_replica)
            w.records(p.records)
            if w.flexible and p.current_leader != NO_LEADER:
                w.tagged([(1, current_leader_value(p.current_leader))])
            else:
                w.tags()
        w.tags()
    if version >= NODE_ENDPOINTS_FROM and node_endpoints:
        w.tagged([(0, node_endpoints_value(node_endpoints))])
    else:
        w.tags()
    return w.finish()


TopicKey = str | uuid.UUID
"""A topic as a response names it: by name before v13, by id from v13."""

EmptyShape = tuple[tuple[TopicKey, tuple[int, ...]], ...]
"""The topics (names, or ids from v13) and partition indexes of a response, in order."""

EMPTY_LAYOUTS_KEPT = 4096
"""Layouts of empty responses kept (per version, isolation level and shape); all are dropped when full."""

_EMPTY_LAYOUTS: dict[tuple[int, bool, EmptyShape], tuple[bytes, tuple[int, ...]]] = {}
_OFFSETS_V5 = struct.Struct(">hqqq")
_OFFSETS_V4 = struct.Struct(">hqq")
_OFFSETS_V0 = struct.Struct(">hq")


def encode_empty_fetch_response(
    version: int,
    correlation_id: int,
    shape: EmptyShape,
    read_committed: bool,
    partitions: Sequence[tuple[int, int, int, int]],
) -> bytes:
    """``encode_fetch_response`` of a response without records (throttle 0, no error, no session, no aborted
    transactions, no preferred replica): the layout of ``shape`` is encoded once, then copied with the correlation
    id and each partition's (error_code, high_watermark, last_stable_offset, log_start_offset) written in place."""
    key = (version, read_committed, shape)
    layout = _EMPTY_LAYOUTS.get(key)
    if layout is None:
        if len(_EMPTY_LAYOUTS) >= EMPTY_LAYOUTS_KEPT:
            _EMPTY_LAYOUTS.clear()
        aborted: list[tuple[int, int]] | None = [] if read_committed else None
        topics = [
            FetchTopic(*keyed(t), [FetchPartition(p, 0, 0, 0, 0, aborted, -1, b"") for p in ps]) for t, ps in shape
        ]
        found: list[int] = []
        (frame,) = encode_fetch_response(version, 0, topics, positions=found)
        assert isinstance(frame, bytes)
        layout = _EMPTY_LAYOUTS[key] = (frame, tuple(found))
    frame, positions = layout
    out = bytearray(frame)
    I32.pack_into(out, 4, correlation_id)
    if version >= 5:
        for at, values in zip(positions, partitions, strict=True):
            _OFFSETS_V5.pack_into(out, at, *values)
    elif version >= TRANSACTIONS_FROM:
        for at, (error_code, high_watermark, last_stable_offset, _) in zip(positions, partitions, strict=True):
            _OFFSETS_V4.pack_into(out, at, error_code, high_watermark, last_stable_offset)
    else:
        for at, (error_code, high_watermark, _, _) in zip(positions, partitions, strict=True):
            _OFFSETS_V0.pack_into(out, at, error_code, high_watermark)
    return bytes(out)


def keyed(topic: TopicKey) -> tuple[str, uuid.UUID | None]:
    """(name, topic id) of a ``FetchTopic`` for ``topic`` as a response names it."""
    return ("", topic) if isinstance(topic, uuid.UUID) else (topic, None)
