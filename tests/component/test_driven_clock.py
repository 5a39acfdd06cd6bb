"""Timeouts on the broker's clock: with a driven clock a long-poll fetch waits until the clock reaches its
``max_wait_ms`` (however long that takes in real time) or until records arrive, never by the wall clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from mq.client.connection import BrokerConnection
from mq.client.consumer import fetch_request_body
from mq.protocol.api_keys import ApiKey
from mq.records.default_batch import RecordBatchBuilder
from mq.server.clock import ManualClock
from mq.topic_partition import TopicPartition

TP = TopicPartition("polled", 0)
MAX_WAIT_MS = 60_000


def partitions(response: Any) -> list[Any]:
    return [p for t in response.responses for p in t.partitions]


def test_a_long_poll_fetch_ends_when_the_clock_reaches_its_max_wait_or_records_arrive(
    in_process_broker: Callable[..., Any], tmp_path: Path
) -> None:
    broker = in_process_broker([f"log.dirs={tmp_path / 'logs'}"], ManualClock())
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TP.topic, 1, 1)])
    admin.close()
    fetch = fetch_request_body(
        {TP: 0}, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=1 << 20, partition_max_bytes=1 << 20
    )

    async def scenario() -> None:
        connection = BrokerConnection("127.0.0.1", broker.port, client_id="driven-clock")
        try:
            waiting = asyncio.create_task(connection.send(ApiKey.FETCH, fetch))
            await asyncio.sleep(0.5)
            assert not waiting.done()  # real time passes; the broker's clock does not
            await asyncio.to_thread(broker.advance, MAX_WAIT_MS - 1)
            await asyncio.sleep(0.3)
            assert not waiting.done()
            began = time.monotonic()
            await asyncio.to_thread(broker.advance, 1)
            expired = partitions(await asyncio.wait_for(waiting, 5))
            assert time.monotonic() - began < 5
            assert [(p.error_code, p.high_watermark) for p in expired] == [(0, 0)] and not expired[0].records

            woken = asyncio.create_task(connection.send(ApiKey.FETCH, fetch))
            await asyncio.sleep(0.3)
            assert not woken.done()
            batch = RecordBatchBuilder()
            batch.append(0, None, b"wakes the fetch")
            producer = BrokerConnection("127.0.0.1", broker.port, client_id="driven-clock-producer")
            produce = {
                "acks": 1,
                "timeout": 30_000,
                "topic_data": [{"name": TP.topic, "partition_data": [{"index": 0, "records": batch.build()}]}],
            }
            await producer.send(ApiKey.PRODUCE, produce)
            await producer.close()
            answered = partitions(await asyncio.wait_for(woken, 5))  # the clock never moved
            assert answered[0].error_code == 0 and answered[0].high_watermark == 1 and answered[0].records
        finally:
            await connection.close()

    asyncio.run(scenario())
