"""Offset index (``.index``): sparse, sorted 8-byte entries ``int32 relativeOffset | int32 position``, big-endian.

An entry (O, P) says the batch whose last offset is O starts at byte P of the segment's ``.log``. The file is
preallocated to its maximum size (a multiple of 8) while the segment is active and trimmed to its entries when the
segment is closed or rolled; an existing file is trusted to hold ``length // 8`` entries. Entries live in memory,
so lookups never touch the file, and reach the file in one write at trim, flush or close (after a crash the
unflushed part of the log is recovered and its indexes rebuilt anyway).
"""

from __future__ import annotations

import bisect
import os
import struct
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
    """The index of one segment; lookups are answered from memory."""

    ENTRY = ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        self.base_offset = base_offset
        self.offsets: list[int] = []
        self.positions: list[int] = []
        super().__init__(path, max_index_size, min_entries=1)

    def _load(self, raw: list[tuple[int, ...]]) -> None:
        self.offsets = [self.base_offset + rel for rel, _ in raw]
        self.positions = [pos for _, pos in raw]

    def _packed_from(self, start: int) -> bytes:
        pairs = zip(self.offsets[start:], self.positions[start:], strict=True)
        return b"".join(ENTRY.pack(o - self.base_offset, p) for o, p in pairs)

    @property
    def entries(self) -> int:
        return len(self.offsets)

    @property
    def is_full(self) -> bool:
        return len(self.offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        return self.offsets[-1] if self.offsets else self.base_offset

    def sanity_check(self) -> None:
        if self.offsets and self.offsets[-1] < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset is "
                f"{self.offsets[-1]} which is less than the base offset {self.base_offset}."
            )
        if any(b <= a for a, b in zip(self.offsets, self.offsets[1:], strict=False)):
            raise CorruptIndexError(f"Corrupt index found, index file ({self.path}) has offsets out of order.")

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must grow. A full index ignores the call (the segment rolls first)."""
        if self.is_full or (self.offsets and offset <= self.offsets[-1]):
            return
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, target: int) -> tuple[int, int]:
        """The greatest entry with offset <= ``target``, else (base offset, 0)."""
        i = bisect.bisect_right(self.offsets, target) - 1
        return (self.offsets[i], self.positions[i]) if i >= 0 else (self.base_offset, 0)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The last entry whose position is <= ``position``, else (base offset, 0)."""
        i = bisect.bisect_right(self.positions, position) - 1
        return (self.offsets[i], self.positions[i]) if i >= 0 else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= ``offset``."""
        keep = bisect.bisect_left(self.offsets, offset)
        self._forget_from(keep)
        del self.offsets[keep:]
        del self.positions[keep:]

    def reset(self) -> None:
        self.truncate_to(-1)
