"""The file side of the offset and time indexes: a preallocated file of fixed-size entries.

While the segment is active the file is preallocated to ``max_entries`` slots (zeros past the entries); ``trim``
cuts it to exactly the entries, which is how a later open knows how many there are (``length // entry size``).
Entries are kept in memory by the subclass and written in one ``pwrite`` at trim, flush or close.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path


class IndexFile:
    ENTRY: struct.Struct

    def __init__(self, path: Path, max_index_size: int, min_entries: int) -> None:
        self.path = path
        self.max_entries = max(max_index_size // self.ENTRY.size, min_entries)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        stored = os.pread(self._fd, size - size % self.ENTRY.size, 0) if size else b""
        self._load(list(self.ENTRY.iter_unpack(stored)))
        self._written = self.entries
        os.ftruncate(self._fd, max(self.max_entries, self.entries) * self.ENTRY.size)

    # what a subclass provides
    def _load(self, raw: list[tuple[int, ...]]) -> None:
        raise NotImplementedError

    @property
    def entries(self) -> int:
        raise NotImplementedError

    def _packed_from(self, start: int) -> bytes:
        raise NotImplementedError

    # file handling shared by both indexes
    def _forget_from(self, keep: int) -> None:
        """Zero the slots from ``keep`` on that already reached the file."""
        if keep < self._written:
            os.pwrite(self._fd, bytes((self._written - keep) * self.ENTRY.size), keep * self.ENTRY.size)
            self._written = keep

    def _write_pending(self) -> None:
        if self._written < self.entries:
            os.pwrite(self._fd, self._packed_from(self._written), self._written * self.ENTRY.size)
            self._written = self.entries

    def trim(self) -> None:
        """Cut the file to its entries, so a later open trusts exactly them."""
        self._write_pending()
        os.ftruncate(self._fd, self.entries * self.ENTRY.size)

    def flush(self) -> None:
        self._write_pending()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            os.close(self._fd)
            self._fd = -1
