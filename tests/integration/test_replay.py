"""mq replay-log-producer between two standalone brokers, driven and checked with kafka-python."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.partitioner.default import murmur2

from tests.integration.conftest import BrokerProcess
from tests.integration.test_mirror_exactly_once import read_committed
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.slow

T0 = (int(time.time()) - 3600) * 1000
"""Record timestamps start an hour ago: recent enough that retention (7 days) keeps them."""
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]


def _brokers(broker_factory: Callable[..., BrokerProcess]) -> tuple[BrokerProcess, BrokerProcess]:
    return broker_factory("source").start(), broker_factory("target").start()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """Record i: partition i % partitions, key k<i>, value v<i>, a header i=<i>, timestamp T0 + i seconds."""
    _create(bootstrap, topic, partitions)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(count):
        producer.send(
            topic,
            value=f"v{i}".encode(),
            key=f"k{i}".encode(),
            headers=[("i", str(i).encode())],
            partition=i % partitions,
            timestamp_ms=T0 + i * 1000,
        )
    producer.flush()
    producer.close()


def _read(bootstrap: str, topic: str) -> dict[int, list[tuple[int, Record]]]:
    """Every record of ``topic`` per partition as (offset, (key, value, headers, timestamp))."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        found: dict[int, list[tuple[int, Record]]] = {tp.partition: [] for tp in tps}
        deadline = time.monotonic() + 20
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    found[tp.partition].append((r.offset, (r.key, r.value, list(r.headers), r.timestamp)))
        return found
    finally:
        consumer.close()


