"""Compacting a log with transactions: aborted records go and never shadow committed ones, markers go once their
transaction has no data left and they are past the delete horizon, the transaction index follows the markers, and
the dirty section stops at the last stable offset."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from compaction_helpers import (
    Clock,
    Transactions,
    clean,
    compacted,
    data_records,
    dump_cleaned_segment,
    markers,
    produce,
    records,
)

from mq.records import read_end_txn_marker
from mq.records.batch_header import Codec, iter_headers
from mq.storage.cleaner import Cleaner
from mq.storage.log_cleaner import LogCleaner
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.storage.txn_index import AbortedTxn, iter_aborted_txns
from mq.topic_partition import TopicPartition


def two_producers(directory: Path, retention_ms: int = 86_400_000) -> Log:
    """Segment 0: producer 1 commits k1=c1 k2=c1 (0-1, COMMIT 4) while producer 2 aborts k1=aborted k3=aborted
    (2-3, ABORT 5), then producer 1 commits k2=c2 (6, COMMIT 7). Segment 8: producer 2 commits k2=c3 (8, COMMIT 9),
    producer 1 commits k9=c1 (10, COMMIT 11). Active segment 12: z=1."""
    log = Log(directory, compacted(**{"delete.retention.ms": str(retention_ms)}), time_ms=Clock())
    txns = Transactions(log)
    txns.send(1, [(b"k1", b"c1"), (b"k2", b"c1")])
    txns.send(2, [(b"k1", b"aborted"), (b"k3", b"aborted")])
    txns.end(1, commit=True)
    txns.end(2, commit=False)
    txns.send(1, [(b"k2", b"c2")])
    txns.end(1, commit=True)
    log.roll()
    txns.send(2, [(b"k2", b"c3")])
    txns.end(2, commit=True)
    txns.send(1, [(b"k9", b"c1")])
    txns.end(1, commit=True)
    log.roll()
    produce(log, [(b"z", b"1")])
    assert log.log_end_offset == 13
    return log


def age(log: Log, seconds: float) -> None:
    """Give every inactive segment a modification time ``seconds`` ago."""
    then = time.time() - seconds
    for segment in log.segments[:-1]:
        os.utime(segment.log_path, (then, then))


def roll_a_fresh_clean_segment(log: Log) -> None:
    """Close the active segment (now the newest clean one: the delete horizon counts from its modification time) and
    open another."""
    log.roll()
    produce(log, [(b"fresh", b"1")])


def aborted_in_index(log: Log) -> list[tuple[int, int, int]]:
    """(producer id, first offset, marker offset) of every aborted transaction the log's transaction indexes list."""
    return [(t.producer_id, t.first_offset, t.last_offset) for t in log.collect_aborted_txns(0, log.log_end_offset)]


def test_aborted_records_go_committed_stay_and_aborted_values_never_shadow(tmp_path: Path) -> None:
    log = two_producers(tmp_path / "t-0")
    clean(log)
    assert data_records(log) == [(0, b"k1", b"c1"), (8, b"k2", b"c3"), (10, b"k9", b"c1"), (12, b"z", b"1")]
    # k1=aborted (offset 2) is later than k1=c1 but shadows nothing; k3 had only an aborted value
    assert records(Log(tmp_path / "t-0", compacted(), time_ms=Clock()))[0] == (0, b"k1", b"c1")


