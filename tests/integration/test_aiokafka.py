"""aiokafka against a broker process."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

pytestmark = pytest.mark.slow


def test_produce_and_consume(broker) -> None:
    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        sent = []
        for i in range(200):
            md = await producer.send_and_wait(
                "aio",
                f"v{i}".encode(),
                key=f"k{i}".encode(),
                headers=[("i", str(i).encode())],
                timestamp_ms=1_700_000_000_000 + i,
            )
            sent.append((md.partition, md.offset, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i))
        await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        tp = TopicPartition("aio", 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        received = []
        while len(received) < len(sent):
            batches = await consumer.getmany(timeout_ms=5000)
            assert batches, f"only {len(received)} of {len(sent)}"
            for records in batches.values():
                received += [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in records]
        await consumer.stop()
        assert received == sent

    asyncio.run(scenario())
