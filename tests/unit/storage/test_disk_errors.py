"""Storage errors (ENOSPC, EIO) injected into appends, index writes and checkpoints: an append is all or nothing, a
failed one leaves nothing a restart could misread, and the log manager takes the failing dir offline once."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode
from mq.server.partition import Partition
from mq.server.replica_manager import FetchRequestPartition, ReplicaManager
from mq.storage.checkpoints import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import TS, v2_batch

CONFIG = TopicConfig(index_interval_bytes=0)
"""An index entry before every append after the first: a failed append would leave one behind."""


def failing_pwrite(monkeypatch: pytest.MonkeyPatch, fails: Callable[[int], bool]) -> None:
    """``os.pwrite`` to the file descriptors ``fails`` picks raises ENOSPC; others write as usual."""
    real = os.pwrite

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if fails(fd):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)


def fd_of(path: Path) -> Callable[[int], bool]:
    return lambda fd: os.path.realpath(f"/proc/self/fd/{fd}") == str(path)


def appended_log(directory: Path, batches: int) -> Log:
    log = Log(directory, CONFIG)
    for _ in range(batches):
        log.append_as_leader(v2_batch(count=3), 0)
    return log


@pytest.mark.parametrize("failing", ["log", "index", "timeindex"])
def test_a_failed_append_leaves_the_segment_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    log = appended_log(tmp_path / "t-0", 3)
    segment = log.active
    size, entries, time_entries = segment.size, segment.index.entries, segment.time_index.entries
    target = {"log": segment.log_path, "index": segment.index.path, "timeindex": segment.time_index.path}[failing]
    failing_pwrite(monkeypatch, fd_of(target))
    later = v2_batch(count=3, timestamp=TS + 100)  # a new max timestamp: a time index entry too
    with pytest.raises(OSError):
        log.append_as_leader(later, 0)
    assert os.fstat(segment.fd).st_size == size == segment.size
    assert (segment.index.entries, segment.time_index.entries) == (entries, time_entries)
    assert log.log_end_offset == 9


def test_a_clean_restart_after_a_failed_append_keeps_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data loss seen after a disk-full episode: an index entry written before the ``.log`` write that then
    failed pointed at the end of the file, and a clean start took the log end offset from it (the base offset)."""
    log = appended_log(tmp_path / "t-0", 3)
    failing_pwrite(monkeypatch, fd_of(log.active.log_path))
    with pytest.raises(OSError):
        log.append_as_leader(v2_batch(count=3), 0)
    monkeypatch.undo()
    log.close()
    reopened = Log(tmp_path / "t-0", CONFIG, clean_shutdown=True)
    assert reopened.log_end_offset == 9
    assert reopened.read(0, 1 << 20).records is not None


def two_dir_manager(tmp_path: Path) -> tuple[LogManager, list[Path], list[Path]]:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG)
    manager.startup()
    told: list[Path] = []
    manager.dir_failure_listener = told.append
    for partition in range(2):
        manager.get_or_create_log(TopicPartition("t", partition), CONFIG)  # t-0 in a, t-1 in b
    return manager, dirs, told


def test_an_offline_dir_is_skipped_and_gets_no_clean_shutdown_marker(tmp_path: Path) -> None:
    manager, (a, b), told = two_dir_manager(tmp_path)
    manager.mark_offline(b, OSError(errno.EIO, "Input/output error"))
    manager.mark_offline(b, OSError(errno.EIO, "Input/output error"))
    assert told == [b]  # once
    assert manager.get_or_create_log(TopicPartition("u", 0), CONFIG).dir.parent == a  # new logs avoid it
    manager.checkpoint_recovery_points()
    assert (a / RECOVERY_POINT_FILE).exists() and not (b / RECOVERY_POINT_FILE).exists()
    manager.shutdown()
    assert (a / CLEAN_SHUTDOWN_FILE).exists() and not (b / CLEAN_SHUTDOWN_FILE).exists()


def test_a_failed_checkpoint_write_takes_its_dir_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, (a, b), told = two_dir_manager(tmp_path)
    real_open = open

    def open_failing_in_b(path: object, *args: object, **kwargs: object) -> object:
        if str(path).startswith(str(b)) and str(path).endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", open_failing_in_b)
    manager.checkpoint_recovery_points()
    assert told == [b] and b in manager.offline_dirs and a not in manager.offline_dirs


def test_produce_and_fetch_answer_storage_error_once_the_dir_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, (_, b), told = two_dir_manager(tmp_path)
    rm = ReplicaManager(BrokerConfig(), 1, manager, lambda topic: CONFIG)
    for partition in range(2):
        tp = TopicPartition("t", partition)
        hosted = Partition(tp, manager.logs[tp], 1)
        hosted.leader_id, hosted.leader_epoch, hosted.replicas, hosted.isr = 1, 0, (1,), frozenset({1})
        rm.partitions[tp] = hosted
    failing = manager.logs[TopicPartition("t", 1)].active.log_path
    failing_pwrite(monkeypatch, fd_of(failing))

    async def produce() -> dict[TopicPartition, ErrorCode]:
        results = await rm.append_records({TopicPartition("t", p): v2_batch() for p in range(2)}, 1, 1000)
        return {tp: result.error for tp, result in results.items()}

    async def fetch() -> dict[TopicPartition, ErrorCode]:
        requests = [FetchRequestPartition(TopicPartition("t", p), 0, 1 << 20) for p in range(2)]
        results = await rm.fetch(requests, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
        return {tp: result.error for tp, result in results.items()}

    first = asyncio.run(produce())
    assert first == {TopicPartition("t", 0): ErrorCode.NONE, TopicPartition("t", 1): ErrorCode.KAFKA_STORAGE_ERROR}
    assert told == [b] and rm.is_offline(TopicPartition("t", 1)) and not rm.is_offline(TopicPartition("t", 0))
    monkeypatch.undo()  # the dir stays offline though writes would work again
    assert asyncio.run(produce())[TopicPartition("t", 1)] == ErrorCode.KAFKA_STORAGE_ERROR
    assert asyncio.run(fetch()) == {
        TopicPartition("t", 0): ErrorCode.NONE,
        TopicPartition("t", 1): ErrorCode.KAFKA_STORAGE_ERROR,
    }
