"""The Fetch response, encoded in pieces so record data can be sent straight from log files.

``encode_fetch_response`` returns the complete framed response as a list of ``bytes`` runs and ``FileRegion``s,
in wire order; the frame's size prefix (first 4 bytes) already counts the regions' lengths. Layout (v4-v16)::

    correlation_id int32 [tagged fields: v12+]
    throttle_time_ms int32, error_code int16 (v7+), session_id int32 (v7+)
    responses: [topic string (v4-12) | topic_id uuid (v13+),
                partitions: [partition_index int32, error_code int16, high_watermark int64,
                             last_stable_offset int64, log_start_offset int64 (v5+),
                             aborted_transactions nullable [producer_id int64, first_offset int64],
                             preferred_read_replica int32 (v11+), records nullable bytes, [tags v12+]]
                [tags v12+]]
    [tags v12+]

Arrays, strings and bytes use int32/int16 lengths before v12 and unsigned-varint (length + 1) from v12 on.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Protocol

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MIN_VERSION = 4
MAX_VERSION = 16


class FileRegion(Protocol):
    """A byte range of an open file (what the log returns for a read)."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


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


@dataclass
class FetchTopic:
    name: str
    topic_id: uuid.UUID | None = None
    partitions: list[FetchPartition] = field(default_factory=list)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Writer:
    """Accumulates byte runs and regions; ``size`` counts both."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.pieces: list[bytes | FileRegion] = []
        self.run = bytearray(b"\0\0\0\0")
        self.size = 0

    def array_length(self, n: int | None) -> None:
        if self.flexible:
            self.run += _uvarint(0 if n is None else n + 1)
        else:
            self.run += _I32.pack(-1 if n is None else n)

    def string(self, text: str) -> None:
        data = text.encode("utf-8")
        self.run += _uvarint(len(data) + 1) if self.flexible else _I16.pack(len(data))
        self.run += data

    def records(self, records: bytes | FileRegion | None) -> None:
        if records is None:
            self.run += _uvarint(0) if self.flexible else _I32.pack(-1)
            return
        length = len(records) if isinstance(records, bytes) else records.length
        self.run += _uvarint(length + 1) if self.flexible else _I32.pack(length)
        if isinstance(records, bytes):
            self.run += records
        elif length:
            self._flush()
            self.pieces.append(records)
            self.size += length

    def tags(self) -> None:
        if self.flexible:
            self.run.append(0)

    def _flush(self) -> None:
        if self.run:
            self.pieces.append(bytes(self.run))
            self.size += len(self.run)
            self.run = bytearray()

    def finish(self) -> list[bytes | FileRegion]:
        self._flush()
        first = self.pieces[0]
        assert isinstance(first, bytes)
        self.pieces[0] = _I32.pack(self.size - 4) + first[4:]
        return self.pieces


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: list[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[bytes | FileRegion]:
    """The framed response for ``version`` (4-16) as pieces in wire order."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"fetch response version {version} is not supported")
    w = _Writer(flexible=version >= 12)
    w.run += _I32.pack(correlation_id)
    w.tags()
    w.run += _I32.pack(throttle_time_ms)
    if version >= 7:
        w.run += _I16.pack(error_code) + _I32.pack(session_id)
    w.array_length(len(topics))
    for topic in topics:
        if version >= 13:
            w.run += (topic.topic_id or uuid.UUID(int=0)).bytes
        else:
            w.string(topic.name)
        w.array_length(len(topic.partitions))
        for p in topic.partitions:
            w.run += _I32.pack(p.partition_index) + _I16.pack(p.error_code) + _I64.pack(p.high_watermark)
            w.run += _I64.pack(p.last_stable_offset)
            if version >= 5:
                w.run += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            w.array_length(None if aborted is None else len(aborted))
            for producer_id, first_offset in aborted or ():
                w.run += _I64.pack(producer_id) + _I64.pack(first_offset)
                w.tags()
            if version >= 11:
                w.run += _I32.pack(p.preferred_read_replica)
            w.records(p.records)
            w.tags()
        w.tags()
    w.tags()
    return w.finish()
