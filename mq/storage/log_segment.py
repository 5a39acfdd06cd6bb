"""One segment of a partition log: the ``.log`` file of batches with its offset and time indexes.

Invariants: the ``.log`` holds whole entries back to back from position 0; ``size`` is its length; every offset
index entry points at the start of a batch whose last offset it names; an index entry is added before an append
when more than ``index_interval_bytes`` were appended since the last entry (so the first append to an empty
segment adds none, and one append adds at most one).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mq.errors import CorruptRecordError
from mq.records.batch_header import V2_HEADER_SIZE, BatchHeader, parse_header, validate
from mq.storage.file_names import DELETED_SUFFIX, index_file, log_file, time_index_file
from mq.storage.offset_index import OffsetIndex
from mq.storage.time_index import TimeIndex

HEADER_READ = V2_HEADER_SIZE
RECOVERY_CHUNK = 8 << 20


@dataclass(frozen=True)
class FileSlice:
    """Bytes ``[position, position + length)`` of an open file: what the fetch path sends with sendfile."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        return os.pread(self.fd, self.length, self.position)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10485760,
        rolling_jitter_ms: int = 0,
        time_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.log_path = log_file(directory, base_offset)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.index = OffsetIndex(index_file(directory, base_offset), base_offset, max_index_size)
        self.time_index = TimeIndex(time_index_file(directory, base_offset), base_offset, max_index_size)
        self.bytes_since_last_index = 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self.first_batch_timestamp = -1
        self.created_ms = time_ms()

    # --- appends -----------------------------------------------------------------------------------------------

    def append(
        self, largest_offset: int, largest_timestamp: int, offset_of_largest: int, data: bytes | bytearray
    ) -> None:
        """Write ``data`` (whole batches, offsets assigned) at the end; index it per the interval rule."""
        if self.size == 0 and data:
            header = parse_header(data, 0, complete=False)
            self.first_batch_timestamp = header.max_timestamp if header is not None else -1
        if largest_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = largest_timestamp, offset_of_largest
        if self.bytes_since_last_index > self.index_interval_bytes:
            self.index.append(largest_offset, self.size)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index = 0
        written = os.write(self.fd, data)
        if written != len(data):
            raise OSError(f"short write to {self.log_path}: {written} of {len(data)} bytes")
        self.size += written
        self.bytes_since_last_index += written

    # --- reading -----------------------------------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader | None:
        """The header of the entry at ``position`` (positions in the returned header are file positions)."""
        data = os.pread(self.fd, HEADER_READ, position)
        try:
            header = parse_header(data, 0, complete=False)
        except CorruptRecordError:
            return None
        if header is None or position + header.size > self.size:
            return None
        header.position = position
        return header

    def headers_from(self, position: int) -> Iterator[BatchHeader]:
        while position < self.size:
            header = self.header_at(position)
            if header is None:
                return
            yield header
            position += header.size

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch at or after ``start_position`` whose last offset is >= ``offset``."""
        _, position = self.index.lookup(offset)
        for header in self.headers_from(max(position, start_position)):
            if header.last_offset >= offset:
                return header
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = True
    ) -> tuple[FileSlice, BatchHeader] | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes (at least one batch
        when ``min_one_message``) and ending at or before ``max_position``; None when nothing qualifies."""
        first = self.translate_offset(start_offset)
        limit = self.size if max_position is None else min(max_position, self.size)
        if first is None or first.position >= limit:
            return None
        if limit - first.position <= max_size:
            return FileSlice(self.fd, first.position, limit - first.position), first
        if first.size > max_size:
            return (FileSlice(self.fd, first.position, first.size), first) if min_one_message else None
        _, position = self.index.lookup_position(first.position + max_size)
        end = max(position, first.position)
        for header in self.headers_from(end):
            if header.end_position > min(first.position + max_size, limit):
                break
            end = header.end_position
        return FileSlice(self.fd, first.position, end - first.position), first

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[BatchHeader, int] | None:
        """The first batch whose max timestamp is >= ``timestamp``, with its position."""
        _, offset = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(offset)
        for header in self.headers_from(position):
            if header.max_timestamp >= timestamp:
                return header, header.position
        return None

    @property
    def largest_timestamp_ms(self) -> int:
        """Max record timestamp in the segment, or the file's modification time without timestamps."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def read_next_offset(self) -> int:
        """One past the last offset in the segment (the base offset when empty)."""
        _, position = self.index.lookup_position(self.size)
        last = None
        for header in self.headers_from(position):
            last = header
        return self.base_offset if last is None else last.next_offset

    # --- recovery and truncation -------------------------------------------------------------------------------

    def recover(self, max_message_size: int) -> int:
        """Validate every entry (size, CRC), rebuild both indexes, truncate at the first invalid or partial entry.

        Returns the number of bytes truncated.
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.bytes_since_last_index = 0
        self.first_batch_timestamp = -1
        file_size = os.fstat(self.fd).st_size
        position = 0
        read_size = RECOVERY_CHUNK
        while position < file_size:
            chunk = os.pread(self.fd, read_size, position)
            consumed = 0
            try:
                while (header := parse_header(chunk, consumed, max_message_size)) is not None:
                    validate(chunk, header)
                    self._index_recovered(header, position + consumed)
                    consumed += header.size
                if consumed == 0:
                    head = parse_header(chunk, 0, max_message_size, complete=False)
                    if head is None or position + head.size > file_size:
                        break  # a partial entry at the end
                    read_size = head.size  # one entry larger than a chunk
                    continue
            except CorruptRecordError:
                position += consumed
                break
            position += consumed
            read_size = RECOVERY_CHUNK
        valid_end = position
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, final=True)
        return truncated

    def _index_recovered(self, header: BatchHeader, position: int) -> None:
        if position == 0:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
        if self.bytes_since_last_index > self.index_interval_bytes:
            self.index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += header.size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        header = self.translate_offset(offset)
        if header is None:
            return 0
        removed = self.size - header.position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self.fd, header.position)
        self.size = header.position
        self.bytes_since_last_index = 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if self.size == 0:
            self.first_batch_timestamp = -1
        return removed

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def time_to_roll(self, now_ms: int, incoming_max_timestamp: int, segment_ms: int) -> bool:
        """Kafka's time rule: by batch timestamps when both have them, else by the segment's age."""
        if self.size == 0:
            return False
        if self.first_batch_timestamp >= 0 and incoming_max_timestamp >= 0:
            return incoming_max_timestamp - self.first_batch_timestamp > segment_ms - self.rolling_jitter_ms
        return now_ms - self.created_ms > segment_ms - self.rolling_jitter_ms

    def on_become_inactive(self) -> None:
        """The segment stopped being active: write the final time index entry and trim both indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, final=True)
        self.index.trim()
        self.time_index.trim()

    def on_become_active(self) -> None:
        """The segment is appended to again (after a truncation): re-expand both indexes to their maximum size."""
        self.index.resize(self.index.max_entries * self.index.ENTRY.size)
        self.time_index.resize(self.time_index.max_entries * self.time_index.ENTRY.size)

    def flush(self) -> None:
        os.fsync(self.fd)
        self.index.flush()
        self.time_index.flush()

    def _close_indexes(self) -> None:
        """Write the final time index entry, trim and close both indexes (once)."""
        if self.time_index.is_open:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, final=True)
        self.index.close()
        self.time_index.close()

    def close(self) -> None:
        if self.fd >= 0:
            self._close_indexes()
            os.close(self.fd)
            self.fd = -1

    def paths(self) -> list[Path]:
        return [self.log_path, self.index.path, self.time_index.path]

    def mark_deleted(self) -> None:
        """Rename every file to ``*.deleted``; the ``.log`` stays open so reads already handed out still work."""
        self._close_indexes()
        for path in self.paths():
            if path.exists():
                os.rename(path, path.with_name(path.name + DELETED_SUFFIX))
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        self.index.path = self.index.path.with_name(self.index.path.name + DELETED_SUFFIX)
        self.time_index.path = self.time_index.path.with_name(self.time_index.path.name + DELETED_SUFFIX)

    def delete(self) -> None:
        self.close()
        for path in self.paths():
            path.unlink(missing_ok=True)
