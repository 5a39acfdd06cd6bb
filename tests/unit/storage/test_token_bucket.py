"""The token bucket (the cleaner's I/O limit, the replay's and perf's rates), driven by a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.storage.token_bucket import TokenBucket, default_burst


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_burst_is_free_then_each_record_costs_one_over_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(10, burst=2, clock=clock)
    assert bucket.reserve(2) == 0
    assert bucket.reserve(1) == pytest.approx(0.1)
    assert bucket.reserve(3) == pytest.approx(0.4)  # waits behind the earlier debt


def test_tokens_refill_with_time_up_to_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(100, burst=5, clock=clock)
    assert bucket.reserve(5) == 0
    clock.now += 0.03
    assert bucket.reserve(3) == 0
    clock.now += 10  # a long pause refills only the burst
    assert bucket.reserve(5) == 0
    assert bucket.reserve(1) == pytest.approx(0.01)


def test_default_burst_is_a_tenth_of_a_second() -> None:
    assert default_burst(1000) == 100
    assert default_burst(15) == 2
    assert default_burst(0.5) == 1


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0)


@given(
    rate=st.floats(min_value=1, max_value=10_000),
    chunks=st.lists(st.integers(min_value=1, max_value=500), min_size=1, max_size=50),
    pauses=st.lists(st.floats(min_value=0, max_value=0.5), min_size=50, max_size=50),
)
def test_records_used_never_exceed_burst_plus_rate_times_elapsed(
    rate: float, chunks: list[int], pauses: list[float]
) -> None:
    """A taker that sleeps as told (plus arbitrary pauses) never gets ahead of burst + rate * elapsed."""
    clock = Clock()
    start = clock.now
    bucket = TokenBucket(rate, clock=clock)
    used = 0
    for chunk, pause in zip(chunks, pauses, strict=False):
        clock.now += pause
        clock.now += bucket.reserve(chunk)
        used += chunk
        assert used <= bucket.burst + rate * (clock.now - start) + 1e-6 * used


def test_a_continuous_taker_gets_the_rate() -> None:
    """Reserving 1000 records in chunks of 10 without pauses takes (1000 - burst) / rate seconds."""
    clock = Clock()
    start = clock.now
    bucket = TokenBucket(200, clock=clock)
    for _ in range(100):
        clock.now += bucket.reserve(10)
    assert clock.now - start == pytest.approx((1000 - bucket.burst) / 200)
