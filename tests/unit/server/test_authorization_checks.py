"""Authorization of requests through the dispatcher, with real frames and Kafka's AclAuthorizer rules: the whole-request
cluster checks of the table, the helpers' decisions (reference counts, authorized-operation bit fields), and the
per-resource checks of the handlers on both paths (Produce, Fetch, OffsetCommit immediately and in general), with
TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED where Kafka answers them and nothing done for what was refused."""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import pytest

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import (
    RequestHeader,
    decode_response,
    encode_request,
    parse_request_header,
    request_schema,
    response_schema,
)
from mq.protocol.entities import build
from mq.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from mq.security.authorizer import AclAuthorizer
from mq.server import logging_config
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import LATER, Api, ApiDispatcher, RequestContext
from mq.server.authorization import (
    CLUSTER_OPERATIONS,
    SUPPORTED_OPERATIONS,
    allowed_names,
    authorized_operations,
)
from mq.server.clock import ManualClock
from mq.server.handlers.admin_topics import admin_topic_apis
from mq.server.handlers.cluster import cluster_apis
from mq.server.handlers.configs import configs_apis
from mq.server.handlers.fetch import fetch_api
from mq.server.handlers.group_offsets import group_offset_apis
from mq.server.handlers.groups import group_apis
from mq.server.handlers.leader_epoch import leader_epoch_apis
from mq.server.handlers.metadata import metadata_api
from mq.server.handlers.offsets import offsets_apis
from mq.server.handlers.produce import produce_api
from mq.server.handlers.transactions import transaction_apis
from mq.server.metadata_cache import MetadataCache, PartitionInfo
from mq.server.network import ClientAddress, Response
from mq.topic_partition import TopicPartition
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import BrokerRegistration
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from tests.produce_frames import produce_frame
from tests.unit.server.group_fakes import make
from tests.unit.server.test_fetch_now import frame as fetch_frame
from tests.unit.server.test_group_handlers import cache as group_cache
from tests.unit.server.test_produce_now import GOOD, replica_manager
from tests.unit.server.test_replica_manager_fetch import manager
from tests.unit.server.test_transaction_coordinator import COORDINATOR_EPOCH, Markers, RecordingLog
from tests.unit.server.test_transaction_coordinator import coordinator as txn_coordinator

ALICE = ClientAddress("10.0.0.1", 5555, 1, "User:alice")
ADMIN = ClientAddress("10.0.0.2", 5555, 2, "User:admin")


def acl_cache(*grants: tuple[ResourceType, str, AclOperation]) -> AclCache:
    """Kafka's AclAuthorizer (super user User:admin, nothing allowed without an ACL) with ALLOW ACLs for alice."""
    cache = AclCache(LocalStore(None), AclAuthorizer({"User:admin"}), Executor(), lambda fn: fn())
    for resource_type, name, operation in grants:
        allow(cache, resource_type, name, operation)
    return cache


def allow(cache: AclCache, resource_type: ResourceType, name: str, operation: AclOperation) -> None:
    pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
    entry = AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW)
    cache.authorizer.set_acls(pattern, {*cache.authorizer.get_acls(pattern), entry})


def request_frame(key: ApiKey, version: int, values: dict[str, Any], client_id: str = "c") -> bytearray:
    body = build(request_schema(key, version), values)  # type: ignore[arg-type]
    return bytearray(encode_request(RequestHeader(key, version, 7, client_id, 0), body)[4:])


def decoded(key: ApiKey, version: int, wire: Response | None) -> Any:
    assert isinstance(wire, bytes)
    return decode_response(wire[4:], response_schema(key, version))[1]


def general(dispatcher: ApiDispatcher, frame: bytearray, client: ClientAddress = ALICE) -> Response | None:
    return asyncio.run(asyncio.wait_for(dispatcher(frame, client), 5))


def context(key: ApiKey, client: ClientAddress = ALICE) -> RequestContext:
    return RequestContext(RequestHeader(key, 0, 1, "c", 0), client)


# --- the table and the helpers ---------------------------------------------------------------------------------------


