"""Producer state snapshots (``<offset>.snapshot``): the producers of a partition as of a log offset.

A snapshot named by offset N holds the state after applying every batch below N. Layout (big-endian)::

    0  int16   version       1
    2  uint32  crc           CRC-32C of every byte from offset 6 to the end
    6  int32   entry count
    10 entries, 46 bytes each:
       int64 producer_id, int16 epoch, int32 last_sequence, int64 last_offset, int32 offset_delta,
       int64 timestamp, int32 coordinator_epoch, int64 current_txn_first_offset

``last_sequence``/``last_offset`` describe the producer's last batch (``offset_delta`` = its last minus first
sequence, so its first sequence is ``last_sequence - offset_delta`` mod 2**31); a producer known only by its epoch (no
batch left) stores -1, -1, 0. ``timestamp`` is the producer's last timestamp (its last batch's max timestamp or its
last marker's, what producer.id.expiration.ms is measured from; -1 unknown). ``current_txn_first_offset`` is the first
offset of the producer's open transaction, -1 without one.

An idempotent producer's state (``mq.server.producer_state``) maps onto an entry through its last batch: that
batch's last sequence, last offset and last minus first sequence.

Like Kafka, a snapshot is written in place and fsynced; a torn or damaged file fails its CRC on reading and must be
discarded (the state is then rebuilt from an older snapshot or the log).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mq.records.crc import crc32c
from mq.storage.file_names import SNAPSHOT_SUFFIX, offset_from_file_name

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")
_CRC_OFFSET = 2
_ENTRIES_OFFSET = 6
"""The CRC covers the entry count and the entries."""
_ENTRY = struct.Struct(">qhiqiqiq")
SEQUENCE_MODULUS = 0x80000000


class CorruptSnapshotError(ValueError):
    """A snapshot of an unknown version, with a wrong CRC, or whose entries do not fill it; Kafka's wording."""


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def has_batch(self) -> bool:
        """The entry describes a last batch (a producer known only by its epoch has last offset -1)."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """The first sequence of the last batch (meaningful only with ``has_batch``)."""
        return (self.last_sequence - self.offset_delta) % SEQUENCE_MODULUS


def encode_snapshot(entries: list[ProducerSnapshotEntry]) -> bytes:
    body = bytearray(_HEADER.pack(SNAPSHOT_VERSION, 0, len(entries)))
    for e in entries:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    struct.pack_into(">I", body, _CRC_OFFSET, crc32c(memoryview(body)[_ENTRIES_OFFSET:]))
    return bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot's bytes; CorruptSnapshotError unless version, CRC and length all check out."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {len(data)} bytes is shorter than the header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    if count < 0 or _HEADER.size + count * _ENTRY.size != len(data):
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {count} entries do not fill {len(data)} bytes")
    return [ProducerSnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size :])]


def list_snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the directory's snapshot files, ascending (files not named by an offset are ignored)."""
    offsets = []
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX):
            try:
                offsets.append(offset_from_file_name(name))
            except ValueError:
                continue
    return sorted(offsets)


def write_snapshot(path: Path, entries: list[ProducerSnapshotEntry]) -> None:
    """Write the snapshot file (replacing any) and fsync it."""
    with open(path, "wb") as out:
        out.write(encode_snapshot(entries))
        out.flush()
        os.fsync(out.fileno())


def read_snapshot(path: Path) -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot file; CorruptSnapshotError when it does not check out."""
    return decode_snapshot(path.read_bytes())
