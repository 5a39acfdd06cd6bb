"""Replay state files (atomic JSON) and the acknowledged frontier they record."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mq.errors import ErrorCode, KafkaError
from mq.tools.replay import (
    PartitionState,
    PartitionWindow,
    ReplayError,
    ReplayLogProducer,
    ReplayOptions,
    ReplayState,
    _Progress,
    default_state_file,
    load_state,
    save_state,
)


def _state() -> ReplayState:
    return ReplayState(
        "in", "out", {0: PartitionState(0, 10, 4, 104), 1: PartitionState(5, None, 7), 2: PartitionState(3, 3, 3)}
    )


def test_state_round_trips_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, _state())
    assert load_state(path) == _state()
    document = json.loads(path.read_text())
    assert document["version"] == 1
    assert document["partitions"]["0"] == {"start": 0, "end": 10, "next": 4, "target_next": 104}
    assert document["partitions"]["1"]["end"] is None
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # the temporary file was renamed away


def test_saving_replaces_the_previous_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, _state())
    later = _state()
    later.partitions[0].next = 10
    save_state(path, later)
    loaded = load_state(path)
    assert loaded is not None
    assert loaded.partitions[0].next == 10


def test_a_missing_state_file_is_no_state(tmp_path: Path) -> None:
    assert load_state(tmp_path / "absent.json") is None


@pytest.mark.parametrize("text", ["not json", "[]", '{"version": 2}', '{"version": 1, "partitions": {}}'])
def test_a_state_file_that_is_not_a_replay_state_is_a_usage_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text)
    with pytest.raises(ReplayError) as caught:
        load_state(path)
    assert caught.value.usage


def test_default_state_file_is_named_for_the_topics() -> None:
    assert default_state_file("a", "b") == Path("replay-a-b.json")


def _acknowledged(count: int) -> asyncio.Future[int]:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    future.set_result(count)
    return future


def test_the_frontier_stops_at_the_first_unacknowledged_run() -> None:
    async def run() -> None:
        progress = _Progress(PartitionWindow(0, 10, 30), PartitionState(10, 30, 10, 100))
        waiting: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        progress.sent(10, 12, 2, _acknowledged(2))  # offset 11 was a compacted gap
        progress.sent(13, 15, 3, waiting)
        progress.sent(16, 16, 1, _acknowledged(1))
        progress.acknowledge()
        assert (progress.state.next, progress.state.target_next) == (13, 102)
        waiting.set_result(3)
        progress.acknowledge()
        assert (progress.state.next, progress.state.target_next) == (17, 106)
        assert (progress.first, progress.last, progress.records) == (10, 16, 6)

    asyncio.run(run())


def test_a_finished_partition_moves_to_its_window_end_once_everything_is_acknowledged() -> None:
    async def run() -> None:
        progress = _Progress(PartitionWindow(0, 0, 20), PartitionState(0, 20, 0, None))
        progress.sent(0, 17, 18, _acknowledged(18))
        progress.finished_at = 20
        progress.acknowledge()
        assert progress.state.next == 20
        assert progress.state.target_next is None
        assert progress.done

    asyncio.run(run())


def test_a_failed_run_holds_the_frontier_and_raises_every_time() -> None:
    async def run() -> None:
        progress = _Progress(PartitionWindow(0, 0, 20), PartitionState(0, 20, 0, 50))
        failed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        failed.set_exception(KafkaError("gone", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        progress.sent(0, 0, 1, _acknowledged(1))
        progress.sent(1, 4, 4, failed)
        for _ in range(2):
            with pytest.raises(KafkaError):
                progress.acknowledge()
        assert (progress.state.next, progress.state.target_next) == (1, 51)

    asyncio.run(run())


def test_records_found_copied_after_the_save_are_skipped_with_the_target_offset() -> None:
    progress = _Progress(PartitionWindow(0, 0, 20), PartitionState(0, 20, 5, 105), skip=2)
    progress.skip_copied(5)
    progress.skip_copied(7)
    assert (progress.skip, progress.skipped) == (0, 2)
    assert (progress.state.next, progress.state.target_next) == (8, 107)


def _replay() -> ReplayLogProducer:
    return ReplayLogProducer(ReplayOptions("s:1", "t:1", "in", "out"), lambda line: None)


@pytest.mark.parametrize(("target_end", "copied"), [(105, 0), (108, 3), (120, 15)])
def test_resume_counts_the_copies_made_after_the_save(target_end: int, copied: int) -> None:
    progress = _Progress(PartitionWindow(0, 0, 20), PartitionState(0, 20, 5, 105))
    assert _replay()._already_copied(0, progress, target_end) == copied


@pytest.mark.parametrize("target_end", [104, 121])
def test_resume_refuses_an_output_partition_that_does_not_fit_the_state(target_end: int) -> None:
    progress = _Progress(PartitionWindow(0, 0, 20), PartitionState(0, 20, 5, 105))
    with pytest.raises(ReplayError, match="output partition 0"):
        _replay()._already_copied(0, progress, target_end)


def test_records_deleted_from_the_input_before_being_copied_are_reported() -> None:
    lines: list[str] = []
    replay = ReplayLogProducer(ReplayOptions("s:1", "t:1", "in", "out"), lines.append)
    replay.progress[0] = _Progress(PartitionWindow(0, 0, 20), PartitionState(0, 20, 5, 105))
    replay.progress[1] = _Progress(PartitionWindow(1, 0, 20), PartitionState(0, 20, 20, 120))
    assert not replay._deleted(0, 5)
    assert replay._deleted(0, 9)
    assert not replay._deleted(1, 30)  # finished: nothing of its window is missing
    assert lines == [
        "Partition 0: offsets 5 to 8 of in were deleted before they were copied; continuing at offset 9, at least once"
    ]