def test_cluster_apis_are_refused_before_their_handler_and_answered_by_their_error_builder() -> None:
    handled: list[int] = []

    def api(key: ApiKey) -> Api:
        async def handle(context: RequestContext, body: Any) -> bytes:
            handled.append(context.header.api_key)
            return b"handled"

        def error(context: RequestContext, body: Any, code: ErrorCode) -> bytes:
            return bytes([int(code)])

        return Api(key, 0, 0, handle, error, decode=lambda frame: (parse_request_header(frame, False), None))

    acl = acl_cache((ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER))
    dispatcher = ApiDispatcher([api(key) for key in CLUSTER_OPERATIONS], acl)
    refused, allowed = [], []
    for key in CLUSTER_OPERATIONS:
        header = bytearray(struct.pack(">hhih", key, 0, 1, 1) + b"c")  # a header alone: these APIs read no body
        answer = general(dispatcher, header)
        if answer == bytes([ErrorCode.CLUSTER_AUTHORIZATION_FAILED]):
            refused.append(key)
        else:
            allowed.append(key)
        assert general(dispatcher, header, ADMIN) != bytes([ErrorCode.CLUSTER_AUTHORIZATION_FAILED])
    altering = {k for k, op in CLUSTER_OPERATIONS.items() if op in (AclOperation.ALTER, AclOperation.DESCRIBE)}
    assert set(allowed) == altering  # ALTER also allows DESCRIBE, as Kafka's authorizer does
    assert set(refused) == set(CLUSTER_OPERATIONS) - altering
    assert ApiKey.LEADER_AND_ISR in refused and ApiKey.DESCRIBE_CLIENT_QUOTAS in refused
    assert set(handled) == altering | set(CLUSTER_OPERATIONS)  # the admin's requests, alice's allowed ones


def test_allowed_names_decide_once_per_name_with_its_reference_count(caplog: pytest.LogCaptureFixture) -> None:
    acl = acl_cache((ResourceType.TOPIC, "a", AclOperation.WRITE))
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        allowed = allowed_names(acl, context(ApiKey.PRODUCE), AclOperation.WRITE, ResourceType.TOPIC, "abab")
    assert allowed == {"a"}
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Principal = ")]
    assert len(lines) == 2
    assert any("is Allowed Operation = Write" in line and "Topic:LITERAL:a" in line for line in lines)
    denied = next(r for r in caplog.records if "Denied" in r.getMessage())
    assert denied.levelno == logging.INFO
    assert denied.getMessage().endswith("on resource = Topic:LITERAL:b for request = Produce with resourceRefCount = 2")
    assert allowed_names(None, context(ApiKey.PRODUCE), AclOperation.WRITE, ResourceType.TOPIC, "ab") == {"a", "b"}


def test_authorized_operations_are_a_bit_field_of_the_supported_operations() -> None:
    acl = acl_cache((ResourceType.TOPIC, "t", AclOperation.READ), (ResourceType.TOPIC, "t", AclOperation.ALTER_CONFIGS))
    alice = authorized_operations(acl, context(ApiKey.METADATA), ResourceType.TOPIC, "t")
    read, describe, describe_configs, alter_configs = (1 << 3, 1 << 8, 1 << 10, 1 << 11)
    assert (
        alice == read | describe | describe_configs | alter_configs
    )  # READ implies DESCRIBE, ALTER_ implies DESCRIBE_
    every = sum(1 << op for op in SUPPORTED_OPERATIONS[ResourceType.GROUP])
    assert authorized_operations(None, context(ApiKey.METADATA), ResourceType.GROUP, "g") == every == 0b1_0100_1000
    assert authorized_operations(acl, context(ApiKey.METADATA, ADMIN), ResourceType.GROUP, "g") == every


# --- Produce and Fetch on both paths ---------------------------------------------------------------------------------


