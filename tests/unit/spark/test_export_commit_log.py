"""The export's commit protocol without Spark: manifests, recovery after a kill at each step, chunking and planning."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest

from mq.spark.export import (
    CommitLog,
    ExportError,
    Manifest,
    check_layout,
    chunk_ranges,
    plan_export,
)
from mq.spark.output_fs import join
from mq.topic_partition import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class LocalFileSystem:
    """The output file system protocol over local paths, as the Hadoop one behaves on ``file:``."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        if not os.path.isdir(path):
            return []
        return [(e.name, e.is_dir()) for e in os.scandir(path)]

    def list_files(self, path: str) -> list[str]:
        return sorted(str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file())

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def delete(self, path: str) -> None:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)

    def read_text(self, path: str) -> str:
        return Path(path).read_text(encoding="utf-8")

    def write_text(self, path: str, text: str) -> None:
        Path(path).write_text(text, encoding="utf-8")


def stage(log: CommitLog, chunk: int, ranges: dict[TopicPartition, tuple[int, int]]) -> Manifest:
    """What a chunk's Spark write leaves in staging: data files, a _SUCCESS marker and checksum files."""
    name, staging = log.new_staging(chunk)
    for tp in ranges:
        directory = Path(staging, f"topic={tp.topic}", f"partition={tp.partition}")
        directory.mkdir(parents=True)
        (directory / f"part-{chunk}.parquet").write_text(f"{tp} {ranges[tp]}")
        (directory / f".part-{chunk}.parquet.crc").write_text("crc")
    Path(staging, "_SUCCESS").write_text("")
    return Manifest(chunk, name, ranges, log.staged_files(staging))


def data_files(output: Path) -> list[str]:
    return sorted(
        str(p.relative_to(output)) for p in output.rglob("*.parquet") if not str(p.relative_to(output)).startswith("_")
    )


@pytest.fixture
def log(tmp_path: Path) -> CommitLog:
    return CommitLog(LocalFileSystem(), str(tmp_path / "out"))


def test_manifest_round_trip() -> None:
    files = ("topic=a/partition=0/x.parquet",)
    manifest = Manifest(7, "00000000000000000007-abc", {A0: (0, 10), B0: (5, 6)}, files, ("topic", "partition"), True)
    assert Manifest.from_json(manifest.to_json(), "m") == manifest


def test_every_run_keeps_the_layout_of_the_first() -> None:
    first = Manifest(0, "s", {A0: (0, 1)}, (), ("topic", "date"), False)
    check_layout([], ("partition",), True)
    check_layout([first], ("topic", "date"), False)
    with pytest.raises(ExportError, match="partitioned by topic,date and without headers"):
        check_layout([first], ("topic", "partition"), False)
    with pytest.raises(ExportError, match="--include-headers"):
        check_layout([first], ("topic", "date"), True)


def test_an_unreadable_manifest_is_an_error(log: CommitLog) -> None:
    os.makedirs(log.commits)
    Path(log.commits, "00000000000000000000.json").write_text("{not json")
    with pytest.raises(ExportError, match="unreadable"):
        log.recover()


def test_commit_moves_data_files_and_records_the_ranges(log: CommitLog, tmp_path: Path) -> None:
    manifest = stage(log, 0, {A0: (0, 10), A1: (0, 4)})
    assert manifest.files == ("topic=a/partition=0/part-0.parquet", "topic=a/partition=1/part-0.parquet")
    log.commit(manifest)
    assert data_files(tmp_path / "out") == list(manifest.files)
    assert not os.path.exists(log.staging) or not os.listdir(log.staging)
    recovery = log.recover()
    assert recovery.manifests == [manifest] and recovery.moved_files == 0 and recovery.discarded == []
    assert recovery.committed_ends() == {A0: 10, A1: 4} and recovery.next_chunk == 1


