"""The recovery point: a roll's flush advances it, an unclean start recovers only from it, indexes stay sparse."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest
from storage_batches import TS, v2_batch

from mq.config import TopicConfig
from mq.records.batch_header import iter_headers
from mq.storage import log_segment
from mq.storage.checkpoints import RECOVERY_POINT_FILE, OffsetCheckpointFile
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

CONFIG = TopicConfig(segment_bytes=2000, index_interval_bytes=150, retention_ms=-1)
"""Default segment.index.bytes (10 MB): the active segment's indexes are preallocated far beyond their entries."""


def fill(log: Log, batches: int) -> None:
    for i in range(batches):
        log.append_as_leader(v2_batch(1 + i % 3, value_size=10 + i, timestamp=TS + i), 0)


def flushed_log(directory: Path) -> Log:
    """A log of several segments whose roll was flushed: its recovery point is the active segment's base offset."""
    log = Log(directory, CONFIG)
    fill(log, 60)
    log.flush_rolled()
    return log


def crash_copy(source: Path, target: Path) -> None:
    """The files of a log as a kill -9 leaves them (nothing trimmed or closed), holes kept."""
    subprocess.run(["cp", "-r", "--sparse=always", str(source), str(target)], check=True)


def index_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".index", ".timeindex"))


def test_a_roll_asks_for_a_flush_that_advances_the_recovery_point_to_the_new_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rolled: list[Log] = []
    log = Log(tmp_path / "t-0", CONFIG, on_roll=rolled.append)
    fill(log, 10)
    assert rolled == []
    fill(log, 40)
    assert len(log.segments) > 2
    assert rolled and all(r is log for r in rolled)
    assert log.recovery_point == 0
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(log_segment.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    log.flush_rolled()
    assert log.recovery_point == log.active.base_offset > 0
    assert {s.fd for s in log.segments[:-1]} <= set(synced)  # their indexes are fsynced too
    assert log.active.fd not in synced
    synced.clear()
    log.flush_rolled()
    assert synced == []
    log.close()


def test_an_unclean_start_trusts_the_indexes_below_the_recovery_point(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "src-0"
    log = flushed_log(source)
    fill(log, 10)  # a roll not yet flushed, and a partly filled active segment
    recovery_point, end, bases = log.recovery_point, log.log_end_offset, [s.base_offset for s in log.segments]
    assert 0 < recovery_point < bases[-1]
    crashed = tmp_path / "t-0"
    crash_copy(source, crashed)
    log.close()
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in index_files(crashed)}
    trusted = [p.name for p in index_files(crashed) if int(p.stem) < recovery_point]
    assert len(trusted) >= 4

    with caplog.at_level(logging.INFO, logger="mq.storage.partition_log"):
        recovered = Log(crashed, CONFIG, recovery_point=recovery_point)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("mq.")] == []
    assert f"Recovering unflushed segments from {recovery_point} " in caplog.text
    assert recovered.log_end_offset == end
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in index_files(crashed)}
    assert {name: after[name] for name in trusted} == {name: before[name] for name in trusted}
    rebuilt = [name for name in after if name not in trusted]
    assert all(after[name][0] != before[name][0] for name in rebuilt)
    offset, batches = 0, 0
    while offset < end:
        data = recovered.read(offset, 1 << 20)
        assert data.records is not None
        for header in iter_headers(data.records.read()):
            offset, batches = header.next_offset, batches + 1
    assert batches == 70
    recovered.close()


def test_an_insane_index_below_the_recovery_point_is_rebuilt_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "t-0"
    log = flushed_log(directory)
    recovery_point = log.recovery_point
    log.close()
    index = index_files(directory)[0]
    original = index.read_bytes()
    index.write_bytes(original[:-3])
    with caplog.at_level(logging.WARNING, logger="mq.storage.partition_log"):
        Log(directory, CONFIG, recovery_point=recovery_point).close()
    assert "Found a corrupted index file" in caplog.text
    assert index.read_bytes() == original