def test_produce_refuses_unwritable_topics_on_both_paths_without_appending(tmp_path: Path) -> None:
    for path in ("now", "general"):
        rm = replica_manager(tmp_path / path)
        acl = acl_cache((ResourceType.TOPIC, "c", AclOperation.WRITE))
        dispatcher = ApiDispatcher([produce_api(rm, acl)], acl)
        for topics, expected in (
            ([("t", [(0, GOOD)])], {("t", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}),
            (
                [("t", [(0, GOOD), (1, GOOD)]), ("c", [(0, GOOD)])],
                {
                    ("t", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    ("t", 1): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    ("c", 0): ErrorCode.NONE,
                },
            ),
        ):
            frame = produce_frame(9, topics)
            if path == "now":
                answer = dispatcher.now(frame, ALICE)
                assert answer is not LATER and not asyncio.isfuture(answer)
            else:
                answer = general(dispatcher, frame)
            response = decoded(ApiKey.PRODUCE, 9, answer)  # type: ignore[arg-type]
            codes = {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}
            assert codes == expected, path
        assert rm.partitions[TopicPartition("t", 0)].log.log_end_offset == 0
        assert rm.partitions[TopicPartition("c", 0)].log.log_end_offset == 1


def test_fetch_refuses_unreadable_topics_and_a_follower_without_cluster_action(tmp_path: Path) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 1, ManualClock())
        await rm.append_records({TopicPartition("t", 0): GOOD}, 1, 1000)
        acl = acl_cache()
        dispatcher = ApiDispatcher([fetch_api(rm, acl)], acl)
        refused = fetch_frame(12, [("t", 0, 0)], max_wait_ms=60_000)
        for answer in (dispatcher.now(refused, ALICE), await dispatcher(refused, ALICE)):
            assert isinstance(answer, bytes)  # answered at once: nothing to wait for
            partition = decoded(ApiKey.FETCH, 12, answer).responses[0].partitions[0]
            assert (partition.error_code, partition.records) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, b"")
        follower = fetch_frame(12, [("t", 0, 0)], replica_id=2)
        answer = decoded(ApiKey.FETCH, 12, await dispatcher(follower, ALICE))
        assert answer.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        allow(acl, ResourceType.TOPIC, "t", AclOperation.READ)  # in force for the next request
        found = dispatcher.now(refused, ALICE)
        assert not isinstance(found, bytes) and found is not LATER and found is not None
        assert not asyncio.isfuture(found)  # records ready: a response in pieces (file regions)

    asyncio.run(run())


# --- Metadata and InitProducerId -------------------------------------------------------------------------------------


