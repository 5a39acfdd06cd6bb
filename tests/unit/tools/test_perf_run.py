"""``mq perf`` run logic without a broker: payloads, join time, progress lines and the consumer's stop rule."""

from __future__ import annotations

import pytest

from mq.tools import perf
from mq.tools.perf import ConsumeProgress, ConsumerRun, JoinTimer, PerfError, random_payloads, split_payloads


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(1000)
    monkeypatch.setattr(perf, "wall_ms", fake)
    return fake


def test_random_payloads_are_upper_case_letters_of_the_size() -> None:
    payloads = random_payloads(50, count=4)
    assert len(payloads) == 4 and len(set(payloads)) == 4
    assert all(len(p) == 50 and p.isalpha() and p.isupper() for p in payloads)
    assert random_payloads(50, count=4) == payloads


def test_payload_file_parts_skip_empty_ones() -> None:
    assert split_payloads(b"a\nbb\n\nccc\n", b"\n") == [b"a", b"bb", b"ccc"]
    with pytest.raises(PerfError):
        split_payloads(b"\n\n", b"\n")


def test_join_time_runs_from_start_or_full_revocation_to_assignment(clock: Clock) -> None:
    timer = JoinTimer(start_ms=1000)
    clock.ms = 1300
    timer.on_assigned([0, 1])
    assert (timer.total_ms, timer.round_ms) == (300, 300)
    clock.ms = 2000
    timer.revoked([0])  # still owns partition 1: not rejoining from nothing
    timer.on_assigned([0])
    assert timer.total_ms == 300
    timer.revoked([0, 1])
    clock.ms = 2250
    timer.on_assigned([2])
    assert timer.total_ms == 550


def run(**given: object) -> ConsumerRun:
    options: dict[str, object] = {"topic": "t", "messages": 10, "group": "g", "fetch_size": 1, "props": {}}
    options.update(given)
    return ConsumerRun(**options)  # type: ignore[arg-type]


def test_progress_prints_detailed_lines_per_interval(clock: Clock) -> None:
    lines: list[str] = []
    progress = ConsumeProgress(run(detailed=True, reporting_interval_ms=1000), 1000, lines.append)
    clock.ms = 1500
    progress.add(4, 400)
    assert lines == []
    clock.ms = 2000
    progress.add(2, 200)
    assert len(lines) == 1
    fields = lines[0].split(", ")
    assert fields[1:6] == ["0", f"{600 / 1024 / 1024:.4f}", f"{600 / 1024 / 1024:.4f}", "6", "6.0000"]
    assert not progress.finished()


def test_progress_without_detailed_stats_prints_nothing(clock: Clock) -> None:
    lines: list[str] = []
    progress = ConsumeProgress(run(reporting_interval_ms=1), 1000, lines.append)
    clock.ms = 5000
    progress.add(3, 30)
    assert lines == []


def test_consumer_stops_at_the_message_count_or_after_the_timeout(clock: Clock) -> None:
    progress = ConsumeProgress(run(messages=10, timeout_ms=500), 1000, lambda _line: None)
    clock.ms = 1400
    progress.add(0, 0)
    assert not progress.finished()
    clock.ms = 1501
    assert progress.finished()
    progress = ConsumeProgress(run(messages=10, timeout_ms=500), 1000, lambda _line: None)
    progress.add(12, 120)
    assert progress.finished()


def test_message_bytes_counts_keys_and_values_of_librdkafka_messages() -> None:
    from confluent_kafka import Message

    messages = [Message(value=b"abc", key=b"k"), Message(value=None, key=b"kk"), Message(value=b"12345")]
    assert perf.message_bytes(messages) == 3 + 1 + 2 + 5
    assert perf.message_bytes([]) == 0


def test_librdkafka_settings_drop_java_only_keys_and_override_the_defaults() -> None:
    props = {"fetch.queue.backoff.ms": "5", "value.deserializer": "ByteArrayDeserializer", "bootstrap.servers": "h:1"}
    config = perf._confluent_config(props, perf.CONFLUENT_CONSUMER_DEFAULTS)
    assert config == {"client.id": "perf-consumer-client", "fetch.queue.backoff.ms": "5", "bootstrap.servers": "h:1"}
    assert perf._confluent_config({}, perf.CONFLUENT_CONSUMER_DEFAULTS)["fetch.queue.backoff.ms"] == "0"
