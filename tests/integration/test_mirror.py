"""mq mirror between two broker processes: everything arrives in order, a kill -9 re-sends but never skips, source
gaps are reported and counted, --check finds a target that lacks a record."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from mq.client.admin import AsyncAdmin
from mq.client.consumer import AsyncConsumer
from mq.client.sync import SyncAdmin
from mq.records.batch_header import Codec
from mq.topic_partition import TopicPartition as MqTopicPartition

pytestmark = pytest.mark.slow

KEYS = 50
Record = tuple[int, bytes, bytes, list[tuple[str, bytes]], int]
"""partition, key, value, headers, timestamp"""


def start_brokers(broker_factory: Callable[..., Any]) -> tuple[Any, Any]:
    """Source and target brokers; short group sessions let a restarted mirror take over its partitions quickly."""
    overrides = ["group.min.session.timeout.ms=1000"]
    return broker_factory("source", overrides).start(), broker_factory("target", overrides).start()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, start: int = 0, **config: Any) -> None:
    """Keyed records ``key-K`` with value ``key-K:<sequence of that key>``, two headers and a set timestamp."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all", **config})
    for i in range(start, start + count):
        key = b"key-%d" % (i % KEYS)
        headers = [("seq", b"%d" % i), ("origin", b"source")]
        while True:
            try:
                producer.produce(
                    topic, b"%s:%d" % (key, i // KEYS), key, headers=headers, timestamp=1_600_000_000_000 + i
                )
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, topic: str, partitions: int) -> list[Record]:
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list[Record] = []
    done = {p for p in range(partitions) if ends[p] == 0}
    while len(done) < partitions:
        for m in consumer.consume(10_000, timeout=5):
            assert m.error() is None, m.error()
            records.append((m.partition(), m.key(), m.value(), m.headers() or [], m.timestamp()[1]))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    consumer.close()
    return records


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def settled_end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """End offsets once two reads 0.3 s apart agree (requests a killed client sent have been handled)."""
    previous = end_offsets(bootstrap, topic, partitions)
    while True:
        time.sleep(0.3)
        current = end_offsets(bootstrap, topic, partitions)
        if current == previous:
            return current
        previous = current


def target_count(bootstrap: str, topic: str, partitions: int) -> int:
    try:
        return sum(end_offsets(bootstrap, topic, partitions))
    except Exception:  # the mirror has not created the topic yet
        return 0


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in found]
    finally:
        consumer.close()


