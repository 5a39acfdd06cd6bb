"""The newest versions of admin APIs Kafka 4.1 serves: DescribeCluster v2 (endpoint types, fenced brokers),
AlterPartitionReassignments v1 (KIP-860: refusing a change of replication factor) and InitProducerId v5, through real
frames."""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import ApiDispatcher
from mq.server.handlers.cluster import cluster_apis
from mq.server.handlers.reassignments import reassignment_apis
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache
from mq.server.producer_id_manager import ProducerIdManager
from mq.zk import paths
from mq.zk.codecs import BrokerRegistration, TopicAssignment, decode_reassignment
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from tests.unit.server.test_authorization_checks import decoded, general, request_frame


def describe_cluster(version: int, values: dict[str, Any], key: ApiKey = ApiKey.DESCRIBE_CLUSTER) -> Any:
    cache = MetadataCache(1, "the-cluster")
    cache.update_brokers([BrokerEndpoint(1, "h", 9092), BrokerEndpoint(2, "h", 9093)], 2)
    dispatcher = ApiDispatcher(cluster_apis(cache, ProducerIdManager(LocalStore(None), 1)))
    return decoded(key, version, general(dispatcher, request_frame(key, version, values)))


def test_init_producer_id_v5_answers_an_idempotent_producer_as_v4_does() -> None:
    values = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    for version in (4, 5):
        fresh = describe_cluster(version, values, ApiKey.INIT_PRODUCER_ID)
        assert (fresh.error_code, fresh.producer_epoch) == (ErrorCode.NONE, 0) and fresh.producer_id >= 0
        bumped = describe_cluster(version, {**values, "producer_id": 42, "producer_epoch": 3}, ApiKey.INIT_PRODUCER_ID)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.NONE, 42, 4)


def test_describe_cluster_v2_lists_every_broker_unfenced() -> None:
    values = {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True}
    answer = describe_cluster(2, values)
    assert (answer.error_code, answer.cluster_id, answer.controller_id) == (ErrorCode.NONE, "the-cluster", 2)
    assert [(b.broker_id, b.port, b.is_fenced) for b in answer.brokers] == [(1, 9092, False), (2, 9093, False)]


def test_describe_cluster_for_controllers_or_an_unknown_endpoint_type_is_refused_as_kafkas_brokers_refuse_it() -> None:
    for version in (1, 2):
        values = {"include_cluster_authorized_operations": False, "include_fenced_brokers": False}
        controllers = describe_cluster(version, {**values, "endpoint_type": 2})
        assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and controllers.brokers == ()
        unknown = describe_cluster(version, {**values, "endpoint_type": 0})
        assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        assert unknown.error_message == "Unsupported endpoint type 0"


def reassign(zk: KafkaZkClient, version: int, replicas: dict[int, list[int]], allow: bool) -> Any:
    key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    values = {
        "timeout": 30000,
        "allow_replication_factor_change": allow,
        "topics": [{"name": "t", "partitions": [{"partition_index": p, "replicas": r} for p, r in replicas.items()]}],
    }
    return decoded(key, version, general(ApiDispatcher(reassignment_apis(zk)), request_frame(key, version, values)))


def zk_with_topic() -> KafkaZkClient:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    for broker in (1, 2, 3):
        zk.register_broker(BrokerRegistration(broker, [f"PLAINTEXT://h:{9091 + broker}"]))
    zk.create_topic("t", TopicAssignment({0: [1, 2], 1: [2, 3]}), {})
    return zk


def requested(zk: KafkaZkClient) -> dict[int, list[int]]:
    data = zk.store.get_or_none(paths.REASSIGN_PARTITIONS)
    return {} if data is None else {p: r for _, p, r in decode_reassignment(data)}


def test_a_reassignment_that_may_not_change_the_replication_factor_refuses_one_that_does() -> None:
    zk = zk_with_topic()
    answer = reassign(zk, 1, {0: [1, 2, 3], 1: [3, 1]}, allow=False)
    assert answer.allow_replication_factor_change is False
    results = {p.partition_index: (p.error_code, p.error_message) for p in answer.responses[0].partitions}
    assert results == {
        0: (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
        1: (ErrorCode.NONE, None),
    }
    assert requested(zk) == {1: [3, 1]}  # only the move that keeps two replicas


def test_a_reassignment_may_change_the_replication_factor_by_default_and_before_v1() -> None:
    for version, allow in ((0, False), (1, True)):  # v0 has no flag: a change is allowed
        zk = zk_with_topic()
        answer = reassign(zk, version, {0: [1, 2, 3]}, allow=allow)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE
        assert requested(zk) == {0: [1, 2, 3]}
