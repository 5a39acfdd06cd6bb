"""A broker with two log dirs, one of them on a slow disk: every fsync of a file under it takes 200 ms longer (a
wrapper of ``os.fsync``/``os.fdatasync`` that reads the descriptor's path from /proc/self/fd). While the slow dir's
partition takes a steady stream of records and is flushed after every message (``log.flush.interval.messages=1``)
or every few milliseconds (``log.flush.interval.ms``), produce and fetch requests for a partition on the other dir
are answered well within the 200 ms: flushes must not hold up the broker's request handling.

Placement: a new partition goes to the log dir holding the fewest partitions (the first listed on a tie), so with
both dirs empty the first topic created lands in ``logs-0`` and the second in ``logs-1``; the test checks where
they landed on disk.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from mq.client.connection import BrokerConnection
from mq.client.consumer import fetch_request_body
from mq.protocol.api_keys import ApiKey
from mq.records.default_batch import RecordBatchBuilder
from mq.topic_partition import TopicPartition

DELAY_S = 0.2
REQUESTS = 40
BUDGET_S = 15.0
"""The requests stop after this long even if fewer than REQUESTS were made (a blocked broker takes seconds each)."""
SLOW_FLUSHES = 3
"""Slow flushes that must start while the requests run."""
BOUND_S = DELAY_S / 2
"""The 90th percentile of the other dir's request latencies must stay below half the injected delay: a broker that
waits for the slow flushes while handling requests answers most of them 0-200 ms late."""


class SlowDisk:
    """Wraps ``os.fsync`` and ``os.fdatasync``: a descriptor whose path is under ``directory`` waits ``DELAY_S``
    first. ``calls`` counts those slowed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.directory: str | None = None
        self.calls = 0
        for name in ("fsync", "fdatasync"):
            monkeypatch.setattr(os, name, self._slowed(getattr(os, name)))

    def _slowed(self, real: Callable[[Any], None]) -> Callable[[Any], None]:
        def call(fd: Any) -> None:
            number = fd if isinstance(fd, int) else fd.fileno()
            try:
                path = os.readlink(f"/proc/self/fd/{number}")
            except OSError:
                path = ""
            if self.directory is not None and path.startswith(self.directory + os.sep):
                self.calls += 1
                time.sleep(DELAY_S)
            real(fd)

        return call


def create_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, 1, 1)])
    admin.close()


def log_dir_of(dirs: list[Path], partition: str) -> Path:
    """The log dir that holds the partition's directory (created with the partition)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        holding = [d for d in dirs if (d / partition).is_dir()]
        if holding:
            return holding[0]
        time.sleep(0.05)
    raise AssertionError(f"{partition} is in no log dir")


async def timed_requests(port: int, topic: str, slow_flushes: Callable[[], int]) -> tuple[list[float], list[float]]:
    """Seconds each produce request (acks=1, one record) and fetch request (from offset 0, no wait) for partition 0
    of ``topic`` took: at least REQUESTS of each, and more until ``slow_flushes()`` reaches SLOW_FLUSHES (a window
    with no slow flush in it would prove nothing), within BUDGET_S. Every response must be error-free and every
    fetch must return records."""
    connection = BrokerConnection("127.0.0.1", port)
    produce_times: list[float] = []
    fetch_times: list[float] = []
    fetch = fetch_request_body(
        {TopicPartition(topic, 0): 0}, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, partition_max_bytes=1 << 20
    )
    try:
        await connection.connect()
        deadline = time.monotonic() + BUDGET_S
        i = 0
        while i < REQUESTS or slow_flushes() < SLOW_FLUSHES:
            if time.monotonic() > deadline:
                break
            i += 1
            batch = RecordBatchBuilder()
            batch.append(int(time.time() * 1000), None, b"fast-%d" % i)
            produce = {
                "acks": 1,
                "timeout": 30_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch.build()}]}],
            }
            began = time.perf_counter()
            produced = await connection.send(ApiKey.PRODUCE, produce)
            produce_times.append(time.perf_counter() - began)
            assert [p.error_code for t in produced.responses for p in t.partition_responses] == [0]
            began = time.perf_counter()
            fetched = await connection.send(ApiKey.FETCH, fetch)
            fetch_times.append(time.perf_counter() - began)
            parts = [p for t in fetched.responses for p in t.partitions]
            assert [p.error_code for p in parts] == [0] and parts[0].records
            await asyncio.sleep(0.02)
    finally:
        await connection.close()
    return produce_times, fetch_times


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "flush",
    [
        ["log.flush.interval.messages=1"],
        ["log.flush.interval.ms=10", "log.flush.scheduler.interval.ms=10"],
    ],
    ids=["every-message", "every-10ms"],
)
def test_a_slow_log_dir_does_not_delay_requests_for_the_other(
    in_process_broker: Callable[[list[str]], Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flush: list[str],
) -> None:
    disk = SlowDisk(monkeypatch)
    dirs = [(tmp_path / f"logs-{i}").resolve() for i in range(2)]
    broker = in_process_broker([f"log.dirs={','.join(map(str, dirs))}", *flush])
    create_topic(broker.bootstrap, "slow")
    create_topic(broker.bootstrap, "fast")
    slow_dir, fast_dir = log_dir_of(dirs, "slow-0"), log_dir_of(dirs, "fast-0")
    assert slow_dir != fast_dir, "both partitions are in one log dir"
    disk.directory = str(slow_dir)

    stop = threading.Event()

    def keep_writing_slow() -> None:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=0)
        while not stop.is_set():
            producer.send("slow", b"s" * 100)
            time.sleep(0.005)
        producer.close(timeout=5)

    writer = threading.Thread(target=keep_writing_slow)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while disk.calls < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert disk.calls >= 2, "the slow dir is not being flushed"
        flushed_before = disk.calls
        produce_times, fetch_times = asyncio.run(
            timed_requests(broker.port, "fast", lambda: disk.calls - flushed_before)
        )
        slow_flushes = disk.calls - flushed_before
    finally:
        stop.set()
        writer.join(120)

    assert slow_flushes >= SLOW_FLUSHES, f"only {slow_flushes} slow flushes while the requests ran"
    produce_ms = [round(t * 1000) for t in produce_times]
    fetch_ms = [round(t * 1000) for t in fetch_times]
    assert len(produce_times) >= REQUESTS, f"{len(produce_ms)} produces in {BUDGET_S} s, latencies (ms) {produce_ms}"
    assert p90(produce_times) < BOUND_S, f"produce latencies (ms) on the other dir: {produce_ms}"
    assert p90(fetch_times) < BOUND_S, f"fetch latencies (ms) on the other dir: {fetch_ms}"
