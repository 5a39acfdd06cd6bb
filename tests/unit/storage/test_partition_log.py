"""The partition log: offsets, reads, rolling, retention, validation, flush policy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_batches import TS, legacy_batch, v2_batch

from mq.config import TopicConfig
from mq.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from mq.records import iter_records
from mq.records.batch_header import TimestampType, iter_headers, parse_header, set_offset, set_partition_leader_epoch
from mq.records.crc import crc32c
from mq.records.default_batch import RecordBatchBuilder, assemble_batch
from mq.storage.offset_index import read_offset_index
from mq.storage.partition_log import Log


class Clock:
    def __init__(self, now: int = TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for h in iter_headers(data) for r in iter_records(data, h)]


def read_all(log: Log, start: int = 0, max_bytes: int = 1 << 30, max_offset: int | None = None) -> bytes:
    """One read: whole batches of at most one segment, as a fetch returns them."""
    info = log.read(start, max_bytes, max_offset)
    return b"" if info.records is None else info.records.read()


def read_to_end(log: Log) -> bytes:
    data, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        chunk = read_all(log, offset)
        data += chunk
        offset = list(iter_headers(chunk))[-1].next_offset
    return data


def test_offsets_are_assigned_contiguously(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig())
    infos = [log.append_as_leader(v2_batch(3), leader_epoch=2) for _ in range(4)]
    infos.append(log.append_as_leader(legacy_batch(1, 2), leader_epoch=2))
    infos.append(log.append_as_leader(legacy_batch(0, 2, codec=1), leader_epoch=2))
    infos.append(log.append_as_leader(legacy_batch(1, 4, codec=2), leader_epoch=2))
    assert [(i.first_offset, i.last_offset) for i in infos] == [
        (0, 2),
        (3, 5),
        (6, 8),
        (9, 11),
        (12, 13),
        (14, 15),
        (16, 19),
    ]
    assert log.log_end_offset == 20
    assert offsets_in(read_all(log)) == list(range(20))
    header = next(iter_headers(read_all(log)))
    assert header.partition_leader_epoch == 2


def test_read_bounds(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig())
    batch = v2_batch(2)
    for _ in range(10):
        log.append_as_leader(batch, 0)
    assert offsets_in(read_all(log, 5)) == list(range(4, 20))  # from the batch holding offset 5
    assert len(read_all(log, 0, max_bytes=len(batch) * 3 + 5)) == len(batch) * 3
    assert len(read_all(log, 0, max_bytes=1)) == len(batch)  # at least one whole batch
    assert log.read(0, 1, min_one_message=False).records is None
    assert offsets_in(read_all(log, 0, max_offset=7)) == list(range(6))  # only batches wholly below
    assert log.read(20, 100).records is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)


def test_index_entries_follow_the_interval_rule(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(index_interval_bytes=100))
    batch = v2_batch(1, value_size=60)
    for _ in range(6):
        log.append_as_leader(batch, 0)
    size = len(batch)
    # first append never indexes; afterwards an entry whenever more than 100 bytes came since the last one
    since, got = 0, []
    for i in range(6):
        if since > 100:
            got.append((i, i * size))
            since = 0
        since += size
    assert log.active.index.pairs() == got
    assert got and got[0][0] > 0


def test_roll_by_size_at_the_boundary(tmp_path: Path) -> None:
    batch = v2_batch(1)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 3))
    for _ in range(3):
        log.append_as_leader(batch, 0)
    assert len(log.segments) == 1
    log.append_as_leader(batch, 0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert (tmp_path / "t-0" / "00000000000000000003.log").exists()
    assert log.segments[0].index.path.stat().st_size == log.segments[0].index.entries * 8


def test_roll_by_segment_ms_on_batch_timestamps(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(segment_ms=1000))
    log.append_as_leader(v2_batch(1, timestamp=TS), 0)
    log.append_as_leader(v2_batch(1, timestamp=TS + 1000), 0)
    assert len(log.segments) == 1
    log.append_as_leader(v2_batch(1, timestamp=TS + 1001), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_age_without_timestamps(tmp_path: Path) -> None:
    clock = Clock()
    log = Log(tmp_path / "t-0", TopicConfig(segment_ms=1000), time_ms=clock)
    log.append_as_leader(legacy_batch(0, 1), 0)
    clock.now += 1001
    log.append_as_leader(legacy_batch(0, 1), 0)
    assert len(log.segments) == 2


def test_roll_when_the_index_is_full(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(segment_index_bytes=24, index_interval_bytes=0))
    for _ in range(6):
        log.append_as_leader(v2_batch(1), 0)
    assert len(log.segments) > 1
    assert offsets_in(read_to_end(log)) == list(range(6))


def test_roll_on_relative_offset_overflow(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig())
    log.truncate_fully_and_start_at(0)
    log.append_as_leader(v2_batch(1), 0)
    log.log_end_offset = 2**31 + 5  # as after a follower caught up across a huge gap
    log.append_as_leader(v2_batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]


def test_retention_by_time_and_the_active_segment(tmp_path: Path) -> None:
    clock = Clock(TS + 10_000)
    batch = v2_batch(1, timestamp=TS)
    log = Log(
        tmp_path / "t-0",
        TopicConfig(segment_bytes=len(batch) * 2, retention_ms=5000, file_delete_delay_ms=100),
        time_ms=clock,
    )
    for _ in range(5):
        log.append_as_leader(batch, 0)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.delete_old_segments() == 3  # even the active one, after rolling first
    assert [s.base_offset for s in log.segments] == [5]
    assert log.log_start_offset == 5
    deleted = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".deleted"))
    assert "00000000000000000000.log.deleted" in deleted
    clock.now += 101
    log.remove_expired_files()
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".deleted")]


def test_retention_by_bytes_keeps_exactly_what_fits(tmp_path: Path) -> None:
    batch = v2_batch(1)
    log = Log(
        tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 2, retention_bytes=len(batch) * 3, retention_ms=-1)
    )
    for _ in range(7):
        log.append_as_leader(batch, 0)
    assert [s.size for s in log.segments] == [len(batch) * 2] * 3 + [len(batch)]
    assert log.delete_old_segments() == 2
    assert log.size_in_bytes == len(batch) * 3
    assert log.delete_old_segments() == 0


def test_delete_records_moves_the_log_start(tmp_path: Path) -> None:
    batch = v2_batch(1)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 2, retention_ms=-1))
    for _ in range(6):
        log.append_as_leader(batch, 0)
    assert log.maybe_increment_log_start_offset(3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert log.log_start_offset == 3


def test_rejected_appends_leave_the_log_unchanged(tmp_path: Path) -> None:
    log = Log(
        tmp_path / "t-0",
        TopicConfig(max_message_bytes=500, segment_bytes=2000, message_timestamp_difference_max_ms=60_000),
        time_ms=Clock(TS),
    )
    log.append_as_leader(v2_batch(1), 0)
    before = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    corrupt = bytearray(v2_batch(2))
    corrupt[-3] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(corrupt), 0)
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(v2_batch(1, value_size=600), 0)
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(v2_batch(1, value_size=400) * 6, 0)
    with pytest.raises(CorruptRecordError, match="partial"):
        log.append_as_leader(v2_batch(1) + b"\x00\x00", 0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(v2_batch(1, timestamp=TS + 120_000), 0)
    miscounted = bytearray(v2_batch(2))
    miscounted[23:27] = (5).to_bytes(4, "big")
    miscounted[17:21] = crc32c(bytes(miscounted[21:])).to_bytes(4, "big")
    assert parse_header(bytes(miscounted)) is not None
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(miscounted), 0)
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == before
    assert log.log_end_offset == 1


def test_poison_batches_leave_the_log_unchanged(tmp_path: Path) -> None:
    """A valid CRC around records that do not parse, or around a payload that does not decompress, is refused."""
    log = Log(tmp_path / "t-0", TopicConfig(message_timestamp_difference_max_ms=60_000), time_ms=Clock(TS))
    log.append_as_leader(v2_batch(2), 0)
    before = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    garbage = assemble_batch(0, -1, 0, 2, TS, TS, -1, -1, -1, 3, bytes(range(7, 250)))
    with pytest.raises(InvalidRecordError) as caught:
        log.append_as_leader(garbage, 0)
    assert caught.value.record_errors[0].batch_index == 0
    with pytest.raises(InvalidRecordError, match="decompress"):
        log.append_as_leader(assemble_batch(0, -1, 1, 2, TS, TS, -1, -1, -1, 3, b"\x1f\x8b garbage"), 0)
    late = RecordBatchBuilder()
    for delta in (0, 1, 90_000, 2):  # the batch header's timestamps are fine; the third record's is not
        late.append(TS + delta, None, b"v")
    late_batch = bytearray(late.build())
    late_batch[35:43] = TS.to_bytes(8, "big")
    late_batch[17:21] = crc32c(bytes(late_batch[21:])).to_bytes(4, "big")
    with pytest.raises(InvalidTimestampError) as timestamps:
        log.append_as_leader(bytes(late_batch), 0)
    assert [e.batch_index for e in timestamps.value.record_errors] == [2]
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == before
    assert log.log_end_offset == 2


def test_compacted_topic_refuses_records_without_keys(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(cleanup_policy="compact"))
    builder = RecordBatchBuilder()
    for key in (b"a", None, b"c", None):
        builder.append(TS, key, b"v")
    with pytest.raises(InvalidRecordError, match="without a key") as caught:
        log.append_as_leader(builder.build(), 0)
    assert [e.batch_index for e in caught.value.record_errors] == [1, 3]
    assert log.log_end_offset == 0


def test_log_append_time(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(message_timestamp_type="LogAppendTime"), time_ms=Clock(TS + 999))
    info = log.append_as_leader(v2_batch(2), 0)
    assert info.log_append_time_ms == TS + 999
    data = read_all(log)
    assert {r.timestamp for h in iter_headers(data) for r in iter_records(data, h)} == {TS + 999}
    stamped = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    stamped.append(TS, None, b"v")
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(stamped.build(), 0)  # the broker stamps a LogAppendTime topic, not the producer
    assert log.log_end_offset == 2


def test_flush_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    every = Log(tmp_path / "a-0", TopicConfig(flush_messages=1))
    every.append_as_leader(v2_batch(2), 0)
    assert every.flush_due and every.recovery_point == 0 and every.active.fd not in synced  # appends never fsync
    every.maybe_flush()
    assert every.recovery_point == 2 and every.active.fd in synced and not every.flush_due
    synced.clear()
    default = Log(tmp_path / "b-0", TopicConfig())
    for _ in range(20):
        default.append_as_leader(v2_batch(2), 0)
    default.maybe_flush()
    assert default.recovery_point == 0 and default.active.fd not in synced  # only the epoch checkpoint is synced
    clock = Clock()
    timed = Log(tmp_path / "c-0", TopicConfig(flush_ms=100), time_ms=clock)
    timed.append_as_leader(v2_batch(2), 0)
    timed.maybe_flush()
    assert timed.recovery_point == 0
    clock.now += 100
    timed.maybe_flush()
    assert timed.recovery_point == 2


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(index_interval_bytes=10))
    for i in range(5):
        log.append_as_leader(v2_batch(3, timestamp=TS + 100 * i), 0)
    assert log.fetch_offset_by_timestamp(TS + 201) == (7, TS + 201)
    assert log.fetch_offset_by_timestamp(TS + 150) == (6, TS + 200)
    assert log.fetch_offset_by_timestamp(0) == (0, TS)
    assert log.fetch_offset_by_timestamp(TS + 10_000) is None


def test_truncate_to(tmp_path: Path) -> None:
    batch = v2_batch(2)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 2))
    for _ in range(5):
        log.append_as_leader(batch, 0)
    log.truncate_to(6)
    assert log.log_end_offset == 6 and [s.base_offset for s in log.segments] == [0, 4]
    assert offsets_in(read_to_end(log)) == list(range(6))
    assert read_offset_index(log.segments[0].index.path, 0) == log.segments[0].index.pairs()


def test_follower_appends_must_continue_the_log(tmp_path: Path) -> None:
    leader = Log(tmp_path / "l-0", TopicConfig())
    leader.append_as_leader(v2_batch(3), 0)
    data = read_all(leader)
    follower = Log(tmp_path / "f-0", TopicConfig())
    follower.append_as_follower(data)
    assert follower.log_end_offset == 3
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(data)
    assert os.path.getsize(tmp_path / "f-0" / "00000000000000000000.log") == len(data)


def test_a_segment_active_again_after_truncation_indexes_new_appends(tmp_path: Path) -> None:
    batch = v2_batch(1, value_size=60)
    config = TopicConfig(segment_bytes=len(batch) * 3, index_interval_bytes=1)
    log = Log(tmp_path / "t-0", config)
    for _ in range(9):
        log.append_as_leader(batch, 0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    log.truncate_to(4)  # segment 3 had its indexes trimmed when it rolled; it is active again
    assert log.log_end_offset == 4 and log.active.base_offset == 3
    assert log.active.index.path.stat().st_size == config.segment_index_bytes
    for _ in range(2):
        log.append_as_leader(batch, 0)
    assert log.active.index.pairs() == [(5, len(batch) * 2)]
    log.close()
    assert read_offset_index(tmp_path / "t-0" / "00000000000000000003.index", 3) == [(5, len(batch) * 2)]


@pytest.mark.parametrize(
    "batch",
    [v2_batch(3), v2_batch(4, codec=1), legacy_batch(0, 3), legacy_batch(1, 3)],
    ids=["v2", "v2-gzip", "v0", "v1"],
)
def test_stored_bytes_are_the_produced_bytes_with_offsets_patched(tmp_path: Path, batch: bytes) -> None:
    log = Log(tmp_path / "t-0", TopicConfig())
    log.append_as_leader(v2_batch(2), 7)
    info = log.append_as_leader(batch, 7)
    stored = read_all(log, info.first_offset)
    expected = bytearray(batch)
    for i, header in enumerate(iter_headers(batch)):
        set_offset(expected, header.position, info.first_offset + (i if header.magic < 2 else 0))
        if header.magic >= 2:
            set_partition_leader_epoch(expected, header.position, 7)
    assert stored == bytes(expected)
    assert offsets_in(stored) == list(range(info.first_offset, info.last_offset + 1))


def test_fetch_data_info_says_where_the_offset_is(tmp_path: Path) -> None:
    batch = v2_batch(2)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 2))
    for _ in range(3):
        log.append_as_leader(batch, 0)
    info = log.read(3, 1 << 20)
    assert info.fetch_offset == 3
    assert (
        info.fetch_offset_metadata.segment_base_offset,
        info.fetch_offset_metadata.relative_position_in_segment,
    ) == (
        0,
        len(batch),
    )
    at_end = log.read(6, 1 << 20).fetch_offset_metadata
    assert (at_end.message_offset, at_end.segment_base_offset, at_end.relative_position_in_segment) == (
        6,
        4,
        len(batch),
    )
    assert offsets_in(read_all(log, 4)) == [4, 5]  # a read stays in one segment
    assert offsets_in(read_all(log, 2, max_offset=4)) == [2, 3]  # bounded in an earlier segment
    assert log.read(4, 1 << 20, max_offset=4).records is None


def test_roll_names_the_new_segment_by_the_log_end_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig())
    log.append_as_leader(v2_batch(3), 0)
    assert log.roll().base_offset == 3
    assert log.roll().base_offset == 3  # an empty active segment is kept
    log.append_as_leader(v2_batch(2), 0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000003.log",
    ]


def test_follower_rolls_at_an_offset_beyond_int32_of_the_base(tmp_path: Path) -> None:
    follower = Log(tmp_path / "f-0", TopicConfig())
    follower.append_as_follower(v2_batch(1))
    far = bytearray(v2_batch(2))
    set_offset(far, 0, 2**31 + 10)
    info = follower.append_as_follower(bytes(far))
    assert (info.first_offset, info.last_offset) == (2**31 + 10, 2**31 + 11)
    assert [s.base_offset for s in follower.segments] == [0, 2**31 + 10]
    assert follower.log_end_offset == 2**31 + 12
    behind = bytearray(v2_batch(1))
    set_offset(behind, 0, 5)
    with pytest.raises(InvalidRecordError, match="non-monotonic"):
        follower.append_as_follower(bytes(behind))


def test_roll_when_the_time_index_is_full(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicConfig(segment_index_bytes=36, index_interval_bytes=0))
    for i in range(5):
        log.append_as_leader(v2_batch(1, timestamp=TS + i), 0)
    # offset index: 4 slots; time index: 3 slots, full at 2 entries, reached by the third append
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert offsets_in(read_to_end(log)) == list(range(5))


def test_the_log_start_offset_never_deletes_the_active_segment(tmp_path: Path) -> None:
    batch = v2_batch(1)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 2, retention_ms=-1))
    for _ in range(3):
        log.append_as_leader(batch, 0)
    assert log.maybe_increment_log_start_offset(100)
    assert log.log_start_offset == 3  # at most the log end
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [2]
    assert log.log_start_offset == 3


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    clock = Clock(TS + 10_000)
    batch = v2_batch(1, timestamp=TS)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch) * 2, retention_ms=5000), time_ms=clock)
    for _ in range(6):
        log.append_as_leader(batch, 0)
    assert log.delete_old_segments(high_watermark=3) == 1  # segment 2 holds offset 3, not yet replicated
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert log.delete_old_segments(high_watermark=6) == 2
    assert [s.base_offset for s in log.segments] == [6] and log.log_start_offset == 6


def test_compacted_topics_keep_old_segments(tmp_path: Path) -> None:
    clock = Clock(TS + 10_000)
    batch = v2_batch(1, timestamp=TS)
    config = TopicConfig(segment_bytes=len(batch) * 2, retention_ms=1, retention_bytes=1, cleanup_policy="compact")
    log = Log(tmp_path / "t-0", config, time_ms=clock)
    for _ in range(5):
        log.append_as_leader(batch, 0)
    assert log.delete_old_segments() == 0
    log.maybe_increment_log_start_offset(2)
    assert log.delete_old_segments() == 1  # the log start offset applies under any policy


def test_truncated_segments_are_removed_after_the_delay(tmp_path: Path) -> None:
    clock = Clock()
    batch = v2_batch(1)
    log = Log(tmp_path / "t-0", TopicConfig(segment_bytes=len(batch), file_delete_delay_ms=50), time_ms=clock)
    for _ in range(3):
        log.append_as_leader(batch, 0)
    log.truncate_to(1)
    assert [s.base_offset for s in log.segments] == [0, 1] and log.active.size == 0
    assert (tmp_path / "t-0" / "00000000000000000002.log.deleted").exists()
    clock.now += 50
    log.remove_expired_files()
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert log.append_as_leader(batch, 0).first_offset == 1