def _replay(mq_command: list[str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mq_command, "replay-log-producer", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def _copies(found: dict[int, list[tuple[int, Record]]]) -> dict[int, list[Record]]:
    return {p: [record for _, record in records] for p, records in found.items()}


def test_offset_window_copies_exactly_those_records(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    source, target = _brokers(broker_factory)
    _produce(source.bootstrap, "events", 3, 60)
    result = _replay(
        mq_command,
        tmp_path,
        *("--broker-list", source.bootstrap, "--target-bootstrap-server", target.bootstrap),
        *("--inputtopic", "events", "--outputtopic", "copy", "--from", "5", "--to", "15", "--format", "text"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Sent 30 messages"
    wanted = {
        p: [record for offset, record in rs if 5 <= offset < 15] for p, rs in _read(source.bootstrap, "events").items()
    }
    assert all(len(records) == 10 for records in wanted.values())
    assert _copies(_read(target.bootstrap, "copy")) == wanted
    state = json.loads((tmp_path / "replay-events-copy.json").read_text())
    assert {p: (s["start"], s["end"], s["next"]) for p, s in state["partitions"].items()} == {
        str(p): (5, 15, 15) for p in range(3)
    }


def test_time_window_copies_exactly_those_records_and_places_extra_partitions_by_key(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    source, target = _brokers(broker_factory)
    _produce(source.bootstrap, "events", 3, 60)
    _create(target.bootstrap, "copy", 2)
    start = datetime.fromtimestamp(T0 / 1000 + 10, UTC).isoformat()  # an ISO-8601 time: T0 + 10 s
    end = f"@{T0 + 40_000}"
    result = _replay(
        mq_command,
        tmp_path,
        *("--bootstrap-server", source.bootstrap, "--target-bootstrap-server", target.bootstrap),
        *("--inputtopic", "events", "--outputtopic", "copy", "--from", start, "--to", end, "--format", "json"),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["records"] == 30
    assert not summary["exactly_once"]
    in_window = {
        p: [r for _, r in rs if T0 + 10_000 <= r[3] < T0 + 40_000]
        for p, rs in _read(source.bootstrap, "events").items()
    }
    expected: dict[int, list[Record]] = {0: [], 1: []}
    for p, records in in_window.items():
        for r in records:
            assert r[0] is not None
            expected[p if p < 2 else (murmur2(r[0]) & 0x7FFFFFFF) % 2].append(r)
    copied = _copies(_read(target.bootstrap, "copy"))
    assert sum(map(len, copied.values())) == 30
    for out in (0, 1):  # each input partition's records arrive in their order
        for p in range(3):
            assert [r for r in copied[out] if _source(r) == p] == [r for r in expected[out] if _source(r) == p]


def _source(record: Record) -> int:
    """The input partition of a record copied from ``_produce``'s topic of 3 partitions."""
    return int(dict(record[2])["i"]) % 3


def test_rate_limit_holds(mq_command: list[str], broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    """The limiter's achieved rate is the behaviour under test: over a run of about 3.5 s it stays within 10% above
    the limit (measured on the command's own clock and, more conservatively, on the wall clock around it); the lower
    bound is loose."""
    source, target = _brokers(broker_factory)
    _produce(source.bootstrap, "events", 2, 350)
    began = time.monotonic()
    result = _replay(
        mq_command,
        tmp_path,
        *("--broker-list", source.bootstrap, "--target-bootstrap-server", target.bootstrap),
        *("--inputtopic", "events", "--outputtopic", "copy", "--rate", "100", "--format", "json"),
    )
    wall = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["records"] == 350
    assert 350 / wall <= 110
    assert 40 <= summary["records"] / summary["elapsed_s"] <= 110
    assert sum(len(rs) for rs in _read(target.bootstrap, "copy").values()) == 350


def test_stop_kill_and_resume_copy_every_record_exactly_once(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """SIGTERM stops a replay cleanly: it exits 1 with a state exactly matching the target. After kill -9 the state
    is behind the target; partitions map one to one, so the resumed run skips the copies the target holds beyond
    the saved state (the output partition's end minus the saved target offset): every record of the window arrives
    exactly once, in order."""
    source, target = _brokers(broker_factory)
    _produce(source.bootstrap, "events", 2, 600)
    state_file = tmp_path / "state.json"
    args = [
        *("--broker-list", source.bootstrap, "--target-bootstrap-server", target.bootstrap),
        *("--inputtopic", "events", "--outputtopic", "copy", "--state-file", str(state_file), "--format", "json"),
    ]

    def saved() -> dict[str, Any]:
        return json.loads(state_file.read_text())["partitions"] if state_file.exists() else {}

    def progress() -> int:
        return sum(s["next"] - s["start"] for s in saved().values())

    def copied() -> dict[int, int]:
        return {p: len(rs) for p, rs in _read(target.bootstrap, "copy").items()}

    def run_until(command: list[str], records: int, signum: int) -> subprocess.Popen[str]:
        running = subprocess.Popen(
            [*mq_command, "replay-log-producer", *command], cwd=tmp_path, stdout=subprocess.PIPE, text=True
        )
        try:
            assert wait_for(lambda: progress() >= records, timeout=20)
        finally:
            running.send_signal(signum)
            running.wait(10)
        return running

    stopped = run_until([*args, "--rate", "150"], 60, signal.SIGTERM)
    assert stopped.returncode == 1
    at_stop = saved()
    assert {int(p): s["next"] for p, s in at_stop.items()} == copied()
    assert all(s["target_next"] == s["next"] for s in at_stop.values())

    run_until([*args, "--rate", "150", "--resume"], sum(copied().values()) + 100, signal.SIGKILL)
    at_kill = progress()
    copied_before = sum(copied().values())
    assert at_kill <= copied_before < 600

    resumed = _replay(mq_command, tmp_path, *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert sum(p["skipped"] for p in summary["partitions"]) == copied_before - at_kill
    assert summary["records"] == 600 - copied_before
    assert _copies(_read(target.bootstrap, "copy")) == _copies(_read(source.bootstrap, "events"))


def test_zookeeper_names_the_source_and_broker_list_the_target(
    mq_command: list[str], zookeeper: Any, broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """Kafka's invocation: the source cluster's ZooKeeper and the target's --broker-list."""
    source = broker_factory("source", [f"zookeeper.connect={zookeeper.connect}/mq-replay", "broker.id=3"]).start()
    target = broker_factory("target").start()
    _produce(source.bootstrap, "events", 1, 20)
    result = _replay(
        mq_command,
        tmp_path,
        *("--zookeeper", f"{zookeeper.connect}/mq-replay", "--broker-list", target.bootstrap),
        *("--inputtopic", "events", "--outputtopic", "events", "--format", "text"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Sent 20 messages"
    assert _copies(_read(target.bootstrap, "events")) == _copies(_read(source.bootstrap, "events"))
    source.kill()  # its clean shutdown in ZooKeeper mode is not under test here


def _read_committed_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value a read_committed consumer reads from ``topic``'s 2 partitions up to their last stable offsets."""
    return [value for _, _, value in read_committed(bootstrap, topic, 2)]


def test_exactly_once_by_key_across_kill_9_and_resume(
    mq_command: list[str], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """--exactly-once with a mapping that is not one to one (3 input partitions, 2 output partitions: partition 2's
    records placed by key): kill -9 twice mid-way, then --resume; a read_committed consumer of the output reads every
    record of the window exactly once."""
    source, target = _brokers(broker_factory)
    _produce(source.bootstrap, "events", 3, 900)
    _create(target.bootstrap, "copy", 2)
    state_file = tmp_path / "state.json"
    args = [
        *("--broker-list", source.bootstrap, "--target-bootstrap-server", target.bootstrap, "--exactly-once"),
        *("--inputtopic", "events", "--outputtopic", "copy", "--state-file", str(state_file), "--format", "json"),
    ]
    for resume in ([], ["--resume"]):
        before = len(_read_committed_values(target.bootstrap, "copy")) if resume else 0
        running = subprocess.Popen(  # 30 records/s: the 900 take 30 s, so each kill comes mid-way, even under load
            [*mq_command, "replay-log-producer", *args, "--rate", "30", *resume],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:  # killed after some transactions committed, with one open
            wanted = before + 100
            assert wait_for(lambda n=wanted: len(_read_committed_values(target.bootstrap, "copy")) >= n, timeout=30)
            time.sleep(0.5)
        finally:
            running.kill()
            _, err = running.communicate(10)
        assert running.returncode == -signal.SIGKILL, err
    uncommitted = sum(len(rs) for rs in _read(target.bootstrap, "copy").values())
    resumed = _replay(mq_command, tmp_path, *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["exactly_once"] is True
    values = _read_committed_values(target.bootstrap, "copy")
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(900))
    assert uncommitted > len(values) - json.loads(resumed.stdout)["records"]  # the kills left aborted copies behind
