"""Recovery after a crash, index rebuilds, checkpoints, and the log manager's start-up and shutdown."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_batches import TS, v2_batch

from mq.config import TopicConfig
from mq.errors import CorruptCheckpointError, InvalidTopicError, KafkaStorageError
from mq.records.batch_header import iter_headers
from mq.storage.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

CONFIG = TopicConfig(segment_bytes=2000, index_interval_bytes=150, retention_ms=-1)


def build_log(directory: Path, batches: int = 30) -> tuple[list[bytes], list[int]]:
    """A closed log of ``batches`` batches; returns each batch as stored and each batch's end offset."""
    log = Log(directory, CONFIG)
    for i in range(batches):
        log.append_as_leader(v2_batch(1 + i % 3, value_size=10 + i, timestamp=TS + i), 0)
    log.close()
    stored, ends = [], []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for header in iter_headers(data):
            stored.append(data[header.position : header.end_position])
            ends.append(header.next_offset)
    return stored, ends


def log_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def test_torn_tail_at_every_byte_keeps_every_whole_batch(tmp_path: Path) -> None:
    source = tmp_path / "src-0"
    stored, ends = build_log(source, batches=5)
    active = sorted(source.glob("*.log"))[-1]
    full = active.read_bytes()
    last = stored[-1]
    for cut in range(1, len(last)):
        directory = tmp_path / f"cut{cut}-0"
        shutil.copytree(source, directory)
        (directory / active.name).write_bytes(full[: len(full) - cut])
        log = Log(directory, CONFIG, recovery_point=0)
        assert log.log_end_offset == ends[-2]
        assert log_bytes(directory) == b"".join(stored[:-1])
        log.close()


def test_garbage_after_the_last_batch_is_cut(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    stored, ends = build_log(directory)
    active = sorted(directory.glob("*.log"))[-1]
    rng = random.Random(7)
    with open(active, "ab") as out:
        out.write(bytes(rng.randrange(256) for _ in range(333)))
    log = Log(directory, CONFIG)
    assert log.log_end_offset == ends[-1]
    assert log_bytes(directory) == b"".join(stored)
    log.append_as_leader(v2_batch(1), 0)
    assert log.log_end_offset == ends[-1] + 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=300))
def test_any_garbage_tail_is_cut_and_nothing_else(tmp_path: Path, garbage: bytes) -> None:
    source = tmp_path / "garbage-src-0"
    if not source.exists():
        build_log(source, batches=8)
    stored_bytes = log_bytes(source)
    directory = tmp_path / "garbage-0"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(source, directory)
    with open(sorted(directory.glob("*.log"))[-1], "ab") as out:
        out.write(garbage)
    log = Log(directory, CONFIG)
    assert log_bytes(directory) == stored_bytes
    log.close()


