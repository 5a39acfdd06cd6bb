from __future__ import annotations

from pathlib import Path

import pytest

from mq.errors import CorruptIndexError, KafkaStorageError
from mq.storage.file_names import (
    delete_dir_name,
    file_name,
    index_file_name,
    log_file_name,
    offset_from_file_name,
    parse_partition_dir,
    time_index_file_name,
)
from mq.storage.offset_index import OffsetIndex, read_offset_index, sanity_check_offset_index
from mq.storage.time_index import TimeIndex, read_time_index, sanity_check_time_index
from mq.topic_partition import TopicPartition


def test_file_names() -> None:
    assert file_name(368769, ".log") == "00000000000000368769.log"
    assert log_file_name(Path("/d"), 5) == Path("/d/00000000000000000005.log")
    assert index_file_name(Path("/d"), 5).name == "00000000000000000005.index"
    assert time_index_file_name(Path("/d"), 5).name == "00000000000000000005.timeindex"
    assert parse_partition_dir("a-b-c-12.0a1b2c3d4e5f60718293a4b5c6d7e8f9-future") == TopicPartition("a-b-c", 12)
    assert offset_from_file_name("00000000000000000042.index") == 42
    assert parse_partition_dir("my-topic-3") == TopicPartition("my-topic", 3)
    assert parse_partition_dir("t-0.0a1b2c3d4e5f60718293a4b5c6d7e8f9-delete") == TopicPartition("t", 0)
    for bad in ("nodash", "-3", "topic-x", "topic-"):
        with pytest.raises(KafkaStorageError, match="is not in the form of topic-partition"):
            parse_partition_dir(bad)
    with pytest.raises(KafkaStorageError) as caught:
        parse_partition_dir(Path("/x/y"))
    assert str(caught.value).startswith("Found directory /x/y, 'y' is not in the form of topic-partition or ")
    name = delete_dir_name(TopicPartition("x" * 249, 7))
    assert len(name) <= 255 and name.endswith("-delete")


def test_offset_index_entry_bytes_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=1024)
    assert path.stat().st_size == 1024
    index.append(5, 4168)
    index.close()
    assert path.read_bytes() == bytes.fromhex("0000000500001048")
    assert read_offset_index(path, 0) == [(5, 4168)]


def test_offset_index_preallocation_rounds_down_and_reexpands(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=1001)
    assert path.stat().st_size == 1000 and index.max_entries == 125
    index.append(103, 10)
    index.append(107, 20)
    index.close()
    assert path.stat().st_size == 16
    reopened = OffsetIndex(path, 100, max_index_size=1001)
    assert reopened.entries == 2 and path.stat().st_size == 16  # an existing file is trusted as it is
    reopened.expand()  # the active segment's index is re-expanded at load
    assert reopened.entries == 2 and path.stat().st_size == 1000
    assert reopened.lookup(200) == (107, 20)
    reopened.trim()
    appended = OffsetIndex(path, 100, max_index_size=1001)
    appended.append(110, 30)  # an append past the mapping re-expands too
    assert appended.entries == 3 and path.stat().st_size == 1000
    appended.close()
    assert read_offset_index(path, 100) == [(103, 10), (107, 20), (110, 30)]


