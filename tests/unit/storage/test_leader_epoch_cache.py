"""Leader epoch cache: Kafka's assignment and lookup rules, its checkpoint file, and its life inside a Log."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_batches import legacy_batch, v2_batch

from mq.config import TopicConfig
from mq.errors import InvalidRecordError
from mq.records.batch_header import iter_headers, set_offset, set_partition_leader_epoch
from mq.storage.checkpoints import LeaderEpochCheckpointFile
from mq.storage.leader_epoch_cache import LeaderEpochFileCache
from mq.storage.partition_log import Log


def cache_at(path: Path, entries: tuple[tuple[int, int], ...] = ()) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path / "leader-epoch-checkpoint"))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def file_text(directory: Path) -> str:
    return (directory / "leader-epoch-checkpoint").read_text()


def test_assign_keeps_epochs_and_offsets_increasing(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    assert cache.entries == [] and cache.latest_epoch is None
    assert file_text(tmp_path) == ""  # created empty, as Kafka does
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: nothing new
    cache.assign(2, 10)
    assert cache.entries == [(0, 0), (2, 10)] and cache.latest_epoch == 2
    assert file_text(tmp_path) == "0\n2\n0 0\n2 10\n"
    cache.assign(2, 7)  # same epoch from an earlier offset: it moves back
    assert cache.entries == [(0, 0), (2, 7)]
    cache.assign(3, 7)  # a new epoch at the same offset supersedes the one that wrote nothing
    assert cache.entries == [(0, 0), (3, 7)]
    cache.assign(1, 20)  # an older epoch is newer information: the entries it contradicts go
    assert cache.entries == [(0, 0), (1, 20)]
    with pytest.raises(ValueError):
        cache.assign(-1, 3)
    assert cache_at(tmp_path).entries == [(0, 0), (1, 20)]


def test_end_offset_for_follows_kafka(tmp_path: Path) -> None:
    assert cache_at(tmp_path).end_offset_for(0, 100) == (-1, -1)
    cache = cache_at(tmp_path, ((2, 10), (4, 30), (7, 50)))
    assert cache.end_offset_for(-1, 100) == (-1, -1)  # undefined epoch
    assert cache.end_offset_for(7, 100) == (7, 100)  # latest epoch: the log end
    assert cache.end_offset_for(4, 100) == (4, 50)  # the start of the next epoch
    assert cache.end_offset_for(2, 100) == (2, 30)
    assert cache.end_offset_for(5, 100) == (4, 50)  # unknown epoch between: the largest below it
    assert cache.end_offset_for(3, 100) == (2, 30)
    assert cache.end_offset_for(1, 100) == (1, 10)  # below every epoch: the first start offset
    assert cache.end_offset_for(8, 100) == (-1, -1)  # above the latest


def test_truncation_from_both_ends(tmp_path: Path) -> None:
    cache = cache_at(tmp_path, ((2, 10), (4, 30), (7, 50)))
    cache.truncate_from_end(60)
    assert cache.entries == [(2, 10), (4, 30), (7, 50)]
    cache.truncate_from_end(50)
    assert cache.entries == [(2, 10), (4, 30)]
    cache.truncate_from_start(5)
    assert cache.entries == [(2, 10), (4, 30)]
    cache.truncate_from_start(31)
    assert cache.entries == [(4, 31)]
    assert file_text(tmp_path) == "0\n1\n4 31\n"
    cache.truncate_from_end(31)
    assert cache.entries == [] and file_text(tmp_path) == "0\n0\n"
    cache.assign(5, 40)
    cache.clear()
    assert cache_at(tmp_path).entries == []


def batch_at(offset: int, epoch: int, count: int = 3) -> bytes:
    data = bytearray(v2_batch(count))
    set_offset(data, 0, offset)
    set_partition_leader_epoch(data, 0, epoch)
    return bytes(data)


def test_log_records_epochs_of_leader_appends_and_keeps_them(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, TopicConfig())
    log.append_as_leader(v2_batch(3), 0)
    log.append_as_leader(v2_batch(3), 0)
    log.leader_epoch_cache.assign(2, log.log_end_offset)  # becoming leader again
    log.append_as_leader(v2_batch(2), 2)
    log.append_as_leader(legacy_batch(1, count=1), 3)  # v0/v1 entries carry no epoch
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 6)]
    assert [
        h.partition_leader_epoch for h in iter_headers(directory.joinpath("00000000000000000000.log").read_bytes())
    ][:3] == [0, 0, 2]
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(2) == (2, 9)
    log.close()
    reopened = Log(directory, TopicConfig(), clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries == [(0, 0), (2, 6)]
    reopened.truncate_to(8)
    assert reopened.leader_epoch_cache.entries == [(0, 0), (2, 6)]
    reopened.truncate_to(4)  # inside the second batch of epoch 0: cut at that batch
    assert reopened.log_end_offset == 3 and reopened.leader_epoch_cache.entries == [(0, 0)]
    reopened.truncate_fully_and_start_at(10)
    assert reopened.leader_epoch_cache.entries == [] and file_text(directory) == "0\n0\n"


def test_log_records_epochs_of_follower_appends(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig())
    log.append_as_follower(batch_at(0, 1) + batch_at(3, 1) + batch_at(6, 4))
    log.append_as_follower(batch_at(9, 4) + batch_at(12, 5, count=1))
    assert log.leader_epoch_cache.entries == [(1, 0), (4, 6), (5, 12)]
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(batch_at(10, 9))  # out of order: rejected, the cache unchanged
    assert log.leader_epoch_cache.entries == [(1, 0), (4, 6), (5, 12)]
    log.maybe_increment_log_start_offset(7)
    assert log.leader_epoch_cache.entries == [(4, 7), (5, 12)]


def test_log_start_advance_by_retention_truncates_the_cache(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=300, retention_bytes=0))
    for epoch in range(4):
        log.append_as_follower(batch_at(log.log_end_offset, epoch))
        log.roll()
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 3), (2, 6), (3, 9)]
    log.delete_old_segments()
    assert log.log_start_offset == 12 and log.leader_epoch_cache.entries == [(3, 12)]


def test_reopen_drops_epochs_beyond_the_log_and_rebuilds_lost_ones(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, TopicConfig())
    log.append_as_follower(batch_at(0, 1) + batch_at(3, 2))
    log.close()
    # The checkpoint knows an epoch whose data never reached the disk, and misses epoch 2.
    LeaderEpochCheckpointFile(directory / "leader-epoch-checkpoint").write([(1, 0), (3, 6)])
    clean = Log(directory, TopicConfig(), clean_shutdown=True)
    assert clean.leader_epoch_cache.entries == [(1, 0)]
    clean.close()
    recovered = Log(directory, TopicConfig(), recovery_point=0)  # unclean: segments are recovered
    assert recovered.leader_epoch_cache.entries == [(1, 0), (2, 3)]
