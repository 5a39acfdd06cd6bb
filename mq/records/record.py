"""One record as read by deep iteration, and the control records that mark transaction ends.

A control record's key is ``int16 version (0), int16 type`` (0 ABORT, 1 COMMIT); an end-transaction marker's value
is ``int16 version (0), int32 coordinator epoch``. Readers take any non-negative version and read the version-0
fields at their fixed positions (a later version may only append fields); a negative version is corrupt.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mq.errors import CorruptRecordError

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What a transaction marker batch says: producer ``producer_id`` at ``producer_epoch`` committed (or aborted)
    its transaction on this partition, as coordinator epoch ``coordinator_epoch`` decided."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool

    @property
    def kind(self) -> int:
        """COMMIT (1) or ABORT (0): the control record type of the marker."""
        return COMMIT if self.commit else ABORT


@dataclass(slots=True)
class Record:
    """One record (v2) or message (v0/v1, inner messages of a wrapper) with its absolute offset."""

    offset: int
    timestamp: int
    """Effective timestamp: for LogAppendTime entries, the batch's (or wrapper's) timestamp."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    sequence: int = -1
    """v2: baseSequence + offsetDelta (wrapping at 2**31 - 1) when the batch has a sequence; else -1."""
    crc: int | None = None
    """v0/v1: the message's stored CRC; None for v2 records (the batch CRC covers them)."""
    is_valid: bool = True
    """v0/v1: the stored CRC matches the message."""
    attributes: int = 0
    """v0/v1: the message's attributes byte; v2: the record's attributes byte (unused by Kafka, 0)."""


def control_key(kind: int) -> bytes:
    """The key of a control record of type ``kind`` (version 0)."""
    return _KEY.pack(0, kind)


def end_txn_marker(coordinator_epoch: int) -> bytes:
    """The value of an ABORT/COMMIT control record (version 0)."""
    return _MARKER.pack(0, coordinator_epoch)


def parse_control_key(key: bytes | None) -> int:
    """The control type of a control record's key: ABORT (0), COMMIT (1), or any other type as stored."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"Invalid version found for control record: {version}. May indicate data corruption")
    return int(kind)


def parse_end_txn_marker(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker's value."""
    if value is None or len(value) < _MARKER.size:
        raise CorruptRecordError("end transaction marker is shorter than 6 bytes")
    version, coordinator_epoch = _MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(
            f"Invalid version found for end transaction marker: {version}. May indicate data corruption"
        )
    return int(coordinator_epoch)
