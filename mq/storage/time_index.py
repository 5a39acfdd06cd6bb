"""Time index (``.timeindex``): 12-byte entries ``int64 timestamp | int32 relativeOffset``, big-endian.

An entry (T, O) says every record with a timestamp above T lies after offset O. Timestamps strictly increase
between entries; the last slot is kept for the entry written when the segment is rolled or closed, so the index
counts as full one entry early. The file is written and read like the offset index.
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
    """Kafka's load-time check of a time index file as it is (``length // 12`` entries), read-only."""
    with open(path, "rb") as f:
        length = os.fstat(f.fileno()).st_size
        entries = length // ENTRY_SIZE
        first = last = None
        if entries:
            first = ENTRY.unpack(os.pread(f.fileno(), ENTRY_SIZE, 0))
            last = ENTRY.unpack(os.pread(f.fileno(), ENTRY_SIZE, (entries - 1) * ENTRY_SIZE))
    _check(path, base_offset, length, first, last)


def _check(
    path: Path | str,
    base_offset: int,
    length: int,
    first: tuple[int, int] | None,
    last: tuple[int, int] | None,
) -> None:
    """Kafka's checks in its order; ``first``/``last`` are raw (timestamp, relative offset) entries."""
    where = os.path.abspath(path)
    if first is not None and last is not None:
        if last[0] < first[0]:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({where}) has non-zero size but the last timestamp is "
                f"{last[0]} which is less than the first timestamp {first[0]}"
            )
        if base_offset + last[1] < base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({where}) has non-zero size but the last offset is "
                f"{base_offset + last[1]} which is less than the base offset {base_offset}"
            )
    if length % ENTRY_SIZE:
        raise CorruptIndexError(
            f"Time index file {where} is corrupt, found {length} bytes which is neither positive nor a multiple of "
            f"{ENTRY_SIZE}."
        )


class TimeIndex(IndexFile):
    """The time index of one segment; timestamps strictly and offsets weakly increase."""

    ENTRY = ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        super().__init__(path, base_offset, max_index_size, min_entries=2)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or (-1, base offset)."""
        last = self.last
        if last is None:
            return -1, self.base_offset
        timestamp, rel = last
        return timestamp, self.base_offset + rel

    def sanity_check(self) -> None:
        """Kafka's checks on the entries as opened (a zero-filled tail fails: timestamp 0 < the first one)."""
        first = last = None
        if self.entries:
            (ts0, rel0), (ts1, rel1) = self.read_entry(0), self.read_entry(self.entries - 1)
            first, last = (ts0, rel0), (ts1, rel1)
        _check(self.path, self.base_offset, self.opened_length, first, last)

    def maybe_append(self, timestamp: int, offset: int, *, final: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is above the last one; ``final`` may use the reserved slot."""
        last = self.last
        if timestamp < 0 or (last is not None and timestamp <= last[0]):
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
        self.truncate_entries(self._floor(offset - 1 - self.base_offset, field=1) + 1)
