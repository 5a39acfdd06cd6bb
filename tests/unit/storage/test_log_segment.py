"""One segment: offset translation, bounded reads, the roll rule, preallocation, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_batches import TS, v2_batch

from mq.records.batch_header import iter_headers, set_offset
from mq.storage.log_segment import INT_MAX, RECENT_APPENDS, FileSlice, LogSegment


def batch_at(base_offset: int, count: int, timestamp: int = TS, value_size: int = 20) -> bytes:
    data = bytearray(v2_batch(count, value_size=value_size, timestamp=timestamp))
    set_offset(data, 0, base_offset)
    return bytes(data)


def fill(segment: LogSegment, counts: list[int], timestamps: list[int] | None = None) -> list[int]:
    """Append one batch per count from the segment's base offset; returns each batch's start position."""
    positions, offset = [], segment.base_offset
    for i, count in enumerate(counts):
        ts = timestamps[i] if timestamps else TS + i
        data = batch_at(offset, count, ts)
        positions.append(segment.size)
        segment.append(offset + count - 1, ts + count - 1, offset + count - 1, data)
        offset += count
    return positions


def test_translate_offset_gives_the_batch_holding_it(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 100, index_interval_bytes=0)
    positions = fill(segment, [3, 3, 3, 3])
    size = positions[1]
    assert segment.translate_offset(100) == (102, 0, size)
    assert segment.translate_offset(104) == (105, positions[1], size)  # the middle of a batch
    assert segment.translate_offset(111) == (111, positions[3], size)
    assert segment.translate_offset(112) is None
    assert segment.translate_offset(100, positions[2]) == (108, positions[2], size)  # scan starts there
    assert segment.index.pairs() == [(105, positions[1]), (108, positions[2]), (111, positions[3])]
    segment.close()


def test_read_is_whole_batches_within_the_bounds(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    positions = fill(segment, [2] * 6)
    size = positions[1]
    whole = segment.read(0, 1 << 20)
    assert isinstance(whole, FileSlice) and (whole.position, whole.length) == (0, segment.size)
    assert whole.read() == (tmp_path / "00000000000000000000.log").read_bytes()
    bounded = segment.read(3, size * 2 + size // 2)
    assert bounded is not None and (bounded.position, bounded.length) == (size, size * 2)
    one = segment.read(3, 5)
    assert one is not None and (one.position, one.length) == (size, size)  # min_one_message: one whole batch
    assert segment.read(3, 5, min_one_message=False) is None
    capped = segment.read(0, 1 << 20, max_position=positions[4])
    assert capped is not None and capped.length == positions[4]
    assert segment.read(0, 1 << 20, max_position=0) is None
    assert segment.read(12, 1 << 20) is None
    assert [h.offset for h in iter_headers(bounded.read())] == [2, 4]
    segment.close()


def test_roll_rule(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, rolling_jitter_ms=100, time_ms=lambda: 5_000)
    assert not segment.should_roll(10**9, 10, TS + 10**9, 5, 1000, 1000)  # empty: never by time
    fill(segment, [1], [TS])
    size = segment.size
    assert not segment.should_roll(0, 1000 - size, TS, 1, 1000, 10**9)  # exactly fills segment.bytes
    assert segment.should_roll(0, 1000 - size + 1, TS, 1, 1000, 10**9)
    # by the first batch's max timestamp, segment.ms minus the jitter
    assert not segment.should_roll(0, 1, TS + 900, 1, 10**6, 1000)
    assert segment.should_roll(0, 1, TS + 901, 1, 10**6, 1000)
    assert not segment.should_roll(0, 1, INT_MAX, INT_MAX, 10**6, 10**12)
    assert segment.should_roll(0, 1, TS, INT_MAX + 1, 10**6, 10**12)  # relative offset overflow
    segment.close()
    reopened = LogSegment(tmp_path, 0, time_ms=lambda: 0)  # the first batch's timestamp is read from the file
    assert reopened.should_roll(0, 1, TS + 1001, 1, 10**6, 1000)
    assert not reopened.should_roll(0, 1, TS + 1000, 1, 10**6, 1000)
    reopened.close()


def test_roll_by_age_without_timestamps(tmp_path: Path) -> None:
    now = [1_000]
    segment = LogSegment(tmp_path, 0, time_ms=lambda: now[0])
    fill(segment, [1], [-1])
    assert not segment.should_roll(2_000, 1, -1, 1, 10**6, 1000)
    assert segment.should_roll(2_001, 1, -1, 1, 10**6, 1000)
    segment.close()


def test_indexes_full_force_a_roll(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=0, max_index_size=36)
    fill(segment, [1, 1, 1])  # time index: three slots, the last kept for the roll, so full at two entries
    assert segment.time_index.entries == 2 and segment.time_index.is_full
    assert not segment.index.is_full
    assert segment.should_roll(0, 1, TS, 3, 10**6, 10**12)
    segment.close()
    assert segment.time_index.path.stat().st_size == 24  # trimmed; no final entry: TS + 2 is already the last


def test_preallocated_log_is_trimmed_on_roll_and_close(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, preallocate_bytes=1 << 16)
    assert segment.log_path.stat().st_size == 1 << 16 and segment.size == 0
    fill(segment, [2, 2])
    written = segment.size
    assert segment.log_path.stat().st_size == 1 << 16
    assert [h.offset for h in segment.headers_from(0)] == [0, 2]
    assert segment.read_next_offset() == 4
    segment.on_become_inactive()
    assert segment.log_path.stat().st_size == written
    segment.close()

    (tmp_path / "crash").mkdir()
    crashed = LogSegment(tmp_path / "crash", 0, preallocate_bytes=1 << 16)
    fill(crashed, [2, 2])
    os.close(crashed.fd)  # a crash: the zero tail stays
    recovered = LogSegment(tmp_path / "crash", 0)
    assert recovered.recover(INT_MAX) == (1 << 16) - written
    assert recovered.size == written and recovered.read_next_offset() == 4
    recovered.close()


def test_truncate_reloads_the_largest_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=1 << 20)  # no index entries: found by scanning
    fill(segment, [1, 1, 1, 1], [TS, TS + 50, TS + 20, TS + 90])
    assert segment.max_timestamp == TS + 90
    found = segment.translate_offset(3)
    assert found is not None
    size_before = segment.size
    assert segment.truncate_to(3) == size_before - found[1] == found[2]
    assert segment.size == found[1]
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (TS + 50, 1)
    assert segment.read_next_offset() == 3
    segment.append(3, TS + 10, 3, batch_at(3, 1, TS + 10))
    assert segment.read_next_offset() == 4
    segment.close()


def test_appends_land_at_the_end_whatever_the_descriptor_offset(tmp_path: Path) -> None:
    """sendfile of an older slice leaves the shared descriptor's offset inside the file (asyncio's sendfile seeks
    it past the bytes sent); the next append must still go to the end, never over existing batches."""
    segment = LogSegment(tmp_path, 0)
    fill(segment, [3, 3])
    first_two = (tmp_path / "00000000000000000000.log").read_bytes()
    os.lseek(segment.fd, 10, os.SEEK_SET)  # where a reader of the first batch would leave it
    data = batch_at(6, 2)
    segment.append(7, TS, 7, data)
    assert (tmp_path / "00000000000000000000.log").read_bytes() == first_two + data
    assert [h.offset for h in iter_headers(segment.read(0, 1 << 20).read())] == [0, 3, 6]
    segment.close()


def test_reads_near_the_end_start_from_the_latest_appends_and_find_what_the_index_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=4096)
    counts = [1 + i % 3 for i in range(2 * RECENT_APPENDS + 50)]  # more appends than it remembers, then trimmed
    fill(segment, counts)
    end = sum(counts)
    (tmp_path / "copy").mkdir()
    reopened = LogSegment(tmp_path / "copy", 0, index_interval_bytes=4096)
    fill(reopened, counts)
    reopened._appended_last.clear()  # the index and a scan of headers only
    reopened._appended_at.clear()
    preads: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: preads.append(at) or real_pread(fd, n, at))
    for offset in range(end + 2):
        assert segment.translate_offset(offset) == reopened.translate_offset(offset), offset
    preads.clear()
    segment.translate_offset(end - 1)
    assert len(preads) == 1  # the last batch's header, found at once
    reopened.translate_offset(end - 1)
    assert len(preads) > 2  # the index entry below it, then a header after another
    preads.clear()
    assert segment.translate_offset(end) is None and segment.read(end, 1 << 20) is None
    assert preads == []  # past the last append: nothing to read, no header read (a long poll at the log end)
    segment.truncate_to(end - 5)
    reopened.truncate_to(end - 5)
    for offset in range(end - 300, end):
        assert segment.translate_offset(offset) == reopened.translate_offset(offset), offset
    segment.close()
    reopened.close()
