"""The file side of the offset and time indexes: a memory-mapped file of fixed-size big-endian entries.

A newly created file is preallocated to ``max_entries`` slots (zeros past the entries) and mapped; an existing file
is mapped at its length and trusted to hold ``length // entry size`` entries, so ``trim`` cuts the file to exactly
its entries when the segment stops being active, and ``resize`` re-expands it when it becomes active again (an
append past the mapping re-expands it too). Entries are written into the mapping, so they are in the page cache as soon as they are appended; ``flush``
msyncs. Field 0 of every entry is its sort key (relative offset, timestamp); entries are sorted on it.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path


class IndexFile:
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int, min_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.ENTRY.size, min_entries)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._mmap: mmap.mmap | None = None
        self._length = 0
        self.opened_length = os.fstat(self._fd).st_size
        """The file's length when opened (a multiple of the entry size unless the file is corrupt)."""
        self.entries = self.opened_length // self.ENTRY.size
        self.resize(self.opened_length if self.opened_length else self.max_entries * self.ENTRY.size)

    # --- entries -----------------------------------------------------------------------------------------------

    def entry(self, i: int) -> tuple[int, ...]:
        assert self._mmap is not None
        return self.ENTRY.unpack_from(self._mmap, i * self.ENTRY.size)

    def all_entries(self) -> list[tuple[int, ...]]:
        if self._mmap is None or not self.entries:
            return []
        return list(self.ENTRY.iter_unpack(self._mmap[: self.entries * self.ENTRY.size]))

    def _floor(self, target: int, field: int = 0) -> int:
        """The index of the last entry whose ``field`` is <= ``target`` (entries sorted on it), else -1."""
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[field] <= target:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def _put(self, *fields: int) -> None:
        if (self.entries + 1) * self.ENTRY.size > self._length:
            self.expand()
        assert self._mmap is not None
        self.ENTRY.pack_into(self._mmap, self.entries * self.ENTRY.size, *fields)
        self.entries += 1

    def _truncate_entries(self, keep: int) -> None:
        """Keep the first ``keep`` entries and zero the slots after them."""
        if keep < self.entries and self._mmap is not None:
            start, end = keep * self.ENTRY.size, self.entries * self.ENTRY.size
            self._mmap[start:end] = bytes(end - start)
            self.entries = keep

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    # --- file --------------------------------------------------------------------------------------------------

    def resize(self, length: int) -> None:
        """Set the file length (rounded down to whole entries, never below the entries) and remap it."""
        length = max(length - length % self.ENTRY.size, self.entries * self.ENTRY.size)
        if self._mmap is not None and length == self._length:
            return
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        if os.fstat(self._fd).st_size != length:  # even an equal length would stamp the file's mtime
            os.ftruncate(self._fd, length)
        self._length = length
        if length:
            self._mmap = mmap.mmap(self._fd, length)

    def expand(self) -> None:
        """Re-expand the file to ``max_entries`` slots (an active segment's index)."""
        self.resize(max(self.max_entries, self.entries) * self.ENTRY.size)

    def reset(self) -> None:
        """Drop every entry and re-expand, ready for a rebuild: the file is cut to nothing first, so its slots come
        back as holes (never written zeros, which would allocate every block of a preallocated index)."""
        self.entries = 0
        self.resize(0)
        self.expand()

    def trim(self) -> None:
        """Cut the file to its entries, so a later open trusts exactly them."""
        self.resize(self.entries * self.ENTRY.size)

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            if self._mmap is not None:
                self._mmap.close()
                self._mmap = None
            os.close(self._fd)
            self._fd = -1
