"""Log compaction in a broker process: what a consumer reads from a compacted topic, and a kill -9 mid-clean."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from mq.storage.checkpoints import OffsetCheckpointFile
from mq.topic_partition import TopicPartition as MqTopicPartition

pytestmark = pytest.mark.slow

Record = tuple[int, bytes | None, bytes | None]


def create_compacted(bootstrap: str, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    settings = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", **config}
    admin.create_topics([NewTopic(topic, 1, 1, config=settings)])[topic].result(15)


def produce(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]]) -> list[Record]:
    """Produce ``pairs`` in order (one request per 50 records); (offset, key, value) of each as acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    acked: list[Record] = []

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        acked.append((msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    for i, (key, value) in enumerate(pairs):
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
        if i % 50 == 49:
            producer.flush(30)
    assert producer.flush(30) == 0
    return sorted(acked)


def read_all(bootstrap: str, topic: str) -> list[Record]:
    """Every record from the beginning up to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[Record] = []
        while not out or out[-1][0] < high - 1:
            msg = consumer.poll(10)
            assert msg is not None, f"read stopped at {out[-1][0] if out else None} of {high}"
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def latest(records: list[Record]) -> dict[bytes | None, Record]:
    return {key: (offset, key, value) for offset, key, value in records}


def test_a_consumer_reads_each_keys_latest_value_and_tombstones_expire(
    broker_factory: Callable[..., object],
) -> None:
    broker = broker_factory(overrides=["log.cleaner.backoff.ms=100", "log.segment.delete.delay.ms=1000"])
    broker.start()  # type: ignore[attr-defined]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    create_compacted(bootstrap, "state", **{"segment.bytes": "4096", "delete.retention.ms": "2000"})
    produced = []
    for round_ in range(8):
        produced += produce(bootstrap, "state", [(b"k%d" % i, b"v%d-%d" % (round_, i)) for i in range(20)])
    produced += produce(bootstrap, "state", [(b"k%d" % i, None) for i in range(5)])  # tombstones
    filler = b"f" * 1000

    def roll_and_read() -> list[Record]:
        produce(bootstrap, "state", [(b"filler", filler)] * 3)  # most of a segment: the data before rolls out
        return read_all(bootstrap, "state")

    expected = latest(produced)
    deadline = time.monotonic() + 30
    seen: list[Record] = []
    while time.monotonic() < deadline:
        seen = [r for r in roll_and_read() if r[1] != b"filler"]
        if len(seen) == len(expected):
            break
        time.sleep(0.3)
    assert sorted(seen) == sorted(expected.values())  # each key once, its latest value at its original offset
    assert [r for r in seen if r[2] is None] == [expected[b"k%d" % i] for i in range(5)]  # tombstones still there

    time.sleep(2.5)  # past delete.retention.ms
    assert wait_for(lambda: all(r[2] is not None for r in roll_and_read() if r[1] != b"filler"), timeout=30)
    final = [r for r in read_all(bootstrap, "state") if r[1] != b"filler"]
    assert sorted(final) == sorted(expected[b"k%d" % i] for i in range(5, 20))


def test_a_record_without_key_is_refused_by_a_compacted_topic(broker_factory: Callable[..., object]) -> None:
    broker = broker_factory()
    broker.start()  # type: ignore[attr-defined]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    create_compacted(bootstrap, "keyed")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    errors = []
    producer.produce("keyed", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]
    assert produce(bootstrap, "keyed", [(b"k", b"v")]) == [(0, b"k", b"v")]


def dirty_files(log_dir: Path) -> list[str]:
    return [p.name for p in log_dir.glob("big-0/*") if p.name.endswith((".cleaned", ".swap"))]


def mid_pass(log_dir: Path) -> bool:
    """Several groups were swapped in (their old files wait as ``.deleted``) and another is being written."""
    swapped = list(log_dir.glob("big-0/*.log.deleted"))
    return len(swapped) >= 5 and bool(dirty_files(log_dir))


def test_kill_during_cleaning_leaves_a_consistent_log(broker_factory: Callable[..., object]) -> None:
    broker = broker_factory(overrides=["log.cleaner.enable=false"])
    broker.start()  # type: ignore[attr-defined]
    bootstrap = broker.bootstrap  # type: ignore[attr-defined]
    create_compacted(bootstrap, "big", **{"segment.bytes": "65536"})
    produced: list[Record] = []
    for round_ in range(6):
        produced += produce(bootstrap, "big", [(b"key-%d" % i, b"%d-" % round_ + b"x" * 200) for i in range(4000)])
    expected = latest(produced)
    broker.stop()  # type: ignore[attr-defined]

    broker.overrides = ["log.cleaner.enable=true", "log.cleaner.backoff.ms=50"]  # type: ignore[attr-defined]
    broker.start()  # type: ignore[attr-defined]
    log_dir = broker.log_dir  # type: ignore[attr-defined]
    assert wait_for(lambda: mid_pass(log_dir), timeout=30, interval=0.005), "no cleaning was observed"
    broker.kill()  # type: ignore[attr-defined]

    broker.overrides = ["log.cleaner.enable=false"]  # type: ignore[attr-defined]
    broker.start()  # type: ignore[attr-defined]
    content = read_all(bootstrap, "big")
    offsets = [offset for offset, _, _ in content]
    assert offsets == sorted(set(offsets))
    assert set(content) <= set(produced)  # nothing invented, nothing moved
    assert latest(content) == expected  # every key's latest value at its offset
    assert not dirty_files(log_dir)

    broker.stop()  # type: ignore[attr-defined]
    broker.overrides = ["log.cleaner.enable=true", "log.cleaner.backoff.ms=50"]  # type: ignore[attr-defined]
    broker.start()  # type: ignore[attr-defined]
    checkpoint = OffsetCheckpointFile(log_dir / "cleaner-offset-checkpoint")
    assert wait_for(lambda: checkpoint.read().get(MqTopicPartition("big", 0), 0) > 0, timeout=30)
    cleaned_to = checkpoint.read()[MqTopicPartition("big", 0)]
    content = read_all(bootstrap, "big")
    cleaned = [key for offset, key, _ in content if offset < cleaned_to]
    assert len(cleaned) == len(set(cleaned))  # the recovered log cleans: one record per key below the checkpoint
    assert latest(content) == expected