def test_metadata_lists_only_describable_topics_and_auto_creation_needs_create() -> None:
    cache = group_cache()  # topics __consumer_offsets and t
    cache.update_partition("u", None, 0, cache.topics["t"].partitions[0])
    created: list[str] = []
    acl = acl_cache((ResourceType.TOPIC, "t", AclOperation.READ), (ResourceType.TOPIC, "new-2", AclOperation.CREATE))
    dispatcher = ApiDispatcher(
        [metadata_api(cache, lambda name: created.append(name) or ErrorCode.LEADER_NOT_AVAILABLE, acl)], acl
    )
    values = {"allow_auto_topic_creation": True, "include_cluster_authorized_operations": True,
              "include_topic_authorized_operations": True}  # fmt: skip
    every = decoded(
        ApiKey.METADATA, 10, general(dispatcher, request_frame(ApiKey.METADATA, 10, {**values, "topics": None}))
    )
    assert [t.name for t in every.topics] == ["t"]
    assert every.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)
    assert every.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    named = [{"name": n} for n in ("t", "u", "new-1", "new-2")]
    answer = decoded(
        ApiKey.METADATA, 10, general(dispatcher, request_frame(ApiKey.METADATA, 10, {**values, "topics": named}))
    )
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("t", ErrorCode.NONE),
        ("u", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("new-1", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # describable? no: refused before anything is said of it
        ("new-2", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # CREATE implies no DESCRIBE
    ]
    allow(acl, ResourceType.TOPIC, "new-1", AclOperation.DESCRIBE)
    allow(acl, ResourceType.TOPIC, "new-2", AclOperation.DESCRIBE)
    answer = decoded(
        ApiKey.METADATA, 10, general(dispatcher, request_frame(ApiKey.METADATA, 10, {**values, "topics": named[2:]}))
    )
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("new-1", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # no CREATE
        ("new-2", ErrorCode.LEADER_NOT_AVAILABLE),
    ]
    assert created == ["new-2"]


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic() -> None:
    acl = acl_cache()
    dispatcher = ApiDispatcher(cluster_apis(group_cache(), None, acl), acl)  # type: ignore[arg-type]
    request = request_frame(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                         "producer_id": 5, "producer_epoch": 0})  # fmt: skip
    assert decoded(ApiKey.INIT_PRODUCER_ID, 4, general(dispatcher, request)).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    allow(acl, ResourceType.TOPIC, "anything", AclOperation.WRITE)
    answer = decoded(ApiKey.INIT_PRODUCER_ID, 4, general(dispatcher, request))
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (ErrorCode.NONE, 5, 1)


# --- groups and offsets ----------------------------------------------------------------------------------------------


def test_group_apis_need_their_group_operation_and_offsets_their_topic_operation() -> None:
    coordinator, _, _ = make()
    cache = group_cache()
    cache.update_partition("u", None, 0, cache.topics["t"].partitions[0])
    acl = acl_cache()
    dispatcher = ApiDispatcher(
        [
            *group_apis(coordinator, cache, lambda: True, acl),
            *group_offset_apis(coordinator, cache, coordinator.config, ZkConsumerGroups(LocalStore(None)), acl=acl),
        ],
        acl,
    )

    def call(key: ApiKey, version: int, values: dict[str, Any], client: ClientAddress = ALICE) -> Any:
        return decoded(key, version, general(dispatcher, request_frame(key, version, values), client))

    join = {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "m",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}  # fmt: skip
    joined = call(ApiKey.JOIN_GROUP, 9, join)
    assert (joined.error_code, joined.member_id) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, "")
    assert call(ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}).error_code == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED
    )
    found = call(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert (found.error_code, found.error_message) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        "Group authorization failed.",
    )
    found = call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]}).coordinators[0]
    assert found.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    commit = {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]}  # fmt: skip
    frame = request_frame(ApiKey.OFFSET_COMMIT, 8, commit)
    for answer in (dispatcher.now(frame, ALICE), general(dispatcher, frame)):  # both paths
        assert decoded(ApiKey.OFFSET_COMMIT, 8, answer).topics[0].partitions[0].error_code == (  # type: ignore[arg-type]
            ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    allow(acl, ResourceType.GROUP, "g", AclOperation.READ)
    commit["generation_id_or_member_epoch"] = -1  # outside any generation: stored without a member
    answer = call(ApiKey.OFFSET_COMMIT, 8, commit)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(acl, ResourceType.TOPIC, "t", AclOperation.READ)
    assert call(ApiKey.OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code == ErrorCode.NONE

    # READ on the group gives DESCRIBE: the offsets of describable topics, t's named partition of u refused
    fetch = {"groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]},
                                                      {"name": "u", "partition_indexes": [0]}]}]}  # fmt: skip
    topics = call(ApiKey.OFFSET_FETCH, 8, fetch).groups[0].topics
    assert [(t.name, p.committed_offset, p.error_code) for t in topics for p in t.partitions] == [
        ("t", 5, ErrorCode.NONE),
        ("u", -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    commit["topics"] = [{"name": "u", "partitions": [{"partition_index": 0, "committed_offset": 9}]}]
    call(ApiKey.OFFSET_COMMIT, 8, commit, ADMIN)
    everything = call(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]}).groups[0].topics
    assert [t.name for t in everything] == ["t"]  # u left out
    assert [t.name for t in call(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]}, ADMIN)
            .groups[0].topics] == ["t", "u"]  # fmt: skip
    refused = call(ApiKey.OFFSET_FETCH, 3, {"group_id": "other", "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert (refused.error_code, refused.topics) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, ())

    described = call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g", "other"], "include_authorized_operations": True})
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("g", ErrorCode.NONE),
        ("other", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]
    assert described.groups[0].authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE
    call(ApiKey.OFFSET_COMMIT, 8, {**commit, "group_id": "other"}, ADMIN)
    assert [g.group_id for g in call(ApiKey.LIST_GROUPS, 4, {}).groups] == ["g"]
    assert sorted(g.group_id for g in call(ApiKey.LIST_GROUPS, 4, {}, ADMIN).groups) == ["g", "other"]
    deleted = call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g", "other"]})
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("g", ErrorCode.GROUP_AUTHORIZATION_FAILED),  # READ does not give DELETE
        ("other", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]
    offset_delete = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    assert call(ApiKey.OFFSET_DELETE, 0, offset_delete).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


# --- topic admin APIs, ListOffsets, DeleteRecords, OffsetForLeaderEpoch -------------------------------------------


def test_topic_admin_apis_need_their_topic_operation() -> None:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    zk.register_broker(BrokerRegistration(1, ["PLAINTEXT://h:9092"]))
    cache = MetadataCache(1, "cluster")
    acl = acl_cache(
        (ResourceType.TOPIC, "a", AclOperation.CREATE),
        (ResourceType.TOPIC, "b", AclOperation.CREATE),
        (ResourceType.TOPIC, "b", AclOperation.DESCRIBE_CONFIGS),
    )
    dispatcher = ApiDispatcher(admin_topic_apis(AdminZkClient(zk), cache, BrokerConfig(), 1, acl), acl)

    def call(key: ApiKey, version: int, values: dict[str, Any]) -> Any:
        return decoded(key, version, general(dispatcher, request_frame(key, version, values)))

    new = [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} for n in "abc"]
    created = {t.name: t for t in call(ApiKey.CREATE_TOPICS, 7, {"topics": new, "timeout": 0}).topics}
    assert (created["a"].error_code, created["a"].topic_config_error_code) == (0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert created["a"].num_partitions == -1 and not created["a"].configs  # not told without DESCRIBE_CONFIGS
    assert (created["b"].error_code, created["b"].num_partitions, created["b"].topic_config_error_code) == (0, 1, 0)
    assert created["b"].configs
    assert (created["c"].error_code, created["c"].error_message) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "Authorization failed.",
    )
    assert sorted(zk.get_all_topics()) == ["a", "b"]

    grown = call(ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "a", "count": 2, "assignments": None}],
                                                "timeout": 0, "validate_only": False})  # fmt: skip
    assert grown.results[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    cache.update_partition("b", "AAAAAAAAAAAAAAAAAAAAAQ", 0, PartitionInfo(1, 0, (1,), (1,)))
    b_id = cache.topics["b"].topic_uuid
    deleted = call(ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": "a", "topic_id": uuid.UUID(int=0)},
                                                         {"name": None, "topic_id": b_id}], "timeout": 0})  # fmt: skip
    assert [(r.name, r.error_code) for r in deleted.responses] == [
        ("a", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # named by id and not describable: the name is not told
    ]
    assert sorted(zk.get_all_topics()) == ["a", "b"] and not zk.store.exists("/admin/delete_topics/a")


def test_offsets_apis_need_describe_or_delete_on_the_topic_and_a_broker_cluster_action(tmp_path: Path) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 1, ManualClock())
        await rm.append_records({TopicPartition("t", 0): GOOD}, 1, 1000)
        acl = acl_cache()
        dispatcher = ApiDispatcher([*offsets_apis(rm, acl=acl), *leader_epoch_apis(rm, acl)], acl)

        async def codes(client: ClientAddress) -> tuple[int, int, int]:
            listed = {"replica_id": -1, "isolation_level": 0,
                      "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}  # fmt: skip
            epoch = {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}  # fmt: skip
            delete = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]}], "timeout": 0}
            answers = [
                decoded(key, version, await dispatcher(request_frame(key, version, values), client))
                for key, version, values in (
                    (ApiKey.LIST_OFFSETS, 7, listed),
                    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, epoch),
                    (ApiKey.DELETE_RECORDS, 2, delete),
                )
            ]
            return (
                answers[0].topics[0].partitions[0].error_code,
                answers[1].topics[0].partitions[0].error_code,
                answers[2].topics[0].partitions[0].error_code,
            )

        refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert await codes(ALICE) == (refused, refused, refused)
        allow(acl, ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)  # a broker's
        assert await codes(ALICE) == (refused, ErrorCode.NONE, refused)
        allow(acl, ResourceType.TOPIC, "t", AclOperation.DESCRIBE)
        assert await codes(ALICE) == (ErrorCode.NONE, ErrorCode.NONE, refused)
        assert rm.partitions[TopicPartition("t", 0)].log_start_offset == 0
        assert await codes(ADMIN) == (ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE)
        assert rm.partitions[TopicPartition("t", 0)].log_start_offset == 1

    asyncio.run(run())