def test_corrupt_middle_batch_truncates_there_and_drops_later_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    build_log(directory, batches=80)
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 3
    first = segments[0].read_bytes()
    headers = list(iter_headers(first))
    middle = headers[len(headers) // 2]
    damaged = bytearray(first)
    damaged[middle.position + 40] ^= 0xFF
    segments[0].write_bytes(bytes(damaged))
    log = Log(directory, CONFIG)
    assert len(log.segments) == 1
    assert log.log_end_offset == middle.offset
    assert log_bytes(directory) == first[: middle.position]
    assert sorted(p.name for p in directory.glob("*.log")) == [segments[0].name]


def test_clean_shutdown_skips_recovery(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    build_log(directory)
    active = sorted(directory.glob("*.log"))[-1]
    with open(active, "ab") as out:
        out.write(b"\x00" * 50)
    log = Log(directory, CONFIG, clean_shutdown=True)
    assert active.read_bytes().endswith(b"\x00" * 50)  # trusted as it is, no recovery
    log.close()


def test_rebuilt_indexes_equal_the_originals(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    build_log(directory)
    originals = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in (".index", ".timeindex")}
    assert any(originals.values())
    for name in originals:
        (directory / name).unlink()
    log = Log(directory, CONFIG, clean_shutdown=True)
    log.close()
    rebuilt = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in (".index", ".timeindex")}
    assert rebuilt == originals


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    build_log(directory)
    index = sorted(directory.glob("*.index"))[0]
    original = index.read_bytes()
    index.write_bytes(original[:-3])
    log = Log(directory, CONFIG, clean_shutdown=True)
    log.close()
    assert index.read_bytes() == original


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    assert checkpoint.read() == {}
    checkpoint.write({TopicPartition("my-topic", 0): 1500, TopicPartition("my-topic", 1): 1432})
    assert path.read_text() == "0\n2\nmy-topic 0 1500\nmy-topic 1 1432\n"
    assert checkpoint.read() == {TopicPartition("my-topic", 0): 1500, TopicPartition("my-topic", 1): 1432}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    path.write_text("1\n0\n")
    with pytest.raises(CorruptCheckpointError, match="Unrecognized version of the checkpoint file"):
        checkpoint.read()
    path.write_text("0\n3\nt 0 1\nt 1 2\n")
    with pytest.raises(CorruptCheckpointError, match="Expected 3 entries in checkpoint file"):
        checkpoint.read()
    path.write_text("0\n1\nt zero 1\n")
    with pytest.raises(CorruptCheckpointError, match="Malformed line in checkpoint file"):
        checkpoint.read()
    epochs = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    epochs.write([(0, 0), (1, 1500), (4, 2200)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n1 1500\n4 2200\n"
    assert epochs.read() == [(0, 0), (1, 1500), (4, 2200)]


def test_log_manager_lifecycle(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG, broker_id=3)
    manager.startup()
    with pytest.raises(KafkaStorageError, match=f"log directory .* is in use by mq server pid {os.getpid()}"):
        LogManager(dirs, CONFIG, broker_id=3).startup()
    logs = [manager.get_or_create_log(TopicPartition("t", p), CONFIG) for p in range(4)]
    assert {log.dir.parent for log in logs} == set(dirs)
    for log in logs:
        log.append_as_leader(v2_batch(3), 0)
    logs[0].maybe_increment_log_start_offset(2)
    (dirs[0] / "metadata-tree.json").write_text("{}")
    manager.shutdown()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        assert "broker.id=3" in (d / "meta.properties").read_text()
        assert (d / "recovery-point-offset-checkpoint").read_text().startswith("0\n2\n")
    starts = OffsetCheckpointFile(logs[0].dir.parent / "log-start-offset-checkpoint").read()
    assert starts == {TopicPartition("t", 0): 2}

    again = LogManager(dirs, CONFIG, broker_id=3)
    again.startup()
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    assert sorted(again.logs) == [TopicPartition("t", p) for p in range(4)]
    assert again.logs[TopicPartition("t", 0)].log_start_offset == 2
    assert all(log.log_end_offset == 3 for log in again.all_logs())
    again.delete_log(TopicPartition("t", 1))
    assert TopicPartition("t", 1) not in again.logs
    again.shutdown()
    with pytest.raises(KafkaStorageError, match="doesn't match stored broker.id 3"):
        LogManager(dirs, CONFIG, broker_id=4).startup()


def test_unclean_start_recovers_from_the_recovery_point(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], CONFIG, broker_id=0)
    manager.startup()
    log = manager.get_or_create_log(TopicPartition("t", 0), CONFIG)
    for i in range(20):
        log.append_as_leader(v2_batch(2, timestamp=TS + i), 0)
    end = log.log_end_offset
    manager.checkpoint_recovery_points()
    assert manager._locks is not None
    manager._locks.release()  # a crash: nothing closed or trimmed, locks die with the process
    active = log.active.log_path
    with open(active, "ab") as out:
        out.write(b"\xff" * 17)
    recovered = LogManager([tmp_path], CONFIG, broker_id=0)
    recovered.startup()
    assert recovered.logs[TopicPartition("t", 0)].log_end_offset == end
    recovered.shutdown()


def test_leftover_files_at_load(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    build_log(directory)
    names = sorted(p.name for p in directory.iterdir())
    for leftover in ("00000000000000000000.log.deleted", "00000000000000000000.log.cleaned", "x.index.swap"):
        (directory / leftover).write_bytes(b"junk")
    Log(directory, CONFIG).close()
    assert sorted(p.name for p in directory.iterdir()) == names


def test_a_swap_file_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    stored, ends = build_log(directory, batches=60)
    logs = sorted(directory.glob("*.log"))
    assert len(logs) >= 3
    first, second = logs[0], logs[1]
    end_of_second = int(logs[2].name.split(".")[0])
    replacement = first.read_bytes() + second.read_bytes()  # one segment covering both, as a cleaner writes it
    (directory / (first.name + ".swap")).write_bytes(replacement)
    log = Log(directory, CONFIG, clean_shutdown=True)
    assert [s.base_offset for s in log.segments][:2] == [0, end_of_second]
    assert not second.exists() and not (directory / (second.stem + ".index")).exists()
    assert first.read_bytes() == replacement
    assert log.log_end_offset == ends[-1]
    assert log.segments[0].index.pairs()  # rebuilt for the installed segment
    assert log_bytes(directory) == b"".join(stored)
    middle = ends[len(ends) // 4]
    info = log.read(middle, 1)
    assert info.records is not None and next(iter_headers(info.records.read())).offset <= middle
    log.close()


def test_an_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", CONFIG, recovery_point=40, log_start_offset=40)
    assert log.log_start_offset == log.log_end_offset == 40
    assert log.append_as_leader(v2_batch(2), 0).first_offset == 40
    assert (tmp_path / "t-0" / "00000000000000000040.log").exists()
    log.close()


def test_checkpoint_errors_carry_kafkas_texts(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    where = os.path.abspath(path)
    cases = {
        "2\n0\n": f"Unrecognized version of the checkpoint file ({where}): 0",
        "x\n0\n": f"Malformed line in checkpoint file ({where}): 'x'",
        "0\ntwo\n": f"Malformed line in checkpoint file ({where}): 'two'",
        "0\n1\nt 0 1 2\n": f"Malformed line in checkpoint file ({where}): 't 0 1 2'",
        "0\n2\nt 0 1\n\n": f"Malformed line in checkpoint file ({where}): ''",
        "0\n2\nt 0 1\n": f"Expected 2 entries in checkpoint file ({where}), but found only 1",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(CorruptCheckpointError) as caught:
            checkpoint.read()
        assert str(caught.value) == message, text
    for text in ("", "0\n"):
        path.write_text(text)
        assert checkpoint.read() == {}
    path.write_text("0\n2\nmy-topic 0\t15 \nmy-topic 1 -1\n")
    assert checkpoint.read() == {TopicPartition("my-topic", 0): 15, TopicPartition("my-topic", 1): -1}


def test_log_manager_checkpoints_and_clean_marker(tmp_path: Path) -> None:
    batch = v2_batch(1)
    small = TopicConfig(segment_bytes=len(batch) * 2, retention_ms=-1)
    manager = LogManager([tmp_path], CONFIG, {"small": small}, broker_id=1, recovery_threads=3)
    manager.startup()
    meta = (tmp_path / "meta.properties").read_text().splitlines()
    assert meta[0] == "#" and meta[1].startswith("#") and meta[2:] == ["version=0", "broker.id=1"]
    log = manager.get_or_create_log(TopicPartition("small", 0), manager.topic_config("small"))
    assert log.config == small and manager.topic_config("other") == CONFIG
    for _ in range(5):
        log.append_as_leader(batch, 0)
    log.maybe_increment_log_start_offset(3)
    assert manager.cleanup_logs() == 1
    manager.shutdown()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nsmall 0 5\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nsmall 0 3\n"
    active = sorted((tmp_path / "small-0").glob("*.log"))[-1]
    with open(active, "ab") as out:  # after a clean shutdown the tail is trusted, not recovered
        out.write(b"\x00" * 20)
    again = LogManager([tmp_path], CONFIG, lambda topic: small, broker_id=1)
    again.startup()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    reloaded = again.logs[TopicPartition("small", 0)]
    assert (reloaded.log_start_offset, reloaded.recovery_point) == (3, reloaded.log_end_offset)
    assert active.read_bytes().endswith(b"\x00" * 20)
    again.shutdown()


def test_many_partitions_recover_in_worker_threads(tmp_path: Path) -> None:
    for p in range(6):
        build_log(tmp_path / f"t-{p}", batches=6)
        with open(sorted((tmp_path / f"t-{p}").glob("*.log"))[-1], "ab") as out:
            out.write(b"\xee" * (p + 1))
    manager = LogManager([tmp_path], CONFIG, recovery_threads=4)
    manager.startup()  # no marker and no checkpoint: every log is recovered from its start
    assert len(manager.logs) == 6
    for log in manager.all_logs():
        assert not log_bytes(log.dir).endswith(b"\xee")
        assert log.log_end_offset == sum(1 + i % 3 for i in range(6))
    manager.shutdown()


def test_preallocated_log_survives_close_and_crash(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=1 << 16, preallocate=True)
    log = Log(tmp_path / "t-0", config)
    for i in range(4):
        log.append_as_leader(v2_batch(2, timestamp=TS + i), 0)
    active = log.active.log_path
    assert active.stat().st_size == 1 << 16
    written = log.active.size
    log.close()
    assert active.stat().st_size == written
    reopened = Log(tmp_path / "t-0", config, clean_shutdown=True)
    assert reopened.log_end_offset == 8
    reopened.append_as_leader(v2_batch(2), 0)
    os.close(reopened.active.fd)  # a crash with the preallocated zeros still there
    recovered = Log(tmp_path / "t-0", config)
    assert recovered.log_end_offset == 10
    assert offsets_of(recovered) == list(range(10))
    recovered.close()


def offsets_of(log: Log) -> list[int]:
    data = log_bytes(log.dir)
    return [o for h in iter_headers(data) for o in range(h.offset, h.next_offset)]


def test_retention_stops_at_each_partitions_high_watermark(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=200, retention_bytes=0)
    manager = LogManager([tmp_path], config, broker_id=1)
    manager.startup()
    logs = [manager.get_or_create_log(TopicPartition("t", p), config) for p in range(3)]
    for log in logs:
        for _ in range(4):
            log.append_as_leader(v2_batch(3), 0)
            log.roll()
    assert manager.cleanup_logs({TopicPartition("t", 0): 0, TopicPartition("t", 1): 6}) == 2
    assert [log.log_start_offset for log in logs] == [0, 6, 0]  # t-2 is not hosted: left alone
    manager.shutdown()


@pytest.mark.parametrize("tp", [TopicPartition("../../x", 0), TopicPartition("..", 0), TopicPartition("t", -1)])
def test_no_log_is_placed_outside_the_log_dirs(tmp_path: Path, tp: TopicPartition) -> None:
    manager = LogManager([tmp_path / "logs"], CONFIG, broker_id=0)
    manager.startup()
    with pytest.raises(InvalidTopicError):
        manager.get_or_create_log(tp, CONFIG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
    assert not manager.logs
