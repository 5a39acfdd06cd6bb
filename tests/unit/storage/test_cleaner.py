"""Compacting one log: what survives, how batches are rewritten, and the swap with its crash states."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from compaction_helpers import (
    TS,
    Clock,
    batch,
    clean,
    compacted,
    dump_cleaned_segment,
    latest,
    produce,
    records,
    segment_files,
)

from mq.errors import InvalidRecordError
from mq.records import LegacyBatchBuilder, iter_records
from mq.records.batch_header import Codec, iter_headers, parse_header
from mq.storage import cleaner as cleaner_module
from mq.storage.cleaner import CleaningAbortedError
from mq.storage.offset_index import read_offset_index
from mq.storage.partition_log import Log
from mq.storage.time_index import read_time_index


def three_rounds(log: Log, keys: int = 5) -> None:
    """Three segments, each with one value per key, then one record in the active segment."""
    for round_ in range(3):
        produce(log, [(b"k%d" % i, b"v%d-%d" % (round_, i)) for i in range(keys)])
        log.roll()
    produce(log, [(b"k0", b"active")])


def test_latest_value_per_key_stays_at_its_offset_and_earlier_values_go(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    three_rounds(log)
    before = records(log)
    end = clean(log)
    after = records(log)
    assert end == 15
    assert after == [(10 + i, b"k%d" % i, b"v2-%d" % i) for i in range(5)] + [(15, b"k0", b"active")]
    cleaned_part = [r for r in before if r[0] < end]
    assert latest(cleaned_part) == latest([r for r in after if r[0] < end])
    assert log.log_end_offset == 16
    reopened = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    assert records(reopened) == after


def test_active_segment_is_untouched(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    produce(log, [(b"a", b"1"), (b"a", b"2")])
    log.roll()
    produce(log, [(b"a", b"3"), (b"a", b"4"), (b"a", b"5")])
    active_bytes = Path(log.active.log_path).read_bytes()[: log.active.size]
    clean(log)
    assert Path(log.active.log_path).read_bytes()[: log.active.size] == active_bytes
    assert [r[0] for r in records(log)] == [1, 2, 3, 4]


def test_later_dirty_values_beyond_the_map_keep_the_older_ones(tmp_path: Path) -> None:
    """Only the dirty section's offsets count: a record is removed only when the map holds a later offset."""
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    three_rounds(log)
    end = clean(log, first_uncleanable=10)  # the third round is not part of the dirty section
    assert end == 10
    assert [r[2] for r in records(log)][:5] == [b"v1-%d" % i for i in range(5)]
    assert len(records(log)) == 5 + 5 + 1


def tombstone_log(directory: Path, retention_ms: int) -> Log:
    """Segment 0: a=1, b=1; segment 2: a=null (tombstone); segment 3: c=1 (the clean section's last); active."""
    log = Log(directory, compacted(**{"delete.retention.ms": str(retention_ms)}), time_ms=Clock())
    produce(log, [(b"a", b"1"), (b"b", b"1")])
    log.roll()
    produce(log, [(b"a", None)])
    log.roll()
    produce(log, [(b"c", b"1")])
    log.roll()
    produce(log, [(b"d", b"1")])
    return log


def test_tombstones_stay_on_the_first_pass(tmp_path: Path) -> None:
    log = tombstone_log(tmp_path / "t-0", retention_ms=0)
    clean(log)
    assert [(o, k, v) for o, k, v in records(log)] == [
        (1, b"b", b"1"),
        (2, b"a", None),
        (3, b"c", b"1"),
        (4, b"d", b"1"),
    ]


@pytest.mark.parametrize(("retention_ms", "kept"), [(1000, False), (60_000, True)])
def test_tombstones_go_once_older_than_delete_retention(tmp_path: Path, retention_ms: int, kept: bool) -> None:
    """The delete horizon is the last clean segment's modification time minus delete.retention.ms; tombstones in
    segments modified at or before it go."""
    log = tombstone_log(tmp_path / "t-0", retention_ms)
    now = time.time()
    os.utime(log.segments[1].log_path, (now - 10, now - 10))  # the tombstone's segment, 10 s old
    clean(log, first_dirty=log.active.base_offset)  # everything already clean: the horizon comes from segment 3
    remaining = [(o, k, v) for o, k, v in records(log)]
    assert ((2, b"a", None) in remaining) is kept
    assert (1, b"b", b"1") in remaining and (3, b"c", b"1") in remaining


