"""The log cleaner: which compacted log to clean next, the cleaner threads, and ``cleaner-offset-checkpoint``.

A log is a candidate when its cleanup.policy includes ``compact`` and no thread is cleaning it. Its dirty section
runs from the first dirty offset (the checkpointed offset, or the log start offset when there is none or it lies
outside [log start, log end]) to the first uncleanable offset: the smallest of the active segment's base offset,
the base offset of the first dirty segment holding a record younger than min.compaction.lag.ms, and, with last
stable offsets, the base offset of the segment holding the last stable offset (only whole segments below it are
cleaned: every transaction there is decided, none is open, and every record is below the high watermark).
Dirty ratio = dirty bytes / (clean + dirty bytes) over the segments from the log start. The thread picks the log
with the highest ratio among those with dirty bytes whose ratio is at least min.cleanable.dirty.ratio or whose
first dirty batch is older than max.compaction.lag.ms, cleans it (``mq.storage.cleaner``) and checkpoints the
end of the cleaned section; it sleeps log.cleaner.backoff.ms when nothing qualifies. A log whose cleaning failed
for any reason other than an abort is skipped from then on, as Kafka marks it uncleanable.

``cleaner-offset-checkpoint`` (one per log dir, the format of ``mq.storage.checkpoints``) lists the first dirty
offset of every log of that dir the cleaner has cleaned.
"""

from __future__ import annotations

import bisect
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mq.config import LONG_MAX
from mq.storage.checkpoints import CLEANER_OFFSET_FILE, OffsetCheckpointFile
from mq.storage.cleaner import Cleaner, CleanerStats, CleaningAbortedError, map_slots
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.storage.token_bucket import TokenBucket
from mq.topic_partition import TopicPartition

