"""Reading raw segment files into Arrow batches: every magic and codec, control batches, torn and corrupt tails."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

from mq.records import COMMIT, Codec, LegacyBatchBuilder, RecordBatchBuilder, TimestampType, compute_crc, parse_header  # noqa: E402
from mq.records.default_batch import build_control_batch  # noqa: E402
from mq.spark.segment_reader import (  # noqa: E402
    SegmentFile,
    SegmentOutcome,
    arrow_schema,
    find_segments,
    partition_of_dir,
    read_segment,
)
from mq.topic_partition import TopicPartition  # noqa: E402

TS = 1_700_000_000_000


def v2(base: int, count: int, codec: Codec = Codec.NONE, **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(codec=codec, base_offset=base, **kwargs)  # type: ignore[arg-type]
    for i in range(count):
        builder.append(TS + base + i, f"k{base + i}".encode(), f"v{base + i}".encode(), [("h", str(i).encode())])
    return builder.build()


def legacy(magic: int, base: int, count: int, codec: Codec = Codec.NONE) -> bytes:
    builder = LegacyBatchBuilder(magic, codec, base)
    for i in range(count):
        builder.append(TS + base + i, f"k{base + i}".encode(), f"v{base + i}".encode())
    return builder.build()


def write(directory: Path, base: int, *entries: bytes) -> SegmentFile:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base:020d}.log"
    path.write_bytes(b"".join(entries))
    tp = partition_of_dir(directory.name)
    assert tp is not None
    return SegmentFile(str(path), tp, base, path.stat().st_size)


def read(segment: SegmentFile, include_headers: bool = False) -> tuple[pa.Table, SegmentOutcome]:
    outcomes: list[SegmentOutcome] = []
    batches = list(read_segment(segment, outcomes.append, include_headers=include_headers, rows_per_batch=4))
    assert len(outcomes) == 1
    return pa.Table.from_batches(batches, arrow_schema(include_headers)), outcomes[0]


def test_every_magic_and_codec_reads_in_offset_order(tmp_path: Path) -> None:
    entries = [
        legacy(0, 0, 2),
        legacy(0, 2, 3, Codec.GZIP),
        legacy(1, 5, 2, Codec.SNAPPY),
        legacy(1, 7, 2, Codec.LZ4),
        v2(9, 3, Codec.ZSTD),
        v2(12, 2, Codec.LZ4, timestamp_type=TimestampType.LOG_APPEND_TIME),
        v2(14, 2),
    ]
    segment = write(tmp_path / "orders-3", 0, *entries)
    table, outcome = read(segment)
    assert outcome == SegmentOutcome(segment.path, segment.size, segment.size, 16, None)
    assert table.column("offset").to_pylist() == list(range(16))
    assert table.column("key").to_pylist() == [f"k{i}".encode() for i in range(16)]
    assert table.column("value").to_pylist() == [f"v{i}".encode() for i in range(16)]
    assert set(table.column("topic").to_pylist()) == {"orders"}
    assert set(table.column("partition").to_pylist()) == {3}
    assert table.column("timestampType").to_pylist() == [-1] * 5 + [0] * 7 + [1] * 2 + [0] * 2
    micros = [ts.value for ts in table.column("timestamp")]
    assert micros[:5] == [-1000] * 5  # magic 0 carries no timestamp
    assert micros[5:12] == [(TS + i) * 1000 for i in range(5, 12)]
    assert micros[14:] == [(TS + i) * 1000 for i in (14, 15)]


def test_headers_when_asked(tmp_path: Path) -> None:
    segment = write(tmp_path / "t-0", 0, v2(0, 2, Codec.GZIP))
    table, _ = read(segment, include_headers=True)
    assert table.column("headers").to_pylist() == [[{"key": "h", "value": b"0"}], [{"key": "h", "value": b"1"}]]


def test_control_batches_yield_no_rows(tmp_path: Path) -> None:
    marker = build_control_batch(COMMIT, producer_id=5, producer_epoch=0, coordinator_epoch=0, base_offset=2)
    segment = write(tmp_path / "t-0", 0, v2(0, 2, producer_id=5, producer_epoch=0, is_transactional=True), marker)
    table, outcome = read(segment)
    assert table.column("offset").to_pylist() == [0, 1]
    assert outcome.complete and outcome.records == 2


def test_a_torn_tail_ends_the_segment_at_the_last_whole_entry(tmp_path: Path) -> None:
    whole = v2(0, 3)
    segment = write(tmp_path / "t-0", 0, whole, v2(3, 3)[:-7])
    table, outcome = read(segment)
    assert table.column("offset").to_pylist() == [0, 1, 2]
    assert outcome.valid_bytes == len(whole)
    assert outcome.error is not None and "partial entry" in outcome.error


def test_a_checksum_mismatch_stops_reading_as_recovery_does(tmp_path: Path) -> None:
    first, second, third = v2(0, 2), bytearray(v2(2, 2, Codec.SNAPPY)), v2(4, 2)
    second[-1] ^= 0xFF
    segment = write(tmp_path / "t-0", 0, first, bytes(second), third)
    table, outcome = read(segment)
    assert table.column("offset").to_pylist() == [0, 1]
    assert outcome.valid_bytes == len(first) and not outcome.complete
    assert outcome.error is not None and f"position {len(first)}" in outcome.error and "crc" in outcome.error


def test_a_size_field_below_the_minimum_stops_reading(tmp_path: Path) -> None:
    first = v2(0, 2)
    garbage = struct.pack(">qi", 2, 3) + bytes(40)
    table, outcome = read(write(tmp_path / "t-0", 0, first, garbage))
    assert table.num_rows == 2 and outcome.valid_bytes == len(first) and outcome.error is not None


def test_an_empty_segment(tmp_path: Path) -> None:
    table, outcome = read(write(tmp_path / "t-0", 0))
    assert table.num_rows == 0 and outcome.complete and outcome.error is None


def test_find_segments_skips_other_files_and_directories(tmp_path: Path) -> None:
    write(tmp_path / "orders-1", 5, v2(5, 1))
    write(tmp_path / "orders-1", 0, v2(0, 5))
    write(tmp_path / "my-topic-10", 0, v2(0, 1))
    (tmp_path / "orders-1" / "00000000000000000000.index").write_bytes(bytes(8))
    (tmp_path / "orders-1" / "00000000000000000005.snapshot").write_bytes(bytes(8))
    (tmp_path / "orders-1" / "leader-epoch-checkpoint").write_text("0\n0\n")
    deleted = tmp_path / "orders-2.0123456789abcdef0123456789abcdef-delete"
    deleted.mkdir()
    (deleted / "00000000000000000000.log").write_bytes(v2(0, 1))
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    (tmp_path / "not_a_partition").mkdir()
    found = [(s.tp, s.base_offset) for s in find_segments(tmp_path)]
    assert found == [
        (TopicPartition("my-topic", 10), 0),
        (TopicPartition("orders", 1), 0),
        (TopicPartition("orders", 1), 5),
    ]
    assert [s.tp.topic for s in find_segments(tmp_path, ["my-topic"])] == ["my-topic"]


def test_find_segments_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        find_segments(tmp_path / "missing")


def undecodable(base: int) -> bytes:
    """A v2 batch of 2 records whose CRC is right but whose recordsCount says 1: bytes follow its last record."""
    batch = bytearray(v2(base, 2))
    struct.pack_into(">i", batch, 57, 1)
    header = parse_header(batch)
    assert header is not None
    struct.pack_into(">I", batch, 17, compute_crc(batch, header))
    return bytes(batch)


@pytest.mark.parametrize("rows_per_batch", [1, 4, 1000])
def test_an_entry_that_does_not_decode_ends_the_segment_before_its_rows(tmp_path: Path, rows_per_batch: int) -> None:
    first, second, bad, after = v2(0, 3), v2(3, 2, Codec.LZ4), undecodable(5), v2(7, 2)
    segment = write(tmp_path / "t-0", 0, first, second, bad, after)
    outcomes: list[SegmentOutcome] = []
    batches = list(read_segment(segment, outcomes.append, rows_per_batch=rows_per_batch))
    table = pa.Table.from_batches(batches, arrow_schema(False))
    assert table.column("offset").to_pylist() == [0, 1, 2, 3, 4]
    (outcome,) = outcomes
    assert outcome.valid_bytes == len(first) + len(second) and outcome.records == 5
    assert outcome.error is not None and "bytes after its 1 records" in outcome.error
    assert outcome.error.startswith(f"position {len(first) + len(second)}: batch at position")


def test_many_rows_with_headers_in_batches(tmp_path: Path) -> None:
    builder = RecordBatchBuilder(codec=Codec.ZSTD)
    for i in range(2500):
        builder.append(TS + i, None if i % 3 == 0 else b"k", b"" if i % 5 == 0 else b"v%d" % i, [("h", None)] * (i % 2))
    segment = write(tmp_path / "t-0", 0, builder.build(), v2(2500, 10))
    outcomes: list[SegmentOutcome] = []
    batches = list(read_segment(segment, outcomes.append, include_headers=True, rows_per_batch=1000))
    assert [b.num_rows for b in batches] == [2500, 10]
    table = pa.Table.from_batches(batches, arrow_schema(True))
    assert table.column("offset").to_pylist() == list(range(2510))
    assert table.column("key").to_pylist()[:4] == [None, b"k", b"k", None]
    assert table.column("value").to_pylist()[:3] == [b"", b"v1", b"v2"]
    assert table.column("headers").to_pylist()[:2] == [[], [{"key": "h", "value": None}]]
    assert outcomes[0].complete and outcomes[0].records == 2510
