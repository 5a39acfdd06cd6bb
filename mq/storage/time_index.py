"""Time index (``.timeindex``): 12-byte entries ``int64 timestamp | int32 relativeOffset``, big-endian.

An entry (T, O) says every record with a timestamp above T lies after offset O. Timestamps strictly increase
between entries; the last slot is kept for the entry written when the segment is rolled or closed, so the index
counts as full one entry early.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from mq.errors import CorruptIndexError
from mq.storage.index_file import IndexFile

ENTRY = struct.Struct(">qi")
ENTRY_SIZE = ENTRY.size


def read_time_index(path: Path | str, base_offset: int) -> list[tuple[int, int]]:
    """Every (timestamp, absolute offset) entry of a time index file, read-only."""
    data = Path(path).read_bytes()
    usable = len(data) - len(data) % ENTRY_SIZE
    return [(ts, base_offset + rel) for ts, rel in ENTRY.iter_unpack(data[:usable])]


def sanity_check_time_index(path: Path | str, base_offset: int) -> None:
    size = os.path.getsize(path)
    if size % ENTRY_SIZE:
        raise CorruptIndexError(
            f"Time index file {Path(path).name} is corrupt, found {size} bytes which is neither positive nor a "
            f"multiple of {ENTRY_SIZE}."
        )
    _check(read_time_index(path, base_offset), path, base_offset)


def _check(entries: list[tuple[int, int]], path: Path | str, base_offset: int) -> None:
    if not entries:
        return
    if entries[-1][0] < entries[0][0]:
        raise CorruptIndexError(
            f"Corrupt time index found, time index file ({path}) has non-zero size but the last timestamp is "
            f"{entries[-1][0]} which is less than the first timestamp {entries[0][0]}"
        )
    if entries[-1][1] < base_offset:
        raise CorruptIndexError(
            f"Corrupt time index found, time index file ({path}) has non-zero size but the last offset is "
            f"{entries[-1][1]} which is less than the base offset {base_offset}"
        )


class TimeIndex(IndexFile):
    ENTRY = ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []
        super().__init__(path, max_index_size, min_entries=2)

    def _load(self, raw: list[tuple[int, ...]]) -> None:
        self.timestamps = [ts for ts, _ in raw]
        self.offsets = [self.base_offset + rel for _, rel in raw]

    def _packed_from(self, start: int) -> bytes:
        pairs = zip(self.timestamps[start:], self.offsets[start:], strict=True)
        return b"".join(ENTRY.pack(t, o - self.base_offset) for t, o in pairs)

    @property
    def entries(self) -> int:
        return len(self.timestamps)

    @property
    def is_full(self) -> bool:
        return len(self.timestamps) >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        return (self.timestamps[-1], self.offsets[-1]) if self.timestamps else (-1, self.base_offset)

    def sanity_check(self) -> None:
        _check(list(zip(self.timestamps, self.offsets, strict=True)), self.path, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, final: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is above the last one; ``final`` may use the reserved slot."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        if timestamp < 0 or len(self.timestamps) >= self.max_entries or (self.is_full and not final):
            return
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the greatest timestamp <= ``timestamp``, else (-1, base offset)."""
        i = bisect.bisect_right(self.timestamps, timestamp) - 1
        return (self.timestamps[i], self.offsets[i]) if i >= 0 else (-1, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        keep = bisect.bisect_left(self.offsets, offset)
        self._forget_from(keep)
        del self.timestamps[keep:]
        del self.offsets[keep:]

    def reset(self) -> None:
        self.truncate_to(-1)
