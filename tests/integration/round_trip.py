"""Produce three records with confluent-kafka and consume them back in a group, with any client settings."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer


def librdkafka_round_trip(config: dict[str, Any], topic: str) -> list[bytes]:
    """The values read back (``m0``, ``m1``, ``m2`` when all went well) within 30 s."""
    producer = Producer(config)
    for i in range(3):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(bytes(message.value()))
    consumer.close()
    return values
