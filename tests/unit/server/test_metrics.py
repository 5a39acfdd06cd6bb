"""The metrics recorders: histogram quantiles and windows, request times, Kafka's request names."""

from __future__ import annotations

from mq.protocol.api_keys import request_name
from mq.server.metrics import (
    BOUNDS_MS,
    MESSAGES_IN,
    QUANTILES,
    SAMPLE_EVERY,
    WINDOW_S,
    BrokerTopicStats,
    Histogram,
    RequestStats,
)


def test_quantiles_are_within_a_bucket_of_the_true_value() -> None:
    histogram = Histogram()
    for ms in range(1, 1001):
        histogram.record(float(ms))
    values = dict(zip((label for label, _ in QUANTILES), histogram.quantiles(histogram.window_start), strict=True))
    for label, q in QUANTILES:
        true = q * 1000
        assert true <= values[label] <= true * 1.2 + 1, label
    assert histogram.count == 1000
    assert histogram.sum == sum(range(1, 1001))


def test_quantiles_forget_samples_two_windows_old_but_count_keeps_them() -> None:
    histogram = Histogram()
    histogram.record(5000.0)
    start = histogram.window_start
    assert histogram.quantiles(start + WINDOW_S)[-1] >= 5000  # the previous window still counts
    histogram.record(1.0)
    assert histogram.quantiles(start + 2 * WINDOW_S)[-1] < 2  # the 5 s sample is two windows old
    assert histogram.count == 2


def test_an_empty_histogram_reports_zeros_and_huge_values_land_in_the_last_bucket() -> None:
    histogram = Histogram()
    assert histogram.quantiles(histogram.window_start) == [0.0] * len(QUANTILES)
    histogram.record(1e9)
    assert histogram.quantiles(histogram.window_start)[0] == BOUNDS_MS[-1]


def test_request_stats_count_every_request_and_time_a_sample() -> None:
    stats = RequestStats()
    timed = [stats.count(0, 9 if i % 2 else 8) for i in range(2 * SAMPLE_EVERY + 1)]
    assert timed == [i % SAMPLE_EVERY == 0 for i in range(2 * SAMPLE_EVERY + 1)]  # the first, then every 8th
    assert stats.apis[0].requests == {8: SAMPLE_EVERY + 1, 9: SAMPLE_EVERY}
    assert stats.apis[0].count == 2 * SAMPLE_EVERY + 1


def test_request_stats_split_a_request_into_kafkas_five_times() -> None:
    stats = RequestStats()
    stats.count(0, 9)
    stats.record(0, received=1.0, started=1.001, handled=1.003, answered=1.010, sent=1.012)
    stats.record(0, received=2.0, started=2.0, handled=2.0, answered=2.0, sent=2.0)
    produce = stats.apis[0]
    assert round(produce.queue.sum, 6) == 1.0
    assert round(produce.local.sum, 6) == 2.0
    assert round(produce.remote.sum, 6) == 7.0
    assert round(produce.send.sum, 6) == 2.0
    assert round(produce.total.sum, 6) == 12.0


def test_request_names_are_kafkas() -> None:
    assert request_name(0) == "Produce"
    assert request_name(1) == "Fetch"
    assert request_name(2) == "ListOffsets"
    assert request_name(8) == "OffsetCommit"
    assert request_name(18) == "ApiVersions"


def test_topic_counters_of_topics_gone_still_count_for_all_topics() -> None:
    stats = BrokerTopicStats()
    stats.of("kept")[MESSAGES_IN] += 3
    stats.of("deleted")[MESSAGES_IN] += 5
    stats.prune({"kept"})
    assert list(stats) == ["kept"]
    assert stats.gone[MESSAGES_IN] == 5
    assert stats.of("kept")[MESSAGES_IN] == 3