def test_config_apis_need_the_configs_operation_on_the_topic_or_the_cluster() -> None:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    acl = acl_cache((ResourceType.TOPIC, "t", AclOperation.ALTER_CONFIGS))
    dispatcher = ApiDispatcher(configs_apis(AdminZkClient(zk), BrokerConfig(), 1, acl), acl)

    def call(key: ApiKey, version: int, values: dict[str, Any]) -> Any:
        return decoded(key, version, general(dispatcher, request_frame(key, version, values)))

    resources = [{"resource_type": kind, "resource_name": name, "configuration_keys": None}
                 for kind, name in ((2, "t"), (2, "u"), (4, "1"), (8, "1"))]  # fmt: skip
    described = call(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": resources, "include_synonyms": False,
                                                   "include_documentation": False})  # fmt: skip
    assert [(r.resource_name, r.error_code, r.error_message) for r in described.results] == [
        ("t", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Topic 't' does not exist."),  # ALTER_ gives DESCRIBE_CONFIGS
        ("u", ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
        ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
        ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    ]
    before = logging_config.loggers()["root"]
    level = [{"name": "root", "config_operation": 0, "value": "TRACE" if before != "TRACE" else "INFO"}]
    altered = call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 8, "resource_name": "1", "configs": level},
        {"resource_type": 2, "resource_name": "u", "configs": []}], "validate_only": False})  # fmt: skip
    assert [r.error_code for r in altered.responses] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ]
    assert logging_config.loggers()["root"] == before
    legacy = call(ApiKey.ALTER_CONFIGS, 2, {"resources": [{"resource_type": 8, "resource_name": "1", "configs": []}],
                                            "validate_only": False})  # fmt: skip
    assert legacy.responses[0].error_code == ErrorCode.INVALID_REQUEST  # refused as invalid before any ACL