class Mirror:
    """``mq mirror`` as a subprocess with consumer and producer properties files."""

    made: list[Mirror] = []

    def __init__(
        self,
        mq_command: list[str],
        tmp: Path,
        source: str,
        target: str,
        topic: str,
        *extra: str,
        producer_properties: str = "linger.ms=5\nbatch.size=131072\n",
    ) -> None:
        consumer = tmp / "consumer.properties"
        consumer.write_text(
            f"bootstrap.servers={source}\ngroup.id=mirror\nauto.offset.reset=earliest\nsession.timeout.ms=2000\n"
            "heartbeat.interval.ms=300\nmax.poll.records=5000\nmetadata.max.age.ms=1000\n"
        )
        producer = tmp / "producer.properties"
        producer.write_text(f"bootstrap.servers={target}\n{producer_properties}")
        self.command = [*mq_command, "mirror", "--consumer.config", str(consumer), "--producer.config", str(producer)]
        self.check_command = [*self.command, "--check", "--whitelist", topic]
        self.command += ["--whitelist", topic, *extra]
        self.process: subprocess.Popen[str] | None = None
        self.env = {**os.environ, "PYTHONPATH": str(tmp)}
        Mirror.made.append(self)

    def start(self) -> Mirror:
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env
        )
        return self

    def running(self) -> bool:
        assert self.process is not None
        return self.process.poll() is None

    def stop(self) -> tuple[int, str]:
        """SIGTERM; returns the exit code and stderr."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.communicate(timeout=30)

    def check(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.check_command, capture_output=True, text=True, timeout=120)


@pytest.fixture(autouse=True)
def no_mirror_left_behind() -> Iterator[None]:
    yield
    for mirror in Mirror.made:
        if mirror.process is not None and mirror.process.poll() is None:
            mirror.kill()
    Mirror.made.clear()


def wait_mirrored(condition: Callable[[], bool], mirror: Mirror, timeout: float = 60) -> None:
    def done() -> bool:
        assert mirror.running(), mirror.stop()[1]
        return condition()

    assert wait_for(done, timeout, interval=0.2)


def sequences(records: list[Record]) -> dict[bytes, list[int]]:
    by_key: dict[bytes, list[int]] = defaultdict(list)
    for _, key, value, _, _ in records:
        by_key[key].append(int(value.rsplit(b":", 1)[1]))
    return by_key


def test_every_record_is_mirrored_in_order_and_check_finds_a_missing_record(
    mq_command: list[str], broker_factory, tmp_path: Path
) -> None:
    source, target = start_brokers(broker_factory)
    create_topic(source.bootstrap, "orders", 3)
    produce(source.bootstrap, "orders", 100_000)
    mirror = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "orders").start()
    wait_mirrored(lambda: target_count(target.bootstrap, "orders", 3) >= 100_000, mirror)
    code, err = mirror.stop()
    assert code == 0, err
    summary = err.splitlines()[-1]  # before it, at most a warning of a retry on a loaded machine
    assert summary.startswith("Mirrored 100000 records") and "gaps: 0;" in summary, err
    assert "\r" not in err  # no progress display when stderr is not a terminal

    source_records = read_all(source.bootstrap, "orders", 3)
    target_records = read_all(target.bootstrap, "orders", 3)
    assert len(target_records) == 100_000
    # same partition, key, value, headers and timestamp, in the same order within each partition
    assert sorted(target_records, key=lambda r: r[0]) == sorted(source_records, key=lambda r: r[0])
    assert sequences(target_records) == {key: list(range(100_000 // KEYS)) for key in sequences(source_records)}

    checked = mirror.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["orders-0", "orders-1", "orders-2"]
    assert all(line.endswith("\tOK") for line in lines)

    with SyncAdmin(target.bootstrap) as admin:
        admin.call(AsyncAdmin.delete_records, {MqTopicPartition("orders", 1): 1})
    checked = mirror.check()
    assert checked.returncode == 1
    verdicts = [line.rsplit("\t", 1)[1] for line in checked.stdout.splitlines()]
    assert verdicts == ["OK", "DIFFERENT", "OK"]


Shapes = dict[int, list[tuple[int, int, Codec]]]
"""(bytes, records, codec) of each batch, per partition."""


def batch_shapes(bootstrap: str, topic: str, partitions: int) -> Shapes:
    """(bytes, records, codec) of every data batch of each partition, in offset order."""
    ends = end_offsets(bootstrap, topic, partitions)

    async def read() -> Shapes:
        shapes: Shapes = defaultdict(list)
        tps = [MqTopicPartition(topic, p) for p in range(partitions)]
        async with AsyncConsumer(bootstrap, auto_offset_reset="earliest", decode_records=False) as consumer:
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            while [await consumer.position(tp) for tp in tps] < ends:
                for entry in await consumer.poll_entries(1000):
                    shapes[entry.tp.partition] += [(h.size, h.records_count, h.codec) for h in entry.headers]
        return shapes

    return asyncio.run(read())


def copied_whole(source: str, target: str, topic: str, partitions: int, batch_size: int) -> tuple[Shapes, Shapes]:
    """The batch shapes of ``topic`` on both sides, once asserted that every source batch of at least half
    ``batch_size`` has a target batch of its record count (copied whole, not re-batched)."""
    before, after = batch_shapes(source, topic, partitions), batch_shapes(target, topic, partitions)
    for partition in range(partitions):
        whole = [count for size, count, _ in before[partition] if size * 2 >= batch_size]
        copied = [count for _, count, _ in after[partition]]
        assert whole and all(whole.count(n) <= copied.count(n) for n in whole), (before, after)
    return before, after


def test_large_batches_are_copied_whole_and_small_ones_record_by_record_all_in_order(
    mq_command: list[str], broker_factory, tmp_path: Path
) -> None:
    source, target = start_brokers(broker_factory)
    create_topic(source.bootstrap, "whole", 2)
    produce(source.bootstrap, "whole", 10_000, **{"compression.type": "lz4"})
    for i in range(10_000, 10_040):  # one record per batch
        produce(source.bootstrap, "whole", 1, i, **{"linger.ms": 0})
    produce(source.bootstrap, "whole", 10_000, 10_040, **{"compression.type": "lz4"})
    batch_size = 16384
    mirror = Mirror(
        mq_command,
        tmp_path,
        source.bootstrap,
        target.bootstrap,
        "whole",
        producer_properties=f"linger.ms=5\nbatch.size={batch_size}\ncompression.type=gzip\n",
    ).start()
    wait_mirrored(lambda: target_count(target.bootstrap, "whole", 2) >= 20_040, mirror)
    code, err = mirror.stop()
    assert code == 0, err
    assert err.splitlines()[-1].startswith("Mirrored 20040 records"), err

    source_records = read_all(source.bootstrap, "whole", 2)
    target_records = read_all(target.bootstrap, "whole", 2)
    assert sorted(target_records, key=lambda r: r[0]) == sorted(source_records, key=lambda r: r[0])
    before, after = copied_whole(source.bootstrap, target.bootstrap, "whole", 2, batch_size)
    for partition in (0, 1):
        assert {codec for _, _, codec in after[partition]} == {Codec.GZIP}
        singles = sum(1 for _, count, _ in before[partition] if count == 1)
        assert singles > 0 and len(after[partition]) < len(before[partition])  # the single records re-batched


PACING_HANDLER = """
import time


