"""Offset index (``.index``): sparse, sorted 8-byte entries ``int32 relativeOffset | int32 position``, big-endian.

An entry (O, P) says the batch whose last offset is O starts at byte P of the segment's ``.log``. The file is
memory-mapped and preallocated to its maximum size (a multiple of 8) while the segment is active, and trimmed to
its entries when the segment is closed or rolled; an existing file is trusted to hold ``length // 8`` entries.
"""

from __future__ import annotations

import os
import struct
from itertools import pairwise
from pathlib import Path

from mq.errors import CorruptIndexError
from mq.storage.index_file import IndexFile

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size


def read_offset_index(path: Path | str, base_offset: int) -> list[tuple[int, int]]:
    """Every (absolute offset, position) entry of an index file, read-only, without any early stop."""
    data = Path(path).read_bytes()
    usable = len(data) - len(data) % ENTRY_SIZE
    return [(base_offset + rel, pos) for rel, pos in ENTRY.iter_unpack(data[:usable])]


def sanity_check_offset_index(path: Path | str, base_offset: int) -> None:
    """Kafka's load-time check: length a multiple of 8, and a non-empty index ends at or after the base offset."""
    size = os.path.getsize(path)
    if size % ENTRY_SIZE:
        raise CorruptIndexError(
            f"Index file {Path(path).name} is corrupt, found {size} bytes which is neither positive nor a multiple "
            f"of {ENTRY_SIZE}."
        )
    entries = read_offset_index(path, base_offset)
    if entries and entries[-1][0] < base_offset:
        raise CorruptIndexError(
            f"Corrupt index found, index file ({path}) has non-zero size but the last offset is "
            f"{entries[-1][0]} which is less than the base offset {base_offset}."
        )


class OffsetIndex(IndexFile):
    """The offset index of one segment, memory-mapped; relative offsets and positions both increase."""

    ENTRY = ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        super().__init__(path, base_offset, max_index_size, min_entries=1)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.entry(self.entries - 1)[0] if self.entries else self.base_offset

    def pairs(self) -> list[tuple[int, int]]:
        """Every (absolute offset, position) entry."""
        return [(self.base_offset + rel, position) for rel, position in self.all_entries()]

    def sanity_check(self) -> None:
        """Kafka's check (last offset >= base offset), and offsets strictly increasing (a zero-filled tail left
        by a crash fails it)."""
        offsets = [rel for rel, _ in self.all_entries()]
        if offsets and offsets[-1] < 0:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset is "
                f"{self.base_offset + offsets[-1]} which is less than the base offset {self.base_offset}."
            )
        if any(b <= a for a, b in pairwise(offsets)):
            raise CorruptIndexError(f"Corrupt index found, index file ({self.path}) has offsets out of order.")

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must grow. A full index ignores the call (the segment rolls first)."""
        if self.is_full or (self.entries and offset <= self.last_offset):
            return
        self._put(offset - self.base_offset, position)

    def lookup(self, target: int) -> tuple[int, int]:
        """The greatest entry with offset <= ``target``, else (base offset, 0)."""
        i = self._floor(target - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        rel, position = self.entry(i)
        return self.base_offset + rel, position

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The last entry whose position is <= ``position``, else (base offset, 0)."""
        i = self._floor(position, field=1)
        if i < 0:
            return self.base_offset, 0
        rel, found = self.entry(i)
        return self.base_offset + rel, found

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= ``offset``."""
        self._truncate_entries(self._floor(offset - 1 - self.base_offset) + 1)

    def reset(self) -> None:
        self._truncate_entries(0)
