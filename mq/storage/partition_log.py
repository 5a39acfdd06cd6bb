"""The log of one partition: ordered segments, offset assignment, reads, rolling, retention, recovery.

Invariants: segments are ordered by base offset, each holding offsets from its base offset up to the next one's;
only the last (active) segment is appended to; ``log_start_offset <= log_end_offset``; ``recovery_point`` is the
first offset not yet known to be fsynced; appended batches keep their bytes except the patched base offset,
partition leader epoch and (for LogAppendTime topics) timestamp fields — one positional write per appended set, per-batch
work only — unless the topic's ``compression.type`` names a codec other than a produced entry's: that entry is first
rewritten in the topic's codec (``mq.records.recompress``, on the appending thread, as validation). A lock serialises
appends, reads, rolls, truncation and retention; fsyncs run outside it. The leader epoch cache follows the log: epochs
of appended v2 batches are recorded, and truncation at either end trims it.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from mq.config import LONG_MAX, TopicConfig
from mq.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from mq.records import iter_records
from mq.records.batch_header import (
    V2_HEADER_SIZE,
    BatchHeader,
    Codec,
    TimestampType,
    iter_headers,
    parse_header,
    set_log_append_time,
    set_offset,
    set_partition_leader_epoch,
    validate,
)
from mq.records.crc import Buffer
from mq.records.legacy import assign_offsets_compressed
from mq.records.recompress import recompress, target_codec
from mq.records.validation import RecordRules, validate_records
from mq.storage.checkpoints import LEADER_EPOCH_FILE, LeaderEpochCheckpointFile
from mq.storage.file_names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
    offset_from_file_name,
    snapshot_file_name,
)
from mq.storage.leader_epoch_cache import LeaderEpochFileCache
from mq.storage.log_segment import INT_MAX, FileSlice, LogSegment
from mq.storage.producer_snapshot import list_snapshot_offsets
from mq.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)


def _wall_ms() -> int:
    return int(time.time() * 1000)


Writable = bytearray | memoryview


def _writable(records: Buffer) -> Writable:
    """``records`` itself when it can be patched in place, else a mutable copy."""
    if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
        return records
    return bytearray(records)


class LogAppendInfo(NamedTuple):
    """What an append did: offsets ``first_offset..last_offset`` were written (``num_messages`` of them). A named
    tuple: built once per append, it is the cheapest immutable record."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    """The timestamp written into the batches on a LogAppendTime topic, else -1."""
    log_start_offset: int
    num_messages: int
    valid_bytes: int


@dataclass(frozen=True)
class LogOffsetMetadata:
    """An offset with where it was found: the segment's base offset and the position of its batch in it."""

    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int


