"""Offset index (``.index``): sparse, sorted 8-byte entries ``int32 relativeOffset | int32 position``, big-endian.

An entry (O, P) says the batch whose last offset is O starts at byte P of the segment's ``.log``. The file is
written with pwrite and read through a memory map (see ``index_file``); it is extended (sparse) to its maximum size
(a multiple of 8) while the segment is active, and trimmed to its entries when the segment is closed or rolled; an
existing file is trusted to hold ``length // 8`` entries.
"""

from __future__ import annotations

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


def _check(path: Path | str, base_offset: int, length: int, last_relative: int | None) -> None:
    """Kafka's two checks, in its order: a non-empty index ends at or after the base offset; whole entries."""
    if last_relative is not None and base_offset + last_relative < base_offset:
        raise CorruptIndexError(
            f"Corrupt index found, index file ({os.path.abspath(path)}) has non-zero size but the last offset is "
            f"{base_offset + last_relative} which is less than the base offset {base_offset}."
        )
    if length % ENTRY_SIZE:
        raise CorruptIndexError(
            f"Index file {os.path.abspath(path)} is corrupt, found {length} bytes which is neither positive nor a "
            f"multiple of {ENTRY_SIZE}."
        )


def sanity_check_offset_index(path: Path | str, base_offset: int) -> None:
    """Kafka's load-time check of an index file as it is (``length // 8`` entries), read-only."""
    with open(path, "rb") as f:
        length = os.fstat(f.fileno()).st_size
        entries = length // ENTRY_SIZE
        last = None
        if entries:
            last = ENTRY.unpack(os.pread(f.fileno(), ENTRY_SIZE, (entries - 1) * ENTRY_SIZE))[0]
    _check(path, base_offset, length, last)


class OffsetIndex(IndexFile):
    """The offset index of one segment; relative offsets and positions both increase."""

    ENTRY = ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        super().__init__(path, base_offset, max_index_size, min_entries=1)

    @property
    def last_offset(self) -> int:
        last = self.last
        return self.base_offset + last[0] if last is not None else self.base_offset

    def pairs(self) -> list[tuple[int, int]]:
        """Every (absolute offset, position) entry."""
        return [(self.base_offset + rel, position) for rel, position in self.all_entries()]

    def sanity_check(self) -> None:
        """Kafka's checks, plus: the last two entries increase. Entries are written strictly increasing, so a
        zero-filled tail (an index not trimmed before a crash) fails this where Kafka's checks let it pass."""
        last = self.read_entry(self.entries - 1)[0] if self.entries else None
        _check(self.path, self.base_offset, self.opened_length, last)
        previous = self.read_entry(self.entries - 2)[0] if self.entries >= 2 else None
        if last is not None and previous is not None and last <= previous:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({os.path.abspath(self.path)}) has offsets out of order: "
                f"{self.base_offset + last} follows {self.base_offset + previous}."
            )

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
        self.truncate_entries(self._floor(offset - 1 - self.base_offset) + 1)
