"""The report math and line formats of ``mq perf producer`` and ``mq perf consumer`` (Kafka's perf tools).

Pure: no I/O, no clients. Times are integer milliseconds as the caller measures them; a megabyte is 1024 * 1024
bytes, as Kafka's tools count it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mq.storage.token_bucket import TokenBucket

MB = 1024 * 1024
REPORTING_INTERVAL_MS = 5000
"""The producer tool's window: a progress line once a completion arrives this long after the window began."""
MAX_LATENCY_SAMPLES = 500_000
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
MIN_SLEEP_S = 0.002

CONSUMER_HEADER_FIELDS = "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
CONSUMER_FETCH_FIELDS = "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"


def parse_props(pairs: Iterable[str]) -> dict[str, str]:
    """``k=v`` strings as a dict; raises ValueError naming a pair that is not exactly one key and one value."""
    props: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or "=" in value:
            raise ValueError(f"Invalid property: {pair}")
        props[key] = value
    return props


def percentiles(samples: list[int], *fractions: float) -> list[int]:
    """The sample at index ``int(fraction * len)`` of the sorted samples, for each fraction (Kafka's method)."""
    ordered = sorted(samples)
    if not ordered:
        return [0 for _ in fractions]
    return [ordered[int(fraction * len(ordered))] for fraction in fractions]


