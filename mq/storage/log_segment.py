"""One segment of a partition log: the ``.log`` file of batches with its offset, time and transaction indexes.

Invariants: the ``.log`` holds whole entries back to back from position 0 and ``size`` bytes of them (a
preallocated file is longer, zeros past ``size``, until it is trimmed on roll or close); every offset index entry
points at the start of a batch whose last offset it names; an index entry is added before an append when more than
``index_interval_bytes`` were appended since the last entry (so the first append to an empty segment adds none,
and one append adds at most one); relative offsets (offset - base offset) fit in an int32.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mq.errors import CorruptRecordError
from mq.records.batch_header import V2_HEADER_SIZE, BatchHeader, parse_header, validate
from mq.records.crc import Buffer
from mq.storage.entry_scan import scan_entries
from mq.storage.file_names import (
    DELETED_SUFFIX,
    index_file_name,
    log_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from mq.storage.offset_index import OffsetIndex
from mq.storage.time_index import TimeIndex
from mq.storage.txn_index import TransactionIndex

HEADER_READ = V2_HEADER_SIZE
RECOVERY_CHUNK = 8 << 20
INT_MAX = 2147483647
RECENT_APPENDS = 256
"""How many of its latest appends a segment remembers at least (see ``_appended_last``)."""


def _suffixed(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix) if suffix else path


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
    """A ``.log`` file, kept open as ``fd``, with its offset and time indexes, all named by ``base_offset``.

    Appends are positional writes at ``size``: the fetch path's sendfile shares ``fd`` and moves its file offset
    (asyncio's sendfile leaves it after the bytes it sent), so nothing may depend on that offset."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10485760,
        rolling_jitter_ms: int = 0,
        preallocate_bytes: int = 0,
        time_ms: Callable[[], int] = _wall_ms,
        file_suffix: str = "",
        to_recover: bool = False,
    ) -> None:
        """``to_recover``: ``recover`` is called next, so the indexes are not read (an index left preallocated by a
        crash has a zero tail; reading its last slot faults in pages of a hole, milliseconds per file)."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.log_path = _suffixed(log_file_name(directory, base_offset), file_suffix)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        if self.size == 0 and preallocate_bytes > 0:
            os.posix_fallocate(self.fd, 0, preallocate_bytes)
        self.index = OffsetIndex(
            _suffixed(index_file_name(directory, base_offset), file_suffix), base_offset, max_index_size
        )
        self.time_index = TimeIndex(
            _suffixed(time_index_file_name(directory, base_offset), file_suffix), base_offset, max_index_size
        )
        self.txn_index = TransactionIndex(
            _suffixed(txn_index_file_name(directory, base_offset), file_suffix), base_offset
        )
        """The aborted transactions whose ABORT markers this segment holds (the file exists only once one does)."""
        self.bytes_since_last_index = 0
        self.max_timestamp, self.offset_of_max_timestamp = (
            (-1, base_offset) if to_recover else self.time_index.last_entry
        )
        self._first_batch_timestamp: int | None = None if self.size else -1
        self.created_ms = time_ms()
        self._appended_last: list[int] = []
        self._appended_at: list[int] = []
        """The largest offset and the starting position of each of the latest appends (at most
        ``2 * RECENT_APPENDS``), oldest first: a read near the end starts from the append holding its offset instead
        of scanning headers from the index entry below it, and a read past the last append (a long poll at the log
        end) finds nothing without reading a header."""

    # --- appends -----------------------------------------------------------------------------------------------

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_largest: int, records: Buffer) -> None:
        """Write ``records`` (whole batches, offsets assigned) at the end with one write, then index per the interval
        rule: the entry names ``largest_offset`` at the position where the records start. All or nothing: on an
        OSError (ENOSPC, EIO) the ``.log`` and both indexes are cut back, as far as the file system lets them, to
        what they held before, and the error propagates; no index entry ever points past the ``.log``'s end."""
        position = self.size
        index_entries, time_entries = self.index.entries, self.time_index.entries
        max_timestamp, offset_of_max = self.max_timestamp, self.offset_of_max_timestamp
        if largest_timestamp > max_timestamp:
            max_timestamp, offset_of_max = largest_timestamp, offset_of_largest
        indexed = self.bytes_since_last_index > self.index_interval_bytes
        try:
            written = os.pwrite(self.fd, records, position)  # positional: readers' sendfile moves the fd's offset
            if written != len(records):
                raise OSError(errno.ENOSPC, f"short write to {self.log_path}: {written} of {len(records)} bytes")
            if indexed:
                self.index.append(largest_offset, position)
                self.time_index.maybe_append(max_timestamp, offset_of_max)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, position)
            with contextlib.suppress(OSError):
                self.index.truncate_entries(index_entries)
            with contextlib.suppress(OSError):
                self.time_index.truncate_entries(time_entries)
            raise
        if position == 0:
            first = parse_header(records, 0, complete=False)
            self._first_batch_timestamp = first.max_timestamp if first is not None else -1
        if indexed:
            self.bytes_since_last_index = 0
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self.size = position + written
        self.bytes_since_last_index += written
        self._appended_last.append(largest_offset)
        self._appended_at.append(position)
        if len(self._appended_last) > 2 * RECENT_APPENDS:
            del self._appended_last[:RECENT_APPENDS], self._appended_at[:RECENT_APPENDS]

    def should_roll(
        self,
        now_ms: int,
        incoming_bytes: int,
        incoming_max_timestamp: int,
        incoming_max_offset: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's roll rule, checked before an append: the set would not fit in ``segment_bytes``; the segment is
        non-empty and older than ``segment_ms`` minus the jitter (measured from its first batch's max timestamp to
        the incoming max timestamp, or from its creation time when the first batch has none); an index is full; or
        the incoming offsets are too far from the base offset for int32 relative offsets."""
        if self.size > segment_bytes - incoming_bytes:
            return True
        if self.size > 0:
            if self._first_batch_timestamp is None:
                first = self.header_at(0)
                self._first_batch_timestamp = first.max_timestamp if first is not None else -1
            if self._first_batch_timestamp >= 0:
                waited = incoming_max_timestamp - self._first_batch_timestamp
            else:
                waited = now_ms - self.created_ms
            if waited > segment_ms - self.rolling_jitter_ms:
                return True
        return (
            self.index.is_full or self.time_index.is_full or not 0 <= incoming_max_offset - self.base_offset <= INT_MAX
        )

    # --- reading -----------------------------------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader | None:
        """The header of the whole entry at ``position`` (its ``position`` is the file position), read with one
        header-sized pread; None past the end, for a partial entry or for bytes that are no header."""
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
        """Headers of the entries from ``position`` to the end (or to the first unreadable one)."""
        while position < self.size:
            header = self.header_at(position)
            if header is None:
                return
            yield header
            position += header.size

    def _batch_for(self, offset: int, starting_position: int = 0) -> BatchHeader | None:
        """The first batch at or after ``starting_position`` whose last offset is >= ``offset``."""
        latest = self._appended_last
        i = bisect.bisect_left(latest, offset)
        if 0 < i < len(latest):  # in the i-th of the latest appends: the batches before it end below ``offset``
            position = self._appended_at[i]
        elif latest and i == len(latest):  # past the last append, which holds the segment's last offset
            return None
        else:
            _, position = self.index.lookup(offset)
        for header in self.headers_from(max(position, starting_position)):
            if header.last_offset >= offset:
                return header
        return None

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, int, int] | None:
        """(last offset, position, size) of the first batch at or after ``starting_position`` holding an offset
        >= ``offset``: an index lookup, then a scan of batch headers (never payloads) from there."""
        header = self._batch_for(offset, starting_position)
        return None if header is None else (header.last_offset, header.position, header.size)

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = True
    ) -> FileSlice | None:
        """Whole batches from the one holding ``start_offset``: at most ``max_size`` bytes (but at least that
        batch when ``min_one_message``), ending at or before ``max_position``. None when nothing qualifies."""
        first = self._batch_for(start_offset)
        limit = self.size if max_position is None else min(max_position, self.size)
        if first is None or first.position >= limit:
            return None
        if limit - first.position <= max_size:
            return FileSlice(self.fd, first.position, limit - first.position)
        if first.size > max_size:
            return FileSlice(self.fd, first.position, first.size) if min_one_message else None
        bound = first.position + max_size
        _, position = self.index.lookup_position(bound)
        end = max(position, first.end_position)
        for header in self.headers_from(end):
            if header.end_position > bound:
                break
            end = header.end_position
        return FileSlice(self.fd, first.position, end - first.position)

    def find_offset_by_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch whose max timestamp is >= ``timestamp`` (time index, offset index, header scan)."""
        _, offset = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(offset)
        for header in self.headers_from(position):
            if header.max_timestamp >= timestamp:
                return header
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
        """Validate every entry from position 0 (size within ``max_message_size``, CRC, relative offset in range),
        rebuild both indexes, and truncate the file at the first invalid or partial entry.

        Returns the number of bytes truncated.
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.bytes_since_last_index = 0
        self._first_batch_timestamp = -1
        file_size = os.fstat(self.fd).st_size
        position = 0
        next_offset = self.base_offset
        try:
            for chunk, chunk_position, header in scan_entries(self.fd, file_size, RECOVERY_CHUNK, max_message_size):
                validate(chunk, header)
                if not 0 <= header.last_offset - self.base_offset <= INT_MAX:
                    raise CorruptRecordError(f"offset {header.last_offset} does not fit in this segment")
                self._index_recovered(header, chunk_position + header.position)
                position = chunk_position + header.end_position
                next_offset = header.next_offset
        except CorruptRecordError:
            pass  # truncated at the end of the last valid entry
        self.txn_index.truncate_to(next_offset)  # entries for markers lost with the tail
        truncated = file_size - position
        if truncated:
            os.ftruncate(self.fd, position)
        self.size = position
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, final=True)
        return truncated

    def _index_recovered(self, header: BatchHeader, position: int) -> None:
        if position == 0:
            self._first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
        if self.bytes_since_last_index > self.index_interval_bytes:
            self.index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += header.size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` and re-expand the indexes (the segment becomes
        the active one); returns the bytes removed."""
        header = self._batch_for(offset)
        self.on_become_active()
        if header is None:
            return 0
        removed = self.size - header.position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        os.ftruncate(self.fd, header.position)
        self.size = header.position
        self._appended_last.clear()
        self._appended_at.clear()
        self.bytes_since_last_index = 0
        self._load_largest_timestamp()
        if self.size == 0:
            self._first_batch_timestamp = -1
        return removed

    def _load_largest_timestamp(self) -> None:
        """Max timestamp so far: the last time index entry, then the batches after the offset it names."""
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        _, position = self.index.lookup(self.offset_of_max_timestamp)
        for header in self.headers_from(position):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def _trim_log(self) -> None:
        """Cut a preallocated ``.log`` back to its ``size`` bytes of entries."""
        if os.fstat(self.fd).st_size != self.size:
            os.ftruncate(self.fd, self.size)

    def on_become_inactive(self) -> None:
        """The segment stopped being active (roll, load): append the final time index entry, trim both indexes
        to their entries and the ``.log`` to its entries."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, final=True)
        self.index.trim()
        self.time_index.trim()
        self._trim_log()

    def on_become_active(self) -> None:
        """The segment is appended to (again): re-expand both indexes to their maximum size."""
        self.index.expand()
        self.time_index.expand()

    def flush(self) -> None:
        """fsync the ``.log`` and both indexes (those still open)."""
        fd = self.fd
        if fd >= 0:
            os.fsync(fd)
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def _close_indexes(self) -> None:
        """Write the final time index entry, trim and close both indexes (once)."""
        if self.time_index.is_open:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, final=True)
        self.index.close()
        self.time_index.close()

    def close(self) -> None:
        """Trim the indexes and a preallocated ``.log``, and close every file."""
        if self.fd >= 0:
            self._close_indexes()
            self._trim_log()
            os.close(self.fd)
            self.fd = -1

    def paths(self) -> list[Path]:
        return [self.log_path, self.index.path, self.time_index.path, self.txn_index.path]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the ``.log`` (first) and both indexes from ``<name><old_suffix>`` to ``<name><new_suffix>``;
        the files stay open."""

        def renamed(path: Path) -> Path:
            target = path.with_name(path.name.removesuffix(old_suffix) + new_suffix)
            if path.exists():
                os.rename(path, target)
            return target

        self.log_path = renamed(self.log_path)
        self.index.path = renamed(self.index.path)
        self.time_index.path = renamed(self.time_index.path)
        self.txn_index.path = renamed(self.txn_index.path)

    def mark_deleted(self, *, close_indexes: bool = True) -> None:
        """Rename every file to ``*.deleted``; the ``.log`` stays open so slices already handed out stay valid, and
        without ``close_indexes`` the indexes too (another thread may be flushing them)."""
        if close_indexes:
            self._close_indexes()
        self.change_file_suffixes("", DELETED_SUFFIX)

    def delete(self) -> None:
        """Close the segment and remove its files."""
        self.close()
        for path in self.paths():
            path.unlink(missing_ok=True)
