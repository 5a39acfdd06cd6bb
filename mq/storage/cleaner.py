"""Compacting one log: the offset map over its dirty section, then the recopy of its older segments.

A pass over a log with its dirty section ``[first_dirty, first_uncleanable)``:

1. Snapshot under the log's lock: the inactive segments below ``first_uncleanable``, each with a duplicate of its
   file descriptor (reads stay valid whatever retention, truncation or a swap do to the segment meanwhile), its
   size and its last-modified time, the log's truncation count, and the aborted transactions overlapping those
   segments (``Log.collect_aborted_txns``: their index entries may sit in any later segment, the active one too).
2. Offset map: key -> latest offset over the dirty segments, segment by segment, stopping at the first segment
   boundary where the map holds ``map_slots`` keys (at least one segment is mapped); its end offset bounds the pass.
   Records of aborted transactions are not mapped: they never shadow an earlier committed value of their key.
3. Every segment below that end is recopied, in groups that fit one segment (``segment.bytes``, the offset index
   size, int32 relative offsets), into ``<base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned``, both
   built as the records are appended, and ``.txnindex.cleaned``). A record stays when it has a key, no later offset
   for that key is in the map, it is not a tombstone (null value) past the delete horizon, and its batch is not part
   of an aborted transaction. The delete horizon is the last-modified time of the last segment that was already
   clean, minus ``delete.retention.ms``; segments modified after it keep their tombstones and markers.
   Transactions (Kafka's ``CleanedTransactionMetadata``, carried across the pass's groups): the aborted ones are
   those the transaction indexes list over the cleanable range (every batch there is decided: the dirty section
   ends below the last stable offset). A transaction marker (control batch) stays while the pass met a data batch
   of its transaction (since its producer's previous marker), and in segments modified after the delete horizon;
   a control batch without records (emptied before) may go at once. The cleaned transaction index holds the
   aborted transactions whose marker stayed because data of theirs was met.
   v2 batches keep their base and last offset, producer fields and codec (``mq.records.filtered``); a v2 batch
   that loses every record (control batches included) stays as an empty batch when it is its producer's last batch
   or last data batch in the pass (the producer's last epoch and sequence stay readable); otherwise it goes.
4. Per group: the cleaned files are fsynced, given the group's last segment's modification time, renamed to
   ``*.swap``, then ``Log.replace_segments`` swaps them in under the log's lock (old files to ``*.deleted``, swap
   files to plain names). A crash leaves at most ``*.cleaned`` files (discarded at load) or ``*.swap`` files (the
   load completes the swap): no state loses a key's latest record.

Everything here runs in a cleaner thread; the log's lock is held only for the snapshot and each swap. Bytes read
and written count against log.cleaner.io.max.bytes.per.second (a ``TokenBucket`` shared by the threads).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mq.records.batch_header import BatchHeader, Codec, parse_header, validate
from mq.records.filtered import KeyedRecord, empty_batch, keyed_records, rebuild
from mq.records.record import ABORT, COMMIT, parse_control_key
from mq.storage.entry_scan import scan_entries
from mq.storage.file_names import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    index_file_name,
    log_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from mq.storage.log_segment import HEADER_READ, INT_MAX, LogSegment
from mq.storage.partition_log import Log
from mq.storage.token_bucket import TokenBucket
from mq.storage.txn_index import AbortedTxn

MIN_READ_CHUNK = 4096
OFFSET_MAP_ENTRY_BYTES = 24
"""What Kafka's offset map spends per key (16-byte MD5 hash + 8-byte offset): log.cleaner.dedupe.buffer.size
divided by it (times log.cleaner.io.buffer.load.factor) is how many keys one pass maps."""


class CleaningAbortedError(Exception):
    """The cleaner was asked to stop, or the log changed under it; nothing was swapped for the unfinished group."""


def map_slots(dedupe_buffer_size: int, threads: int, load_factor: float = 0.9) -> int:
    """Keys one pass may map: each thread's share of log.cleaner.dedupe.buffer.size at Kafka's entry size, filled
    to ``load_factor``."""
    return max(int(dedupe_buffer_size / max(threads, 1) / OFFSET_MAP_ENTRY_BYTES * load_factor), 1)


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    map_records_read: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


@dataclass
class _SegmentView:
    """A segment as the pass sees it: the object (to swap it out), a private fd, its size, its mtime in ms."""

    segment: LogSegment
    fd: int
    size: int
    modified_ms: int
    next_base: int
    """Base offset of the segment after it (the first offset it cannot hold)."""


class Cleaner:
    """Cleans one log at a time; ``stop`` aborts a pass between entries. ``read_chunk`` bytes are read at a time
    (this thread's half of log.cleaner.io.buffer.size); reads and writes go through ``throttler`` when given."""

    def __init__(
        self,
        map_slots: int,
        stop: threading.Event,
        thread_id: int = 0,
        *,
        read_chunk: int = 262144,
        throttler: TokenBucket | None = None,
    ) -> None:
        self.map_slots = map_slots
        self.stop = stop
        self.thread_id = thread_id
        self.read_chunk = max(read_chunk, MIN_READ_CHUNK)
        self.throttler = throttler

    def _entries(self, view: _SegmentView) -> Iterator[tuple[bytes, BatchHeader]]:
        """The segment's entries; stops the pass when asked to, throttles per chunk read."""
        chunk_seen = None
        for chunk, _, header in scan_entries(view.fd, view.size, self.read_chunk):
            self._check_stop()
            if chunk is not chunk_seen:
                self._throttle(len(chunk))
                chunk_seen = chunk
            yield chunk, header

    def _throttle(self, done_bytes: int) -> None:
        """Count bytes read or written against the shared I/O rate, sleeping off any debt (woken by ``stop``)."""
        if self.throttler is not None and (wait := self.throttler.reserve(done_bytes)) > 0:
            self.stop.wait(wait)

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise CleaningAbortedError("the log cleaner is shutting down")

    def clean(self, partition_log: Log, first_dirty: int, first_uncleanable: int) -> tuple[int, CleanerStats]:
        """Clean ``partition_log``; returns the end offset of the mapped dirty section (the next pass's first dirty
        offset) and the pass's figures. CleaningAbortedError when stopped or the log changed (groups swapped in
        before stay)."""
        stats = CleanerStats()
        with partition_log.lock:
            truncations = partition_log.truncations
            config = partition_log.config
            segments = partition_log.segments
            views: list[_SegmentView] = []
            for i, segment in enumerate(segments[:-1]):
                if segment.base_offset >= first_uncleanable or segment.fd < 0:
                    break
                fd = os.dup(segment.fd)
                modified_ms = os.fstat(fd).st_mtime_ns // 1_000_000
                views.append(_SegmentView(segment, fd, segment.size, modified_ms, segments[i + 1].base_offset))
            aborted = (
                partition_log.collect_aborted_txns(views[0].segment.base_offset, views[-1].next_base) if views else []
            )
        try:
            clean_views = [v for v in views if v.segment.base_offset < first_dirty]
            horizon = clean_views[-1].modified_ms - config.delete_retention_ms if clean_views else 0
            offset_map, end_offset, tails = self._build_offset_map(
                views, first_dirty, first_uncleanable, aborted, stats
            )
            to_clean = [v for v in views if v.segment.base_offset < end_offset]
            self._tails_in_clean_section(to_clean, first_dirty, tails)
            transactions = _Transactions(aborted)
            for group in _group_by_size(to_clean, config.segment_bytes, config.segment_index_bytes):
                self._clean_group(partition_log, group, offset_map, horizon, tails, transactions, truncations, stats)
            return end_offset, stats
        finally:
            for view in views:
                os.close(view.fd)

    # --- the offset map ----------------------------------------------------------------------------------------

    def _build_offset_map(
        self,
        views: list[_SegmentView],
        first_dirty: int,
        first_uncleanable: int,
        aborted: list[AbortedTxn],
        stats: CleanerStats,
    ) -> tuple[dict[bytes, int], int, _ProducerTails]:
        """(key -> latest offset outside aborted transactions, end offset of the mapped section, the producers'
        last batches in the mapped section)."""
        offset_map: dict[bytes, int] = {}
        tails = _ProducerTails()
        transactions = _Transactions(aborted)
        end_offset = first_dirty
        for view in views:
            if view.next_base <= first_dirty:
                continue
            if offset_map and len(offset_map) >= self.map_slots:
                break
            for chunk, header in self._entries(view):
                if header.last_offset < first_dirty:
                    continue
                tails.note(header)
                validate(chunk, header)
                _, records = keyed_records(chunk, header)
                stats.map_records_read += len(records)
                if header.is_control:
                    transactions.on_marker(header, records)
                    continue
                if transactions.on_data(header):
                    continue
                for record in records:
                    if record.key is not None and record.offset >= first_dirty:
                        offset_map[record.key] = record.offset
            end_offset = min(view.next_base, first_uncleanable)
        return offset_map, end_offset, tails

    @staticmethod
    def _tails_in_clean_section(views: list[_SegmentView], first_dirty: int, tails: _ProducerTails) -> None:
        """Add the producers whose last batches below ``end_offset`` lie in the already clean section (headers
        only)."""
        for view in views:
            if view.segment.base_offset >= first_dirty:
                break
            position = 0
            while position < view.size:
                header = parse_header(os.pread(view.fd, HEADER_READ, position), 0, complete=False)
                if header is None:
                    break
                tails.note(header)
                position += header.size

    # --- recopying ---------------------------------------------------------------------------------------------

    def _clean_group(
        self,
        partition_log: Log,
        group: list[_SegmentView],
        offset_map: dict[bytes, int],
        horizon: int,
        tails: _ProducerTails,
        transactions: _Transactions,
        truncations: int,
        stats: CleanerStats,
    ) -> None:
        config = partition_log.config
        base = group[0].segment.base_offset
        directory = partition_log.dir
        for name in (log_file_name, index_file_name, time_index_file_name, txn_index_file_name):
            plain = name(directory, base)
            for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
                plain.with_name(plain.name + suffix).unlink(missing_ok=True)
        cleaned = LogSegment(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            file_suffix=CLEANED_SUFFIX,
        )
        swapped = False
        try:
            for view in group:
                retain = view.modified_ms > horizon
                self._clean_segment(view, cleaned, offset_map, retain, tails, transactions, stats)
            cleaned.on_become_inactive()
            cleaned.flush()
            modified_ns = group[-1].modified_ms * 1_000_000
            os.utime(cleaned.log_path, ns=(modified_ns, modified_ns))
            self._check_stop()
            cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            _fsync_dir(directory)
            swapped = partition_log.replace_segments([v.segment for v in group], cleaned, truncations)
            if not swapped:
                raise CleaningAbortedError(f"log {directory.name} changed while it was cleaned")
            _fsync_dir(directory)
        except Exception:
            if not swapped:
                cleaned.delete()
            raise

    def _clean_segment(
        self,
        view: _SegmentView,
        cleaned: LogSegment,
        offset_map: dict[bytes, int],
        retain_deletes: bool,
        tails: _ProducerTails,
        transactions: _Transactions,
        stats: CleanerStats,
    ) -> None:
        """Recopy ``view`` into ``cleaned``; ``retain_deletes``: the segment is newer than the delete horizon."""
        stats.bytes_read += view.size
        for chunk, header in self._entries(view):
            validate(chunk, header)
            entry = memoryview(chunk)[header.position : header.end_position]
            area, records = keyed_records(chunk, header)
            stats.records_read += len(records)
            if header.is_control:
                discard, indexed = transactions.on_marker(header, records)
                if indexed is not None:
                    cleaned.txn_index.append(indexed)
                kept = [] if discard and not retain_deletes else records
            elif transactions.on_data(header):
                kept = []
            else:
                kept = [r for r in records if _retain(r, offset_map, retain_deletes)]
            stats.records_written += len(kept)
            out: bytes | memoryview | None = None
            if kept and len(kept) == len(records):
                out = entry
            elif kept and (header.magic >= 2 or header.codec != Codec.NONE):
                out = rebuild(header, area, kept)
            elif tails.keeps_empty(header):
                out = entry if not records else empty_batch(header)
            if out is None:
                continue
            written = parse_header(out, 0, complete=False)
            assert written is not None
            cleaned.append(written.last_offset, written.max_timestamp, written.last_offset, out)
            stats.bytes_written += len(out)
            self._throttle(len(out))


class _ProducerTails:
    """Per producer id, the last offset of its last batch and of its last data batch in a pass: the batches that
    stay (empty if need be) so the producer's last epoch and sequence stay in the log."""

    def __init__(self) -> None:
        self._last: dict[int, int] = {}
        self._last_data: dict[int, int] = {}

    def note(self, header: BatchHeader) -> None:
        producer_id = header.producer_id
        if producer_id < 0:
            return
        self._last[producer_id] = max(self._last.get(producer_id, -1), header.last_offset)
        if not header.is_control:
            self._last_data[producer_id] = max(self._last_data.get(producer_id, -1), header.last_offset)

    def keeps_empty(self, header: BatchHeader) -> bool:
        """The v2 batch ``header`` stays, without records if need be."""
        producer_id = header.producer_id
        if header.magic < 2 or producer_id < 0:
            return False
        last = header.last_offset
        return self._last.get(producer_id) == last or (
            not header.is_control and self._last_data.get(producer_id) == last
        )


class _Transactions:
    """The transactions a pass meets, batch by batch in offset order (Kafka's ``CleanedTransactionMetadata``).

    ``aborted`` lists the aborted transactions overlapping the pass (from the transaction indexes). One becomes
    current for its producer at the first batch at or past its first offset, and stays so until its producer's next
    ABORT marker: the producer's transactional data batches meanwhile belong to it and go. Other transactional data
    batches belong to a committed (or unindexed) transaction, closed by the producer's next marker. A marker may go
    when no data batch of its transaction was met in this pass; an ABORT marker that stays for its data keeps its
    index entry.
    """

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(set(aborted), key=lambda txn: (txn.first_offset, txn.last_offset))
        self._next = 0
        self._current_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        """Producer id -> (its current aborted transaction, whether a data batch of it was met)."""
        self._current_other: set[int] = set()
        """Producers with a data batch met in a transaction not known to be aborted."""

    def _begin_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self._current_aborted.setdefault(txn.producer_id, (txn, False))

    def on_data(self, header: BatchHeader) -> bool:
        """Note the data batch ``header``; True when it belongs to an aborted transaction (it goes whole)."""
        self._begin_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        current = self._current_aborted.get(header.producer_id)
        if current is None:
            self._current_other.add(header.producer_id)
            return False
        self._current_aborted[header.producer_id] = (current[0], True)
        return True

    def on_marker(self, header: BatchHeader, records: list[KeyedRecord]) -> tuple[bool, AbortedTxn | None]:
        """Note the control batch ``header`` holding ``records``: (whether it may go, the index entry to keep)."""
        self._begin_up_to(header.last_offset)
        if not records:
            return True, None  # emptied by an earlier pass
        kind = parse_control_key(records[0].key)
        if kind not in (ABORT, COMMIT):
            return False, None
        producer_id = header.producer_id
        met_other = producer_id in self._current_other
        self._current_other.discard(producer_id)
        if kind == COMMIT:
            return not met_other, None
        txn, met = self._current_aborted.pop(producer_id, (None, False))
        if txn is not None and met:
            return False, txn
        return not met_other, None


def _retain(record: KeyedRecord, offset_map: dict[bytes, int], retain_deletes: bool) -> bool:
    """Kafka's rule: a keyed record that is its key's latest (or newer than the map), and not an expired
    tombstone; records without a key go."""
    key = record.key
    if key is None:
        return False
    return record.offset >= offset_map.get(key, -1) and (retain_deletes or not record.is_tombstone)


def _group_by_size(views: list[_SegmentView], max_size: int, max_index_size: int) -> list[list[_SegmentView]]:
    """Consecutive segments whose cleaned copy surely fits one segment: total size within ``max_size``, index
    sizes within ``max_index_size``, every offset within int32 of the group's base offset."""
    groups: list[list[_SegmentView]] = []
    current: list[_SegmentView] = []
    size = index_size = 0
    for view in views:
        segment = view.segment
        view_index = segment.index.entries * segment.index.ENTRY.size
        fits = (
            current
            and size + view.size <= max_size
            and index_size + view_index <= max_index_size
            and view.next_base - 1 - current[0].segment.base_offset <= INT_MAX
        )
        if not fits and current:
            groups.append(current)
            current, size, index_size = [], 0, 0
        current.append(view)
        size += view.size
        index_size += view_index
    if current:
        groups.append(current)
    return groups


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