def test_cleaned_segment_keeps_the_modification_time_of_its_last_source(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    three_rounds(log)
    os.utime(log.segments[2].log_path, (1_600_000_000, 1_600_000_000))
    clean(log)
    assert os.stat(log.segments[0].log_path).st_mtime == 1_600_000_000


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compressed_batches_are_rebuilt_with_their_codec_and_offsets(tmp_path: Path, codec: Codec) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    produce(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")], codec)  # offsets 0-3
    log.roll()
    produce(log, [(b"b", b"2"), (b"d", b"2")], codec)  # 4-5
    log.roll()
    produce(log, [(b"z", b"1")])
    clean(log)
    data = Path(log.segments[0].log_path).read_bytes()
    headers = list(iter_headers(data))
    assert [(h.offset, h.last_offset, h.codec, h.records_count) for h in headers] == [
        (0, 3, codec, 2),
        (4, 5, codec, 2),
    ]
    first = headers[0]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(data, first)] == [
        (0, b"a", b"1", TS),
        (2, b"c", b"1", TS + 2),
    ]
    assert first.max_timestamp == TS + 2
    assert [r[:2] for r in records(log)] == [(0, b"a"), (2, b"c"), (4, b"b"), (5, b"d"), (6, b"z")]


@pytest.mark.parametrize(("magic", "codec"), [(0, Codec.NONE), (1, Codec.NONE), (0, Codec.GZIP), (1, Codec.SNAPPY)])
def test_legacy_message_sets_are_compacted(tmp_path: Path, magic: int, codec: Codec) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    builder = LegacyBatchBuilder(magic, codec)
    for key, value in [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1")]:
        builder.append(TS, key, value)
    log.append_as_leader(builder.build(), leader_epoch=0)  # 0-3
    log.roll()
    log.append_as_leader(batch([(b"c", b"2")]), leader_epoch=0)  # 4
    log.roll()
    produce(log, [(b"z", b"1")])
    clean(log)
    assert [r for r in records(log)] == [(1, b"b", b"1"), (2, b"a", b"2"), (4, b"c", b"2"), (5, b"z", b"1")]
    data = Path(log.segments[0].log_path).read_bytes()
    assert all(h.magic == magic and h.codec == codec for h in iter_headers(data) if h.offset < 4)


def test_records_without_key_are_dropped_and_refused_at_produce(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append_as_leader(batch([(b"a", b"1"), (None, b"x")]), leader_epoch=0)
    assert log.log_end_offset == 0
    keyless = bytearray(batch([(b"a", b"1"), (None, b"x")]))
    log.append_as_follower(keyless)  # a follower copies what its leader holds
    log.roll()
    produce(log, [(b"z", b"1")])
    clean(log)
    assert records(log) == [(0, b"a", b"1"), (2, b"z", b"1")]


def test_last_batch_of_a_producer_stays_as_an_empty_batch(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    log.append_as_leader(batch([(b"a", b"1"), (b"b", b"1")], producer_id=7), leader_epoch=0)  # 0-1
    log.append_as_leader(batch([(b"a", b"0")], producer_id=8), leader_epoch=0)  # 2
    log.roll()
    log.append_as_leader(batch([(b"a", b"2"), (b"b", b"2")]), leader_epoch=0)  # 3-4
    log.roll()
    produce(log, [(b"z", b"1")])
    clean(log)
    data = Path(log.segments[0].log_path).read_bytes()
    headers = list(iter_headers(data))
    assert [(h.offset, h.last_offset, h.producer_id, h.records_count) for h in headers] == [
        (0, 1, 7, 0),
        (2, 2, 8, 0),
        (3, 4, -1, 2),
    ]
    assert [r[0] for r in records(log)] == [3, 4, 5]


def test_indexes_of_cleaned_segments_are_rebuilt(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(**{"index.interval.bytes": "100"}), time_ms=Clock())
    for round_ in range(4):
        for i in range(20):
            produce(log, [(b"k%d" % (i % 10 + round_), b"v" * 50)], timestamp=TS + round_ * 100 + i)
        log.roll()
    produce(log, [(b"z", b"1")])
    clean(log)
    segment = log.segments[0]
    data = Path(segment.log_path).read_bytes()
    positions = {h.position: h for h in iter_headers(data)}
    entries = read_offset_index(segment.index.path, segment.base_offset)
    assert len(entries) > 1
    for offset, position in entries:
        assert positions[position].last_offset == offset
    times = read_time_index(segment.time_index.path, segment.base_offset)
    assert times and times[-1][0] == max(h.max_timestamp for h in positions.values())
    for offset, _ in [(o, k) for o, k, _ in records(log)]:
        assert log.read(offset, 1 << 20).records is not None


def test_a_slice_of_a_replaced_segment_stays_readable(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    three_rounds(log)
    fetched = log.read(0, 1 << 20).records
    assert fetched is not None
    expected = fetched.read()
    clean(log)
    assert fetched.read() == expected
    log.remove_expired_files()
    assert fetched.read() == expected  # removal waits file.delete.delay.ms


def test_truncation_during_a_pass_aborts_the_swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log(tmp_path / "t-0", compacted(), time_ms=Clock())
    three_rounds(log)
    before = records(log)
    real = cleaner_module._fsync_dir

    def truncate_then_fsync(directory: Path) -> None:
        log.truncate_to(log.log_end_offset - 1)
        real(directory)

    monkeypatch.setattr(cleaner_module, "_fsync_dir", truncate_then_fsync)
    with pytest.raises(CleaningAbortedError):
        clean(log)
    assert records(log) == before[:-1]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


class Crash(BaseException):
    """A kill -9 at a rename: nothing after it runs, no handler sees it."""


REAL_RENAME = os.rename


class CrashingRename:
    """``os.rename`` that crashes at its ``crash_at``-th call (never when negative), counting the calls before."""

    def __init__(self, crash_at: int = -1) -> None:
        self.crash_at = crash_at
        self.calls = 0

    def __call__(self, src: str | Path, dst: str | Path) -> None:
        if self.calls == self.crash_at:
            raise Crash
        self.calls += 1
        REAL_RENAME(src, dst)


def build_template(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    log = Log(directory, compacted(**{"segment.bytes": "300"}), time_ms=Clock())
    for round_ in range(4):
        for i in range(6):
            produce(log, [(b"k%d" % i, b"v%d" % round_ * 10)])
    produce(log, [(b"k0", None)])
    content = records(log)
    log.close()
    return content


def test_a_crash_at_every_rename_of_the_swap_recovers_a_consistent_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = tmp_path / "template" / "t-0"
    original = build_template(template)
    config = compacted(**{"segment.bytes": "300"})
    probe = tmp_path / "probe" / "t-0"
    shutil.copytree(template, probe)
    counter = CrashingRename()
    with monkeypatch.context() as patch:
        patch.setattr(os, "rename", counter)
        clean(Log(probe, config, time_ms=Clock()))
    assert counter.calls > 6  # several groups, each with several renames
    cleaned_content = records(Log(probe, config, time_ms=Clock()))
    for crash_at in range(counter.calls):
        directory = tmp_path / f"crash-{crash_at}" / "t-0"
        shutil.copytree(template, directory)
        log = Log(directory, config, time_ms=Clock())
        with monkeypatch.context() as patch:
            patch.setattr(os, "rename", CrashingRename(crash_at))
            with pytest.raises(Crash):
                clean(log)
        recovered = Log(directory, config, time_ms=Clock())
        content = records(recovered)
        offsets = [o for o, _, _ in content]
        assert offsets == sorted(set(offsets)), crash_at
        assert latest(content) == latest(original), crash_at
        assert set(cleaned_content) <= set(content) <= set(original), crash_at
        assert not [n for n in segment_files(directory) if n.endswith((".cleaned", ".swap"))], crash_at
        clean(recovered)  # the log cleans again after recovery
        assert records(recovered) == cleaned_content, crash_at


def test_leftover_cleaned_and_swap_files_of_indexes_are_handled_at_load(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    original = build_template(directory)
    for name in (
        "00000000000000000000.log.cleaned",
        "00000000000000000000.index.swap",
        "00000000000000000000.timeindex.cleaned",
    ):
        (directory / name).write_bytes(b"\x00" * 64)
    log = Log(directory, compacted(), time_ms=Clock())
    assert records(log) == original
    assert not [n for n in segment_files(directory) if n.endswith((".cleaned", ".swap"))]


def test_rebuilt_batches_pass_recovery_validation(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, compacted(), time_ms=Clock())
    three_rounds(log)
    clean(log)
    content = records(log)
    log.close()
    for path in directory.glob("*.index"):
        path.unlink()
    reopened = Log(directory, compacted(), time_ms=Clock())
    assert records(reopened) == content
    data = Path(reopened.segments[0].log_path).read_bytes()
    assert parse_header(data, 0) is not None


def test_dump_segments_reads_a_cleaned_segment_and_its_indexes(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", compacted(**{"index.interval.bytes": "50"}), time_ms=Clock())
    three_rounds(log)
    clean(log)
    result = dump_cleaned_segment(log)
    offsets = [int(line.split()[2]) for line in result.stdout.splitlines() if line.startswith("| offset: ")]
    assert offsets == [10, 11, 12, 13, 14]
