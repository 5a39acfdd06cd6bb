"""kill -9 of a broker process: the next start recovers only what lies above the checkpointed recovery point."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from mq.storage.checkpoints import RECOVERY_POINT_FILE, OffsetCheckpointFile
from mq.topic_partition import TopicPartition

TOPIC = "crash"
PARTITIONS = 2
SEGMENT_BYTES = 64 * 1024
INDEX_BYTES = 10485760


def index_files(partition_dir: Path) -> list[Path]:
    return sorted(p for p in partition_dir.iterdir() if p.suffix in (".index", ".timeindex"))


@pytest.mark.slow
def test_kill_9_recovers_from_the_recovery_point(broker_factory) -> None:
    broker = broker_factory(overrides=["log.flush.offset.checkpoint.interval.ms=200"]).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": str(SEGMENT_BYTES)})
    admin.create_topics([topic])[TOPIC].result(15)

    acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            acked[message.partition()].append(message.value())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384})
    for i in range(3000):
        producer.produce(TOPIC, value=b"%06d" % i + b"x" * 300, partition=i % PARTITIONS, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    assert sum(map(len, acked.values())) == 3000

    checkpoint = OffsetCheckpointFile(broker.log_dir / RECOVERY_POINT_FILE)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    partition_dirs = {tp: broker.log_dir / str(tp) for tp in tps}

    def active_base(tp: TopicPartition) -> int:
        return max(int(p.stem) for p in partition_dirs[tp].glob("*.log"))

    # every roll's flush done and checkpointed: the recovery point is the active segment's base offset
    assert wait_for(lambda: all(checkpoint.read().get(tp) == active_base(tp) > 0 for tp in tps), 30)
    recovery_points = checkpoint.read()
    trusted: dict[Path, int] = {}
    for tp, directory in partition_dirs.items():
        assert len(list(directory.glob("*.log"))) >= 4
        trusted.update({p: p.stat().st_mtime_ns for p in index_files(directory) if int(p.stem) < recovery_points[tp]})

    broker.kill()
    log_before_restart = len(broker.stderr())
    broker.start()
    restart_log = broker.stderr()[log_before_restart:]

    assert "corrupt" not in restart_log.lower()
    for tp in tps:
        assert (
            f"Recovering unflushed segments from {recovery_points[tp]} (recovery point {recovery_points[tp]}) "
            f"in log {tp} (" in restart_log
        )
    assert {p: p.stat().st_mtime_ns for p in trusted} == trusted

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "crash-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    read: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, read.values())) < 3000 and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    read[message.partition()].append(message.value())
    finally:
        consumer.close()
    assert read == acked

    for tp, directory in partition_dirs.items():
        for path in index_files(directory):
            stat = path.stat()
            if int(path.stem) == active_base(tp):
                assert stat.st_size >= INDEX_BYTES - 12
                assert stat.st_blocks * 512 <= 64 * 1024  # preallocated, yet holes
            else:
                entry_size = 8 if path.suffix == ".index" else 12
                assert 0 < stat.st_size < 64 * entry_size  # trimmed to its entries
                assert stat.st_blocks * 512 <= 8192