def test_an_aborted_value_in_the_dirty_section_keeps_the_committed_value_of_the_clean_section(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    txns = Transactions(log)
    produce(log, [(b"k", b"committed"), (b"j", b"1")])
    log.roll()
    clean(log, first_uncleanable=log.active.base_offset)
    dirty = log.log_end_offset
    txns.send(3, [(b"k", b"aborted"), (b"j", b"aborted")], Codec.GZIP)
    txns.end(3, commit=False)
    txns.send(3, [(b"j", b"2")])
    txns.end(3, commit=True)
    log.roll()
    produce(log, [(b"z", b"1")])
    clean(log, first_dirty=dirty)
    assert [(k, v) for _, k, v in data_records(log)] == [(b"k", b"committed"), (b"j", b"2"), (b"z", b"1")]


def test_markers_stay_while_their_transaction_has_data_and_the_aborted_one_stays_indexed(tmp_path: Path) -> None:
    log = two_producers(tmp_path / "t-0")
    clean(log)
    # every marker met data of its transaction in this pass (the aborted batch and k2=c2 went in it)
    assert markers(log) == [(4, 1, "COMMIT"), (5, 2, "ABORT"), (7, 1, "COMMIT"), (9, 2, "COMMIT"), (11, 1, "COMMIT")]
    assert aborted_in_index(log) == [(2, 2, 5)]
    reopened = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    assert aborted_in_index(reopened) == [(2, 2, 5)]
    [txnindex] = [p for p in (tmp_path / "t-0").glob("*.txnindex") if p.stat().st_size]
    assert txnindex.name == "00000000000000000000.txnindex"
    assert list(iter_aborted_txns(txnindex.read_bytes())) == [AbortedTxn(2, 2, 5, 6)]


def cleaned_twice(directory: Path, retention_ms: int) -> Log:
    """``two_producers`` cleaned, aged 10 s, then cleaned again below a fresh segment (the delete horizon 10 s ago
    minus ``retention_ms``)."""
    log = two_producers(directory, retention_ms)
    clean(log)
    age(log, 10)
    roll_a_fresh_clean_segment(log)
    clean(log, first_dirty=log.active.base_offset)
    return log


def test_markers_without_data_go_past_the_delete_horizon(tmp_path: Path) -> None:
    log = cleaned_twice(tmp_path / "t-0", retention_ms=1000)
    # ABORT 5 and COMMIT 7 have no data left; COMMIT 4 keeps k1=c1, 9 keeps k2=c3, 11 keeps k9=c1
    assert markers(log) == [(4, 1, "COMMIT"), (9, 2, "COMMIT"), (11, 1, "COMMIT")]
    assert aborted_in_index(log) == []
    assert [o for o, _, _ in data_records(log)] == [0, 8, 10, 12, 13]
    log.close()
    assert aborted_in_index(Log(tmp_path / "t-0", compacted(), time_ms=Clock())) == []  # no stale index file


def test_markers_without_data_stay_before_the_delete_horizon(tmp_path: Path) -> None:
    log = cleaned_twice(tmp_path / "t-0", retention_ms=60_000)
    assert [o for o, _, _ in markers(log)] == [4, 5, 7, 9, 11]
    assert aborted_in_index(log) == []  # as Kafka: the entry stays only while the marker stays for its data


def test_past_the_horizon_a_marker_still_waits_for_its_data_to_go(tmp_path: Path) -> None:
    """A marker goes in a pass that met no data of its transaction: the pass that removes the aborted records keeps
    their marker (and its index entry); the next one removes it."""
    log = two_producers(tmp_path / "t-0", retention_ms=1000)
    age(log, 10)
    roll_a_fresh_clean_segment(log)
    clean(log, first_dirty=log.active.base_offset)  # all clean: no offset map, aborted records still go
    assert [o for o, _, _ in data_records(log)] == [0, 1, 6, 8, 10, 12, 13]
    assert [o for o, _, _ in markers(log)] == [4, 5, 7, 9, 11]
    assert aborted_in_index(log) == [(2, 2, 5)]
    age(log, 10)
    roll_a_fresh_clean_segment(log)
    clean(log, first_dirty=log.active.base_offset)
    assert [o for o, _, _ in markers(log)] == [4, 7, 9, 11]
    assert aborted_in_index(log) == []


def test_a_marker_that_is_its_producers_last_batch_stays_empty(tmp_path: Path) -> None:
    """A transaction with no data on this partition (an empty one) ends with a marker that is discardable at once;
    as the producer's last batch it stays without records, and reads as no marker."""
    log = Log(tmp_path / "t-0", compacted(**{"delete.retention.ms": "1000"}), time_ms=Clock())
    txns = Transactions(log)
    txns.send(6, [(b"k", b"1")])
    txns.end(6, commit=True)
    txns.first[6] = log.log_end_offset  # a transaction that wrote nothing here
    txns.end(6, commit=False)
    log.roll()
    produce(log, [(b"z", b"1")])
    age(log, 10)
    roll_a_fresh_clean_segment(log)
    clean(log, first_dirty=log.active.base_offset)
    assert markers(log) == [(1, 6, "COMMIT"), (2, 6, "EMPTY")]
    data = Path(log.segments[0].log_path).read_bytes()
    empty = next(h for h in iter_headers(data) if h.offset == 2)
    assert (empty.producer_id, empty.producer_epoch, empty.records_count, empty.is_transactional) == (6, 0, 0, True)
    assert read_end_txn_marker(data, empty) is None
    clean(log, first_dirty=log.active.base_offset)  # an emptied marker stays while it is the last batch
    assert markers(log) == [(1, 6, "COMMIT"), (2, 6, "EMPTY")]


def test_the_last_data_batch_of_a_transactional_producer_stays_empty(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    txns = Transactions(log)
    txns.send(5, [(b"k", b"1"), (b"j", b"1")])
    txns.end(5, commit=True)
    produce(log, [(b"k", b"2"), (b"j", b"2")])
    log.roll()
    produce(log, [(b"z", b"1")])
    clean(log)
    data = Path(log.segments[0].log_path).read_bytes()
    first = next(iter_headers(data))
    assert (first.offset, first.last_offset, first.producer_id, first.base_sequence, first.records_count) == (
        0,
        1,
        5,
        0,
        0,
    )
    assert markers(log) == [(2, 5, "COMMIT")]  # its transaction still has a batch in the log


def test_the_last_stable_offset_bounds_the_dirty_section_so_open_transactions_stay(tmp_path: Path) -> None:
    clock = Clock()
    tp = TopicPartition("t", 0)
    manager = LogManager([tmp_path], compacted(), time_ms=clock)
    manager.startup()
    log = manager.get_or_create_log(tp, compacted())
    txns = Transactions(log)
    produce(log, [(b"k", b"committed")])
    log.roll()
    produce(log, [(b"j", b"1")])
    open_at = txns.send(4, [(b"k", b"open")])  # still open: the last stable offset stays here
    log.roll()
    produce(log, [(b"j", b"2")])
    log.roll()
    produce(log, [(b"z", b"1")])
    cleaner = LogCleaner(manager, bounded_by_last_stable_offsets=True, time_ms=clock)
    cleaner.update_last_stable_offsets({tp: open_at})
    assert cleaner.clean_filthiest_log(Cleaner(cleaner.map_slots, threading.Event()))
    assert cleaner.checkpoints[tp] == 1  # the segment holding the open transaction is not cleaned
    assert [(k, v) for _, k, v in data_records(log)] == [
        (b"k", b"committed"),
        (b"j", b"1"),
        (b"k", b"open"),
        (b"j", b"2"),
        (b"z", b"1"),
    ]
    txns.end(4, commit=False)
    log.roll()
    cleaner.update_last_stable_offsets({tp: log.log_end_offset})
    assert cleaner.clean_filthiest_log(Cleaner(cleaner.map_slots, threading.Event()))
    assert [(k, v) for _, k, v in data_records(log)] == [(b"k", b"committed"), (b"j", b"2"), (b"z", b"1")]


@pytest.mark.parametrize("retention_ms", [1000, 60_000])
def test_dump_segments_prints_the_markers_of_a_cleaned_segment(tmp_path: Path, retention_ms: int) -> None:
    log = cleaned_twice(tmp_path / "t-0", retention_ms)
    result = dump_cleaned_segment(log)
    lines = result.stdout.splitlines()
    marker_lines = [line for line in lines if " endTxnMarker: " in line]
    expected = {1000: [4, 9, 11], 60_000: [4, 5, 7, 9, 11]}[retention_ms]
    assert [int(line.split()[2]) for line in marker_lines] == expected
    assert all(line.endswith(" coordinatorEpoch: 0") for line in marker_lines)
    assert [line.split()[-3] for line in marker_lines if line.startswith("| offset: 5 ")] == (
        ["ABORT"] if retention_ms == 60_000 else []
    )