# --- transactions ----------------------------------------------------------------------------------------------------


def test_transactional_apis_need_write_on_the_transactional_id_and_their_topics_and_groups() -> None:
    groups, _, _ = make()
    cache = group_cache()
    log, markers = RecordingLog(), Markers()
    transactions = txn_coordinator(log, markers)
    transactions.owned_partitions[0] = COORDINATOR_EPOCH
    acl = acl_cache()
    dispatcher = ApiDispatcher(
        [
            *cluster_apis(cache, None, acl, transactions),  # type: ignore[arg-type]
            *transaction_apis(transactions, groups, cache, groups.config, acl),
        ],
        acl,
    )

    def call(key: ApiKey, version: int, values: dict[str, Any]) -> Any:
        return decoded(key, version, general(dispatcher, request_frame(key, version, values)))

    init = {"transactional_id": "tx", "transaction_timeout": 60000}
    assert call(ApiKey.INIT_PRODUCER_ID, 4, init).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(acl, ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
    answer = call(ApiKey.INIT_PRODUCER_ID, 4, init)
    assert (answer.error_code, answer.producer_epoch) == (ErrorCode.NONE, 0)
    producer = {"producer_id": answer.producer_id, "producer_epoch": 0}

    add = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": answer.producer_id,
           "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]}  # fmt: skip
    added = call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add).results_by_topic_v3_and_below[0].results_by_partition[0]
    assert added.partition_error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allow(acl, ResourceType.TOPIC, "t", AclOperation.WRITE)
    added = call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add).results_by_topic_v3_and_below[0].results_by_partition[0]
    assert added.partition_error_code == ErrorCode.NONE
    offsets = {"transactional_id": "tx", **producer, "group_id": "g"}
    assert call(ApiKey.ADD_OFFSETS_TO_TXN, 3, offsets).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

    assert call(ApiKey.END_TXN, 1, {"transactional_id": "tx", **producer, "committed": True}).error_code == 0
    stale = {"transactional_id": "tx", "producer_id": answer.producer_id, "producer_epoch": 9, "committed": True}
    assert call(ApiKey.END_TXN, 1, stale).error_code == ErrorCode.INVALID_PRODUCER_EPOCH  # v1: no PRODUCER_FENCED
    assert call(ApiKey.END_TXN, 3, stale).error_code == ErrorCode.PRODUCER_FENCED

    marker = {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                           "topics": [{"name": "t", "partition_indexes": [0]}]}]}  # fmt: skip
    written = call(ApiKey.WRITE_TXN_MARKERS, 1, marker).markers[0].topics[0].partitions[0]
    assert written.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    batch = {"transactions": [{"transactional_id": "tx", **producer, "verify_only": True,
                               "topics": [{"name": "t", "partitions": [0]}]}]}  # fmt: skip
    assert call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, batch).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allow(acl, ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    verified = call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, batch).results_by_transaction[0].topic_results[0]
    assert (
        verified.results_by_partition[0].partition_error_code == ErrorCode.INVALID_TXN_STATE
    )  # committed: no longer ongoing
    described = call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "other"]}).transaction_states
    assert [(d.transactional_id, d.error_code) for d in described] == [
        ("tx", ErrorCode.NONE),  # WRITE implies DESCRIBE
        ("other", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ]
    assert [t.transactional_id for t in call(ApiKey.LIST_TRANSACTIONS, 1, {}).transaction_states] == ["tx"]
    by_pattern = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    for pattern, listed in (("t.", ["tx"]), ("t", []), ("", ["tx"])):  # matched whole, as Java's matches()
        found = call(ApiKey.LIST_TRANSACTIONS, 2, {**by_pattern, "transactional_id_pattern": pattern})
        assert [t.transactional_id for t in found.transaction_states] == listed
    invalid = call(ApiKey.LIST_TRANSACTIONS, 2, {**by_pattern, "transactional_id_pattern": "(unclosed"})
    assert invalid.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
