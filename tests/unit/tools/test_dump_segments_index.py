""".index and .timeindex files: entry lines, the stop at zero-filled slots, verification reports, sanity checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dump_support import TS, dump, offset_index, time_index, v2_batch, write_segment

MAX_TIMESTAMPS = {1: TS + 1, 4: TS + 4, 5: TS + 3, 7: TS + 11}
"""Last offset of each batch of the segment below -> its max record timestamp."""


@pytest.fixture
def segment(tmp_path: Path) -> tuple[Path, list[int]]:
    """A segment at base offset 0 with batches ending at offsets 1, 4, 5 and 7; returns its dir and their positions."""
    batches = [
        v2_batch([(TS, None, b"a", ()), (TS + 1, None, b"b", ())], base_offset=0),
        v2_batch([(TS + 2 + i, None, b"c", ()) for i in range(3)], base_offset=2),
        v2_batch([(TS + 3, None, b"d", ())], base_offset=5),
        v2_batch([(TS + 10, None, b"e", ()), (TS + 11, None, b"f", ())], base_offset=6),
    ]
    positions = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    write_segment(tmp_path, 0, b"".join(batches))
    return tmp_path, positions


def index_path(directory: Path, base: int = 0) -> Path:
    return directory / f"{base:020d}.index"


def time_index_path(directory: Path, base: int = 0) -> Path:
    return directory / f"{base:020d}.timeindex"


def test_index_lines_stop_at_the_first_zero_slot(segment: tuple[Path, list[int]]) -> None:
    directory, positions = segment
    index = index_path(directory)
    index.write_bytes(offset_index(0, [(1, 0), (4, positions[1]), (7, positions[3])], zero_slots=5))
    result = dump(files=[index])
    assert result.exit_code == 0
    assert result.out == [
        f"Dumping {index}",
        "offset: 1 position: 0",
        f"offset: 4 position: {positions[1]}",
        f"offset: 7 position: {positions[3]}",
    ]
    assert result.err == []


def test_a_first_entry_at_the_base_offset_is_printed(tmp_path: Path) -> None:
    batch = v2_batch([(TS, None, b"a", ())], base_offset=30)
    write_segment(tmp_path, 30, batch + v2_batch([(TS, None, b"b", ())], base_offset=31))
    index = index_path(tmp_path, 30)
    index.write_bytes(offset_index(30, [(30, 0), (31, len(batch))], zero_slots=2))
    assert dump(files=[index]).out[1:] == ["offset: 30 position: 0", f"offset: 31 position: {len(batch)}"]


def test_index_mismatches_newest_first(segment: tuple[Path, list[int]]) -> None:
    directory, positions = segment
    index = index_path(directory)
    index.write_bytes(offset_index(0, [(4, positions[1]), (5, positions[1]), (8, positions[3]), (9, 100_000)]))
    result = dump("--verify-index-only", files=[index])
    assert result.exit_code == 0
    assert result.out == [f"Dumping {index}"]
    assert result.err == [
        f"Mismatches in :{os.path.abspath(index)}",
        "  Index offset: 9, log offset: -1",
        "  Index offset: 8, log offset: 7",
        "  Index offset: 5, log offset: 4",
    ]


def test_empty_index(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, b"")
    index = index_path(tmp_path)
    assert dump(files=[index]).out == [f"Dumping {index}", f"{index} is empty."]
    assert dump("--index-sanity-check", files=[index]).out == [f"Dumping {index}", f"{index} is empty."]


def test_index_sanity_check(segment: tuple[Path, list[int]]) -> None:
    directory, positions = segment
    index = index_path(directory)
    index.write_bytes(offset_index(0, [(4, positions[1])], zero_slots=3))
    result = dump("--index-sanity-check", files=[index])
    assert (result.exit_code, result.out, result.err) == (0, [f"Dumping {index}", f"{index} passed sanity check."], [])


def test_failed_sanity_check_exits_1_after_checking_every_file(tmp_path: Path) -> None:
    write_segment(tmp_path, 10, b"", index=offset_index(10, [(3, 0)]), timeindex=time_index(10, [(TS, 12)]))
    index, timeindex = index_path(tmp_path, 10), time_index_path(tmp_path, 10)
    result = dump("--index-sanity-check", files=[index, timeindex])
    assert result.exit_code == 1
    assert result.out == [f"Dumping {index}", f"Dumping {timeindex}", f"{timeindex} passed sanity check."]
    assert len(result.err) == 1
    assert result.err[0].startswith(f"{index} failed sanity check: ")
    assert "last offset is 3 which is less than the base offset 10" in result.err[0]


def test_time_index_lines_and_stop_at_zero_slot(segment: tuple[Path, list[int]]) -> None:
    directory, positions = segment
    index_path(directory).write_bytes(offset_index(0, [(4, positions[1]), (7, positions[3])]))
    timeindex = time_index_path(directory)
    timeindex.write_bytes(time_index(0, [(TS + 1, 1), (TS + 4, 4), (TS + 11, 7)], zero_slots=4))
    result = dump(files=[timeindex])
    assert result.exit_code == 0
    assert result.out == [
        f"Dumping {timeindex}",
        f"timestamp: {TS + 1} offset: 1",
        f"timestamp: {TS + 4} offset: 4",
        f"timestamp: {TS + 11} offset: 7",
    ]
    assert result.err == []


@pytest.mark.parametrize("with_offset_index", [True, False])
def test_time_index_reports(segment: tuple[Path, list[int]], with_offset_index: bool) -> None:
    directory, positions = segment
    if with_offset_index:
        index_path(directory).write_bytes(offset_index(0, [(4, positions[1]), (7, positions[3])]))
    else:
        index_path(directory).unlink()
    timeindex = time_index_path(directory)
    entries = [(TS + 9, 4), (TS + 3, 5), (TS + 5, 3), (TS + 11, 7), (TS + 12, 50)]
    timeindex.write_bytes(time_index(0, entries))
    result = dump("--verify-index-only", files=[timeindex])
    assert result.exit_code == 0
    assert result.out == [f"Dumping {timeindex}"]
    absolute = os.path.abspath(timeindex)
    assert result.err == [
        f"Found timestamp mismatch in :{absolute}",
        f"  Index timestamp: {TS + 9}, log timestamp: {TS + 4}",
        f"Found out of order timestamp in :{absolute}",
        f"  Index timestamp: {TS + 3}, Previously indexed timestamp: {TS + 9}",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 3, found log offset: 4",
        "Indexed offset: 50, found log offset: -1",
    ]


def test_time_index_sanity_check(segment: tuple[Path, list[int]]) -> None:
    directory, _ = segment
    timeindex = time_index_path(directory)
    timeindex.write_bytes(time_index(0, [(TS + 1, 1), (TS + 4, 4)]))
    result = dump("--index-sanity-check", files=[timeindex])
    assert result.out == [f"Dumping {timeindex}", f"{timeindex} passed sanity check."]


def test_untrimmed_time_index_fails_the_sanity_check_as_in_kafka(segment: tuple[Path, list[int]]) -> None:
    """A zero slot counts as the last entry (timestamp 0 < the first one), as when Kafka opens such a file."""
    directory, _ = segment
    timeindex = time_index_path(directory)
    timeindex.write_bytes(time_index(0, [(TS + 1, 1), (TS + 4, 4)], zero_slots=1))
    result = dump("--index-sanity-check", files=[timeindex])
    assert result.exit_code == 1
    assert result.err[0].startswith(f"{timeindex} failed sanity check: Corrupt time index found")


def test_index_without_its_log_fails(tmp_path: Path) -> None:
    index = index_path(tmp_path)
    index.write_bytes(offset_index(0, [(4, 0)]))
    result = dump(files=[index])
    assert result.exit_code == 1
    assert result.err == [f"Error: cannot read {tmp_path / '00000000000000000000.log'}: No such file or directory"]