def test_offset_index_lookup_edges(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000010.index", 10)
    assert index.lookup(50) == (10, 0)
    index.append(14, 100)
    index.append(20, 300)
    index.append(20, 999)  # not increasing: ignored
    assert index.lookup(13) == (10, 0)
    assert index.lookup(14) == (14, 100)
    assert index.lookup(19) == (14, 100)
    assert index.lookup(1000) == (20, 300)
    index.truncate_to(20)
    assert index.lookup(1000) == (14, 100)


def test_full_index(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=16)
    index.append(1, 0)
    index.append(2, 10)
    assert index.is_full
    index.append(3, 20)
    assert index.entries == 2


def test_offset_index_sanity_check_texts(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.index"
    path.write_bytes(bytes.fromhex("0000000300000000") + b"\x00" * 5)
    with pytest.raises(CorruptIndexError) as caught:
        sanity_check_offset_index(path, 10)
    assert str(caught.value) == (
        f"Index file {path} is corrupt, found 13 bytes which is neither positive nor a multiple of 8."
    )
    path.write_bytes(bytes.fromhex("0000000300000000"))
    sanity_check_offset_index(path, 10)
    path.write_bytes(bytes.fromhex("fffffff600000000") + b"\x00" * 3)  # Kafka checks the last offset first
    with pytest.raises(CorruptIndexError) as caught:
        sanity_check_offset_index(path, 10)
    assert str(caught.value) == (
        f"Corrupt index found, index file ({path}) has non-zero size but the last offset is 0 which is less than "
        "the base offset 10."
    )
    path.write_bytes(b"")
    sanity_check_offset_index(path, 10)


def test_time_index_entry_bytes_and_reserved_slot(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_index_size=36)
    assert path.stat().st_size == 36
    index.maybe_append(1500000000000, 5)
    index.maybe_append(1500000000000, 6)  # not greater: ignored
    index.maybe_append(1500000000001, 7)
    assert index.is_full  # three slots, the last reserved
    index.maybe_append(1500000000002, 8)
    assert index.entries == 2
    index.maybe_append(1500000000003, 9, final=True)
    index.close()
    data = path.read_bytes()
    assert data[:12] == bytes.fromhex("0000015d3ef7980000000005")
    assert read_time_index(path, 0) == [(1500000000000, 5), (1500000000001, 7), (1500000000003, 9)]
    sanity_check_time_index(path, 0)
    reopened = TimeIndex(path, 0)
    assert reopened.lookup(1500000000001) == (1500000000001, 7)
    assert reopened.lookup(1499999999999) == (-1, 0)
    reopened.close()


def test_time_index_sanity_check_texts(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(bytes.fromhex("0000015d3ef7980000000005") + bytes(12))
    with pytest.raises(CorruptIndexError) as caught:
        sanity_check_time_index(path, 0)
    assert str(caught.value) == (
        f"Corrupt time index found, time index file ({path}) has non-zero size but the last timestamp is 0 which "
        "is less than the first timestamp 1500000000000"
    )
    path.write_bytes(bytes.fromhex("0000015d3ef79800fffffffe"))
    with pytest.raises(CorruptIndexError) as caught:
        sanity_check_time_index(path, 0)
    assert str(caught.value) == (
        f"Corrupt time index found, time index file ({path}) has non-zero size but the last offset is -2 which is "
        "less than the base offset 0"
    )
    path.write_bytes(bytes.fromhex("0000015d3ef7980000000005") + bytes(5))
    with pytest.raises(CorruptIndexError) as caught:
        sanity_check_time_index(path, 0)
    assert str(caught.value) == (
        f"Time index file {path} is corrupt, found 17 bytes which is neither positive nor a multiple of 12."
    )


def test_index_entries_reach_the_mapped_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=64)
    index.append(5, 4168)
    index.append(9, 5000)
    assert path.read_bytes()[:24] == bytes.fromhex("00000005000010480000000900001388") + bytes(8)
    assert read_offset_index(path, 0)[:2] == [(5, 4168), (9, 5000)]
    index.truncate_to(9)  # the dropped slot goes back to zeros
    assert path.read_bytes()[8:16] == bytes(8)
    assert index.entries == 1 and index.lookup(100) == (5, 4168)
    index.close()


def test_resize_keeps_entries_and_rounds_down(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000007.timeindex"
    index = TimeIndex(path, 7, max_index_size=120)
    index.maybe_append(1000, 8)
    index.maybe_append(2000, 12)
    index.resize(4)  # never below the entries
    assert path.stat().st_size == 24
    index.resize(65)
    assert path.stat().st_size == 60
    index.maybe_append(3000, 15)
    assert index.lookup(2999) == (2000, 12) and index.last_entry == (3000, 15)
    index.trim()
    assert read_time_index(path, 7) == [(1000, 8), (2000, 12), (3000, 15)]
    index.truncate_to(12)
    assert index.last_entry == (1000, 8)
    index.close()
    assert path.stat().st_size == 12


def test_a_zero_filled_tail_fails_the_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes.fromhex("0000000500001048") + bytes(16))  # untrimmed after a crash
    sanity_check_offset_index(path, 0)  # Kafka's own checks let it pass: the last offset is the base offset
    index = OffsetIndex(path, 0)
    with pytest.raises(CorruptIndexError, match="out of order: 0 follows 0"):
        index.sanity_check()
    index.close()
    path.write_bytes(bytes.fromhex("00000005000010480000000900002000"))
    trimmed = OffsetIndex(path, 0)
    trimmed.sanity_check()
    trimmed.close()
