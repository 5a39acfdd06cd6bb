"""The group APIs through the dispatcher at every advertised version: requests encoded as clients send them,
answers (and error answers) decoded with the response schema of that version. Clients may not produce to
``__consumer_offsets``."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.server.api_dispatch import Api, ApiDispatcher
from mq.server.group_coordinator import GroupCoordinator
from mq.server.handlers.group_offsets import group_offset_apis
from mq.server.handlers.groups import group_apis, offsets_topic_creator
from mq.server.handlers.produce import produce_api
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.server.network import ClientAddress
from mq.server.partition import AppendResult
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.local_store import LocalStore
from tests.unit.server.group_fakes import make

CLIENT = ClientAddress("127.0.0.1", 5555, 1)
GROUP = "g"

REQUESTS: dict[ApiKey, dict[str, Any]] = {
    ApiKey.FIND_COORDINATOR: {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]},
    ApiKey.JOIN_GROUP: {
        "group_id": GROUP,
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x00"}],
    },
    ApiKey.SYNC_GROUP: {"group_id": GROUP, "generation_id": 1, "member_id": "m", "assignments": []},
    ApiKey.HEARTBEAT: {"group_id": GROUP, "generation_id": 1, "member_id": "m"},
    ApiKey.LEAVE_GROUP: {"group_id": GROUP, "member_id": "m", "members": [{"member_id": "m"}]},
    ApiKey.LIST_GROUPS: {},
    ApiKey.DESCRIBE_GROUPS: {"groups": [GROUP], "include_authorized_operations": False},
    ApiKey.DELETE_GROUPS: {"groups_names": [GROUP]},
    ApiKey.OFFSET_COMMIT: {
        "group_id": GROUP,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": "x"}]}
        ],
    },
    ApiKey.OFFSET_FETCH: {
        "group_id": GROUP,
        "topics": [{"name": "t", "partition_indexes": [0, 1]}],
        "groups": [{"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}],
    },
    ApiKey.OFFSET_DELETE: {"group_id": GROUP, "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
}


def cache() -> MetadataCache:
    metadata = MetadataCache(1, "cluster")
    metadata.update_brokers([BrokerEndpoint(1, "broker-host", 9092)], 1)
    metadata.update_partition("__consumer_offsets", None, 0, PartitionInfo(1, 0, (1,), (1,)))
    metadata.update_partition("t", None, 0, PartitionInfo(1, 0, (1,), (1,)))
    return metadata


@functools.cache
def zookeeper_offsets(coordinator: GroupCoordinator) -> ZkConsumerGroups:
    """The metadata tree beside ``coordinator`` (one per coordinator, so that v0 commits are there to fetch)."""
    return ZkConsumerGroups(LocalStore(None))


def apis(coordinator: GroupCoordinator) -> list[Api]:
    metadata = cache()
    return [
        *group_apis(coordinator, metadata, lambda: True),
        *group_offset_apis(coordinator, metadata, coordinator.config, zookeeper_offsets(coordinator)),
    ]


def versions() -> list[tuple[ApiKey, int]]:
    coordinator, _, _ = make()
    return [(api.key, v) for api in apis(coordinator) for v in range(api.min_version, api.max_version + 1)]


def call(coordinator: GroupCoordinator, key: ApiKey, version: int, values: dict[str, Any]) -> Any:
    dispatcher = ApiDispatcher(apis(coordinator))
    body = build(request_schema(key, version), values)  # type: ignore[arg-type]
    frame = encode_request(RequestHeader(key, version, 7, "client", 0), body)[4:]

    async def send() -> Any:
        return await asyncio.wait_for(dispatcher(frame, CLIENT), 5)

    wire = asyncio.run(send())
    correlation_id, response = decode_response(wire[4:], response_schema(key, version))
    assert correlation_id == 7
    return response


def test_every_group_api_is_advertised() -> None:
    keys = {key for key, _ in versions()}
    assert keys == set(REQUESTS)


@pytest.mark.parametrize(("key", "version"), versions(), ids=lambda v: str(getattr(v, "name", v)))
def test_answers_decode_at_every_version(key: ApiKey, version: int) -> None:
    coordinator, _, _ = make()
    response = call(coordinator, key, version, REQUESTS[key])
    if key == ApiKey.FIND_COORDINATOR:
        found = response.coordinators[0] if version >= 4 else response
        assert (found.error_code, found.node_id, found.host, found.port) == (0, 1, "broker-host", 9092)
    elif key == ApiKey.JOIN_GROUP:
        expected = ErrorCode.MEMBER_ID_REQUIRED if version >= 4 else ErrorCode.NONE
        assert response.error_code == expected
        assert response.member_id.startswith("client-")
    elif key in (ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT):
        assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    elif key == ApiKey.LEAVE_GROUP:
        code = response.members[0].error_code if version >= 3 else response.error_code
        assert code == ErrorCode.UNKNOWN_MEMBER_ID
    elif key == ApiKey.DESCRIBE_GROUPS:
        described = response.groups[0]
        assert described.group_state == "Dead"
        assert described.error_code == (ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE)
    elif key == ApiKey.DELETE_GROUPS:
        assert response.results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    elif key == ApiKey.OFFSET_COMMIT:
        assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
    elif key == ApiKey.OFFSET_FETCH:
        topics = response.groups[0].topics if version >= 8 else response.topics
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in topics[0].partitions] == [
            (0, -1, ""),
            (1, -1, ""),
        ]
    elif key == ApiKey.OFFSET_DELETE:
        assert response.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    else:
        assert response.error_code == ErrorCode.NONE


@pytest.mark.parametrize(("key", "version"), versions(), ids=lambda v: str(getattr(v, "name", v)))
def test_error_answers_decode_at_every_version(key: ApiKey, version: int) -> None:
    coordinator, _, _ = make()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("coordinator failure")

    coordinator.partition_for = broken  # type: ignore[method-assign]
    coordinator.list_groups = broken  # type: ignore[method-assign]
    response = call(coordinator, key, version, REQUESTS[key])
    assert response is not None


def test_commit_then_fetch_all_partitions_and_list_groups() -> None:
    coordinator, _, _ = make()
    commit = call(coordinator, ApiKey.OFFSET_COMMIT, 8, REQUESTS[ApiKey.OFFSET_COMMIT])
    assert commit.topics[0].partitions[0].error_code == ErrorCode.NONE
    fetched = call(coordinator, ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": GROUP, "topics": None}]})
    partitions = fetched.groups[0].topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in partitions] == [(0, 5, "x")]
    listed = call(coordinator, ApiKey.LIST_GROUPS, 5, {"states_filter": ["empty"]})
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [(GROUP, "Empty", "classic")]
    assert call(coordinator, ApiKey.LIST_GROUPS, 4, {"states_filter": ["Stable"]}).groups == ()


def test_version_0_commits_and_fetches_the_offsets_kept_in_zookeeper() -> None:
    coordinator, _, _ = make(offset_metadata_max_bytes=3)
    topics = [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"}]},
        {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]},
    ]
    response = call(coordinator, ApiKey.OFFSET_COMMIT, 0, {"group_id": GROUP, "topics": topics})
    codes = {t.name: t.partitions[0].error_code for t in response.topics}
    assert codes == {"t": ErrorCode.NONE, "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert zookeeper_offsets(coordinator).offsets(GROUP) == {TopicPartition("t", 0): 42}
    long = [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7, "committed_metadata": "long"}]}]
    response = call(coordinator, ApiKey.OFFSET_COMMIT, 0, {"group_id": GROUP, "topics": long})
    assert response.topics[0].partitions[0].error_code == ErrorCode.OFFSET_METADATA_TOO_LARGE

    asked = {
        "group_id": GROUP,
        "topics": [{"name": "t", "partition_indexes": [0, 1]}, {"name": "nope", "partition_indexes": [0]}],
    }
    fetched = call(coordinator, ApiKey.OFFSET_FETCH, 0, asked)
    answers = {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in fetched.topics
        for p in t.partitions
    }
    assert answers == {
        ("t", 0): (42, "", ErrorCode.NONE),
        ("t", 1): (-1, "", ErrorCode.NONE),
        ("nope", 0): (-1, "", ErrorCode.NONE),
    }
    # the coordinator keeps other offsets: version 1 does not see those in ZooKeeper, nor version 0 the coordinator's
    assert call(coordinator, ApiKey.OFFSET_FETCH, 1, asked).topics[0].partitions[0].committed_offset == -1
    v1 = [
        {
            "name": "t",
            "partitions": [
                {"partition_index": 1, "committed_offset": 9, "commit_timestamp": -1, "committed_metadata": ""}
            ],
        }
    ]
    body = {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "topics": v1}
    assert call(coordinator, ApiKey.OFFSET_COMMIT, 1, body).topics[0].partitions[0].error_code == ErrorCode.NONE
    assert call(coordinator, ApiKey.OFFSET_FETCH, 1, asked).topics[0].partitions[1].committed_offset == 9
    assert call(coordinator, ApiKey.OFFSET_FETCH, 0, asked).topics[0].partitions[1].committed_offset == -1


def test_unknown_topic_and_large_metadata_fail_only_their_partition() -> None:
    coordinator, _, _ = make(offset_metadata_max_bytes=3)
    topics = [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": "long"}]},
        {"name": "nope", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]},
    ]
    response = call(coordinator, ApiKey.OFFSET_COMMIT, 7, {**REQUESTS[ApiKey.OFFSET_COMMIT], "topics": topics})
    codes = {t.name: t.partitions[0].error_code for t in response.topics}
    assert codes == {"t": ErrorCode.OFFSET_METADATA_TOO_LARGE, "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_find_coordinator_reports_an_unavailable_coordinator() -> None:
    coordinator, _, _ = make()
    metadata = MetadataCache(1, "cluster")
    dispatcher = ApiDispatcher(group_apis(coordinator, metadata, lambda: False))
    body = build(request_schema(ApiKey.FIND_COORDINATOR, 3), {"key": GROUP, "key_type": 0})  # type: ignore[arg-type]
    frame = encode_request(RequestHeader(ApiKey.FIND_COORDINATOR, 3, 1, None, 0), body)[4:]
    wire = asyncio.run(dispatcher(frame, CLIENT))
    assert wire is not None and isinstance(wire, bytes)
    _, response = decode_response(wire[4:], response_schema(ApiKey.FIND_COORDINATOR, 3))
    assert (response.error_code, response.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    transaction = build(request_schema(ApiKey.FIND_COORDINATOR, 3), {"key": "tx", "key_type": 1})  # type: ignore[arg-type]
    frame = encode_request(RequestHeader(ApiKey.FIND_COORDINATOR, 3, 1, None, 0), transaction)[4:]
    wire = asyncio.run(dispatcher(frame, CLIENT))
    assert isinstance(wire, bytes)
    _, response = decode_response(wire[4:], response_schema(ApiKey.FIND_COORDINATOR, 3))
    assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize(
    ("client_id", "expected"), [("client", ErrorCode.INVALID_TOPIC_EXCEPTION), ("__admin_client", None)]
)
def test_clients_cannot_produce_to_the_offsets_topic(client_id: str, expected: ErrorCode | None) -> None:
    appended: list[Any] = []

    class ReplicaManagerStub:
        def append_to_leader(self, tp: TopicPartition, records: bytes, acks: int) -> AppendResult:
            appended.append(tp)
            return AppendResult(0, -1, 0)

    dispatcher = ApiDispatcher([produce_api(ReplicaManagerStub())])  # type: ignore[arg-type]
    values = {
        "acks": 1,
        "timeout": 1000,
        "topic_data": [{"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": b"batch"}]}],
    }
    body = build(request_schema(ApiKey.PRODUCE, 9), values)  # type: ignore[arg-type]
    frame = encode_request(RequestHeader(ApiKey.PRODUCE, 9, 1, client_id, 0), body)[4:]
    wire = asyncio.run(dispatcher(frame, CLIENT))
    assert isinstance(wire, bytes)
    _, response = decode_response(wire[4:], response_schema(ApiKey.PRODUCE, 9))
    code = response.responses[0].partition_responses[0].error_code
    assert code == (expected or ErrorCode.NONE)
    assert appended == ([] if expected else [TopicPartition("__consumer_offsets", 0)])


class AdminStub:
    def __init__(self) -> None:
        self.created: list[tuple[str, int, int, dict[str, str]]] = []

    def create_topic(self, topic: str, partitions: int, factor: int, configs: dict[str, str]) -> None:
        self.created.append((topic, partitions, factor, configs))


@pytest.mark.parametrize(
    ("zookeeper", "live_brokers", "expected_factor"),
    [(None, 1, 1), ("zk:2181", 1, None), ("zk:2181", 3, 3)],
)
def test_offsets_topic_creation_follows_the_replication_factor_rule(
    zookeeper: str | None, live_brokers: int, expected_factor: int | None
) -> None:
    """Standalone: one replica whatever offsets.topic.replication.factor says; a cluster waits for enough brokers."""
    config = BrokerConfig(zookeeper_connect=zookeeper, offsets_topic_num_partitions=5, offsets_topic_segment_bytes=1000)
    metadata = MetadataCache(1, "cluster")
    metadata.update_brokers([BrokerEndpoint(b, "h", 9092) for b in range(1, live_brokers + 1)], 1)
    admin = AdminStub()

    async def first_call() -> bool:
        create = offsets_topic_creator(admin, metadata, config)  # type: ignore[arg-type]
        exists = create()
        assert create() is False  # a creation under way is not started again
        await asyncio.sleep(0.2)  # the write runs on a worker thread
        return exists

    assert asyncio.run(first_call()) is False
    if expected_factor is None:
        assert admin.created == []
    else:
        configs = {"cleanup.policy": "compact", "segment.bytes": "1000", "compression.type": "producer"}
        assert admin.created == [("__consumer_offsets", 5, expected_factor, configs)]
    metadata.update_partition("__consumer_offsets", None, 0, PartitionInfo(1, 0, (1,), (1,)))
    assert offsets_topic_creator(admin, metadata, config)() is True  # type: ignore[arg-type]