log = logging.getLogger("kafka.log.LogCleaner")


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class LogToClean:
    """A compacted log with its dirty section ``[first_dirty_offset, first_uncleanable_offset)`` and sizes."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool
    """The first dirty batch is older than max.compaction.lag.ms."""

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


def log_to_clean(
    tp: TopicPartition, partition_log: Log, checkpoint: int | None, now_ms: int, last_stable_offset: int | None = None
) -> LogToClean:
    """The dirty section of ``partition_log`` as the module docstring defines it."""
    with partition_log.lock:
        config = partition_log.config
        start, end = partition_log.log_start_offset, partition_log.log_end_offset
        segments = list(partition_log.segments)
        first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
        bases = [s.base_offset for s in segments]
        next_bases = [*bases[1:], end]
        first_uncleanable = bases[-1]
        if last_stable_offset is not None:
            holding = bases[max(bisect.bisect_right(bases, last_stable_offset) - 1, 0)]
            first_uncleanable = min(first_uncleanable, holding)
        dirty = [i for i in range(len(segments) - 1) if next_bases[i] > first_dirty]
        if config.min_compaction_lag_ms > 0:
            for i in dirty:
                if segments[i].largest_timestamp_ms > now_ms - config.min_compaction_lag_ms:
                    first_uncleanable = min(first_uncleanable, bases[i])
                    break
        needs_now = False
        if config.max_compaction_lag_ms < LONG_MAX and dirty and bases[dirty[0]] < first_uncleanable:
            first = segments[dirty[0]].header_at(0)
            needs_now = first is not None and 0 <= first.max_timestamp < now_ms - config.max_compaction_lag_ms
        clean_bytes = sum(
            s.size for s, nb in zip(segments, next_bases, strict=True) if nb > start and s.base_offset < first_dirty
        )
        cleanable_bytes = sum(
            s.size
            for s, nb in zip(segments, next_bases, strict=True)
            if nb > first_dirty and s.base_offset < first_uncleanable
        )
    return LogToClean(tp, partition_log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, needs_now)


class LogCleaner:
    """Cleaner threads over the logs of ``log_manager``. With ``bounded_by_last_stable_offsets`` a log is cleaned
    only below the last stable offset (the high watermark, or the first offset of the oldest open transaction if
    lower) last given to ``update_last_stable_offsets``, and not at all before one is known."""

    def __init__(
        self,
        log_manager: LogManager,
        *,
        threads: int = 1,
        dedupe_buffer_size: int = 134217728,
        io_buffer_size: int = 524288,
        io_buffer_load_factor: float = 0.9,
        max_io_bytes_per_second: float = sys.float_info.max,
        backoff_ms: int = 15000,
        bounded_by_last_stable_offsets: bool = False,
        time_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.log_manager = log_manager
        self.threads = max(threads, 1)
        self.map_slots = map_slots(dedupe_buffer_size, self.threads, io_buffer_load_factor)
        self.read_chunk = io_buffer_size // self.threads // 2
        self.backoff_ms = backoff_ms
        self.bounded = bounded_by_last_stable_offsets
        self.time_ms = time_ms
        self._last_stable_offsets: Mapping[TopicPartition, int] | None = None
        self._mutex = threading.Lock()
        self._checkpoint_mutex = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: weakref.WeakSet[Log] = weakref.WeakSet()
        self._stop = threading.Event()
        self.runs = 0
        """Cleanings done; with the last one's seconds and bytes written per 100 read (read by the broker's
        metrics, from any thread)."""
        self.last_clean_time_secs = 0.0
        self.last_recopy_percent = 0.0
        self._throttler = TokenBucket(max_io_bytes_per_second) if max_io_bytes_per_second < sys.float_info.max else None
        """The I/O rate every cleaner thread shares; its burst is a tenth of a second of bytes."""
        self._threads: list[threading.Thread] = []
        self.checkpoints: dict[TopicPartition, int] = {}
        """First dirty offset per partition (what ``cleaner-offset-checkpoint`` files hold)."""
        for directory in log_manager.log_dirs:
            self.checkpoints.update(OffsetCheckpointFile(directory / CLEANER_OFFSET_FILE).read())

    def update_last_stable_offsets(self, last_stable_offsets: Mapping[TopicPartition, int]) -> None:
        """The partitions' current last stable offsets (a snapshot the caller no longer changes)."""
        self._last_stable_offsets = last_stable_offsets

    # --- selection and one pass ----------------------------------------------------------------------------------

    def grab_filthiest_log(self) -> LogToClean | None:
        """The dirtiest cleanable log, marked in progress (``done`` releases it); None when none qualifies."""
        now = self.time_ms()
        bounds = self._last_stable_offsets
        with self._mutex:
            candidates = []
            for tp, partition_log in self.log_manager.log_items():
                if (
                    not partition_log.config.compact
                    or tp in self._in_progress
                    or partition_log in self._uncleanable
                    or not self.log_manager.is_online(partition_log)
                ):
                    continue
                if self.bounded and (bounds is None or tp not in bounds):
                    continue
                bound = bounds.get(tp) if bounds is not None else None
                self._truncate_checkpoint(tp, partition_log)
                candidate = log_to_clean(tp, partition_log, self.checkpoints.get(tp), now, bound)
                if candidate.cleanable_bytes > 0 and (
                    candidate.needs_compaction_now
                    or candidate.cleanable_ratio >= partition_log.config.min_cleanable_dirty_ratio
                ):
                    candidates.append(candidate)
            if not candidates:
                return None
            chosen = max(candidates, key=lambda c: (c.needs_compaction_now, c.cleanable_ratio))
            self._in_progress.add(chosen.tp)
            return chosen

    def clean_filthiest_log(self, cleaner: Cleaner) -> bool:
        """Clean the dirtiest log with ``cleaner``; False when no log needed it."""
        chosen = self.grab_filthiest_log()
        if chosen is None:
            return False
        try:
            end_offset, stats = cleaner.clean(chosen.log, chosen.first_dirty_offset, chosen.first_uncleanable_offset)
            self._checkpoint(chosen.tp, chosen.log.dir.parent, end_offset)
            self._report(cleaner.thread_id, chosen, end_offset, stats)
            self.runs += 1
            self.last_clean_time_secs = stats.elapsed_s
            self.last_recopy_percent = 100 * stats.bytes_written / max(stats.bytes_read, 1)
        except CleaningAbortedError as exc:
            log.info("Cleaning of log %s aborted: %s", chosen.tp, exc)
        except OSError as exc:
            self.log_manager.mark_offline(chosen.log.dir.parent, exc)
        except Exception:
            log.exception(
                "Unexpected exception thrown when cleaning log %s. Marking its partition (%s) as uncleanable",
                chosen.log.dir,
                chosen.tp,
            )
            self._uncleanable.add(chosen.log)
        finally:
            with self._mutex:
                self._in_progress.discard(chosen.tp)
        return True

    def _truncate_checkpoint(self, tp: TopicPartition, partition_log: Log) -> None:
        """Lower ``tp``'s checkpoint to the offset its log was truncated to, if lower (and write it at once)."""
        truncated_to = partition_log.take_truncation_offset()
        checkpoint = self.checkpoints.get(tp)
        if truncated_to is not None and checkpoint is not None and truncated_to < checkpoint:
            self._checkpoint(tp, partition_log.dir.parent, truncated_to)

    def _checkpoint(self, tp: TopicPartition, directory: Path, offset: int) -> None:
        """Record ``offset`` for ``tp`` and rewrite ``directory``'s checkpoint with the entries of its live logs."""
        with self._checkpoint_mutex:
            self.checkpoints[tp] = offset
            items = self.log_manager.log_items()
            live = {t for t, _ in items}
            self.checkpoints = {t: o for t, o in self.checkpoints.items() if t in live}
            in_dir = {
                t: self.checkpoints[t] for t, plog in items if t in self.checkpoints and plog.dir.parent == directory
            }
            self.log_manager.write_checkpoint(directory, CLEANER_OFFSET_FILE, in_dir)

    @staticmethod
    def _report(thread_id: int, chosen: LogToClean, end_offset: int, stats: CleanerStats) -> None:
        elapsed = max(stats.elapsed_s, 1e-6)
        megabytes = stats.bytes_read / 1e6
        log.info(
            "Log cleaner thread %d cleaned log %s (dirty section = [%d, %d]): %.1f MB of log processed in %.1f "
            "seconds (%.1f MB/sec), %d of %d records kept, %.1f MB written",
            thread_id,
            chosen.tp,
            chosen.first_dirty_offset,
            end_offset,
            megabytes,
            elapsed,
            megabytes / elapsed,
            stats.records_written,
            stats.records_read,
            stats.bytes_written / 1e6,
        )

    @property
    def uncleanable_count(self) -> int:
        """Logs the cleaner gave up on after an unexpected error."""
        return len(self._uncleanable)

    # --- threads -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the cleaner threads (``kafka-log-cleaner-thread-<n>``)."""
        self._stop.clear()
        for thread_id in range(self.threads):
            cleaner = Cleaner(
                self.map_slots, self._stop, thread_id, read_chunk=self.read_chunk, throttler=self._throttler
            )
            thread = threading.Thread(
                target=self._run, args=(cleaner,), name=f"kafka-log-cleaner-thread-{thread_id}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _run(self, cleaner: Cleaner) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest_log(cleaner)
            except Exception:
                log.exception("log cleaner thread %d failed", cleaner.thread_id)
                cleaned = False
            if not cleaned:
                self._stop.wait(self.backoff_ms / 1000)

    def shutdown(self) -> None:
        """Stop the threads: a pass in progress aborts at its next entry, leaving no cleaned files behind."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []
