"""The installed ``mq dump-segments``, run as a user runs it, on a partition directory; files stay byte-identical."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mq.config import TopicConfig
from mq.storage.partition_log import Log

TS = 1_500_000_000_000
BATCHES_PER_SEGMENT = 10
RECORDS_PER_BATCH = 5
INDEX_INTERVAL_BYTES = 200


def run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, "dump-segments", *args], capture_output=True, text=True, timeout=60)


def batch(base_offset: int, codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i in range(RECORDS_PER_BATCH):
        builder.append(i, timestamp=TS + base_offset + i, key=b"k", value=b"value-%d" % (base_offset + i), headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def write_segment(directory: Path, base_offset: int, preallocated_slots: int) -> None:
    """A segment as a broker leaves it: an index entry whenever more than the interval was appended since the last,
    a time index entry when the max timestamp grows, and zero-filled slots if it was not trimmed (a crash)."""
    log, index, timeindex = b"", b"", b""
    since_last_entry = 0
    for i in range(BATCHES_PER_SEGMENT):
        data = batch(base_offset + i * RECORDS_PER_BATCH, codec=i % 5)
        last_offset = base_offset + (i + 1) * RECORDS_PER_BATCH - 1
        if since_last_entry > INDEX_INTERVAL_BYTES:
            index += struct.pack(">ii", last_offset - base_offset, len(log))
            timeindex += struct.pack(">qi", TS + last_offset, last_offset - base_offset)
            since_last_entry = 0
        log += data
        since_last_entry += len(data)
    name = f"{base_offset:020d}"
    (directory / f"{name}.log").write_bytes(log)
    (directory / f"{name}.index").write_bytes(index + bytes(8 * preallocated_slots))
    (directory / f"{name}.timeindex").write_bytes(timeindex + bytes(12 * preallocated_slots))


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    """``orders-0`` with a rolled (trimmed) segment and an active one copied after a crash (untrimmed indexes)."""
    directory = tmp_path / "orders-0"
    directory.mkdir()
    write_segment(directory, 0, preallocated_slots=0)
    write_segment(directory, BATCHES_PER_SEGMENT * RECORDS_PER_BATCH, preallocated_slots=100)
    return directory


def segment_files(directory: Path) -> list[str]:
    """The segment files of a partition directory (its checkpoint files are not for the tool)."""
    return [str(p) for p in sorted(directory.iterdir()) if p.suffix in (".log", ".index", ".timeindex")]


def snapshot(directory: Path) -> dict[str, tuple[bytes, int, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_mode) for p in directory.iterdir()}


def test_dumps_a_partition_directory_read_only(mq_command: list[str], partition_dir: Path) -> None:
    before = snapshot(partition_dir)
    files = segment_files(partition_dir)
    result = run(mq_command, "--print-data-log", "--files", ",".join(files))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("Dumping ")] == [f"Dumping {f}" for f in files]
    assert [line for line in lines if line.startswith("Starting offset: ")] == [
        "Starting offset: 0",
        "Starting offset: 50",
    ]
    records = [line for line in lines if line.startswith("| offset: ")]
    assert [int(line.split()[2]) for line in records] == list(range(100))
    assert all(line.endswith(f"key: k payload: value-{i}") for i, line in enumerate(records))
    assert len([line for line in lines if line.startswith("baseOffset: ")]) == 2 * BATCHES_PER_SEGMENT
    index_lines = [line for line in lines if line.startswith("offset: ")]
    time_lines = [line for line in lines if line.startswith("timestamp: ")]
    assert index_lines and len(index_lines) == len(time_lines)
    assert all(int(line.split()[1]) % RECORDS_PER_BATCH == RECORDS_PER_BATCH - 1 for line in index_lines)
    assert snapshot(partition_dir) == before

    checked = run(mq_command, "--index-sanity-check", "--files", ",".join(files))
    untrimmed_time_index = files[-1]
    assert checked.returncode == 1  # the crashed segment's zero-filled time index fails, as Kafka's check does
    assert [line for line in checked.stdout.splitlines() if "sanity" in line] == [
        f"{f} passed sanity check." for f in files if not f.endswith(".log") and f != untrimmed_time_index
    ]
    assert checked.stderr.startswith(f"{untrimmed_time_index} failed sanity check: Corrupt time index found")
    as_json = run(mq_command, "--deep-iteration", "--format", "json", "--files", ",".join(files))
    docs = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [doc["offset"] for doc in docs if doc["type"] == "record"] == list(range(100))
    assert snapshot(partition_dir) == before


def test_a_damaged_copy_is_reported_with_exit_0(mq_command: list[str], partition_dir: Path) -> None:
    log = partition_dir / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[200] ^= 0x55
    log.write_bytes(bytes(data) + b"\x00" * 5)
    result = run(mq_command, "--deep-iteration", "--files", str(log))
    assert result.returncode == 0
    assert "isvalid: false" in result.stdout
    assert result.stdout.splitlines()[-1] == "Found 5 invalid bytes at the end of 00000000000000000000.log"
    assert f"Corrupt entries in {os.path.abspath(log)}" in result.stderr.splitlines()


def test_missing_files_option_is_a_usage_error(mq_command: list[str]) -> None:
    result = run(mq_command)
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["Error: Missing option '--files'."]
    assert result.stdout == ""


def test_unknown_flag_is_a_usage_error(mq_command: list[str], partition_dir: Path) -> None:
    result = run(mq_command, "--deep-iterations", "--files", segment_files(partition_dir)[0])
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("Error: No such option '--deep-iterations'")
    assert result.stdout == ""


def test_unambiguous_abbreviations_work_as_in_kafka(mq_command: list[str], partition_dir: Path) -> None:
    log = str(partition_dir / "00000000000000000000.log")
    result = run(mq_command, "--deep", "--fi", log)
    assert result.returncode == 0, result.stderr
    assert "| offset: 0 " in result.stdout
    ambiguous = run(mq_command, "--f", log)
    assert ambiguous.returncode == 2


def test_nonexistent_file_exits_1_with_one_line(mq_command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000.log"
    result = run(mq_command, "--files", str(missing))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"Error: cannot read {missing}: No such file or directory"]
    assert not missing.exists()


def test_dumps_a_log_written_by_the_storage_engine(mq_command: list[str], tmp_path: Path) -> None:
    """Segments, indexes and time indexes as mq's own Log writes them: everything readable and consistent."""
    directory = tmp_path / "events-0"
    log = Log(directory, TopicConfig(segment_bytes=1000, index_interval_bytes=300))
    for i in range(60):
        log.append_as_leader(batch(0, codec=i % 5), leader_epoch=3)
    log.close()
    files = segment_files(directory)
    assert len([f for f in files if f.endswith(".log")]) > 3
    before = snapshot(directory)
    result = run(mq_command, "--deep-iteration", "--index-sanity-check", "--files", ",".join(files))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert (
        len([line for line in result.stdout.splitlines() if line.endswith("passed sanity check.")])
        == len(files) * 2 // 3
    )
    dumped = run(mq_command, "--deep-iteration", "--files", ",".join(files))
    assert dumped.returncode == 0 and dumped.stderr == "", dumped.stderr
    records = [line for line in dumped.stdout.splitlines() if line.startswith("| offset: ")]
    assert [int(line.split()[2]) for line in records] == list(range(60 * RECORDS_PER_BATCH))
    assert all(
        "partitionLeaderEpoch: 3" in line for line in dumped.stdout.splitlines() if line.startswith("baseOffset")
    )
    assert snapshot(directory) == before


def test_dumps_a_copy_taken_while_the_log_was_open(mq_command: list[str], tmp_path: Path) -> None:
    """A copy of a running broker's directory: the active segment's indexes are preallocated, zero past the entries."""
    directory = tmp_path / "live-0"
    log = Log(directory, TopicConfig(segment_bytes=100_000, index_interval_bytes=300))
    for i in range(40):
        log.append_as_leader(batch(0, codec=i % 5), leader_epoch=1)
    log.flush()
    copy = tmp_path / "copy-0"
    shutil.copytree(directory, copy)
    log.close()
    index = copy / "00000000000000000000.index"
    assert index.stat().st_size > 1_000_000
    files = [str(copy / f"00000000000000000000{suffix}") for suffix in (".log", ".index", ".timeindex")]
    before = snapshot(copy)
    result = run(mq_command, "--deep-iteration", "--files", ",".join(files))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len([line for line in lines if line.startswith("| offset: ")]) == 40 * RECORDS_PER_BATCH
    index_lines = [line for line in lines if line.startswith("offset: ")]
    assert 0 < len(index_lines) < 40
    assert [line for line in lines if line.startswith("timestamp: ")]
    assert snapshot(copy) == before
