"""AsyncAdmin against fake brokers: request shapes, routing to the controller, results and errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from client_fakes import FakeBroker, run, start_cluster, stop_all

from mq.client.admin import AsyncAdmin, NewTopic
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.protocol.configs import AlterConfigOp, ResourceType
from mq.topic_partition import TopicPartition


def with_admin(test: Any) -> None:
    async def main() -> None:
        brokers = await start_cluster({"t": [0, 1]}, count=2)
        admin = AsyncAdmin(f"127.0.0.1:{brokers[1].port}")
        try:
            await test(admin, brokers)
        finally:
            await admin.close()
            await stop_all(brokers)

    run(main())


def test_create_topics_goes_to_the_controller_and_reports_errors_with_the_broker_message() -> None:
    def create(header: RequestHeader, body: Any) -> dict[str, Any]:
        topics = []
        for t in body.topics:
            if t.name == "bad":
                topics.append({"name": t.name, "error_code": 36, "error_message": "Topic 'bad' already exists."})
            else:
                topics.append({"name": t.name, "error_code": 0, "num_partitions": 2, "replication_factor": 1})
        return {"topics": topics}

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[0].handlers[ApiKey.CREATE_TOPICS] = create
        assignment = {0: [1, 0], 1: [0, 1]}
        created = await admin.create_topics([NewTopic("a", replica_assignment=assignment, configs={"x": "1"})])
        assert [(c.name, c.num_partitions) for c in created] == [("a", 2)]
        header, body = brokers[0].of(ApiKey.CREATE_TOPICS)[0]
        assert header.api_version == 7
        sent = body.topics[0]
        assert (sent.num_partitions, sent.replication_factor) == (-1, -1)
        assert [(a.partition_index, list(a.broker_ids)) for a in sent.assignments] == [(0, [1, 0]), (1, [0, 1])]
        assert [(c.name, c.value) for c in sent.configs] == [("x", "1")]
        with pytest.raises(KafkaError, match="already exists") as info:
            await admin.create_topics([NewTopic("bad", 1, 1)], validate_only=True)
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert brokers[0].of(ApiKey.CREATE_TOPICS)[1][1].validate_only is True
        assert not brokers[1].of(ApiKey.CREATE_TOPICS)

    with_admin(test)


def test_describe_topics_and_cluster() -> None:
    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        topic_id = uuid.UUID(int=1)
        original = brokers[1].handlers[ApiKey.METADATA]

        def metadata(header: RequestHeader, body: Any) -> dict[str, Any]:
            answer = original(header, body)
            for topic in answer["topics"]:
                topic["topic_id"] = topic_id
            return answer

        brokers[1].handlers[ApiKey.METADATA] = metadata
        brokers[1].handlers[ApiKey.DESCRIBE_CLUSTER] = lambda h, b: {
            "cluster_id": "c",
            "controller_id": 0,
            "brokers": [{"broker_id": 1, "host": "h1", "port": 1}, {"broker_id": 0, "host": "h0", "port": 2}],
        }
        (topic,) = await admin.describe_topics(["t"])
        assert topic.topic_id == "AAAAAAAAAAAAAAAAAAAAAQ"
        assert [(p.partition, p.leader, p.isr) for p in topic.partitions] == [(0, 0, (0,)), (1, 1, (1,))]
        with pytest.raises(KafkaError) as info:
            await admin.describe_topics(["nope"])
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert await admin.list_topics() == ["t"]
        cluster = await admin.describe_cluster()
        assert (cluster.cluster_id, cluster.controller_id, [b.node_id for b in cluster.brokers]) == ("c", 0, [0, 1])

    with_admin(test)


def test_configs_route_broker_resources_to_that_broker() -> None:
    def describe(header: RequestHeader, body: Any) -> dict[str, Any]:
        resource = body.resources[0]
        config = {"name": "retention.ms", "value": "5", "read_only": False, "config_source": 1, "is_sensitive": False}
        return {
            "results": [
                {
                    "error_code": 0,
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                    "configs": [config],
                }
            ]
        }

    def alter(header: RequestHeader, body: Any) -> dict[str, Any]:
        resource = body.resources[0]
        return {
            "responses": [
                {
                    "error_code": 40,
                    "error_message": "Invalid value x",
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                }
            ]
        }

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        for broker in brokers:
            broker.handlers[ApiKey.DESCRIBE_CONFIGS] = describe
            broker.handlers[ApiKey.INCREMENTAL_ALTER_CONFIGS] = alter
        entries = await admin.describe_configs(ResourceType.BROKER, "0")
        assert [(e.name, e.value, e.source) for e in entries] == [("retention.ms", "5", 1)]
        assert len(brokers[0].of(ApiKey.DESCRIBE_CONFIGS)) == 1
        await admin.describe_configs(ResourceType.TOPIC, "t", keys=["retention.ms"])
        sent = [b for broker in brokers for _, b in broker.of(ApiKey.DESCRIBE_CONFIGS)][-1]
        assert list(sent.resources[0].configuration_keys) == ["retention.ms"]
        with pytest.raises(KafkaError, match="Invalid value x") as info:
            await admin.incremental_alter_configs(ResourceType.TOPIC, "t", {"retention.ms": (AlterConfigOp.SET, "x")})
        assert info.value.code == ErrorCode.INVALID_CONFIG

    with_admin(test)


def test_offsets_delete_records_and_elections() -> None:
    def list_offsets(header: RequestHeader, body: Any) -> dict[str, Any]:
        topic = body.topics[0]
        parts = [
            {"partition_index": p.partition_index, "error_code": 0, "offset": 100 + p.partition_index, "timestamp": 7}
            for p in topic.partitions
        ]
        return {"topics": [{"name": topic.name, "partitions": parts}]}

    def delete_records(header: RequestHeader, body: Any) -> dict[str, Any]:
        topic = body.topics[0]
        parts = [
            {"partition_index": p.partition_index, "error_code": 0, "low_watermark": p.offset} for p in topic.partitions
        ]
        return {"topics": [{"name": topic.name, "partitions": parts}]}

    def elect(header: RequestHeader, body: Any) -> dict[str, Any]:
        results = [
            {"partition_id": p, "error_code": 84 if p else 0, "error_message": "not needed" if p else None}
            for t in body.topic_partitions
            for p in t.partitions
        ]
        return {"replica_election_results": [{"topic": "t", "partition_result": results}]}

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        for broker in brokers:
            broker.handlers[ApiKey.LIST_OFFSETS] = list_offsets
            broker.handlers[ApiKey.DELETE_RECORDS] = delete_records
        brokers[0].handlers[ApiKey.ELECT_LEADERS] = elect
        t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
        offsets = await admin.list_offsets({t0: -1, t1: -2}, isolation_level="read_committed")
        assert {tp: o.offset for tp, o in offsets.items()} == {t0: 100, t1: 101}
        ((_, request),) = brokers[1].of(ApiKey.LIST_OFFSETS)
        assert request.isolation_level == 1 and request.topics[0].partitions[0].timestamp == -2
        assert await admin.delete_records({t0: 5, t1: 6}) == {t0: 5, t1: 6}
        results = await admin.elect_leaders([t0, t1])
        assert results[t0].error == ErrorCode.NONE
        assert (results[t1].error, results[t1].message) == (ErrorCode.ELECTION_NOT_NEEDED, "not needed")

    with_admin(test)
