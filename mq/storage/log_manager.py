"""Every partition log under ``log.dirs``: loading and recovery at start, creation, deletion, checkpoints.

Per log dir: ``.lock`` is held while the broker runs (``log_dir_lock``; the broker takes the locks before it
touches anything and hands them over, or ``startup`` takes them); ``meta.properties`` records the broker id;
``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` are Kafka's checkpoint files; the
``.kafka_cleanshutdown`` marker, written last at a clean shutdown and removed at start, lets the next start skip
recovery. Plain files other components keep in a log dir are left alone; only ``<topic>-<partition>`` directories
are logs.

A replica moves to another log dir of the broker (AlterReplicaLogDirs) as in Kafka: a future log
``<topic>-<partition>.<uuid>-future`` is created in the target dir and filled from the current log while the current
log keeps serving; once it caught up, ``replace_current_with_future`` renames the current directory ``...-delete``
and the future one ``<topic>-<partition>`` and opens it as the partition's log. At start a future dir beside its
current log is loaded again as a future log (the copy resumes); one without a current log (a stop between the two
renames) becomes the current log.

A log dir where a write or read failed (ENOSPC, EIO, any OSError) goes offline, as Kafka's LogDirFailureChannel:
``mark_offline`` records it once (logged once, with the error, then the listener is told), its logs answer
KAFKA_STORAGE_ERROR from then on, periodic work (retention, flush, checkpoints) skips it, and the shutdown neither
closes its logs (which would write) nor writes its clean-shutdown marker, so the next start recovers it: a torn tail
is cut there, every whole batch stays. The other dirs go on serving.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mq.config import TopicConfig, parse_properties
from mq.errors import ErrorCode, InvalidTopicError, KafkaError, KafkaStorageError
from mq.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    OffsetCheckpointFile,
    write_atomically,
)
from mq.storage.file_names import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    delete_dir_name,
    future_dir_name,
    parse_partition_dir,
)
from mq.storage.log_dir_lock import LogDirLocks
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition, topic_name_error

PROCESS_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})

log = logging.getLogger(__name__)

META_FILE = "meta.properties"
RETIRED_LOG_CLOSE_DELAY_S = 60.0
"""A log replaced by its future log is closed and removed this long after the swap, so reads and periodic work that
still hold it finish on open files."""


def _wall_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """The logs of every partition under ``log_dirs``; ``topic_configs`` gives a topic's config (a mapping
    falls back to ``default_config`` for topics it lacks); ``recovery_threads`` is
    num.recovery.threads.per.data.dir; ``broker_id`` (when >= 0) is written to and checked against
    ``meta.properties``."""

    def __init__(
        self,
        log_dirs: list[Path],
        default_config: TopicConfig,
        topic_configs: Mapping[str, TopicConfig] | Callable[[str], TopicConfig] | None = None,
        broker_id: int = -1,
        *,
        recovery_threads: int = 1,
        time_ms: Callable[[], int] = _wall_ms,
        dir_locks: LogDirLocks | None = None,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.topic_configs = topic_configs
        self.broker_id = broker_id
        self.recovery_threads = max(recovery_threads, 1)
        self.time_ms = time_ms
        self.logs: dict[TopicPartition, Log] = {}
        self.future_logs: dict[TopicPartition, Log] = {}
        """Replicas being copied into another log dir of this broker; each replaces its current log once caught up."""
        self._locks = dir_locks
        """Given (held, released by their owner), or taken by ``startup`` and released by ``shutdown``."""
        self._owns_locks = dir_locks is None
        self._hosted: Counter[Path] = Counter()
        """Logs per log dir: a new partition goes to the dir holding the fewest (the first listed on a tie)."""
        self._mutex = threading.Lock()
        self._checkpoint_mutex = threading.Lock()
        self.offline_dirs: set[Path] = set()
        """Log dirs that failed (a dir never comes back while the broker runs)."""
        self._resource_error_logged = -60.0
        self.dir_failure_listener: Callable[[Path], None] | None = None
        """Told, from the failing thread, when a log dir goes offline (once per dir)."""
        self.roll_listener: Callable[[Log], None] | None = None
        """Told of every roll of every log (see ``Log.on_roll``): the broker schedules ``Log.flush_rolled`` on a
        worker thread. Unset, a roll leaves the recovery point where it is."""
        self.flush_listener: Callable[[float], None] = lambda ms: None
        """Told the milliseconds each flush (fsync) took, on the thread that flushed (the broker's metrics)."""

    # --- start-up ----------------------------------------------------------------------------------------------

    def startup(self) -> None:
        started = time.monotonic()
        jobs: list[tuple[TopicPartition, Path, int, int, bool]] = []
        futures: list[tuple[TopicPartition, Path, bool]] = []
        if self._locks is None:
            for directory in self.log_dirs:
                directory.mkdir(parents=True, exist_ok=True)
            self._locks = LogDirLocks.acquire(self.log_dirs)
        for directory in self.log_dirs:
            self._check_meta(directory)
            marker = directory / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            recovery_points = OffsetCheckpointFile(directory / RECOVERY_POINT_FILE).read()
            start_offsets = OffsetCheckpointFile(directory / LOG_START_OFFSET_FILE).read()
            for leftover in directory.glob("*.tmp"):
                leftover.unlink()
            for child in sorted(directory.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                if child.name.endswith(FUTURE_DIR_SUFFIX):
                    futures.append((parse_partition_dir(child), child, clean))
                    continue
                tp = parse_partition_dir(child)
                jobs.append((tp, child, recovery_points.get(tp, 0), start_offsets.get(tp, 0), clean))
            if clean:
                marker.unlink()
        with ThreadPoolExecutor(self.recovery_threads * len(self.log_dirs)) as pool:
            loaded = pool.map(lambda job: (job[0], self._open(*job)), jobs)
            for tp, partition_log in loaded:
                if tp in self.logs:
                    raise KafkaStorageError(
                        f"Duplicate log directories for {tp}: {self.logs[tp].dir} and {partition_log.dir}"
                    )
                self.logs[tp] = partition_log
                self._hosted[partition_log.dir.parent] += 1
        for tp, child, clean in futures:
            self._load_future(tp, child, clean)
        log.info(
            "loaded %d logs from %s in %d ms",
            len(self.logs),
            ", ".join(map(str, self.log_dirs)),
            (time.monotonic() - started) * 1000,
        )

    def _load_future(self, tp: TopicPartition, child: Path, clean: bool) -> None:
        if tp in self.future_logs:
            raise KafkaStorageError(
                f"Duplicate future log directories for {tp}: {self.future_logs[tp].dir} and {child}"
            )
        if tp in self.logs:
            self.future_logs[tp] = self._open(tp, child, 0, 0, clean)
            return
        target = child.parent / str(tp)
        log.warning("Future log %s has no current log: it becomes the log of %s", child, tp)
        os.rename(child, target)
        self.logs[tp] = self._open(tp, target, 0, 0, clean)
        self._hosted[child.parent] += 1

    def topic_config(self, topic: str) -> TopicConfig:
        configs = self.topic_configs
        if configs is None:
            return self.default_config
        if isinstance(configs, Mapping):
            return configs.get(topic, self.default_config)
        return configs(topic)

    def _open(self, tp: TopicPartition, directory: Path, recovery_point: int, log_start: int, clean: bool) -> Log:
        return Log(
            directory,
            self.topic_config(tp.topic),
            recovery_point,
            log_start,
            clean_shutdown=clean,
            time_ms=self.time_ms,
            on_roll=self._rolled,
        )

    def _rolled(self, partition_log: Log) -> None:
        if self.roll_listener is not None:
            self.roll_listener(partition_log)

    def _check_meta(self, directory: Path) -> None:
        meta = directory / META_FILE
        if meta.exists():
            stored = parse_properties(meta.read_text(encoding="utf-8")).get("broker.id")
            if stored is not None and self.broker_id >= 0 and int(stored) != self.broker_id:
                raise KafkaStorageError(
                    f"Configured broker.id {self.broker_id} doesn't match stored broker.id {stored} in "
                    f"meta.properties of {directory}."
                )
            return
        if self.broker_id >= 0:
            stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
            write_atomically(meta, f"#\n#{stamp}\nversion=0\nbroker.id={self.broker_id}\n")

    # --- offline log dirs ---------------------------------------------------------------------------------------

    def mark_offline(self, directory: Path, error: BaseException) -> None:
        """Take ``directory`` offline after ``error`` (any thread); the first call logs and tells the listener.

        Running out of file descriptors or memory is the process's trouble, not the disk's: the dir stays online
        (the failed operation was undone or is retried) and the error is logged at most once a minute."""
        if isinstance(error, OSError) and error.errno in PROCESS_RESOURCE_ERRNOS:
            now = time.monotonic()
            if now - self._resource_error_logged >= 60.0:
                self._resource_error_logged = now
                log.warning("Out of a process resource while accessing log dir %s: %s", directory, error)
            return
        with self._mutex:
            if directory in self.offline_dirs:
                return
            self.offline_dirs.add(directory)
        log.error("Error while accessing log dir %s: %s. Stopping serving logs in dir %s", directory, error, directory)
        if self.dir_failure_listener is not None:
            self.dir_failure_listener(directory)

    def is_online(self, partition_log: Log) -> bool:
        """Asked on every produce and fetch: free while no dir is offline."""
        return not self.offline_dirs or partition_log.dir.parent not in self.offline_dirs

    def storage_error(self, partition_log: Log, error: OSError) -> KafkaStorageError:
        """Take the log's dir offline after ``error``; the KafkaStorageError to answer with."""
        self.mark_offline(partition_log.dir.parent, error)
        return self.offline_error(partition_log)

    def offline_error(self, partition_log: Log) -> KafkaStorageError:
        return KafkaStorageError(f"Partition {partition_log.dir.name} is in an offline log directory")

    def _guarded(self, partition_log: Log, work: Callable[[], int | None]) -> int:
        """``work()`` on ``partition_log`` unless its dir is offline; an OSError takes the dir offline. Returns the
        count ``work`` returns (0 for None)."""
        if not self.is_online(partition_log):
            return 0
        try:
            return work() or 0
        except OSError as exc:
            self.mark_offline(partition_log.dir.parent, exc)
            return 0

    # --- logs --------------------------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def all_logs(self) -> list[Log]:
        return list(self.logs.values())

    def log_items(self) -> list[tuple[TopicPartition, Log]]:
        """Every (partition, log) pair, read under the manager's mutex (safe from any thread)."""
        with self._mutex:
            return list(self.logs.items())

    def get_or_create_log(self, tp: TopicPartition, config: TopicConfig) -> Log:
        """The partition's log, created in the online log dir hosting the fewest. A name that is not a legal topic
        name (or a negative partition) is refused, so no request can place a directory outside ``log.dirs``."""
        reason = topic_name_error(tp.topic) or (f"Partition {tp.partition} is negative" if tp.partition < 0 else None)
        if reason is not None:
            raise InvalidTopicError(reason)
        with self._mutex:
            existing = self.logs.get(tp)
            if existing is not None:
                existing.update_config(config)
                return existing
            online = [d for d in self.log_dirs if d not in self.offline_dirs]
            if not online:
                raise KafkaStorageError(f"No log directory is online to host {tp}")
            parent = min(online, key=lambda d: self._hosted[d])
            created = Log(parent / str(tp), config, time_ms=self.time_ms, on_roll=self._rolled)
            self.logs[tp] = created
            self._hosted[parent] += 1
            return created

    def delete_log(self, tp: TopicPartition) -> None:
        """Close the log, rename its directory ``...-delete`` and remove it in the background."""
        with self._mutex:
            partition_log = self.logs.pop(tp, None)
            if partition_log is not None:
                self._hosted[partition_log.dir.parent] -= 1
        self.abort_future_log(tp)
        if partition_log is None:
            return
        partition_log.close()
        target = partition_log.dir.with_name(delete_dir_name(tp))
        os.rename(partition_log.dir, target)
        threading.Thread(target=shutil.rmtree, args=(target, True), daemon=True).start()

    # --- moving replicas between log dirs -------------------------------------------------------------------------

    def log_dir_named(self, path: str) -> Path:
        """The configured log dir ``path`` names; LOG_DIR_NOT_FOUND when it is none of them (or no path at all, e.g.
        one with a NUL byte)."""
        not_found = KafkaError(f"Log dir {path!r} is not found in the config", ErrorCode.LOG_DIR_NOT_FOUND)
        wanted = os.path.normpath(path)
        for directory in self.log_dirs:
            if str(directory) == wanted:
                return directory
        try:
            resolved = Path(path).resolve()
        except (ValueError, OSError):
            raise not_found from None
        for directory in self.log_dirs:
            if directory.resolve() == resolved:
                return directory
        raise not_found

    def create_future_log(self, tp: TopicPartition, directory: Path) -> Log | None:
        """Start moving the replica of ``tp`` into ``directory`` (a configured, online log dir): its future log there,
        created unless it exists (a future log of ``tp`` in another dir is dropped first). None when the current
        log is already in ``directory`` (any future log is dropped). REPLICA_NOT_AVAILABLE when this broker has no
        log of ``tp``."""
        if directory in self.offline_dirs:
            raise KafkaStorageError(f"Log dir {directory} is offline")
        with self._mutex:
            current = self.logs.get(tp)
            if current is None:
                raise KafkaError(f"Replica of {tp} is not available on this broker", ErrorCode.REPLICA_NOT_AVAILABLE)
            if not self.is_online(current):
                raise self.offline_error(current)
            future = self.future_logs.get(tp)
            if future is not None and future.dir.parent == directory:
                return future
        self.abort_future_log(tp)
        if current.dir.parent == directory:
            return None
        with self._mutex:
            created = Log(directory / future_dir_name(tp), current.config, time_ms=self.time_ms, on_roll=self._rolled)
            self.future_logs[tp] = created
            return created

    def abort_future_log(self, tp: TopicPartition) -> None:
        """Stop moving ``tp``: its future log, if any, is closed and removed."""
        with self._mutex:
            future = self.future_logs.pop(tp, None)
        if future is not None:
            self._retire(future, delay=0.0)

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """Make the future log of ``tp`` (caught up with the current one: the caller lets nothing append to either
        meanwhile) the partition's log: the current directory becomes ``...-delete`` (removed after
        RETIRED_LOG_CLOSE_DELAY_S), the future one ``<topic>-<partition>``. Renames and opens only, no fsync (the
        future log's rolled segments were fsynced on worker threads as any log's; its recovery point carries over).
        Returns the log now serving ``tp``."""
        with self._mutex:
            future = self.future_logs.pop(tp)
            current = self.logs[tp]
        future.maybe_increment_log_start_offset(current.log_start_offset)
        log_start, end, flushed = future.log_start_offset, future.log_end_offset, future.recovery_point
        future.close()
        target = future.dir.parent / str(tp)
        retired = current.dir.with_name(delete_dir_name(tp))
        os.rename(current.dir, retired)
        os.rename(future.dir, target)
        promoted = self._open(tp, target, end, log_start, True)  # just closed by this process: nothing to recover
        promoted.recovery_point = min(flushed, promoted.log_end_offset)  # what is not fsynced yet stays above it
        with self._mutex:
            self.logs[tp] = promoted
            self._hosted[retired.parent] -= 1
            self._hosted[target.parent] += 1
        current.dir = retired
        self._retire(current, delay=RETIRED_LOG_CLOSE_DELAY_S)
        log.info("The current replica of %s moved from %s to %s", tp, retired.parent, target.parent)
        return promoted

    def _retire(self, partition_log: Log, delay: float) -> None:
        """Close ``partition_log`` and remove its directory on another thread, after ``delay`` seconds."""

        def remove() -> None:
            try:
                partition_log.close()
            finally:
                shutil.rmtree(partition_log.dir, ignore_errors=True)

        timer = threading.Timer(delay, remove)
        timer.daemon = True
        timer.start()

    # --- periodic work -----------------------------------------------------------------------------------------

    def cleanup_logs(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> int:
        """Retention for every log (time and size only under the delete policy, the log start offset always), and
        removal of ``.deleted`` files whose delay passed; returns the number of segments deleted. With
        ``high_watermarks``, nothing at or above a partition's high watermark is deleted, and a log missing from it
        (not yet hosted by the replica manager) is left alone."""
        if high_watermarks is None:
            return sum(
                self._guarded(partition_log, partition_log.delete_old_segments) for partition_log in self.all_logs()
            )
        return sum(
            self._guarded(partition_log, functools.partial(partition_log.delete_old_segments, high_watermarks[tp]))
            for tp, partition_log in list(self.logs.items())
            if tp in high_watermarks
        )

    def flush(self, partition_log: Log) -> None:
        """fsync everything above the recovery point (``Log.flush``, flush.messages) unless the dir is offline; an
        OSError takes the dir offline."""
        started = time.monotonic()
        self._guarded(partition_log, partition_log.flush)
        self.flush_listener((time.monotonic() - started) * 1000)

    def flush_rolled(self, partition_log: Log) -> None:
        """fsync the segments a roll left below the active one (``Log.flush_rolled``) unless the dir is offline; an
        OSError takes the dir offline."""
        started = time.monotonic()
        self._guarded(partition_log, partition_log.flush_rolled)
        self.flush_listener((time.monotonic() - started) * 1000)

    def flush_dirty_logs(self) -> None:
        """The periodic flush: each log whose flush is due (timed, as the explicit flushes are)."""
        for partition_log in self.all_logs():
            started = time.monotonic()
            if self._guarded(partition_log, partition_log.maybe_flush):
                self.flush_listener((time.monotonic() - started) * 1000)

    def _by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        """The logs of each online log dir."""
        grouped: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self.log_dirs}
        for tp, partition_log in self.log_items():
            grouped.setdefault(partition_log.dir.parent, {})[tp] = partition_log
        return {d: logs for d, logs in grouped.items() if d not in self.offline_dirs}

    def write_checkpoint(self, directory: Path, name: str, offsets: dict[TopicPartition, int]) -> None:
        """Write an offset checkpoint file in an online log dir; an OSError takes the dir offline."""
        if directory in self.offline_dirs:
            return
        try:
            OffsetCheckpointFile(directory / name).write(offsets)
        except OSError as exc:
            self.mark_offline(directory, exc)

    def checkpoint_recovery_points(self) -> None:
        """Write each log dir's ``recovery-point-offset-checkpoint`` (atomically) from the logs' recovery points:
        the offsets below which every segment was fsynced (by a roll's flush or a due flush). Any thread."""
        with self._checkpoint_mutex:
            for directory, logs in self._by_dir().items():
                points = {tp: partition_log.recovery_point for tp, partition_log in logs.items()}
                self.write_checkpoint(directory, RECOVERY_POINT_FILE, points)

    def checkpoint_log_start_offsets(self) -> None:
        """Only logs whose start offset moved past their first segment's base offset are listed, as in Kafka."""
        with self._checkpoint_mutex:
            for directory, logs in self._by_dir().items():
                starts = {
                    tp: partition_log.log_start_offset
                    for tp, partition_log in logs.items()
                    if partition_log.log_start_offset > partition_log.segments[0].base_offset
                }
                self.write_checkpoint(directory, LOG_START_OFFSET_FILE, starts)

    def shutdown(self) -> None:
        """Flush and close every log of the online dirs, write their checkpoints and, last, their clean-shutdown
        markers (a dir that fails on the way gets none). Offline dirs are left as they are, for recovery."""
        for partition_log in self.all_logs():
            self._guarded(partition_log, partition_log.flush)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for partition_log in [*self.all_logs(), *self.future_logs.values()]:
            self._guarded(partition_log, partition_log.close)
        for directory in self.log_dirs:
            if directory not in self.offline_dirs:
                try:
                    write_atomically(directory / CLEAN_SHUTDOWN_FILE, "")
                except OSError as exc:
                    self.mark_offline(directory, exc)
        if self._locks is not None and self._owns_locks:
            self._locks.release()
