"""One consumer-group member as its own process, for the group tests: ``python group_member.py LIBRARY BOOTSTRAP
TOPIC GROUP [INSTANCE_ID]`` with LIBRARY one of kafka-python, confluent-kafka, aiokafka.

It subscribes, prints one JSON line per event on stdout (``{"assigned": [partitions]}`` after each assignment,
``{"p": partition, "o": offset, "v": value}`` per record) and commits synchronously after printing each batch, so
a record printed before a kill may be read again by the next owner (at least once) but none is ever skipped. It runs
until SIGTERM (a clean close that leaves the group) or SIGKILL (no goodbye).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500

running = True


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def stop(*_: Any) -> None:
    global running
    running = False


def with_kafka_python(bootstrap: str, topic: str, group: str, instance: str | None) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"assigned": sorted(tp.partition for tp in assigned)})

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        group_instance_id=instance,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    consumer.subscribe([topic], listener=Listener())
    while running:
        # A poll long enough for a whole join and sync: kafka-python can lose its heartbeats when a poll times out
        # while its JoinGroup or SyncGroup is in flight (dpkp/kafka-python#2610).
        batches = consumer.poll(2000)
        for tp, records in batches.items():
            for r in records:
                emit({"p": tp.partition, "o": r.offset, "v": r.value.decode()})
        if batches:
            consumer.commit()
    consumer.close()


def with_confluent_kafka(bootstrap: str, topic: str, group: str, instance: str | None) -> None:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    }
    if instance is not None:
        config["group.instance.id"] = instance
    consumer = Consumer(config)
    consumer.subscribe([topic], on_assign=lambda _, parts: emit({"assigned": sorted(p.partition for p in parts)}))
    while running:
        messages = consumer.consume(100, 0.2)
        for m in messages:
            if m.error() is None:
                emit({"p": m.partition(), "o": m.offset(), "v": m.value().decode()})
        if any(m.error() is None for m in messages):
            consumer.commit(asynchronous=False)
    consumer.close()


async def with_aiokafka(bootstrap: str, topic: str, group: str, instance: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"assigned": sorted(tp.partition for tp in assigned)})

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    await consumer.start()
    consumer.subscribe([topic], listener=Listener())
    while running:
        batches = await consumer.getmany(timeout_ms=200)
        for tp, records in batches.items():
            for r in records:
                emit({"p": tp.partition, "o": r.offset, "v": r.value.decode()})
        if batches:
            await consumer.commit()
    await consumer.stop()


def main() -> None:
    library, bootstrap, topic, group = sys.argv[1:5]
    instance = sys.argv[5] if len(sys.argv) > 5 else None
    signal.signal(signal.SIGTERM, stop)
    if library == "kafka-python":
        with_kafka_python(bootstrap, topic, group, instance)
    elif library == "confluent-kafka":
        with_confluent_kafka(bootstrap, topic, group, instance)
    elif library == "aiokafka":
        asyncio.run(with_aiokafka(bootstrap, topic, group, instance))
    else:
        raise SystemExit(f"unknown library {library}")


if __name__ == "__main__":
    main()
