"""Transactions on one partition's log: the last stable offset, markers, the transaction index, read_committed
reads, and producer state that survives a restart (snapshot or log replay)."""

from __future__ import annotations

import os
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
from mq.storage.producer_snapshot import ProducerSnapshotEntry, list_snapshot_offsets, read_snapshot
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


def follower(directory: Path, config: TopicConfig) -> Partition:
    partition = Partition(
        TopicPartition("t", 0), Log(directory, config), BROKER + 1, on_roll_snapshot=write_roll_snapshot
    )
    partition.leader_id, partition.leader_epoch = BROKER, 0
    partition.replicas, partition.isr = (BROKER, BROKER + 1), frozenset({BROKER, BROKER + 1})
    return partition


def replicate(source: Partition, replica: Partition) -> None:
    """Append the source's batches from the replica's log end, one batch per append (as small fetches bring them)."""
    for segment, header in source.log.batches_from(replica.log_end_offset):
        replica.append_records_to_follower(os.pread(segment.fd, header.size, header.position))


def state(partition: Partition) -> list[tuple[object, ...]]:
    return sorted(partition.snapshot_entries(), key=lambda e: e.producer_id)  # type: ignore[arg-type, return-value]


def aborted(partition: Partition) -> list[tuple[int, int, int, int]]:
    return [
        (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in partition.log.collect_aborted_txns(0, 1000)
    ]


def leader_history(directory: Path, config: TopicConfig) -> tuple[Partition, dict[int, list[tuple[object, ...]]]]:
    """A leader whose producers commit, abort and retry across several segments; with its state at each log end."""
    p = leader(directory, config)
    p.on_roll_snapshot = write_roll_snapshot
    states = {0: state(p)}
    steps = [
        lambda: append(p, batch(7, 0, 0, txn=True)),  # 0-1
        lambda: append(p, batch(8, 0, 0)),  # 2-3
        lambda: append(p, batch(9, 0, 0, txn=True)),  # 4-5
        lambda: p.write_txn_marker(7, 0, 1, commit=False),  # 6: aborts while 9's transaction is open
        lambda: append(p, batch(8, 0, 2)),  # 7-8
        lambda: p.write_txn_marker(9, 0, 1, commit=True),  # 9
        lambda: append(p, batch(7, 1, 0, txn=True)),  # 10-11, a new epoch
        lambda: p.write_txn_marker(7, 1, 1, commit=False),  # 12
        lambda: append(p, batch(8, 0, 4)),  # 13-14
    ]
    for step in steps:
        step()
        states[p.log_end_offset] = state(p)
    return p, states


def test_a_follower_keeps_the_leaders_producer_state_transaction_index_and_roll_snapshots(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=200)
    source, states = leader_history(tmp_path / "leader", config)
    replica = follower(tmp_path / "follower", config)
    replicate(source, replica)
    assert replica.log_end_offset == source.log_end_offset == 15
    assert state(replica) == states[15]
    assert aborted(replica) == aborted(source) == [(7, 0, 6, 4), (7, 10, 12, 13)]
    assert replica.last_stable_offset == replica.high_watermark  # no transaction open
    snapshots = list_snapshot_offsets(tmp_path / "follower")
    assert len(snapshots) > 2 and snapshots == list_snapshot_offsets(tmp_path / "leader")
    for offset in snapshots:  # each holds the state before its segment, as the leader's does
        from_follower = read_snapshot(snapshot_file_name(tmp_path / "follower", offset))
        assert sorted(from_follower, key=lambda e: e.producer_id) == states[offset]
    replica.leader_id = replica.local_broker_id  # it becomes leader: a retry of a replicated batch is a duplicate
    assert append(replica, batch(8, 0, 4)) == 13
    assert replica.log_end_offset == 15


def test_a_follower_reloads_its_producer_state_when_truncated(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=200)
    source, states = leader_history(tmp_path / "leader", config)
    replica = follower(tmp_path / "follower", config)
    replicate(source, replica)
    for offset in (13, 10, 6, 4, 2, 0):
        replica.truncate_to(offset)
        assert replica.log_end_offset == offset
        assert state(replica) == states[offset]
        assert all(s <= offset for s in list_snapshot_offsets(tmp_path / "follower"))
        assert aborted(replica) == [a for a in aborted(source) if a[2] < offset]
        if offset == 6:
            assert replica.producers.first_unstable_offset == 0  # the ABORT of 7 is gone: its transaction is open
    replicate(source, replica)
    assert state(replica) == states[15]
    assert aborted(replica) == aborted(source)


def test_a_replay_over_indexed_markers_adds_no_entries(tmp_path: Path) -> None:
    source, _ = leader_history(tmp_path / "leader", TopicConfig())
    indexed = aborted(source)
    source.rebuild_producer_state()
    assert aborted(source) == indexed


def test_a_roll_snapshot_asked_for_before_a_truncation_below_its_segment_is_not_written(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=200)
    asked: list[tuple[Path, int, list[ProducerSnapshotEntry]]] = []
    p = leader(tmp_path / "t-0", config)
    p.on_roll_snapshot = lambda *request: asked.append(request)  # written later, as a worker thread would
    append(p, batch(7, 0, 0))
    append(p, batch(7, 0, 2))
    append(p, batch(7, 0, 4))  # rolls at 4
    assert [offset for _, offset, _ in asked] == [4]
    p.truncate_to(2)
    write_roll_snapshot(*asked[0])
    assert list_snapshot_offsets(tmp_path / "t-0") == []
    p.truncate_to(0)
    append(p, batch(7, 0, 0))
    append(p, batch(7, 0, 2))
    append(p, batch(7, 0, 4))
    write_roll_snapshot(*asked[-1])
    assert list_snapshot_offsets(tmp_path / "t-0") == [4]
