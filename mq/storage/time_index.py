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


class TimeIndex:
    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // ENTRY_SIZE, 2)
        self.timestamps: list[int] = []
        self.offsets: list[int] = []
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if size:
            for ts, rel in ENTRY.iter_unpack(os.pread(self._fd, size - size % ENTRY_SIZE, 0)):
                self.timestamps.append(ts)
                self.offsets.append(base_offset + rel)
        self._written = len(self.timestamps)
        self.resize(self.max_entries * ENTRY_SIZE)

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
        if keep < len(self.offsets):
            if keep < self._written:
                os.pwrite(self._fd, bytes((self._written - keep) * ENTRY_SIZE), keep * ENTRY_SIZE)
                self._written = keep
            del self.timestamps[keep:]
            del self.offsets[keep:]

    def reset(self) -> None:
        self.truncate_to(-1)

    def resize(self, size: int) -> None:
        os.ftruncate(self._fd, max(size, len(self.timestamps) * ENTRY_SIZE))

    def _write_pending(self) -> None:
        """Entries are appended in memory; they reach the file here (trim, flush, close)."""
        if self._written < len(self.timestamps):
            pending = b"".join(
                ENTRY.pack(t, o - self.base_offset)
                for t, o in zip(self.timestamps[self._written :], self.offsets[self._written :], strict=True)
            )
            os.pwrite(self._fd, pending, self._written * ENTRY_SIZE)
            self._written = len(self.timestamps)

    def trim(self) -> None:
        self._write_pending()
        os.ftruncate(self._fd, len(self.timestamps) * ENTRY_SIZE)

    def flush(self) -> None:
        self._write_pending()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path