def test_a_kill_before_the_commit_discards_the_staged_chunk(log: CommitLog, tmp_path: Path) -> None:
    log.commit(stage(log, 0, {A0: (0, 10)}))
    killed = stage(log, 1, {A0: (10, 20)})
    Path(log.commits, f".{1:020d}.json.tmp").write_text(killed.to_json()[:20])  # killed while publishing
    recovery = log.recover()
    assert recovery.discarded == [killed.staging]
    assert recovery.committed_ends() == {A0: 10} and recovery.next_chunk == 1
    assert data_files(tmp_path / "out") == ["topic=a/partition=0/part-0.parquet"]
    assert sorted(os.listdir(log.commits)) == [f"{0:020d}.json"]


def test_a_kill_after_the_commit_is_finished_by_the_next_run(log: CommitLog, tmp_path: Path) -> None:
    manifest = stage(log, 0, {A0: (0, 10), B0: (0, 3)})
    os.makedirs(log.commits)
    Path(log.commits, f"{0:020d}.json").write_text(manifest.to_json())  # committed, then killed before any move
    first = join(log.staging, manifest.staging, manifest.files[0])
    target = join(log.output, manifest.files[0])
    os.makedirs(os.path.dirname(target))
    os.rename(first, target)  # ... or after the first move
    recovery = log.recover()
    assert recovery.moved_files == 1 and recovery.discarded == []
    assert data_files(tmp_path / "out") == sorted(manifest.files)
    assert not os.path.exists(join(log.staging, manifest.staging))
    assert log.recover().moved_files == 0


def test_a_chunk_committed_by_another_export_is_not_overwritten(log: CommitLog) -> None:
    log.commit(stage(log, 0, {A0: (0, 10)}))
    with pytest.raises(ExportError, match="another export"):
        log.commit(stage(log, 0, {A0: (0, 10)}))
    assert [m.ranges for m in log.recover().manifests] == [{A0: (0, 10)}]


def test_a_checkpoint_elsewhere_holds_the_manifests(tmp_path: Path) -> None:
    log = CommitLog(LocalFileSystem(), str(tmp_path / "out"), str(tmp_path / "ckpt"))
    log.commit(stage(log, 0, {A0: (0, 1)}))
    assert os.listdir(tmp_path / "ckpt" / "commits") == [f"{0:020d}.json"]


def test_chunks_cover_every_range_once_within_the_limit() -> None:
    start, end = {A0: 0, A1: 100, B0: 7}, {A0: 1000, A1: 100, B0: 57}
    chunks = list(chunk_ranges(start, end, 200))
    covered: dict[TopicPartition, list[tuple[int, int]]] = {}
    for chunk in chunks:
        assert sum(e - s for s, e in chunk.values()) <= 200
        for tp, bounds in chunk.items():
            covered.setdefault(tp, []).append(bounds)
    for tp, bounds in covered.items():
        assert bounds[0][0] == start[tp] and bounds[-1][1] == end[tp]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    assert A1 not in covered
    assert list(chunk_ranges(start, end, None)) == [{A0: (0, 1000), B0: (7, 57)}]
    assert list(chunk_ranges(end, end, 10)) == []


def test_plan_resumes_from_committed_ends_and_new_partitions_from_the_log_start() -> None:
    start, lost = plan_export({A0: 40}, {A0: 0, A1: 5}, {A0: 90, A1: 50}, True)
    assert start == {A0: 40, A1: 5} and lost == {}


@pytest.mark.parametrize(("committed", "now"), [(3, 10), (95, 90)])
def test_plan_offsets_lost_from_the_log(committed: int, now: int) -> None:
    earliest, latest = {A0: 10 if now == 10 else 0}, {A0: 90}
    with pytest.raises(ExportError, match="offsets were lost"):
        plan_export({A0: committed}, earliest, latest, True)
    start, lost = plan_export({A0: committed}, earliest, latest, False)
    assert start == {A0: now} and lost == {A0: (committed, now)}
