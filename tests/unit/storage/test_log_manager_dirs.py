"""Several log dirs: placement of new logs, future logs (AlterReplicaLogDirs) copied by the mover while appends go
on, the swap, and a restart with a future log beside its current log or alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from mq.config import TopicConfig
from mq.errors import ErrorCode, KafkaError
from mq.server.log_dir_mover import LogDirMover
from mq.server.partition import Partition
from mq.storage.file_names import FUTURE_DIR_SUFFIX
from mq.storage.log_manager import LogManager
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import v2_batch

CONFIG = TopicConfig(segment_bytes=2048)
"""Small segments: a copy crosses several of them."""
TP = TopicPartition("t", 0)


def manager(tmp_path: Path, dirs: int = 2) -> LogManager:
    log_manager = LogManager([tmp_path / f"d{i}" for i in range(dirs)], CONFIG)
    log_manager.startup()
    return log_manager


def test_a_new_log_goes_to_the_dir_holding_the_fewest(tmp_path: Path) -> None:
    log_manager = manager(tmp_path, dirs=3)
    parents = [log_manager.get_or_create_log(TopicPartition("p", i), CONFIG).dir.parent.name for i in range(7)]
    assert parents == ["d0", "d1", "d2", "d0", "d1", "d2", "d0"]
    log_manager.delete_log(TopicPartition("p", 1))
    assert log_manager.get_or_create_log(TopicPartition("q", 0), CONFIG).dir.parent.name == "d1"


def test_future_log_errors_and_no_op(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    current = log_manager.get_or_create_log(TP, CONFIG)
    with pytest.raises(KafkaError) as unknown_dir:
        log_manager.log_dir_named(str(tmp_path / "elsewhere"))
    assert unknown_dir.value.code == ErrorCode.LOG_DIR_NOT_FOUND
    with pytest.raises(KafkaError) as no_path:
        log_manager.log_dir_named(str(tmp_path / "d0") + "\x00")
    assert no_path.value.code == ErrorCode.LOG_DIR_NOT_FOUND
    with pytest.raises(KafkaError) as absent:
        log_manager.create_future_log(TopicPartition("absent", 0), log_manager.log_dirs[1])
    assert absent.value.code == ErrorCode.REPLICA_NOT_AVAILABLE
    assert log_manager.create_future_log(TP, current.dir.parent) is None
    other = log_manager.log_dir_named(str(tmp_path / "d1" / "."))
    future = log_manager.create_future_log(TP, other)
    assert future is not None and future.dir.parent == other and future.dir.name.endswith(FUTURE_DIR_SUFFIX)
    assert log_manager.create_future_log(TP, other) is future
    assert log_manager.create_future_log(TP, current.dir.parent) is None  # moving back: the copy is dropped
    assert TP not in log_manager.future_logs


def test_the_mover_copies_while_appends_go_on_and_swaps_when_caught_up(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    current = log_manager.get_or_create_log(TP, CONFIG)
    for _ in range(30):
        current.append_as_leader(v2_batch(count=3, value_size=50), 0)
    current.maybe_increment_log_start_offset(4)  # DeleteRecords: the start lies inside the second batch
    partition = Partition(TP, current, local_broker_id=0)
    mover = LogDirMover(log_manager, {TP: partition}.get, chunk_bytes=700)
    future = log_manager.create_future_log(TP, log_manager.log_dirs[1])
    assert future is not None
    steps = 0
    while mover.step(TP):
        steps += 1
        if steps % 3 == 0:
            current.append_as_leader(v2_batch(count=3, value_size=50), 0)
    assert steps > 3 and TP not in log_manager.future_logs
    moved = log_manager.logs[TP]
    assert partition.log is moved and moved.dir == log_manager.log_dirs[1] / "t-0"
    assert (moved.log_start_offset, moved.log_end_offset) == (4, current.log_end_offset)
    for offset in range(4, moved.log_end_offset, 3):
        old, new = current.read(offset, 200), moved.read(offset, 200)
        assert old.records is not None and new.records is not None
        assert new.records.read() == old.records.read()
    assert [p.name.endswith("-delete") for p in log_manager.log_dirs[0].iterdir() if p.is_dir()] == [True]
    moved.append_as_leader(v2_batch(), 0)
    assert moved.log_end_offset == current.log_end_offset + 3


def test_a_future_log_ahead_of_a_truncated_current_log_starts_again(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    current = log_manager.get_or_create_log(TP, CONFIG)
    for _ in range(10):
        current.append_as_leader(v2_batch(), 0)
    partition = Partition(TP, current, local_broker_id=0)
    mover = LogDirMover(log_manager, {TP: partition}.get, chunk_bytes=300)
    future = log_manager.create_future_log(TP, log_manager.log_dirs[1])
    assert future is not None
    for _ in range(100):
        if future.log_end_offset >= 15:
            break
        mover.step(TP)
    current.truncate_to(9)
    current.append_as_follower(_renumbered(v2_batch(), 9))
    for _ in range(100):
        if not mover.step(TP) and TP not in log_manager.future_logs:
            break
    moved = log_manager.logs[TP]
    assert moved.log_end_offset == 12
    first, last = moved.read(9, 1 << 20), current.read(9, 1 << 20)
    assert first.records is not None and last.records is not None
    assert first.records.read() == last.records.read()


def _renumbered(batch: bytes, base: int) -> bytes:
    from mq.records.batch_header import set_offset

    data = bytearray(batch)
    set_offset(data, 0, base)
    return bytes(data)


def test_restart_resumes_a_future_log_and_promotes_one_left_alone(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    for tp in (TP, TopicPartition("t", 1)):
        log = log_manager.get_or_create_log(tp, CONFIG)
        log.append_as_leader(v2_batch(), 0)
        future = log_manager.create_future_log(tp, log_manager.log_dirs[1 - int(log.dir.parent.name[-1])])
        assert future is not None
        future.append_as_follower(log.read(0, 1 << 20).records.read())  # type: ignore[union-attr]
    alone = log_manager.logs[TopicPartition("t", 1)].dir
    log_manager.shutdown()
    for child in alone.iterdir():
        child.unlink()
    alone.rmdir()  # a stop between the swap's two renames: only the future log is left

    restarted = manager(tmp_path)
    assert set(restarted.future_logs) == {TP}
    promoted = restarted.logs[TopicPartition("t", 1)]
    assert promoted.dir.name == "t-1" and promoted.dir.parent != alone.parent
    assert promoted.log_end_offset == 3
    restarted.shutdown()
