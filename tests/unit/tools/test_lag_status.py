from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.tools.lag_status import Sample, Status, evaluate, lag


def s(committed: int | None, end: int, start: int = 0, owned: bool = True) -> Sample:
    return Sample(committed, start, end, owned)


@pytest.mark.parametrize(
    ("committed", "start", "end", "expected"),
    [
        (None, 0, 10, None),
        (4, 0, 10, 6),
        (10, 0, 10, 0),
        (12, 0, 10, 0),  # committed beyond a truncated log end: never negative
        (2, 5, 10, 5),  # retention deleted records the group never read: only what is left counts
        (0, 0, 0, 0),
    ],
)
def test_lag_is_clamped(committed: int | None, start: int, end: int, expected: int | None) -> None:
    assert lag(committed, start, end) == expected


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError):
        evaluate([])


def test_never_committed_is_err() -> None:
    assert evaluate([s(None, 10), s(None, 12)]) is Status.ERR


def test_commit_seen_in_any_sample_is_not_err() -> None:
    assert evaluate([s(None, 10), s(10, 10)]) is Status.OK


def test_committed_behind_log_start_is_err() -> None:
    assert evaluate([s(3, 10, start=5)]) is Status.ERR


def test_committed_at_log_start_is_fine() -> None:
    assert evaluate([s(5, 5, start=5)]) is Status.OK


def test_zero_lag_is_ok_even_without_owner_or_progress() -> None:
    assert evaluate([s(10, 10, owned=False), s(10, 10, owned=False)]) is Status.OK


def test_zero_lag_after_compaction_past_the_commit_is_ok() -> None:
    assert evaluate([s(15, 12, start=0)]) is Status.OK


def test_stop_when_no_owner_and_offset_frozen_with_lag() -> None:
    assert evaluate([s(4, 10, owned=False), s(4, 12, owned=False)]) is Status.STOP


def test_stop_from_a_single_sample_without_owner() -> None:
    assert evaluate([s(4, 10, owned=False)]) is Status.STOP


def test_stall_when_owned_and_offset_frozen_with_lag() -> None:
    assert evaluate([s(4, 10), s(4, 10), s(4, 11)]) is Status.STALL


def test_single_owned_sample_with_lag_cannot_stall() -> None:
    assert evaluate([s(4, 10)]) is Status.OK


def test_warn_when_lag_grows_while_committing() -> None:
    assert evaluate([s(4, 10), s(6, 14), s(8, 20)]) is Status.WARN


def test_warn_allows_equal_steps_if_lag_grew_overall() -> None:
    assert evaluate([s(4, 10), s(6, 12), s(8, 16)]) is Status.WARN


def test_ok_when_lag_shrinks_at_some_step() -> None:
    assert evaluate([s(4, 10), s(6, 14), s(12, 15)]) is Status.OK


def test_ok_when_lag_constant_while_committing() -> None:
    assert evaluate([s(4, 10), s(6, 12), s(8, 14)]) is Status.OK


def test_moving_offsets_without_owner_are_not_stop() -> None:
    assert evaluate([s(4, 10, owned=False), s(8, 12, owned=False)]) is Status.OK


def test_reset_backwards_counts_as_movement() -> None:
    assert evaluate([s(8, 10), s(2, 10)]) is Status.WARN


def test_lag_growth_from_retention_moving_start_is_not_negative() -> None:
    # start overtakes the committed offset: ERR, never a negative lag
    assert evaluate([s(4, 10, start=0), s(4, 12, start=6)]) is Status.ERR


def test_uncommitted_samples_are_skipped_for_movement() -> None:
    assert evaluate([s(None, 8), s(4, 10), s(4, 11)]) is Status.STALL


offsets = st.integers(min_value=0, max_value=1000)
samples = st.lists(
    st.builds(
        lambda committed, start, length, owned: Sample(committed, start, start + length, owned),
        st.none() | offsets,
        offsets,
        offsets,
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


@given(st.none() | offsets, offsets, offsets)
def test_lag_is_never_negative_nor_more_than_the_log_holds(committed: int | None, start: int, length: int) -> None:
    found = lag(committed, start, start + length)
    assert found is None if committed is None else 0 <= found <= length


@given(samples)
def test_every_window_gets_a_status_consistent_with_its_newest_commit(window: list[Sample]) -> None:
    status = evaluate(window)
    committed = [s for s in window if s.committed_offset is not None]
    if not committed:
        assert status is Status.ERR
        return
    newest = committed[-1]
    assert newest.committed_offset is not None
    behind_start = newest.committed_offset < newest.log_start_offset
    assert (status is Status.ERR) == behind_start
    if not behind_start and newest.committed_offset >= newest.log_end_offset:
        assert status is Status.OK
