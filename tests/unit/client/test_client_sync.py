"""The blocking facade, against fake brokers running on their own event loop thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from client_fakes import FakeBroker, start_cluster, stop_all

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin, SyncConsumer, SyncProducer
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.records.default_batch import RecordBatchBuilder
from mq.topic_partition import TopicPartition


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    brokers = asyncio.run_coroutine_threadsafe(start_cluster({"t": [0]}), loop).result()
    stored: list[bytes] = []

    def produce(header: RequestHeader, body: Any) -> dict[str, Any]:
        part = body.topic_data[0].partition_data[0]
        stored.append(part.records)
        return {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 0}]}]}

    def fetch(header: RequestHeader, body: Any) -> dict[str, Any]:
        builder = RecordBatchBuilder()
        builder.append(1, b"k", b"v")
        return {
            "responses": [
                {"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 1, "records": builder.build()}]}
            ]
        }

    brokers[0].handlers[ApiKey.PRODUCE] = produce
    brokers[0].handlers[ApiKey.FETCH] = fetch
    yield brokers[0]
    asyncio.run_coroutine_threadsafe(stop_all(brokers), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()


def test_sync_clients(broker: FakeBroker) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    with SyncAdmin(bootstrap) as admin:
        assert admin.list_topics() == ["t"]
        assert [t.name for t in admin.call(AsyncAdmin.describe_topics, ["t"])] == ["t"]
    with SyncProducer(bootstrap, linger_ms=0) as producer:
        metadata = producer.send("t", b"v", key=b"k", timestamp_ms=3).result(timeout=5)
        assert (metadata.topic, metadata.partition, metadata.offset, metadata.timestamp) == ("t", 0, 0, 3)
    with SyncConsumer(bootstrap) as consumer:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records = consumer.poll(timeout_ms=1000)
        assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k", b"v")]
        assert consumer.position(tp) == 1


def test_sync_admin_transaction_shortcuts(broker: FakeBroker) -> None:
    broker.versions.update({ApiKey.LIST_TRANSACTIONS: (0, 1), ApiKey.DESCRIBE_PRODUCERS: (0, 0)})
    broker.handlers[ApiKey.LIST_TRANSACTIONS] = lambda header, body: {
        "error_code": 0,
        "transaction_states": [
            {"transactional_id": "tx", "producer_id": p, "transaction_state": "Ongoing"}
            for p in body.producer_id_filters
        ],
    }
    producer = {"producer_id": 4, "producer_epoch": 1, "coordinator_epoch": 0, "current_txn_start_offset": 8}
    partitions = [{"partition_index": 0, "error_code": 0, "active_producers": [producer]}]
    broker.handlers[ApiKey.DESCRIBE_PRODUCERS] = lambda header, body: {
        "topics": [{"name": "t", "partitions": partitions}]
    }
    tp = TopicPartition("t", 0)
    with SyncAdmin(f"127.0.0.1:{broker.port}") as admin:
        assert [t.partitions[0].leader for t in admin.describe_topics(["t"])] == [0]
        assert [(t.transactional_id, t.producer_id) for t in admin.list_transactions(producer_ids={4})[0]] == [
            ("tx", 4)
        ]
        (state,) = admin.describe_producers([tp])[tp]
        assert (state.producer_id, state.coordinator_epoch, state.current_transaction_start_offset) == (4, 0, 8)
