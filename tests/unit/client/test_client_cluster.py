"""Cluster: bootstrap parsing, metadata, leader lookup and retries with metadata refresh."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from client_fakes import FakeBroker, metadata_handler, run, start_cluster, stop_all

from mq.client.cluster import Cluster, parse_bootstrap, topic_id_string
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.topic_partition import TopicPartition


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    for bad in ("a", "a:x", "", ":1"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_topic_id_string_is_base64url_without_padding() -> None:
    value = uuid.UUID(bytes=bytes(range(250, 256)) + bytes(10))
    assert topic_id_string(value) == "-vv8_f7_AAAAAAAAAAAAAA"
    assert topic_id_string(None) is None


def test_metadata_and_leader_lookup() -> None:
    async def main() -> None:
        brokers = await start_cluster({"t": [1, 0]}, count=2)
        cluster = Cluster(f"127.0.0.1:{brokers[1].port}")
        try:
            metadata = await cluster.topic("t")
            assert [(p.partition, p.leader, p.replicas) for p in metadata.partitions] == [(0, 1, (1,)), (1, 0, (0,))]
            assert sorted(cluster.brokers) == [0, 1]
            assert cluster.cluster_id == "fake-cluster"
            assert await cluster.leader_for(TopicPartition("t", 1)) == 0
            with pytest.raises(KafkaError) as info:
                await cluster.leader_for(TopicPartition("t", 5))
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            with pytest.raises(KafkaError) as info:
                await cluster.topic("missing")
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await cluster.close()
            await stop_all(brokers)

    run(main())


def _list_offsets(answer: int) -> Any:
    def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
        topic = body.topics[0]
        partition = topic.partitions[0].partition_index
        code = answer
        return {
            "topics": [
                {"name": topic.name, "partitions": [{"partition_index": partition, "error_code": code, "offset": 7}]}
            ]
        }

    return handle


async def _offset(cluster: Cluster, tp: TopicPartition) -> int:
    leader = await cluster.leader_for(tp)
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": tp.topic, "partitions": [{"partition_index": tp.partition, "timestamp": -1}]}],
    }
    response = await cluster.send(leader, ApiKey.LIST_OFFSETS, body)
    partition = response.topics[0].partitions[0]
    if partition.error_code != 0:
        raise KafkaError("list offsets", code=ErrorCode(partition.error_code))
    return int(partition.offset)


def test_retriable_error_refreshes_metadata_and_follows_the_new_leader() -> None:
    async def main() -> None:
        leaders = {"t": [0]}
        brokers = [await FakeBroker(node_id=i).start() for i in range(2)]
        for broker in brokers:
            broker.handlers[ApiKey.METADATA] = metadata_handler(brokers, leaders)
        brokers[0].handlers[ApiKey.LIST_OFFSETS] = _list_offsets(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        brokers[1].handlers[ApiKey.LIST_OFFSETS] = _list_offsets(0)
        cluster = Cluster(f"127.0.0.1:{brokers[0].port}", retry_backoff_ms=10)
        tp = TopicPartition("t", 0)
        try:
            await cluster.topic("t")
            leaders["t"] = [1]
            assert await cluster.with_retries(lambda: _offset(cluster, tp), ["t"]) == 7
            assert len(brokers[0].of(ApiKey.LIST_OFFSETS)) == 1
            assert len(brokers[1].of(ApiKey.LIST_OFFSETS)) == 1
            metadata_requests = brokers[0].of(ApiKey.METADATA) + brokers[1].of(ApiKey.METADATA)
            assert len(metadata_requests) == 2
        finally:
            await cluster.close()
            await stop_all(brokers)

    run(main())


def test_retries_are_bounded_and_fatal_errors_are_not_retried() -> None:
    async def main() -> None:
        brokers = await start_cluster({"t": [0]})
        cluster = Cluster(f"127.0.0.1:{brokers[0].port}", retry_backoff_ms=1, retries=3)
        tp = TopicPartition("t", 0)
        try:
            brokers[0].handlers[ApiKey.LIST_OFFSETS] = _list_offsets(ErrorCode.LEADER_NOT_AVAILABLE)
            with pytest.raises(KafkaError) as info:
                await cluster.with_retries(lambda: _offset(cluster, tp), ["t"])
            assert info.value.code == ErrorCode.LEADER_NOT_AVAILABLE
            assert len(brokers[0].of(ApiKey.LIST_OFFSETS)) == 4
            brokers[0].requests.clear()
            brokers[0].handlers[ApiKey.LIST_OFFSETS] = _list_offsets(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            with pytest.raises(KafkaError) as info:
                await cluster.with_retries(lambda: _offset(cluster, tp), ["t"])
            assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert len(brokers[0].of(ApiKey.LIST_OFFSETS)) == 1
        finally:
            await cluster.close()
            await stop_all(brokers)

    run(main())


def test_any_broker_send_skips_unreachable_bootstrap_servers() -> None:
    async def main() -> None:
        dead = await FakeBroker().start()
        await dead.stop()
        brokers = await start_cluster({"t": [0]})
        cluster = Cluster(f"127.0.0.1:{dead.port},127.0.0.1:{brokers[0].port}")
        try:
            metadata = await cluster.refresh_metadata()
            assert list(metadata) == ["t"]
        finally:
            await cluster.close()
            await stop_all(brokers)

    run(main())
