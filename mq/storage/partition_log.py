"""The log of one partition: ordered segments, offset assignment, reads, rolling, retention, recovery.

Invariants: segments are ordered by base offset and cover ``[log_start_offset, log_end_offset)`` without gaps in
offsets' order; only the last (active) segment is appended to; ``recovery_point`` is the first offset not yet
known to be fsynced; appended batches keep their bytes except the patched base offset, partition leader epoch
and (for LogAppendTime topics) timestamp fields.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mq.config import LONG_MAX, TopicConfig
from mq.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from mq.records import iter_records
from mq.records.batch_header import (
    BatchHeader,
    Codec,
    iter_headers,
    parse_header,
    set_log_append_time,
    set_offset,
    set_partition_leader_epoch,
    validate,
)
from mq.storage.file_names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    file_name,
    offset_from_file_name,
)
from mq.storage.log_segment import FileSlice, LogSegment

log = logging.getLogger(__name__)

INT_MAX = 2147483647


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    num_messages: int
    valid_bytes: int


@dataclass(frozen=True)
class FetchDataInfo:
    fetch_offset: int
    records: FileSlice | None


@dataclass
class _Validated:
    data: bytearray
    headers: list[BatchHeader]


class Log:
    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        *,
        clean_shutdown: bool = False,
        time_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.dir = directory
        self.config = config
        self.time_ms = time_ms
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.unflushed_messages = 0
        self.last_flush_ms = time_ms()
        directory.mkdir(parents=True, exist_ok=True)
        self._load(recovery_point, log_start_offset, clean_shutdown)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.recovery_point = self.log_end_offset if clean_shutdown else min(recovery_point, self.log_end_offset)

    # --- loading -----------------------------------------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> LogSegment:
        jitter = random.randrange(self.config.segment_jitter_ms) if self.config.segment_jitter_ms > 0 else 0
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            rolling_jitter_ms=jitter,
            time_ms=self.time_ms,
        )

    def _complete_swap(self, swap: Path) -> None:
        """Install a ``.log.swap`` (a replacement written before a crash): the segments whose base offsets fall in
        its offset range go, and it becomes a plain ``.log`` whose indexes are rebuilt."""
        base = offset_from_file_name(swap.name)
        end = base
        with open(swap, "rb") as f:
            for header in iter_headers(f.read()):
                end = header.next_offset
        covered = range(base, max(end, base + 1))
        for path in self.dir.iterdir():
            if path.name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and (
                offset_from_file_name(path.name) in covered
            ):
                path.unlink()
        os.rename(swap, swap.with_name(file_name(base, LOG_SUFFIX)))

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        """Open every segment, rebuild missing or corrupt indexes, recover the unflushed tail unless clean."""
        swaps = []
        for path in sorted(self.dir.iterdir()):
            name = path.name
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(path)
            elif name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)) or name.endswith(".tmp"):
                path.unlink(missing_ok=True)
        for swap in swaps:
            self._complete_swap(swap)
        logs = {offset_from_file_name(p.name) for p in self.dir.iterdir() if p.name.endswith(LOG_SUFFIX)}
        needs_recovery = {offset_from_file_name(p.name) for p in swaps}
        for path in self.dir.iterdir():
            if path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and offset_from_file_name(path.name) not in logs:
                path.unlink()
        for base in sorted(logs):
            index_path = self.dir / file_name(base, INDEX_SUFFIX)
            time_index_path = self.dir / file_name(base, TIME_INDEX_SUFFIX)
            index_missing = not index_path.exists()
            for path, entry_size in ((index_path, 8), (time_index_path, 12)):
                if path.exists() and path.stat().st_size % entry_size:
                    log.warning(
                        "Found a corrupted index file %s (size not a multiple of %d); rebuilding", path, entry_size
                    )
                    path.unlink()
                    index_missing = True
            segment = self._new_segment(base)
            try:
                segment.index.sanity_check()
                segment.time_index.sanity_check()
            except CorruptIndexError as exc:
                log.warning("Found a corrupted index file in %s: %s; rebuilding", self.dir, exc)
                needs_recovery.add(base)
            if index_missing:
                needs_recovery.add(base)
            self.segments.append(segment)
        if not self.segments:
            self.segments.append(self._new_segment(max(log_start_offset, 0)))
        self._bases = [s.base_offset for s in self.segments]
        if not clean_shutdown:
            start = max(bisect.bisect_right(self._bases, recovery_point) - 1, 0)
            needs_recovery.update(self._bases[start:])
        for i, segment in enumerate(list(self.segments)):
            if segment.base_offset not in needs_recovery:
                continue
            truncated = segment.recover(self.config.max_message_bytes)
            if truncated:
                log.warning(
                    "Corruption found in segment %d of log %s, truncating to offset %d.",
                    segment.base_offset,
                    self.dir.name,
                    segment.read_next_offset(),
                )
                for later in self.segments[i + 1 :]:
                    later.delete()
                del self.segments[i + 1 :]
                break
        self._bases = [s.base_offset for s in self.segments]
        for segment in self.segments[:-1]:
            segment.on_become_inactive()
        self.log_end_offset = self.active.read_next_offset()

    # --- state -------------------------------------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def update_config(self, config: TopicConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def _segment_for(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    # --- appends -----------------------------------------------------------------------------------------------

    def _validate(self, records: bytes | bytearray | memoryview, *, from_producer: bool) -> _Validated:
        data = bytearray(records)
        headers: list[BatchHeader] = []
        position = 0
        max_message = self.config.max_message_bytes
        while position < len(data):
            header = parse_header(data, position)
            if header is None:
                raise CorruptRecordError(f"record set ends with {len(data) - position} bytes of a partial entry")
            if header.size > max_message:
                raise MessageTooLargeError(
                    f"The record batch of {header.size} bytes is larger than max.message.bytes ({max_message})"
                )
            validate(data, header)
            if (
                from_producer
                and header.magic >= 2
                and (header.records_count <= 0 or header.records_count != header.last_offset_delta + 1)
            ):
                raise InvalidRecordError(
                    f"Batch record count {header.records_count} does not match its offset range "
                    f"{header.last_offset_delta + 1}"
                )
            headers.append(header)
            position += header.size
        if not headers:
            raise CorruptRecordError("the record set is empty")
        if len(data) > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"The record set of {len(data)} bytes is larger than segment.bytes ({self.config.segment_bytes})"
            )
        return _Validated(data, headers)

    def _check_timestamps(self, headers: list[BatchHeader], now: int) -> None:
        limit = self.config.message_timestamp_difference_max_ms
        if limit >= LONG_MAX or self.config.message_timestamp_type != "CreateTime":
            return
        for header in headers:
            if header.magic == 0:
                continue
            for ts in (header.first_timestamp, header.max_timestamp):
                if ts >= 0 and abs(ts - now) > limit:
                    raise InvalidTimestampError(
                        f"Timestamp {ts} of a message is out of range: it must be within {limit} ms of {now}"
                    )

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int) -> LogAppendInfo:
        """Validate, assign offsets from the log end, and append with one write. Nothing is changed on error."""
        validated = self._validate(records, from_producer=True)
        now = self.time_ms()
        self._check_timestamps(validated.headers, now)
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        data = validated.data
        first = offset = self.log_end_offset
        max_ts, offset_of_max, messages = -1, first, 0
        if any(h.magic < 2 and h.codec != Codec.NONE for h in validated.headers):
            data = self._renumber_legacy(data, validated.headers, first)
            validated = self._validate(data, from_producer=False)
        for h in validated.headers:
            if h.magic >= 2:
                set_offset(data, h.position, offset)
                set_partition_leader_epoch(data, h.position, leader_epoch)
                count = h.last_offset_delta + 1
            elif h.codec == Codec.NONE:
                set_offset(data, h.position, offset)
                count = 1
            else:
                count = h.offset - offset + 1  # renumbered wrappers already carry their last offset
            if log_append and h.magic > 0:
                set_log_append_time(data, h, now)
            last = offset + count - 1
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, last
            offset += count
            messages += count
        last_offset = offset - 1
        self._maybe_roll(len(data), max_ts, last_offset)
        self.active.append(last_offset, max_ts, offset_of_max, data)
        self.log_end_offset = offset
        self._after_append(messages)
        return LogAppendInfo(
            first,
            last_offset,
            max_ts,
            offset_of_max,
            now if log_append else -1,
            self.log_start_offset,
            messages,
            len(data),
        )

    @staticmethod
    def _renumber_legacy(data: bytearray, headers: list[BatchHeader], first: int) -> bytearray:
        from mq.records.legacy import assign_offsets_compressed

        out = bytearray()
        offset = first
        for h in headers:
            entry = data[h.position : h.end_position]
            if h.magic < 2 and h.codec != Codec.NONE:
                rebuilt, count = assign_offsets_compressed(bytes(entry), offset)
                out += rebuilt
                offset += count
            else:
                out += entry
                offset += h.last_offset_delta + 1 if h.magic >= 2 else 1
        return out

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches whose offsets the leader assigned; they must continue this log in order."""
        validated = self._validate(records, from_producer=False)
        expected = self.log_end_offset
        max_ts, offset_of_max, messages = -1, expected, 0
        for h in validated.headers:
            first = h.offset if h.magic >= 2 or h.codec == Codec.NONE else None
            if (first is not None and first < expected) or h.last_offset < expected:
                raise InvalidRecordError(
                    f"Out of order offsets: batch ending at {h.last_offset} does not follow {expected - 1}"
                )
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
            messages += h.last_offset - expected + 1
            expected = h.last_offset + 1
        first_offset = self.log_end_offset
        self._maybe_roll(len(validated.data), max_ts, expected - 1)
        self.active.append(expected - 1, max_ts, offset_of_max, validated.data)
        self.log_end_offset = expected
        self._after_append(messages)
        return LogAppendInfo(
            first_offset, expected - 1, max_ts, offset_of_max, -1, self.log_start_offset, messages, len(validated.data)
        )

    def _after_append(self, messages: int) -> None:
        self.unflushed_messages += messages
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, incoming_bytes: int, incoming_max_timestamp: int, last_offset: int) -> None:
        segment = self.active
        config = self.config
        if (
            segment.size > config.segment_bytes - incoming_bytes
            or segment.time_to_roll(self.time_ms(), incoming_max_timestamp, config.segment_ms)
            or segment.index.is_full
            or segment.time_index.is_full
            or last_offset - segment.base_offset > INT_MAX
        ):
            self.roll()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op for an empty active segment there)."""
        if self.active.size == 0 and self.active.base_offset == self.log_end_offset:
            return self.active
        self.active.on_become_inactive()
        segment = self._new_segment(self.log_end_offset)
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        return segment

    # --- reads -------------------------------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, below ``max_offset`` when given."""
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.dir.name}, but we only have log "
                f"segments in the range {self.log_start_offset} to {self.log_end_offset}."
            )
        if start_offset == self.log_end_offset or (max_offset is not None and start_offset >= max_offset):
            return FetchDataInfo(start_offset, None)
        for i in range(self._segment_for(start_offset), len(self.segments)):
            segment = self.segments[i]
            max_position = None
            if max_offset is not None and (i + 1 == len(self.segments) or self._bases[i + 1] > max_offset):
                bound = segment.translate_offset(max_offset)
                max_position = bound.position if bound is not None else None
            found = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if found is not None:
                return FetchDataInfo(start_offset, found[0])
            if max_position is not None:
                break
        return FetchDataInfo(start_offset, None)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= ``timestamp``, or None."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp)
            if found is None:
                continue
            header, position = found
            data = os.pread(segment.fd, header.size, position)
            parsed = parse_header(data, 0)
            if parsed is None:
                continue
            for record in iter_records(data, parsed):
                if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                    return record.offset, record.timestamp
        return None

    # --- flush, truncation, retention --------------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to`` (default: all) and advance the recovery point."""
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target <= self.recovery_point and up_to is not None:
            return
        for i in range(self._segment_for(self.recovery_point), len(self.segments)):
            if self.segments[i].base_offset >= target and i > 0:
                break
            self.segments[i].flush()
        self.recovery_point = max(self.recovery_point, target)
        self.unflushed_messages = 0
        self.last_flush_ms = self.time_ms()

    def maybe_flush(self) -> None:
        """Flush when ``flush.ms`` passed since the last flush and something is unflushed."""
        if self.unflushed_messages and self.time_ms() - self.last_flush_ms >= self.config.flush_ms:
            self.flush()

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower catching up with a new leader)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = self._segment_for(offset)
        for segment in self.segments[keep + 1 :]:
            segment.delete()
        del self.segments[keep + 1 :]
        del self._bases[keep + 1 :]
        self.active.on_become_active()
        self.active.truncate_to(offset)
        self.log_end_offset = self.active.read_next_offset()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = [self._new_segment(offset)]
        self._bases = [offset]
        self.log_end_offset = self.log_start_offset = self.recovery_point = offset

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords); segments wholly below it go at the next retention."""
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = min(offset, self.log_end_offset)
        return True

    def delete_old_segments(self) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns the number of segments deleted."""
        now = self.time_ms()
        config = self.config
        doomed: list[LogSegment] = []
        remaining = self.size_in_bytes - config.retention_bytes
        for i, segment in enumerate(self.segments):
            next_base = self._bases[i + 1] if i + 1 < len(self.segments) else self.log_end_offset
            by_time = config.retention_ms >= 0 and now - segment.largest_timestamp_ms > config.retention_ms
            by_size = config.retention_bytes >= 0 and remaining - segment.size >= 0
            by_start = next_base <= self.log_start_offset
            if not (by_time or by_size or by_start) or segment.size == 0:
                break
            doomed.append(segment)
            remaining -= segment.size
        if not doomed:
            return 0
        if doomed[-1] is self.active:
            self.roll()
        for segment in doomed:
            self.segments.remove(segment)
            segment.mark_deleted()
            self._pending_deletes.append((now + config.file_delete_delay_ms, segment))
        self._bases = [s.base_offset for s in self.segments]
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.remove_expired_files()
        return len(doomed)

    def remove_expired_files(self) -> None:
        """Physically remove ``*.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        now = self.time_ms()
        due = [(t, s) for t, s in self._pending_deletes if t <= now]
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now]
        for _, segment in due:
            segment.delete()

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.delete()
        self._pending_deletes = []

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
