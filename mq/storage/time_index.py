"""Time index (``.timeindex``): 12-byte entries ``int64 timestamp | int32 relativeOffset``, big-endian.

An entry (T, O) says every record with a timestamp above T lies after offset O. Timestamps strictly increase
between entries; the last slot is kept for the entry written when the segment is rolled or closed, so the index
counts as full one entry early. The file is memory-mapped like the offset index.
"""

from __future__ import annotations

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
    """The time index of one segment, memory-mapped; timestamps strictly and offsets weakly increase."""

    ENTRY = ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        super().__init__(path, base_offset, max_index_size, min_entries=2)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or (-1, base offset)."""
        if not self.entries:
            return -1, self.base_offset
        timestamp, rel = self.entry(self.entries - 1)
        return timestamp, self.base_offset + rel

    def sanity_check(self) -> None:
        entries = [(ts, self.base_offset + rel) for ts, rel in self.all_entries()]
        _check(entries, self.path, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, final: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is above the last one; ``final`` may use the reserved slot."""
        if timestamp < 0 or (self.entries and timestamp <= self.entry(self.entries - 1)[0]):
            return
        if self.entries >= self.max_entries or (self.is_full and not final):
            return
        self._put(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the greatest timestamp <= ``timestamp``, else (-1, base offset)."""
        i = self._floor(timestamp)
        if i < 0:
            return -1, self.base_offset
        found, rel = self.entry(i)
        return found, self.base_offset + rel

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        self._truncate_entries(self._floor(offset - 1 - self.base_offset, field=1) + 1)

    def reset(self) -> None:
        self._truncate_entries(0)