def test_rebuilt_indexes_stay_sparse_and_trimmed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Recovery from offset 0 (no checkpoint) rebuilds every index: the inactive ones end trimmed to their entries,
    the preallocated active ones keep their holes, and a zero-filled active index is no reason for a warning."""
    source = tmp_path / "src-0"
    log = Log(source, CONFIG)
    fill(log, 60)
    crashed = tmp_path / "t-0"
    crash_copy(source, crashed)
    log.close()
    active = log.active.base_offset
    allocated_before = sum(p.stat().st_blocks for p in crashed.iterdir())
    with caplog.at_level(logging.WARNING, logger="mq.storage.partition_log"):
        recovered = Log(crashed, CONFIG, recovery_point=0)
    assert [r for r in caplog.records if r.name.startswith("mq.")] == []
    allocated_after = sum(p.stat().st_blocks for p in crashed.iterdir())
    assert allocated_after <= allocated_before
    for path in index_files(crashed):
        stat = path.stat()
        if int(path.stem) == active:
            assert stat.st_size >= 10485760 - 12
            assert stat.st_blocks * 512 <= 64 * 1024
        else:
            segment = next(s for s in recovered.segments if s.base_offset == int(path.stem))
            index = segment.index if path.suffix == ".index" else segment.time_index
            assert stat.st_size == index.entries * index.ENTRY.size > 0
    recovered.close()


def test_the_log_manager_checkpoints_what_a_roll_flushed(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], CONFIG)
    manager.startup()
    rolled: list[Log] = []
    manager.roll_listener = rolled.append
    tp = TopicPartition("t", 0)
    log = manager.get_or_create_log(tp, CONFIG)
    fill(log, 60)
    assert rolled and rolled[0] is log
    manager.checkpoint_recovery_points()
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_FILE).read() == {tp: 0}
    rolled[-1].flush_rolled()
    manager.checkpoint_recovery_points()
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_FILE).read() == {tp: log.active.base_offset}
    assert log.active.base_offset > 0
    manager.shutdown()


def test_a_truncation_during_a_flush_keeps_the_recovery_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower's truncation while the fsyncs run (outside the lock): offsets below the flush's target may now be
    new data, so the recovery point must not move there."""
    log = Log(tmp_path / "t-0", CONFIG)
    fill(log, 60)
    target = log.active.base_offset
    rolled_segment = log.segments[-2]
    real_fsync = os.fsync

    def fsync_then_truncate(fd: int) -> None:
        real_fsync(fd)
        if fd == rolled_segment.fd:  # its .log is on disk: a truncation comes in before the flush ends
            log.truncate_to(rolled_segment.base_offset + 1)

    monkeypatch.setattr(os, "fsync", fsync_then_truncate)
    log.flush(target)
    assert log.recovery_point == 0
    log.close()


def test_a_segment_retention_removes_while_a_roll_is_flushed_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsyncs run outside the lock: retention may delete (and close the indexes of) a segment meanwhile. That is
    no I/O error of the log dir; any other failure still is."""
    manager = LogManager([tmp_path], TopicConfig(segment_bytes=2000, index_interval_bytes=150, retention_bytes=2000))
    manager.startup()
    log = manager.get_or_create_log(TopicPartition("t", 0), CONFIG)
    fill(log, 60)
    first = log.segments[0]
    real_fsync = os.fsync

    def fsync_after_retention(fd: int) -> None:
        if fd == first.fd:  # retention closes the segment's files while its fsync is under way
            log.update_config(TopicConfig(segment_bytes=2000, index_interval_bytes=150, retention_bytes=0))
            assert log.delete_old_segments() > 0 and first not in log.segments
        real_fsync(fd)  # EBADF for the closed one

    monkeypatch.setattr(os, "fsync", fsync_after_retention)
    target = log.active.base_offset
    manager.flush_rolled(log)
    assert not manager.offline_dirs
    assert log.recovery_point == target > 0

    failing = log.segments[0]

    def failing_fsync(fd: int) -> None:
        if fd == failing.fd:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    fill(log, 30)
    manager.flush_rolled(log)
    assert manager.offline_dirs == {tmp_path}
    manager.shutdown()
