"""A partition moves to other brokers under a replication throttle while clients use it.

Three brokers on a real ZooKeeper; partition 0 of a topic holds about 5 MB on brokers {1, 2}. An idempotent
confluent-kafka producer (acks=all) and a consumer run while ``mq reassign-partitions --bootstrap-server --execute
--throttle`` moves it to {2, 3}. The throttle keeps the move in progress for a while (``--verify`` says so), then
the move completes: the throttles are removed, every acknowledged message is consumed exactly once and in order,
brokers 2 and 3 hold identical segments and broker 1 deletes its replica.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "moving"
THROTTLE = 1_000_000
"""Bytes/s; the 5 MB already in the log take several seconds to copy at this rate."""
PRELOAD = 5_000
PAYLOAD = b"p" * 1_000


def segments(log_dir: Path) -> dict[str, bytes]:
    directory = log_dir / f"{TOPIC}-0"
    return {f.name: f.read_bytes() for f in sorted(directory.glob("*.log"))} if directory.exists() else {}


def test_a_throttled_move_under_traffic_loses_nothing(throttled_cluster, mq_command: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    started, zk = throttled_cluster
    bootstrap = ",".join(b.bootstrap for b in started)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [1, 2]})])
    admin.close()
    assert wait_for(lambda: (state := zk.get_partition_state(TOPIC, 0)) is not None and len(state[0].isr) == 2)

    acked: list[int] = []
    errors: list[str] = []
    stop = threading.Event()
    produced = threading.Event()

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append(int(msg.value()[: msg.value().index(b":")]))
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(PRELOAD):
        producer.produce(TOPIC, b"%d:" % i + PAYLOAD, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0

    def produce() -> None:
        i = PRELOAD
        while not stop.is_set():
            producer.produce(TOPIC, b"%d:" % i + PAYLOAD, partition=0, on_delivery=delivered)
            producer.poll(0.01)
            i += 1
        producer.flush(60)
        produced.set()

    consumed: list[int] = []

    def consume() -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "reassign-check", "auto.offset.reset": "earliest"}
        )
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = float("inf")
        while time.monotonic() < deadline:
            if produced.is_set():  # everything acknowledged is known: read up to it, for at most a minute
                deadline = min(deadline, time.monotonic() + 60)
                if len(consumed) >= len(acked):
                    break
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                consumed.append(int(message.value()[: message.value().index(b":")]))
        consumer.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3]}]}))

    def reassign(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*mq_command, "reassign-partitions", "--bootstrap-server", bootstrap, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    try:
        executed = reassign("--reassignment-json-file", str(plan), "--execute", "--throttle", str(THROTTLE))
        assert executed.returncode == 0, executed.stderr
        assert "The inter-broker throttle limit was set to 1000000 B/s" in executed.stdout
        verified = reassign("--reassignment-json-file", str(plan), "--verify")
        assert f"Reassignment of partition {TOPIC}-0 is still in progress." in verified.stdout, verified.stdout

        def complete() -> bool:
            out = reassign("--reassignment-json-file", str(plan), "--verify").stdout
            return f"Reassignment of partition {TOPIC}-0 is complete." in out

        assert wait_for(complete, 150, 2.0), [b.stderr()[-3000:] for b in started]
        verified = reassign("--reassignment-json-file", str(plan), "--verify")
        assert "Clearing broker-level throttles on brokers 1,2,3" in verified.stdout, verified.stdout
        for broker_id in ("1", "2", "3"):
            assert not any("throttled.rate" in key for key in zk.get_entity_config("brokers", broker_id))
        assert not any("throttled.replicas" in key for key in zk.get_entity_config("topics", TOPIC))
        assignment = zk.get_topic_assignment(TOPIC)
        assert assignment is not None and assignment.partitions[0] == [2, 3]
    finally:
        time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join(120)

    assert not errors, errors[:5]
    assert len(acked) > PRELOAD
    assert sorted(acked) == list(range(len(acked)))  # the idempotent producer has no gap
    assert consumed == list(range(len(consumed)))  # exactly once, in order
    assert set(acked) <= set(consumed)
    assert wait_for(lambda: segments(started[1].log_dir) == segments(started[2].log_dir) != {}, 30)
    assert wait_for(lambda: not (started[0].log_dir / f"{TOPIC}-0").exists(), 30)
