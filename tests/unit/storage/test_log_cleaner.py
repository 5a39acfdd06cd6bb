"""The log cleaner: choosing the log, the dirty section's bounds, the checkpoint file, the threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from compaction_helpers import TS, Clock, compacted, produce, records

from mq.config import TopicConfig
from mq.storage import cleaner as cleaner_module
from mq.storage.checkpoints import CLEANER_OFFSET_FILE, OffsetCheckpointFile
from mq.storage.cleaner import Cleaner, map_slots
from mq.storage.log_cleaner import LogCleaner, log_to_clean
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.storage.token_bucket import TokenBucket
from mq.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def manager_with(tmp_path: Path, config: TopicConfig, clock: Clock) -> tuple[LogManager, Log]:
    manager = LogManager([tmp_path], config, time_ms=clock)
    manager.startup()
    return manager, manager.get_or_create_log(TP, config)


def rounds(log: Log, count: int, keys: int = 5, timestamp: int = TS) -> None:
    for round_ in range(count):
        produce(log, [(b"k%d" % i, b"v%d" % round_) for i in range(keys)], timestamp=timestamp)
        log.roll()


def one_pass(cleaner: LogCleaner) -> bool:
    return cleaner.clean_filthiest_log(Cleaner(cleaner.map_slots, threading.Event()))


def test_the_checkpoint_records_the_end_of_the_cleaned_section(tmp_path: Path) -> None:
    clock = Clock()
    manager, log = manager_with(tmp_path, compacted(), clock)
    rounds(log, 3)
    produce(log, [(b"k0", b"x")])
    cleaner = LogCleaner(manager, time_ms=clock)
    assert one_pass(cleaner)
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_FILE).read() == {TP: 15}
    assert (tmp_path / CLEANER_OFFSET_FILE).read_text() == "0\n1\nt 0 15\n"
    again = LogCleaner(manager, time_ms=clock)
    assert again.checkpoints == {TP: 15}
    assert log_to_clean(TP, log, again.checkpoints[TP], clock()).first_dirty_offset == 15
    assert not one_pass(again)  # nothing dirty below the active segment


def test_a_checkpoint_outside_the_log_restarts_at_the_log_start(tmp_path: Path) -> None:
    clock = Clock()
    _, log = manager_with(tmp_path, compacted(), clock)
    rounds(log, 2)
    assert log_to_clean(TP, log, 500, clock()).first_dirty_offset == 0
    assert log_to_clean(TP, log, 5, clock()).first_dirty_offset == 5


def test_only_compacted_logs_are_cleaned(tmp_path: Path) -> None:
    clock = Clock()
    manager, log = manager_with(tmp_path, TopicConfig(), clock)
    rounds(log, 3)
    assert not one_pass(LogCleaner(manager, time_ms=clock))
    log.update_config(compacted())
    assert one_pass(LogCleaner(manager, time_ms=clock))


@pytest.mark.parametrize(("ratio", "cleaned"), [("0.5", False), ("0.1", True)])
def test_min_cleanable_dirty_ratio(tmp_path: Path, ratio: str, cleaned: bool) -> None:
    clock = Clock()
    config = compacted(**{"min.cleanable.dirty.ratio": ratio})
    manager, log = manager_with(tmp_path, config, clock)
    for round_ in range(4):
        produce(log, [(b"k%d" % (round_ * 10 + i), b"v" * 100) for i in range(10)])  # distinct keys: all stay
        log.roll()
    cleaner = LogCleaner(manager, time_ms=clock)
    assert one_pass(cleaner)
    produce(log, [(b"k%d" % i, b"w" * 100) for i in range(10)])  # a dirty segment a fifth of the log
    log.roll()
    candidate = log_to_clean(TP, log, cleaner.checkpoints[TP], clock())
    assert 0.1 < candidate.cleanable_ratio < 0.5
    assert one_pass(cleaner) is cleaned
    assert (cleaner.checkpoints[TP] == log.active.base_offset) is cleaned


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    clock = Clock(TS + 60_000)
    config = compacted(**{"min.compaction.lag.ms": "30000"})
    manager, log = manager_with(tmp_path, config, clock)
    rounds(log, 2, timestamp=TS)  # 60 s old: cleanable
    rounds(log, 2, timestamp=TS + 50_000)  # 10 s old: too young
    produce(log, [(b"k0", b"x")])
    assert log_to_clean(TP, log, None, clock()).first_uncleanable_offset == 10
    cleaner = LogCleaner(manager, time_ms=clock)
    assert one_pass(cleaner)
    assert cleaner.checkpoints[TP] == 10
    offsets = [o for o, _, _ in records(log)]
    assert offsets == list(range(5, 21))  # the first round went, the young rounds stayed whole
    clock.now = TS + 90_000
    assert log_to_clean(TP, log, 10, clock()).first_uncleanable_offset == 20


def test_max_compaction_lag_forces_cleaning_below_the_ratio(tmp_path: Path) -> None:
    clock = Clock(TS + 1000)
    config = compacted(**{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "500"})
    manager, log = manager_with(tmp_path, config, clock)
    rounds(log, 1)
    produce(log, [(b"k0", b"x")])
    candidate = log_to_clean(TP, log, None, clock())
    assert candidate.needs_compaction_now
    assert one_pass(LogCleaner(manager, time_ms=clock))


def test_last_stable_offsets_bound_the_dirty_section(tmp_path: Path) -> None:
    clock = Clock()
    manager, log = manager_with(tmp_path, compacted(), clock)
    rounds(log, 3)
    produce(log, [(b"k0", b"x")])
    cleaner = LogCleaner(manager, bounded_by_last_stable_offsets=True, time_ms=clock)
    assert not one_pass(cleaner)  # no last stable offset known yet
    cleaner.update_last_stable_offsets({TP: 12})
    assert log_to_clean(TP, log, None, clock(), 12).first_uncleanable_offset == 10
    assert one_pass(cleaner)
    assert cleaner.checkpoints[TP] == 10


def test_the_dirtiest_log_goes_first(tmp_path: Path) -> None:
    clock = Clock()
    manager = LogManager([tmp_path], compacted(), time_ms=clock)
    manager.startup()
    calm = manager.get_or_create_log(TopicPartition("calm", 0), compacted())
    busy = manager.get_or_create_log(TopicPartition("busy", 0), compacted())
    rounds(calm, 2)
    rounds(busy, 4)
    cleaner = LogCleaner(manager, time_ms=clock)
    cleaner.checkpoints[TopicPartition("calm", 0)] = 5  # half of it clean
    chosen = cleaner.grab_filthiest_log()
    assert chosen is not None and chosen.tp == TopicPartition("busy", 0)
    second = cleaner.grab_filthiest_log()  # the busy log is in progress
    assert second is not None and second.tp == TopicPartition("calm", 0)
    assert cleaner.grab_filthiest_log() is None


def test_map_slots_follow_the_dedupe_buffer() -> None:
    assert map_slots(134217728, 1) == int(134217728 / 24 * 0.9)
    assert map_slots(134217728, 2) == int(134217728 / 2 / 24 * 0.9)


def test_a_full_offset_map_ends_the_pass_at_a_segment_boundary(tmp_path: Path) -> None:
    clock = Clock()
    _, log = manager_with(tmp_path, compacted(), clock)
    rounds(log, 4)
    end, _ = Cleaner(3, threading.Event()).clean(log, 0, log.active.base_offset)
    assert end == 5  # the first segment filled the map
    assert len(records(log)) == 20


def test_the_threads_clean_in_the_background_and_stop_promptly(tmp_path: Path) -> None:
    clock = Clock()
    manager, log = manager_with(tmp_path, compacted(), clock)
    cleaner = LogCleaner(manager, backoff_ms=20, time_ms=clock, threads=2)
    cleaner.start()
    try:
        rounds(log, 3)
        produce(log, [(b"k0", b"x")])
        deadline = time.monotonic() + 10
        while cleaner.checkpoints.get(TP) != 15 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cleaner.checkpoints.get(TP) == 15
        assert [o for o, _, _ in records(log)] == [10, 11, 12, 13, 14, 15]
    finally:
        cleaner.shutdown()
    assert not [t for t in threading.enumerate() if t.name.startswith("kafka-log-cleaner-thread")]


def test_truncation_below_the_checkpoint_lowers_it(tmp_path: Path) -> None:
    clock = Clock()
    manager, log = manager_with(tmp_path, compacted(), clock)
    rounds(log, 3)
    produce(log, [(b"k0", b"x")])
    cleaner = LogCleaner(manager, time_ms=clock)
    assert one_pass(cleaner)
    assert cleaner.checkpoints[TP] == 15
    log.truncate_to(12)  # a follower catching up with a new leader; the batch holding 10-14 goes whole
    assert log.log_end_offset == 10  # offsets below the cleaned segment's first batch stay used
    rounds(log, 2)
    chosen = cleaner.grab_filthiest_log()
    assert chosen is not None and chosen.first_dirty_offset == 10
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_FILE).read() == {TP: 10}


class RecordingStop(threading.Event):
    """A stop event that records the waits asked of it instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return False


