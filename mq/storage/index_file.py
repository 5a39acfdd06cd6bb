"""The file side of the offset and time indexes: fixed-size big-endian entries, written with ``pwrite`` and read
through a read-only memory map.

A newly created file is extended (sparse: no blocks are allocated) to ``max_entries`` slots and mapped; an existing
file is mapped at its length and trusted to hold ``length // entry size`` entries, so ``trim`` cuts the file to
exactly its entries when the segment stops being active, and ``resize`` re-expands it when it becomes active again
(an append past the mapping re-expands it too). Field 0 of every entry is its sort key (relative offset,
timestamp); entries are sorted on it.

Why ``pwrite`` and not stores into the map: a store into a page the filesystem has not allocated yet needs a block,
and on a full filesystem the kernel can only answer with SIGBUS, killing the process; ``pwrite`` reports ENOSPC as
an OSError instead. Reads through the map (Linux keeps it coherent with ``pwrite``) only ever touch pages holding
written entries: on tmpfs even a read fault on a hole allocates a page, and so can SIGBUS. The few reads made
before the entries are trusted (the load-time checks, the last entry of a file as opened) use ``pread``, which
reads holes as zeros without allocating.
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
        self._last: tuple[int, ...] | None = self.read_entry(self.entries - 1) if self.entries else None
        self.resize(self.opened_length if self.opened_length else self.max_entries * self.ENTRY.size)

    # --- entries -----------------------------------------------------------------------------------------------

    def entry(self, i: int) -> tuple[int, ...]:
        """Entry ``i`` (< ``entries``) through the map: the lookup path."""
        assert self._mmap is not None
        return self.ENTRY.unpack_from(self._mmap, i * self.ENTRY.size)

    def read_entry(self, i: int) -> tuple[int, ...]:
        """Entry ``i`` with ``pread`` (a hole reads as zeros): for entries not yet known to be written."""
        data = os.pread(self._fd, self.ENTRY.size, i * self.ENTRY.size)
        return self.ENTRY.unpack(data.ljust(self.ENTRY.size, b"\0"))

    @property
    def last(self) -> tuple[int, ...] | None:
        """The last entry, or None without entries (kept in memory: appends compare against it)."""
        return self._last

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
        """Write the next entry; an OSError (ENOSPC, EIO) leaves ``entries`` as it was."""
        if (self.entries + 1) * self.ENTRY.size > self._length:
            self.expand()
        data = self.ENTRY.pack(*fields)
        written = os.pwrite(self._fd, data, self.entries * self.ENTRY.size)
        if written != len(data):
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        self.entries += 1
        self._last = fields

    def truncate_entries(self, keep: int) -> None:
        """Keep the first ``keep`` entries and zero the slots after them (pages already written: no allocation)."""
        if keep < self.entries:
            start, end = keep * self.ENTRY.size, self.entries * self.ENTRY.size
            os.pwrite(self._fd, bytes(end - start), start)
            self.entries = keep
            self._last = self.read_entry(keep - 1) if keep else None

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
            self._mmap = mmap.mmap(self._fd, length, access=mmap.ACCESS_READ)

    def expand(self) -> None:
        """Re-expand the file to ``max_entries`` slots (an active segment's index)."""
        self.resize(max(self.max_entries, self.entries) * self.ENTRY.size)

    def reset(self) -> None:
        """Drop every entry and re-expand, ready for a rebuild: the file is cut to nothing first, so its slots come
        back as holes (never written zeros, which would allocate every block of a preallocated index)."""
        self.entries, self._last = 0, None
        self.resize(0)
        self.expand()

    def trim(self) -> None:
        """Cut the file to its entries, so a later open trusts exactly them."""
        self.resize(self.entries * self.ENTRY.size)

    def flush(self) -> None:
        """fsync the file; nothing once it is closed."""
        fd = self._fd
        if fd >= 0:
            os.fsync(fd)

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.trim()
            finally:
                if self._mmap is not None:
                    self._mmap.close()
                    self._mmap = None
                os.close(self._fd)
                self._fd = -1