def every_100th_waits(seconds):
    def handle(record):
        if record.offset % 100 == 0:
            time.sleep(float(seconds))
        return [record]

    return handle
"""
"""A message handler that passes records through unchanged and slows the mirror down enough to be killed mid-way."""


def test_kill_9_resends_but_never_skips(mq_command: list[str], broker_factory, tmp_path: Path) -> None:
    source, target = start_brokers(broker_factory)
    total = 50_000
    create_topic(source.bootstrap, "events", 2)
    produce(source.bootstrap, "events", total)
    (tmp_path / "pacing.py").write_text(PACING_HANDLER)
    options = ["--offset.commit.interval.ms", "1000", "--message.handler", "pacing:every_100th_waits"]
    options += ["--message.handler.args", "0.005"]
    mirror = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "events", *options).start()

    def mid_way_with_uncommitted_records() -> bool:
        mirrored = target_count(target.bootstrap, "events", 2)
        done = sum(max(0, offset) for offset in committed(source.bootstrap, "mirror", "events", 2))
        return total // 4 <= mirrored < total and done < mirrored

    wait_mirrored(mid_way_with_uncommitted_records, mirror)
    mirror.kill()
    settled = settled_end_offsets(target.bootstrap, "events", 2)
    at_kill = sum(max(0, offset) for offset in committed(source.bootstrap, "mirror", "events", 2))
    assert at_kill < total

    mirror.start()
    ends = end_offsets(source.bootstrap, "events", 2)
    wait_mirrored(lambda: committed(source.bootstrap, "mirror", "events", 2) == ends, mirror)
    code, err = mirror.stop()
    assert code == 0, err

    target_records = read_all(target.bootstrap, "events", 2)
    duplicates = len(target_records) - total
    print(f"kill -9 after {sum(settled)} of {total} records mirrored: {duplicates} duplicates in the target")
    # the restarted mirror re-sends exactly what was mirrored after the last commit before the kill
    assert duplicates == sum(settled) - at_kill
    per_key = sequences(target_records)
    assert len(per_key) == KEYS
    for key, seqs in per_key.items():
        # each run after a re-send starts at or before the highest sequence seen + 1 and then counts up by one
        previous = highest = -1
        for seq in seqs:
            assert seq == previous + 1 or seq <= previous, (key, previous, seq)
            assert seq <= highest + 1, (key, highest, seq)
            previous, highest = seq, max(highest, seq)
        assert highest == total // KEYS - 1


def test_a_source_gap_is_reported_and_counted_and_new_topics_are_picked_up(
    mq_command: list[str], broker_factory, tmp_path: Path
) -> None:
    source, target = start_brokers(broker_factory)
    create_topic(source.bootstrap, "logs", 1)
    produce(source.bootstrap, "logs", 1000)
    mirror = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "logs.*").start()
    wait_mirrored(lambda: target_count(target.bootstrap, "logs", 1) >= 1000, mirror)
    code, err = mirror.stop()
    assert code == 0 and "GAP" not in err, err
    assert committed(source.bootstrap, "mirror", "logs", 1) == [1000]

    produce(source.bootstrap, "logs", 1000, start=1000)
    with SyncAdmin(source.bootstrap) as admin:
        assert admin.call(AsyncAdmin.delete_records, {MqTopicPartition("logs", 0): 1500}) == {
            MqTopicPartition("logs", 0): 1500
        }
    mirror.start()
    wait_mirrored(lambda: target_count(target.bootstrap, "logs", 1) >= 1500, mirror, timeout=30)
    create_topic(source.bootstrap, "logs-new", 2)  # matches the whitelist: picked up by the running mirror
    produce(source.bootstrap, "logs-new", 300)
    wait_mirrored(lambda: target_count(target.bootstrap, "logs-new", 2) >= 300, mirror, timeout=30)
    code, err = mirror.stop()
    assert code == 0, err
    gap_lines = [line for line in err.splitlines() if line.startswith("GAP")]
    assert gap_lines == [
        "GAP in source logs-0: offsets 1000 to 1499 (500 records) were removed before they were mirrored; "
        "resuming at the log start offset 1500"
    ]
    assert "Mirrored 800 records" in err and "gaps: 1 (500 records lost)" in err
    assert target_count(target.bootstrap, "logs", 1) == 1500
    checked = mirror.check()
    assert checked.returncode == 1
    lines = checked.stdout.splitlines()
    assert lines[0].startswith("logs-0\tsource: 500 ") and lines[0].endswith("\tDIFFERENT")
    assert [line.split("\t")[0] for line in lines[1:]] == ["logs-new-0", "logs-new-1"]
    assert all(line.endswith("\tOK") for line in lines[1:])


def test_a_record_the_target_refuses_stops_the_mirror_without_committing(
    mq_command: list[str], broker_factory, tmp_path: Path
) -> None:
    source, target = start_brokers(broker_factory)
    create_topic(source.bootstrap, "big", 1)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic("big", 1, 1, config={"max.message.bytes": "1000"})])["big"].result(30)
    producer = Producer({"bootstrap.servers": source.bootstrap})
    producer.produce("big", b"small")
    producer.produce("big", b"x" * 5000)
    assert producer.flush(30) == 0
    mirror = Mirror(mq_command, tmp_path, source.bootstrap, target.bootstrap, "big").start()
    assert mirror.process is not None
    _, err = mirror.process.communicate(timeout=60)
    assert mirror.process.returncode == 1
    lines = err.splitlines()
    assert "Exiting on send failure, skip committing offsets." in lines
    assert lines[-1].startswith("Mirrored 2 records") and lines[-1].endswith("send failures: 1")
    assert committed(source.bootstrap, "mirror", "big", 1) == [-1001]  # nothing committed