def sampling_interval(num_records: int) -> int:
    """Every how many completions one latency is kept: at most MAX_LATENCY_SAMPLES samples in all."""
    return max(1, num_records // min(num_records, MAX_LATENCY_SAMPLES)) if num_records > 0 else 1


def rate(amount: float, elapsed_ms: float) -> float:
    """``amount`` per second over ``elapsed_ms``; 0 when no time passed (where Java would print Infinity or NaN)."""
    return 1000.0 * amount / elapsed_ms if elapsed_ms > 0 else 0.0


@dataclass
class ProducerStats:
    """Completions of ``mq perf producer``: totals, the current window, and sampled latencies.

    ``record`` returns a progress line when the window reached REPORTING_INTERVAL_MS, then starts a new window."""

    num_records: int
    start_ms: int
    interval_ms: int = REPORTING_INTERVAL_MS
    count: int = 0
    bytes: int = 0
    total_latency: int = 0
    max_latency: int = 0
    samples: list[int] = field(default_factory=list)
    window_start_ms: int = -1
    window_count: int = 0
    window_bytes: int = 0
    window_latency: int = 0
    window_max_latency: int = 0
    _iteration: int = 0
    _sampling: int = 1

    def __post_init__(self) -> None:
        self._sampling = sampling_interval(self.num_records)
        if self.window_start_ms < 0:
            self.window_start_ms = self.start_ms

    def record(self, latency_ms: int, size: int, now_ms: int) -> str | None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_latency += latency_ms
        self.window_max_latency = max(self.window_max_latency, latency_ms)
        if self._iteration % self._sampling == 0:
            self.samples.append(latency_ms)
        self._iteration += 1
        if now_ms - self.window_start_ms < self.interval_ms:
            return None
        line = self.window_line(now_ms)
        self.window_start_ms = now_ms
        self.window_count = self.window_bytes = self.window_latency = self.window_max_latency = 0
        return line

    def window_line(self, now_ms: int) -> str:
        """``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.``"""
        elapsed = now_ms - self.window_start_ms
        average = self.window_latency / self.window_count if self.window_count else 0.0
        return (
            f"{self.window_count} records sent, {rate(self.window_count, elapsed):.1f} records/sec "
            f"({rate(self.window_bytes, elapsed) / MB:.2f} MB/sec), {average:.1f} ms avg latency, "
            f"{float(self.window_max_latency):.1f} ms max latency."
        )

    def total_line(self, now_ms: int) -> str:
        """The final summary with the 50th, 95th, 99th and 99.9th latency percentiles of the samples."""
        elapsed = now_ms - self.start_ms
        average = self.total_latency / self.count if self.count else 0.0
        p50, p95, p99, p999 = percentiles(self.samples, *PERCENTILES)
        return (
            f"{self.count} records sent, {rate(self.count, elapsed):f} records/sec "
            f"({rate(self.bytes, elapsed) / MB:.2f} MB/sec), {average:.2f} ms avg latency, "
            f"{float(self.max_latency):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, "
            f"{p999} ms 99.9th."
        )


def send_pacer(per_second: float, clock: Callable[[], float] = time.monotonic) -> Callable[[], float]:
    """Seconds to wait before each send so that sends keep to about ``per_second`` a second from the pacer's creation
    (negative: unlimited; 0: nothing is sent, the wait is infinite): a token bucket with no cap on saved tokens,
    starting with one. Waits below ``MIN_SLEEP_S`` are skipped and their debt carried to the next send, as sleeping
    in tiny slices is imprecise."""
    if per_second < 0:
        return lambda: 0.0
    if per_second == 0:
        return lambda: math.inf
    bucket = TokenBucket(per_second, math.inf, initial=1, clock=clock)

    def delay() -> float:
        wait = bucket.reserve(1)
        return wait if wait >= MIN_SLEEP_S else 0.0

    return delay


def kafka_time(ms: int) -> str:
    """Local time as Kafka's perf tools print it by default (``yyyy-MM-dd HH:mm:ss:SSS``)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f":{ms % 1000:03d}"


def consumer_header(detailed: bool) -> str:
    first = "time, threadId" if detailed else "start.time, end.time"
    return f"{first}, {CONSUMER_HEADER_FIELDS}, {CONSUMER_FETCH_FIELDS}"


@dataclass(frozen=True)
class ConsumerTotals:
    start_ms: int
    end_ms: int
    bytes: int
    messages: int
    rebalance_ms: int


def consumer_summary(totals: ConsumerTotals, format_time: Callable[[int], str] = kafka_time) -> str:
    """The final line under ``consumer_header(False)``; fetch rates exclude the time spent joining the group."""
    elapsed = totals.end_ms - totals.start_ms
    fetch_ms = elapsed - totals.rebalance_ms
    megabytes = totals.bytes / MB
    return (
        f"{format_time(totals.start_ms)}, {format_time(totals.end_ms)}, {megabytes:.4f}, "
        f"{rate(megabytes, elapsed):.4f}, {totals.messages}, {rate(totals.messages, elapsed):.4f}, "
        f"{totals.rebalance_ms}, {fetch_ms}, {rate(megabytes, fetch_ms):.4f}, "
        f"{rate(totals.messages, fetch_ms):.4f}"
    )


def consumer_progress(
    previous: ConsumerTotals, current: ConsumerTotals, format_time: Callable[[int], str] = kafka_time
) -> str:
    """One ``--show-detailed-stats`` line for the interval from ``previous.end_ms`` to ``current.end_ms``;
    ``current.rebalance_ms`` is the join time within that interval."""
    elapsed = current.end_ms - previous.end_ms
    fetch_ms = elapsed - current.rebalance_ms
    megabytes = (current.bytes - previous.bytes) / MB
    messages = current.messages - previous.messages
    return (
        f"{format_time(current.end_ms)}, 0, {current.bytes / MB:.4f}, {rate(megabytes, elapsed):.4f}, "
        f"{current.messages}, {rate(messages, elapsed):.4f}, {current.rebalance_ms}, {fetch_ms}, "
        f"{rate(megabytes, fetch_ms):.4f}, "
        f"{rate(messages, fetch_ms):.4f}"
    )


def props_without(props: Mapping[str, str], keys: Iterable[str]) -> dict[str, str]:
    """A copy of ``props`` without ``keys``."""
    dropped = set(keys)
    return {key: value for key, value in props.items() if key not in dropped}
