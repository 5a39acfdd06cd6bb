"""Replay windows: bound parsing and per-partition resolution (start inclusive, end exclusive, clamped to the log)."""

from __future__ import annotations

import pytest

from mq.tools.replay import Bound, PartitionWindow, parse_bound, resolve_window


@pytest.mark.parametrize(
    ("text", "is_end", "bound"),
    [
        ("earliest", False, Bound("earliest")),
        ("end", True, Bound("end")),
        ("latest", True, Bound("end")),
        ("none", True, Bound("none")),
        ("42", False, Bound("offset", 42)),
        ("0", True, Bound("offset", 0)),
        ("@1700000000000", True, Bound("time", 1_700_000_000_000)),
        ("2023-11-14T22:13:20Z", False, Bound("time", 1_700_000_000_000)),
        ("2023-11-14T22:13:20", False, Bound("time", 1_700_000_000_000)),
        ("2023-11-14T23:13:20+01:00", True, Bound("time", 1_700_000_000_000)),
        ("2023-11-14T22:13:20.250Z", True, Bound("time", 1_700_000_000_250)),
    ],
)
def test_parse_bound(text: str, is_end: bool, bound: Bound) -> None:
    assert parse_bound(text, is_end=is_end) == bound


@pytest.mark.parametrize(
    ("text", "is_end"),
    [("none", False), ("earliest", True), ("end", False), ("-1", False), ("@x", True), ("soon", True), ("", False)],
)
def test_parse_bound_refuses(text: str, is_end: bool) -> None:
    with pytest.raises(ValueError):
        parse_bound(text, is_end=is_end)


STARTS = {0: 0, 1: 5}
ENDS = {0: 100, 1: 50}


def test_default_window_is_the_whole_log_at_start() -> None:
    assert resolve_window(Bound("earliest"), Bound("end"), STARTS, ENDS) == {
        0: PartitionWindow(0, 0, 100),
        1: PartitionWindow(1, 5, 50),
    }


def test_offsets_apply_to_every_partition_clamped_to_the_log() -> None:
    windows = resolve_window(Bound("offset", 2), Bound("offset", 70), STARTS, ENDS)
    assert windows == {0: PartitionWindow(0, 2, 70), 1: PartitionWindow(1, 5, 50)}


def test_an_end_before_the_start_is_an_empty_window() -> None:
    windows = resolve_window(Bound("offset", 40), Bound("offset", 10), STARTS, ENDS)
    assert windows == {0: PartitionWindow(0, 40, 40), 1: PartitionWindow(1, 40, 40)}


def test_times_resolve_per_partition_and_a_missing_answer_is_the_log_end() -> None:
    windows = resolve_window(
        Bound("time", 1000), Bound("time", 2000), STARTS, ENDS, start_times={0: 10, 1: 7}, end_times={0: 20, 1: -1}
    )
    assert windows == {0: PartitionWindow(0, 10, 20), 1: PartitionWindow(1, 7, 50)}


def test_no_end_follows_the_log() -> None:
    windows = resolve_window(Bound("offset", 3), Bound("none"), STARTS, ENDS)
    assert windows == {0: PartitionWindow(0, 3, None), 1: PartitionWindow(1, 5, None)}
    assert windows[0].contains(10**9)
    assert not windows[0].contains(2)


def test_window_contains_start_but_not_end() -> None:
    window = PartitionWindow(0, 10, 20)
    assert [o for o in range(5, 25) if window.contains(o)] == list(range(10, 20))