@dataclass(frozen=True)
class FetchDataInfo:
    """The answer to a read: where the fetch offset lies, and the file slice of whole batches (None: nothing)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None

    @property
    def fetch_offset(self) -> int:
        return self.fetch_offset_metadata.message_offset


class Log:
    """The log of one partition in ``directory`` (``<topic>-<partition>``)."""

    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        *,
        clean_shutdown: bool = False,
        time_ms: Callable[[], int] = _wall_ms,
        on_roll: Callable[[Log], None] | None = None,
    ) -> None:
        self.dir = directory
        self.on_roll = on_roll
        """Called (under the log's lock, on the appending thread) after a roll left segments above the recovery
        point: it must only hand ``flush_rolled`` to another thread, as Kafka schedules its flush on roll."""
        self.config = config
        self._rules = _record_rules(config)
        self._target_codec = target_codec(config.compression_type)
        self.time_ms = time_ms
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._lock = threading.RLock()
        self.truncations = 0
        """How many times the log was truncated (at the end or fully): the cleaner swaps nothing into a log truncated
        while it cleaned."""
        self._truncated_to: int | None = None
        self.last_flush_ms = time_ms()
        directory.mkdir(parents=True, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(directory / LEADER_EPOCH_FILE))
        """Which leader epoch wrote which offsets; always within [log start, log end]."""
        self._load(recovery_point, log_start_offset, clean_shutdown)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.recovery_point = self.log_end_offset if clean_shutdown else min(recovery_point, self.log_end_offset)

    # --- loading -----------------------------------------------------------------------------------------------

    def _new_segment(self, base_offset: int, *, to_recover: bool = False) -> LogSegment:
        config = self.config
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            rolling_jitter_ms=random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms > 0 else 0,
            preallocate_bytes=config.segment_bytes if config.preallocate else 0,
            time_ms=self.time_ms,
            to_recover=to_recover,
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
            if path.name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)) and (
                offset_from_file_name(path.name) in covered
            ):
                path.unlink()
        os.rename(swap, swap.with_name(file_name(base, LOG_SUFFIX)))

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        """Open every segment, rebuild missing or corrupt indexes, recover the unflushed tail unless clean.

        After an unclean shutdown the segments from the one holding ``recovery_point`` on are recovered (entries
        validated, indexes rebuilt) without looking at their indexes, which may hold a preallocated zero tail;
        the indexes of the segments below it were fsynced when the log rolled past them and are trusted when they
        pass the sanity check, as are all indexes after a clean shutdown."""
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
            if (
                path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
                and offset_from_file_name(path.name) not in logs
            ):
                path.unlink()
        ordered = sorted(logs)
        unflushed_from = ordered[max(bisect.bisect_right(ordered, recovery_point) - 1, 0)] if ordered else 0
        for base in ordered:
            index_missing = not (self.dir / file_name(base, INDEX_SUFFIX)).exists()
            unflushed = not clean_shutdown and base >= unflushed_from
            segment = self._new_segment(base, to_recover=unflushed)
            self.segments.append(segment)
            if unflushed:
                continue
            if index_missing:
                log.info(
                    "Could not find index file corresponding to log file %s, rebuilding index...",
                    self.dir / file_name(base, LOG_SUFFIX),
                )
                needs_recovery.add(base)
            try:
                segment.index.sanity_check()
                segment.time_index.sanity_check()
            except CorruptIndexError as exc:
                log.warning("Found a corrupted index file due to %s. deleting and rebuilding index...", exc)
                needs_recovery.add(base)
        if not clean_shutdown:
            needs_recovery.update(base for base in ordered if base >= unflushed_from)
            if ordered:
                log.info(
                    "Recovering unflushed segments from %d (recovery point %d) in log %s",
                    unflushed_from,
                    recovery_point,
                    self.dir.name,
                )
        for i, segment in enumerate(list(self.segments)):
            if segment.base_offset not in needs_recovery:
                continue
            # A batch this log accepted stays valid if max.message.bytes is lowered later: only the file bounds it.
            truncated = segment.recover(INT_MAX)
            self._assign_recovered_epochs(segment)
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
        if not self.segments:
            self.segments.append(self._new_segment(max(log_start_offset, 0)))
        self._bases = [s.base_offset for s in self.segments]
        for segment in self.segments[:-1]:
            segment.on_become_inactive()
        self.active.on_become_active()
        self.log_end_offset = self.active.read_next_offset()

    def _assign_recovered_epochs(self, segment: LogSegment) -> None:
        """Add to the epoch cache the epochs of a recovered segment's v2 batches newer than its latest (a crash can
        leave batches on disk whose epoch the checkpoint missed). Headers only."""
        cache = self.leader_epoch_cache
        latest = cache.latest_epoch
        for header in segment.headers_from(0):
            epoch = header.partition_leader_epoch
            if header.magic >= 2 and epoch >= 0 and (latest is None or epoch > latest):
                cache.assign(epoch, header.offset)
                latest = epoch

    # --- state -------------------------------------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def lock(self) -> threading.RLock:
        """The lock serialising appends, reads and segment changes (the cleaner snapshots segments under it)."""
        return self._lock

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def update_config(self, config: TopicConfig) -> None:
        """Take a new topic config; it applies to later appends and to segments rolled from now on."""
        with self._lock:
            self.config = config
            self._rules = _record_rules(config)
            self._target_codec = target_codec(config.compression_type)
            for segment in self.segments:
                segment.index_interval_bytes = config.index_interval_bytes

    def _segment_for(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    # --- appends -----------------------------------------------------------------------------------------------

    def _validate(self, data: Buffer, *, from_producer: bool, parsed: BatchHeader | None = None) -> list[BatchHeader]:
        """Headers of every entry of ``data``, each checked: size within max.message.bytes, whole, CRC; a
        producer's entries also record by record (``validate_records``: framing, keys on compacted topics, timestamps
        within message.timestamp.difference.max.ms on CreateTime topics, no LogAppendTime entries on LogAppendTime
        topics), a v2 batch holding as many records as its offset range, at least one."""
        headers: list[BatchHeader] = []
        position, end = 0, len(data)
        max_message = self.config.max_message_bytes
        rules = self._record_rules() if from_producer else None
        while position < end:
            header = parsed if position == 0 and parsed is not None else parse_header(data, position, complete=False)
            if header is None or position + header.size > end:
                raise CorruptRecordError(f"record set ends with {end - position} bytes of a partial entry")
            if header.size > max_message:
                raise MessageTooLargeError(
                    f"The record batch of {header.size} bytes is larger than max.message.bytes ({max_message})"
                )
            validate(data, header)
            if rules is not None:
                if header.magic >= 2 and not 0 < header.records_count == header.last_offset_delta + 1:
                    raise InvalidRecordError(
                        f"Batch record count {header.records_count} does not match its offset range "
                        f"{header.last_offset_delta + 1}"
                    )
                validate_records(data, header, rules)
            headers.append(header)
            position += header.size
        if not headers:
            raise CorruptRecordError("the record set is empty")
        if end > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"The record set of {end} bytes is larger than segment.bytes ({self.config.segment_bytes})"
            )
        return headers

    def _record_rules(self) -> RecordRules:
        """What a producer's records must satisfy on this topic besides their framing, ``now`` set when a
        timestamp rule needs it."""
        rules = self._rules
        return rules if rules.max_timestamp_difference is None else replace(rules, now=self.time_ms())

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, parsed: BatchHeader | None = None
    ) -> LogAppendInfo:
        """Validate, rewrite entries in the topic's ``compression.type`` when it names another codec than theirs
        (the rewritten entries checked against max.message.bytes again), assign offsets from the log end by patching
        ``records`` (in place when it is a writable buffer, such as a produce request's own frame; else a copy), and
        append the set with one write. ``parsed`` is the header of the entry at position 0 when the caller has parsed
        it already. Raises (MessageTooLargeError, RecordListTooLargeError, CorruptRecordError, InvalidRecordError,
        InvalidTimestampError) with the log unchanged."""
        data = _writable(records)
        headers = self._validate(data, from_producer=True, parsed=parsed)
        target = self._target_codec
        if target is not None:
            rewritten = recompress(data, headers, target)
            if rewritten is not None:
                data = rewritten
                headers = self._validate(data, from_producer=False)
        now = self.time_ms()
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        with self._lock:
            first = offset = self.log_end_offset
            maybe_legacy = len(headers) > 1 or headers[0].magic < 2  # Produce v3+ always sends one v2 batch
            if maybe_legacy and any(h.magic < 2 and h.codec != Codec.NONE for h in headers):
                data = self._renumber_legacy(data, headers, first)
                headers = self._validate(data, from_producer=False)
            max_ts, offset_of_max = -1, first
            epoch_start = -1
            for h in headers:
                if h.magic >= 2:
                    set_offset(data, h.position, offset)
                    set_partition_leader_epoch(data, h.position, leader_epoch)
                    epoch_start = offset if epoch_start < 0 else epoch_start
                    offset += h.last_offset_delta + 1
                elif h.codec == Codec.NONE:
                    set_offset(data, h.position, offset)
                    offset += 1
                else:
                    offset = h.offset + 1  # renumbered wrappers already carry their last offset
                if log_append and h.magic > 0:
                    set_log_append_time(data, h, now)
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, offset - 1
            last_offset = offset - 1
            segment = self.active
            if segment.should_roll(
                now, len(data), max_ts, last_offset, self.config.segment_bytes, self.config.segment_ms
            ):
                segment = self.roll()
            if epoch_start >= 0 and leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, epoch_start)
            segment.append(last_offset, max_ts, offset_of_max, data)
            self.log_end_offset = offset
            return LogAppendInfo(
                first,
                last_offset,
                max_ts,
                offset_of_max,
                now if log_append else -1,
                self.log_start_offset,
                offset - first,
                len(data),
            )

    @staticmethod
    def _renumber_legacy(data: Buffer, headers: list[BatchHeader], first: int) -> bytearray:
        """The set with every compressed v0/v1 wrapper rebuilt around inner offsets assigned from ``first``."""
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

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, headers_out: list[BatchHeader] | None = None
    ) -> LogAppendInfo:
        """Append batches whose offsets the leader assigned. They must start at or after the log end offset and
        increase, else InvalidRecordError (the log unchanged). ``headers_out``, when given, receives the validated
        headers of the appended batches (positions in ``records``), so a caller reading each batch's header (producer
        state) parses none again."""
        headers = self._validate(records, from_producer=False)
        with self._lock:
            expected = self.log_end_offset
            first_offset = max_ts = -1
            offset_of_max = expected
            messages = 0
            epoch_starts: list[tuple[int, int]] = []
            for h in headers:
                first = h.offset if h.magic >= 2 or h.codec == Codec.NONE else h.last_offset
                if first < expected or h.last_offset < first:
                    raise InvalidRecordError(
                        f"Out of order offsets found in append to {self.dir.name}: batch {h.offset}..{h.last_offset} "
                        f"after offset {expected - 1} (non-monotonic)"
                    )
                if first_offset < 0:
                    first_offset = first
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, h.last_offset
                epoch = h.partition_leader_epoch
                if h.magic >= 2 and epoch >= 0 and (not epoch_starts or epoch_starts[-1][0] != epoch):
                    epoch_starts.append((epoch, h.offset))
                messages += h.last_offset - first + 1
                expected = h.last_offset + 1
            segment = self.active
            if segment.should_roll(
                self.time_ms(), len(records), max_ts, expected - 1, self.config.segment_bytes, self.config.segment_ms
            ):
                segment = self.roll(first_offset)
            for epoch, start in epoch_starts:
                self.leader_epoch_cache.assign(epoch, start)
            segment.append(expected - 1, max_ts, offset_of_max, records)
            self.log_end_offset = expected
            if headers_out is not None:
                headers_out += headers
            return LogAppendInfo(
                first_offset, expected - 1, max_ts, offset_of_max, -1, self.log_start_offset, messages, len(records)
            )

    @property
    def flush_due(self) -> bool:
        """flush.messages: at least that many messages are above the recovery point. Appends never fsync; the
        broker flushes a log whose flush is due on a worker thread."""
        return self.log_end_offset - self.recovery_point >= self.config.flush_messages

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment named by the log end offset (or ``expected_next_offset`` when larger); an
        empty active segment already there is kept. The old one's indexes and file are trimmed, and ``on_roll``
        is told, so the segments below the new one get fsynced off this thread (``flush_rolled``)."""
        with self._lock:
            base = max(self.log_end_offset, expected_next_offset or 0)
            if self.active.size == 0:
                if self.active.base_offset == base:
                    return self.active
                self.segments.pop().delete()
                self._bases.pop()
            else:
                self.active.on_become_inactive()
            segment = self._new_segment(base)
            self.segments.append(segment)
            self._bases.append(base)
            if self.on_roll is not None and base > self.recovery_point:
                self.on_roll(self)
            return segment

    # --- reads -------------------------------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, from one segment, below ``max_offset`` when given
        (the high watermark for consumers). OffsetOutOfRangeError outside [log start, log end]."""
        with self._lock:
            if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {start_offset} for partition {self.dir.name}, but we only have "
                    f"log segments in the range {self.log_start_offset} to {self.log_end_offset}."
                )
            at_end = LogOffsetMetadata(start_offset, self.active.base_offset, self.active.size)
            if start_offset == self.log_end_offset or (max_offset is not None and start_offset >= max_offset):
                return FetchDataInfo(at_end, None)
            for i in range(self._segment_for(start_offset), len(self.segments)):
                segment = self.segments[i]
                max_position = None
                if max_offset is not None and (i + 1 == len(self.segments) or self._bases[i + 1] > max_offset):
                    bound = segment.translate_offset(max_offset)
                    max_position = bound[1] if bound is not None else None
                found = segment.read(start_offset, max_bytes, max_position, min_one_message)
                if found is not None:
                    return FetchDataInfo(LogOffsetMetadata(start_offset, segment.base_offset, found.position), found)
                if max_position is not None:
                    break
            return FetchDataInfo(at_end, None)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch <= ``epoch`` this log holds, or (-1, -1); see
        ``LeaderEpochFileCache.end_offset_for``."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def entry_timestamp(self, offset: int) -> int | None:
        """The timestamp of the entry holding ``offset``, from its header alone: a v2 batch's base timestamp (at or
        before each of its records'; its max timestamp under LogAppendTime), a v1 message's. None at or beyond the
        log end, below the log start, for v0 messages, or when the segment went away meanwhile."""
        try:
            found = self.read(offset, V2_HEADER_SIZE)
            if found.records is None:
                return None
            header = parse_header(os.pread(found.records.fd, V2_HEADER_SIZE, found.records.position), complete=False)
        except (OffsetOutOfRangeError, OSError, CorruptRecordError):
            return None
        if header is None or header.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
            return None
        return (
            header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else header.first_timestamp
        )

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start with a timestamp >= ``timestamp``,
        or None. Decodes the records of the one batch found."""
        with self._lock:
            for segment in self.segments:
                if segment.max_timestamp < timestamp:
                    continue
                header = segment.find_offset_by_timestamp(timestamp)
                if header is None:
                    continue
                data = os.pread(segment.fd, header.size, header.position)
                parsed = parse_header(data, 0)
                if parsed is None:
                    continue
                for record in iter_records(data, parsed):
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        return record.offset, record.timestamp
            return None

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``fetch_offset``, ``upper_bound_offset``), from the transaction
        indexes of the segment holding ``fetch_offset`` on (an entry sits in the segment of its marker, which follows
        the fetched data)."""
        with self._lock:
            found: list[AbortedTxn] = []
            for segment in self.segments[self._segment_for(fetch_offset) :]:
                result = segment.txn_index.collect_aborted(fetch_offset, upper_bound_offset)
                found += result.aborted
                if result.complete:
                    break
            return found

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction in the index of the segment holding its marker, unless that index already
        holds an entry for this marker or a later one (a replay of the log over markers already indexed)."""
        with self._lock:
            index = self.segments[self._segment_for(txn.last_offset)].txn_index
            indexed = index.last_offset
            if indexed is None or indexed < txn.last_offset:
                index.append(txn)

    def batches_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchHeader]]:
        """(segment, header) of every entry whose last offset is >= ``offset``, in log order (headers only)."""
        with self._lock:
            segments = self.segments[self._segment_for(offset) :]
        for segment in segments:
            for header in segment.headers_from(0):
                if header.last_offset >= offset:
                    yield segment, header

    def legacy_offset_candidates(self) -> list[tuple[int, int]]:
        """(offset, ms) pairs ListOffsets v0 chooses from (Kafka's ``legacyFetchOffsetsBefore``), oldest first: each
        segment's base offset (at least the log start) stamped with its file's modification time, then the log end
        offset stamped now when the active segment holds data."""
        with self._lock:
            candidates = [
                (max(segment.base_offset, self.log_start_offset), int(os.stat(segment.log_path).st_mtime * 1000))
                for segment in self.segments
            ]
            if self.active.size > 0:
                candidates.append((self.log_end_offset, self.time_ms()))
            return candidates

    def fetch_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start holding the largest timestamp of the
        log, or None without timestamps. The segments' running maxima pick the segment; the one batch that holds the
        record is decoded."""
        with self._lock:
            best = max(self.segments, key=lambda segment: segment.max_timestamp)
            if best.max_timestamp < 0:
                return None
            header = best.find_offset_by_timestamp(best.max_timestamp)
            if header is None:
                return None
            data = os.pread(best.fd, header.size, header.position)
            parsed = parse_header(data, 0)
            if parsed is None:
                return None
            for record in iter_records(data, parsed):
                if record.timestamp == best.max_timestamp and record.offset >= self.log_start_offset:
                    return record.offset, record.timestamp
            return None

    # --- flush, truncation, retention --------------------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding offsets from the recovery point up to ``up_to_offset`` (default: the log
        end) and advance the recovery point to it. The fsyncs run outside the log's lock; a segment removed meanwhile
        is skipped, any other OSError raised (the log manager then takes the dir offline)."""
        with self._lock:
            target = self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
            if target <= self.recovery_point:
                return
            first = self._segment_for(self.recovery_point)
            dirty = [s for s in self.segments[first:] if s.base_offset < target or s is self.segments[first]]
            truncations = self.truncations
        for segment in dirty:
            try:
                segment.flush()
            except OSError:
                with self._lock:
                    if segment in self.segments:
                        raise
                # retention or the cleaner removed it meanwhile (its files closed): nothing of it to keep
        with self._lock:
            if self.truncations == truncations:  # else offsets below target may be new, unflushed data
                self.recovery_point = max(self.recovery_point, target)
            self.last_flush_ms = self.time_ms()

    def flush_rolled(self) -> None:
        """fsync every segment below the active one and advance the recovery point to the active segment's base
        offset (Kafka's flush up to the new segment's base offset, scheduled on roll)."""
        with self._lock:
            base = self.active.base_offset
        self.flush(base)

    def maybe_flush(self) -> int:
        """Flush when ``flush_due`` or, with something unflushed, flush.ms passed since the last flush; 1 if it
        flushed, else 0."""
        unflushed = self.log_end_offset > self.recovery_point
        if self.flush_due or (unflushed and self.time_ms() - self.last_flush_ms >= self.config.flush_ms):
            self.flush()
            return 1
        return 0

    def _schedule_delete(self, segments: list[LogSegment], *, close_indexes: bool = True) -> None:
        """Rename the segments' files to ``*.deleted``; they are removed after file.delete.delay.ms."""
        due = self.time_ms() + self.config.file_delete_delay_ms
        for segment in segments:
            segment.mark_deleted(close_indexes=close_indexes)
            self._pending_deletes.append((due, segment))

    def _note_truncation(self, offset: int) -> None:
        """Count a truncation to ``offset``; the producer snapshots above it no longer describe this log."""
        for snapshot in list_snapshot_offsets(self.dir):
            if snapshot > offset:
                snapshot_file_name(self.dir, snapshot).unlink(missing_ok=True)
        self.truncations += 1
        self._truncated_to = offset if self._truncated_to is None else min(self._truncated_to, offset)

    def take_truncation_offset(self) -> int | None:
        """The lowest offset the log was truncated to since the last call (None: no truncation); offsets from
        there on are new data, whatever a cleaner checkpoint says."""
        with self._lock:
            offset, self._truncated_to = self._truncated_to, None
            return offset

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower catching up with a new leader)."""
        with self._lock:
            if offset >= self.log_end_offset:
                return
            if offset <= self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return
            keep = self._segment_for(offset)
            self._schedule_delete(self.segments[keep + 1 :])
            del self.segments[keep + 1 :]
            del self._bases[keep + 1 :]
            segment = self.active
            found = segment.translate_offset(offset)
            removed = segment.header_at(found[1]) if found is not None else None
            segment.truncate_to(offset)
            self.log_end_offset = segment.read_next_offset()
            if segment.size == 0 and removed is not None:
                # a cleaned segment's first batch may start above its base offset: offsets below it stay used
                self.log_end_offset = max(self.log_end_offset, min(offset, removed.offset))
            self._note_truncation(self.log_end_offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at ``offset`` (log start, log end and recovery point)."""
        with self._lock:
            self._note_truncation(offset)
            self._schedule_delete(self.segments)
            self.segments = [self._new_segment(offset)]
            self._bases = [offset]
            self.log_end_offset = self.log_start_offset = self.recovery_point = offset
            self.leader_epoch_cache.clear()

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords), at most to the log end; segments wholly below it
        go at the next retention pass. Returns whether it moved."""
        with self._lock:
            if offset <= self.log_start_offset:
                return False
            self.log_start_offset = min(offset, self.log_end_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            return True

    def _deletable(self, predicate: Callable[[LogSegment, int | None], bool], upper_bound: int) -> int:
        """How many segments from the oldest satisfy ``predicate(segment, next base offset or None)``: stopping at
        the first that does not, at one holding offsets at or above ``upper_bound``, or at an empty active one."""
        count = 0
        for i, segment in enumerate(self.segments):
            next_base = self._bases[i + 1] if i + 1 < len(self.segments) else None
            end = self.log_end_offset if next_base is None else next_base
            if end > upper_bound or not predicate(segment, next_base) or (next_base is None and segment.size == 0):
                break
            count += 1
        return count

    def _delete_oldest(self, count: int) -> int:
        if count == 0:
            return 0
        if count == len(self.segments):
            self.roll()
        doomed = self.segments[:count]
        del self.segments[:count]
        del self._bases[:count]
        self._schedule_delete(doomed)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return count

    def delete_old_segments(self, high_watermark: int | None = None) -> int:
        """Retention: oldest segments go while they breach retention.ms (by largest timestamp, or mtime without
        timestamps), then retention.bytes (keeping at most that many bytes), then lie wholly below the log start
        offset; time and size only under the delete policy. Only segments below ``high_watermark`` (default: the
        log end) go; the active one only by time or size, and after a roll. Returns the number deleted."""
        with self._lock:
            upper = self.log_end_offset if high_watermark is None else high_watermark
            config = self.config
            deleted = 0
            if config.delete and config.retention_ms >= 0:
                now = self.time_ms()
                deleted += self._delete_oldest(
                    self._deletable(lambda s, _: now - s.largest_timestamp_ms > config.retention_ms, upper)
                )
            if config.delete and config.retention_bytes >= 0:
                excess = self.size_in_bytes - config.retention_bytes

                def over_size(segment: LogSegment, _: int | None) -> bool:
                    nonlocal excess
                    if excess - segment.size < 0:
                        return False
                    excess -= segment.size
                    return True

                if excess > 0:
                    deleted += self._delete_oldest(self._deletable(over_size, upper))
            start = self.log_start_offset
            deleted += self._delete_oldest(
                self._deletable(lambda _, next_base: next_base is not None and next_base <= start, upper)
            )
            self.remove_expired_files()
            return deleted

    def replace_segments(self, old: list[LogSegment], cleaned: LogSegment, truncations: int) -> bool:
        """Swap ``cleaned`` (its files named ``*.swap``, its base offset ``old[0]``'s) in for ``old``, consecutive
        inactive segments: the old files become ``*.deleted`` (removed after file.delete.delay.ms; open slices stay
        readable), then the swap files take the plain names. False, with nothing changed, when the log was truncated
        since ``truncations`` was read or ``old`` is no longer a run of its inactive segments."""
        with self._lock:
            if self.truncations != truncations or not old:
                return False
            first = next((i for i, s in enumerate(self.segments) if s is old[0]), None)
            end = None if first is None else first + len(old)
            if first is None or end is None or end >= len(self.segments):
                return False
            if any(a is not b for a, b in zip(self.segments[first:end], old, strict=True)):
                return False
            self._schedule_delete(old, close_indexes=False)  # a flush outside the lock may be syncing them
            cleaned.change_file_suffixes(SWAP_SUFFIX, "")
            self.segments[first:end] = [cleaned]
            self._bases = [s.base_offset for s in self.segments]
            return True

    def remove_expired_files(self) -> None:
        """Physically remove ``*.deleted`` segments whose file.delete.delay.ms has passed."""
        with self._lock:
            now = self.time_ms()
            due = [s for t, s in self._pending_deletes if t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now]
        for segment in due:
            segment.delete()

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment (trimming indexes and preallocated files); pending deletions happen now."""
        with self._lock:
            for segment in self.segments:
                segment.close()
            for _, segment in self._pending_deletes:
                segment.delete()
            self._pending_deletes = []

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _record_rules(config: TopicConfig) -> RecordRules:
    """The rules ``config`` sets, ``now`` left at 0."""
    limit = config.message_timestamp_difference_max_ms
    create_time = config.message_timestamp_type == "CreateTime"
    timed = limit < LONG_MAX and create_time
    return RecordRules(config.compact, 0, limit if timed else None, not create_time)
