"""Report math of ``mq perf``: Kafka's percentiles, windowed rates, MB of 1024 * 1024 bytes, line formats."""

from __future__ import annotations

import re

import pytest

from mq.tools.perf_stats import (
    ConsumerTotals,
    ProducerStats,
    consumer_header,
    consumer_progress,
    consumer_summary,
    parse_props,
    percentiles,
    sampling_interval,
    send_pacer,
)

FINAL = re.compile(
    r"^\d+ records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg latency, "
    r"\d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def test_parse_props_accepts_key_value_pairs() -> None:
    assert parse_props(["acks=all", "bootstrap.servers=h:1,h:2", "client.id="]) == {
        "acks": "all",
        "bootstrap.servers": "h:1,h:2",
        "client.id": "",
    }


@pytest.mark.parametrize("bad", ["acks", "=1", "a=b=c"])
def test_parse_props_rejects_anything_but_one_key_and_one_value(bad: str) -> None:
    with pytest.raises(ValueError, match=f"Invalid property: {re.escape(bad)}"):
        parse_props([bad])


def test_percentiles_take_the_sorted_sample_at_the_truncated_index() -> None:
    samples = [10 - i for i in range(10)]  # 10..1, unsorted
    assert percentiles(samples, 0.5, 0.95, 0.99, 0.999) == [6, 10, 10, 10]
    assert percentiles(list(range(1000)), 0.5, 0.95, 0.99, 0.999) == [500, 950, 990, 999]
    assert percentiles([], 0.5) == [0]


def test_latency_sampling_keeps_at_most_half_a_million_samples() -> None:
    assert sampling_interval(1000) == 1
    assert sampling_interval(1_000_000) == 2
    stats = ProducerStats(1_000_000, start_ms=0)
    for i in range(10):
        stats.record(i, 1, 0)
    assert stats.samples == [0, 2, 4, 6, 8]


def test_window_line_after_the_interval_then_a_new_window() -> None:
    stats = ProducerStats(100, start_ms=1000)
    assert stats.record(3, 1024 * 1024, 2000) is None
    line = stats.record(7, 1024 * 1024, 6000)
    # 2 records and 2 MiB over 5 s
    assert line == "2 records sent, 0.4 records/sec (0.40 MB/sec), 5.0 ms avg latency, 7.0 ms max latency."
    assert (stats.window_count, stats.window_start_ms) == (0, 6000)
    assert stats.record(1, 10, 7000) is None
    assert stats.window_line(8000).startswith("1 records sent, 0.5 records/sec")  # over 2 s


def test_total_line_has_kafkas_shape_and_figures() -> None:
    stats = ProducerStats(4, start_ms=0)
    for latency in (4, 1, 3, 2):
        stats.record(latency, 512 * 1024, 10)
    line = stats.total_line(2000)
    assert FINAL.match(line), line
    assert line == (
        "4 records sent, 2.000000 records/sec (1.00 MB/sec), 2.50 ms avg latency, 4.00 ms max latency, "
        "3 ms 50th, 4 ms 95th, 4 ms 99th, 4 ms 99.9th."
    )


def test_sends_are_paced_from_the_first_and_short_waits_carry_over() -> None:
    now = [0.0]
    pace = send_pacer(100, clock=lambda: now[0])
    sent_at = []
    for _ in range(5):
        now[0] += pace()
        sent_at.append(now[0])
    assert sent_at == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04])  # each record due 10 ms after the one before
    now[0] += 1.0  # a stalled sender catches up without waiting
    assert [pace() for _ in range(100)] == [0.0] * 100
    assert pace() > 0
    fast = send_pacer(1000, clock=lambda: now[0])
    assert fast() == 0  # the first record is due at once
    assert fast() == 0  # 1 ms early: below the shortest sleep, carried over
    assert fast() == pytest.approx(0.002)
    assert send_pacer(-1)() == 0
    assert send_pacer(0)() == float("inf")


def test_consumer_header_and_summary() -> None:
    assert consumer_header(False) == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    assert consumer_header(True).startswith("time, threadId, data.consumed.in.MB")
    totals = ConsumerTotals(start_ms=0, end_ms=4000, bytes=8 * 1024 * 1024, messages=1000, rebalance_ms=2000)
    line = consumer_summary(totals, format_time=str)
    assert line == "0, 4000, 8.0000, 2.0000, 1000, 250.0000, 2000, 2000, 4.0000, 500.0000"


def test_consumer_progress_covers_the_interval_only() -> None:
    previous = ConsumerTotals(0, 1000, 1024 * 1024, 100, 0)
    current = ConsumerTotals(0, 3000, 3 * 1024 * 1024, 300, 1000)
    line = consumer_progress(previous, current, format_time=str)
    assert line == "3000, 0, 3.0000, 1.0000, 300, 100.0000, 1000, 1000, 2.0000, 200.0000"
    stalled = ConsumerTotals(0, 1000, 1024 * 1024, 100, 0)
    assert consumer_progress(previous, stalled, format_time=str).endswith(", 0, 0, 0.0000, 0.0000")