def test_cleaner_threads_sleep_off_bytes_beyond_their_shared_rate() -> None:
    now = [100.0]
    bucket = TokenBucket(1000.0, clock=lambda: now[0])  # a burst of 100 bytes
    stop = RecordingStop()
    first, second = Cleaner(10, stop, 0, throttler=bucket), Cleaner(10, stop, 1, throttler=bucket)
    first._throttle(100)  # the burst
    assert stop.waits == []
    second._throttle(500)  # 500 bytes at 1000 B/s
    first._throttle(300)  # behind the other thread's debt too
    assert stop.waits == [pytest.approx(0.5), pytest.approx(0.8)]
    now[0] += 5.0  # the debt is paid, and at most a burst is saved meanwhile
    first._throttle(100)
    second._throttle(100)
    assert stop.waits[2:] == [pytest.approx(0.1)]
    Cleaner(10, stop)._throttle(1 << 40)  # no limit
    assert len(stop.waits) == 3


def test_the_default_io_rate_is_unlimited(tmp_path: Path) -> None:
    manager, _ = manager_with(tmp_path, TopicConfig(), Clock())
    assert LogCleaner(manager)._throttler is None
    assert LogCleaner(manager, max_io_bytes_per_second=1e6)._throttler is not None


def test_compact_delete_logs_are_cleaned_and_retention_during_a_pass_aborts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    manager, log = manager_with(tmp_path, compacted(**{"cleanup.policy": "compact,delete"}), clock)
    rounds(log, 3)
    produce(log, [(b"k0", b"x")])
    real = cleaner_module._fsync_dir

    def retention_then_fsync(directory: Path) -> None:
        log.maybe_increment_log_start_offset(5)  # DeleteRecords, then a retention pass, while the cleaner works
        log.delete_old_segments()
        real(directory)

    monkeypatch.setattr(cleaner_module, "_fsync_dir", retention_then_fsync)
    cleaner = LogCleaner(manager, time_ms=clock)
    assert one_pass(cleaner)  # chosen, then aborted at the swap: the segments it cleaned are gone
    assert TP not in cleaner.checkpoints
    assert [o for o, _, _ in records(log)] == list(range(5, 16))
    assert not [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    monkeypatch.setattr(cleaner_module, "_fsync_dir", real)
    assert one_pass(cleaner)
    assert [o for o, _, _ in records(log)] == [10, 11, 12, 13, 14, 15]
