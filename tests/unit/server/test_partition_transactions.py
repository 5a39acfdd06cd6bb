"""Transactions on one partition's log: the last stable offset, markers, the transaction index, read_committed
reads, and producer state that survives a restart (snapshot or log replay)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mq.config import TopicConfig
from mq.errors import InvalidRecordError
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.records.record import COMMIT
from mq.server.partition import Partition, write_roll_snapshot
from mq.server.producer_state import InvalidProducerEpochError
from mq.storage.file_names import snapshot_file_name
from mq.storage.partition_log import Log
from mq.storage.producer_snapshot import list_snapshot_offsets, read_snapshot
from mq.topic_partition import TopicPartition

BROKER = 1


def leader(directory: Path, config: TopicConfig | None = None) -> Partition:
    partition = Partition(TopicPartition("t", 0), Log(directory, config or TopicConfig()), BROKER)
    partition.leader_id, partition.leader_epoch = BROKER, 0
    partition.replicas, partition.isr = (BROKER,), frozenset({BROKER})
    return partition


def batch(producer_id: int = -1, epoch: int = 0, sequence: int = -1, count: int = 2, txn: bool = False) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, is_transactional=txn
    )
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(now, b"k%d" % i, b"v%d" % i)
    return builder.build()


def append(partition: Partition, records: bytes) -> int:
    return partition.append_records_to_leader(bytearray(records), 1, 1).base_offset


def test_open_transactions_hold_the_last_stable_offset_until_their_markers(tmp_path: Path) -> None:
    p = leader(tmp_path / "t-0")
    append(p, batch())  # 0-1, plain
    append(p, batch(7, 0, 0, txn=True))  # 2-3, txn of producer 7
    append(p, batch(8, 0, 0, txn=True))  # 4-5, txn of producer 8
    append(p, batch(7, 0, 2, txn=True))  # 6-7, same txn of 7
    assert p.high_watermark == 8
    assert p.last_stable_offset == 2
    assert p.write_txn_marker(7, 0, 3, commit=False) == 8
    assert p.last_stable_offset == 4  # producer 8's transaction is still open
    aborted = p.log.collect_aborted_txns(0, 100)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in aborted] == [(7, 2, 8, 4)]
    assert p.write_txn_marker(8, 0, 3, commit=True) == 9
    assert p.last_stable_offset == p.high_watermark == 10
    assert len(p.log.collect_aborted_txns(0, 100)) == 1  # a commit adds no index entry
    assert (tmp_path / "t-0" / "00000000000000000000.txnindex").stat().st_size == 34


def test_read_committed_reads_stop_at_the_last_stable_offset(tmp_path: Path) -> None:
    p = leader(tmp_path / "t-0")
    append(p, batch())
    append(p, batch(7, 0, 0, txn=True))
    committed = p.read(0, 1 << 20, from_follower=False, min_one_message=True, read_committed=True)
    uncommitted = p.read(0, 1 << 20, from_follower=False, min_one_message=True)
    assert committed.records is not None and uncommitted.records is not None
    assert committed.records.length < uncommitted.records.length
    assert p.read(2, 1 << 20, from_follower=False, min_one_message=True, read_committed=True).records is None


def test_markers_are_fenced_by_epoch_and_clients_may_not_append_control_batches(tmp_path: Path) -> None:
    p = leader(tmp_path / "t-0")
    append(p, batch(7, 2, 0, txn=True))
    with pytest.raises(InvalidProducerEpochError):
        p.write_txn_marker(7, 1, 0, commit=True)
    with pytest.raises(InvalidRecordError):
        append(p, build_control_batch(COMMIT, 7, 2, 0))
    assert p.last_stable_offset == 0
    p.write_txn_marker(7, 3, 0, commit=False)  # a bumped epoch (the coordinator aborting a fenced producer)
    assert p.last_stable_offset == p.high_watermark


def test_open_transactions_and_aborted_entries_survive_a_restart_by_log_replay(tmp_path: Path) -> None:
    p = leader(tmp_path / "t-0")
    append(p, batch(7, 0, 0, txn=True))
    append(p, batch(8, 0, 0, txn=True))
    p.write_txn_marker(7, 0, 0, commit=False)
    p.log.close()
    (tmp_path / "t-0" / "00000000000000000000.txnindex").unlink()  # as if its append never reached the disk
    again = leader(tmp_path / "t-0")
    again.high_watermark = again.log_end_offset
    again.rebuild_producer_state()
    assert again.last_stable_offset == 2  # producer 8's transaction
    assert [(t.producer_id, t.first_offset) for t in again.log.collect_aborted_txns(0, 100)] == [(7, 0)]
    assert again.producers.check(8, 0, 0, 1) is not None  # a retry is still a duplicate


def test_a_snapshot_restores_producers_and_open_transactions(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=200)
    p = leader(tmp_path / "t-0", config)
    append(p, batch(7, 0, 0, txn=True))
    append(p, batch(8, 0, 0))
    append(p, batch(8, 0, 2))
    p.write_producer_snapshot()
    assert list_snapshot_offsets(tmp_path / "t-0") == [6]
    p.log.close()
    snapshot = snapshot_file_name(tmp_path / "t-0", 6)
    again = leader(tmp_path / "t-0", config)
    again.high_watermark = again.log_end_offset
    again.rebuild_producer_state()
    assert again.last_stable_offset == 0
    assert again.producers.check(8, 0, 2, 3) is not None
    assert snapshot.exists()
    snapshot.write_bytes(b"\x00\x01garbage")  # a damaged snapshot is dropped and the log replayed instead
    third = leader(tmp_path / "t-0", config)
    third.high_watermark = third.log_end_offset
    third.rebuild_producer_state()
    assert not snapshot.exists()
    assert third.last_stable_offset == 0
    assert third.producers.check(8, 0, 2, 3) is not None


def test_a_roll_snapshots_the_producers_before_the_new_segment(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=200)
    p = leader(tmp_path / "t-0", config)
    p.on_roll_snapshot = write_roll_snapshot
    append(p, batch(7, 0, 0, txn=True))  # 0-1
    append(p, batch(8, 0, 0))  # 2-3
    append(p, batch(8, 0, 2))  # 4-5: two batches fill a segment, this one rolls
    assert list_snapshot_offsets(tmp_path / "t-0") == [4]
    entries = {e.producer_id: e for e in read_snapshot(snapshot_file_name(tmp_path / "t-0", 4))}
    assert entries[7].current_txn_first_offset == 0
    assert (entries[8].last_offset, entries[8].last_sequence) == (3, 1)  # the state before the new segment
    p.log.close()
    again = leader(tmp_path / "t-0", config)
    again.high_watermark = again.log_end_offset
    again.rebuild_producer_state()
    assert again.last_stable_offset == 0
    assert again.producers.check(8, 0, 2, 3) is not None


def test_a_truncation_drops_the_snapshots_above_the_new_log_end(tmp_path: Path) -> None:
    p = leader(tmp_path / "t-0")
    append(p, batch(7, 0, 0, txn=True))
    p.write_producer_snapshot()
    append(p, batch(7, 0, 2, txn=True))
    p.write_producer_snapshot()
    assert list_snapshot_offsets(tmp_path / "t-0") == [4]
    p.log.truncate_to(2)
    assert list_snapshot_offsets(tmp_path / "t-0") == []
