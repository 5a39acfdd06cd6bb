"""One deadline over an admin call, and topic auto-creation requests, against fake brokers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from client_fakes import FakeBroker, metadata_handler, run, start_cluster, stop_all

from mq.client.admin import AsyncAdmin
from mq.client.cluster import ApiTimeoutError
from mq.client.consumer import AsyncConsumer
from mq.client.producer import AsyncProducer
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.topic_partition import TopicPartition


def silent(header: RequestHeader, body: Any) -> None:
    return None


@pytest.mark.parametrize("unanswered", ["ApiVersions", "Metadata"])
def test_an_admin_call_ends_at_its_deadline_naming_what_it_waited_for(unanswered: str) -> None:
    async def start() -> FakeBroker:
        [broker] = await start_cluster({"t": [0]})
        broker.handlers[ApiKey.API_VERSIONS if unanswered == "ApiVersions" else ApiKey.METADATA] = silent
        return broker

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    broker = asyncio.run_coroutine_threadsafe(start(), loop).result()
    try:
        # the request timeout and the retries alone would wait 6 x 30 s
        with (
            SyncAdmin(f"127.0.0.1:{broker.port}", api_timeout_ms=300) as admin,
            pytest.raises(ApiTimeoutError) as timed_out,
        ):
            admin.list_topics()
        assert str(timed_out.value) == (
            f"timed out after 0.3 s waiting for 127.0.0.1:{broker.port} (no answer to {unanswered})"
        )
    finally:
        asyncio.run_coroutine_threadsafe(stop_all([broker]), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()


class CreatingMetadata:
    """Metadata answers for a broker with auto.create.topics.enable: an unknown topic a request allows creating
    answers LEADER_NOT_AVAILABLE ``pending`` times, then exists with one partition."""

    def __init__(self, broker: FakeBroker, pending: int) -> None:
        self.existing = metadata_handler([broker], {"t": [0]})
        self.broker = broker
        self.pending = pending
        self.created = False
        self.allowed: list[bool] = []

    def __call__(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        self.allowed.append(bool(body.allow_auto_topic_creation))
        answer = self.existing(header, body)
        for topic in answer["topics"]:
            if topic["name"] != "new":
                continue
            self.created = self.created or bool(body.allow_auto_topic_creation)
            if not self.created:
                continue
            if self.pending > 0:
                self.pending -= 1
                topic["error_code"] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                topic["error_code"] = 0
                topic["partitions"] = [{"partition_index": 0, "leader_id": 0, "replica_nodes": [0], "isr_nodes": [0]}]
        return answer


def test_the_producer_asks_for_creation_and_waits_for_the_new_topics_leader() -> None:
    async def main() -> None:
        [broker] = await start_cluster({"t": [0]})
        metadata = broker.handlers[ApiKey.METADATA] = CreatingMetadata(broker, pending=6)
        broker.handlers[ApiKey.PRODUCE] = lambda h, b: {
            "responses": [{"name": "new", "partition_responses": [{"index": 0, "base_offset": 0}]}]
        }
        # more answers without a leader than retries: the wait is bounded by max_block_ms, not by retries
        producer = AsyncProducer(f"127.0.0.1:{broker.port}", retries=2, retry_backoff_ms=5, linger_ms=0)
        try:
            sent = await (await producer.send("new", b"v"))
            assert (sent.topic, sent.partition, sent.offset) == ("new", 0, 0)
            assert metadata.allowed and all(metadata.allowed)
            metadata.pending = 1_000_000  # a topic that never gets a leader: send gives up after max_block_ms
            stuck = AsyncProducer(f"127.0.0.1:{broker.port}", retry_backoff_ms=5, max_block_ms=200)
            try:
                with pytest.raises(KafkaError) as failed:
                    await stuck.send("new", b"v")
                assert failed.value.code == ErrorCode.LEADER_NOT_AVAILABLE
            finally:
                await stuck.close()
        finally:
            await producer.close()
            await stop_all([broker])

    run(main())


@pytest.mark.parametrize("allow", [True, False])
def test_a_consumer_asks_for_creation_only_with_allow_auto_create_topics(allow: bool) -> None:
    async def main() -> None:
        [broker] = await start_cluster({"t": [0]})
        metadata = broker.handlers[ApiKey.METADATA] = CreatingMetadata(broker, pending=0)
        consumer = AsyncConsumer(f"127.0.0.1:{broker.port}", allow_auto_create_topics=allow)
        admin = AsyncAdmin(cluster=consumer.cluster)
        try:
            await admin.describe_topics(["t"])
            assert metadata.allowed == [False]  # the admin client never asks, on any cluster
            consumer.assign([TopicPartition("new", 0)])
            with contextlib.suppress(KafkaError):  # without creation the topic does not exist
                await consumer.cluster.leader_for(TopicPartition("new", 0))
            assert metadata.allowed[1:] == [allow]
            assert metadata.created is allow
        finally:
            await consumer.close()
            await stop_all([broker])

    run(main())
