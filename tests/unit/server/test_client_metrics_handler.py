"""GetTelemetrySubscriptions, PushTelemetry and ListConfigResources through the dispatcher with real frames: the answers
of a broker whose client-metrics subscriptions match no client, and ListConfigResources v1's other resources."""

from __future__ import annotations

import uuid
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import ApiDispatcher
from mq.server.handlers.client_metrics import (
    CLIENT_METRICS,
    GROUP,
    PUSH_INTERVAL_MS,
    client_metrics_apis,
    subscription_id,
)
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from tests.unit.server.test_authorization_checks import acl_cache, decoded, general, request_frame

CLIENT = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def cluster() -> MetadataCache:
    """Brokers 7 and 3; topics ``b``, ``a`` and ``__consumer_offsets``."""
    cache = MetadataCache(3, "cluster")
    cache.update_brokers([BrokerEndpoint(7, "h7", 9092), BrokerEndpoint(3, "h3", 9092)], 3)
    for topic in ("b", "a", "__consumer_offsets"):
        cache.update_partition(topic, None, 0, PartitionInfo(3, 0, (3,), (3,)))
    return cache


def ask(key: ApiKey, values: dict[str, Any], acl: AclCache | None = None, version: int = 0) -> Any:
    dispatcher = ApiDispatcher(client_metrics_apis(cluster(), acl), acl)
    return decoded(key, version, general(dispatcher, request_frame(key, version, values)))


def test_a_new_client_gets_an_instance_id_and_an_empty_subscription() -> None:
    first = ask(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": None})
    second = ask(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": None})
    assert first.error_code == ErrorCode.NONE
    assert first.client_instance_id is not None and first.client_instance_id != second.client_instance_id
    assert first.requested_metrics == ()
    assert first.push_interval.total_seconds() * 1000 == PUSH_INTERVAL_MS  # asks again after 5 minutes, not at once
    assert first.delta_temporality and first.telemetry_max_bytes == 1024 * 1024
    assert first.accepted_compression_types == (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
    assert first.subscription_id == subscription_id(first.client_instance_id)


def test_a_known_client_keeps_its_instance_id_and_subscription_id() -> None:
    answer = ask(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": CLIENT})
    assert answer.client_instance_id == CLIENT
    assert (
        answer.subscription_id
        == ask(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": CLIENT}).subscription_id
    )


def test_the_subscription_id_is_kafkas() -> None:
    """Kafka: CRC-32C of "[]300000" (the subscribed metrics and the push interval) XOR Java's Uuid.hashCode()."""
    crc = 0xFFFFFFFF
    for byte in b"[]300000":  # CRC-32C bit by bit, independent of mq's codecs
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    mixed = 0x0F1E2D3C4B5A6978 ^ 0x8796A5B4C3D2E1F0  # CLIENT's most and least significant bits
    expected = crc ^ (mixed >> 32) ^ (mixed & 0xFFFFFFFF)
    assert subscription_id(CLIENT) == (expected - (1 << 32) if expected >= 1 << 31 else expected)


def test_a_push_is_answered_and_one_without_a_client_instance_id_is_invalid() -> None:
    values = {"subscription_id": 1, "terminating": False, "compression_type": 0, "metrics": b"\x01\x02"}
    assert ask(ApiKey.PUSH_TELEMETRY, {**values, "client_instance_id": CLIENT}).error_code == ErrorCode.NONE
    for reserved in (None, uuid.UUID(int=1)):
        answer = ask(ApiKey.PUSH_TELEMETRY, {**values, "client_instance_id": reserved})
        assert answer.error_code == ErrorCode.INVALID_REQUEST


def test_no_client_metrics_resources_are_listed_to_a_client_that_may_describe_the_cluster_configs() -> None:
    answer = ask(ApiKey.LIST_CONFIG_RESOURCES, {})
    assert (answer.error_code, answer.config_resources) == (ErrorCode.NONE, ())
    refused = ask(
        ApiKey.LIST_CONFIG_RESOURCES, {}, acl_cache((ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE))
    )
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allowed = acl_cache((ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS))
    assert ask(ApiKey.LIST_CONFIG_RESOURCES, {}, allowed).error_code == ErrorCode.NONE


def test_v1_lists_the_resources_of_the_types_asked_in_kafkas_order() -> None:
    def listed(types: list[int]) -> tuple[int, list[tuple[int, str]]]:
        answer = ask(ApiKey.LIST_CONFIG_RESOURCES, {"resource_types": types}, version=1)
        return answer.error_code, [(r.resource_type, r.resource_name) for r in answer.config_resources]

    brokers = [(8, "3"), (8, "7"), (4, "3"), (4, "7")]  # as broker loggers, then as brokers
    topics = [(2, "__consumer_offsets"), (2, "a"), (2, "b")]
    assert listed([]) == (ErrorCode.NONE, brokers + topics)
    assert listed([2, 4, 2]) == (ErrorCode.NONE, brokers[2:] + topics)
    assert listed([GROUP, CLIENT_METRICS]) == (ErrorCode.NONE, [])
    assert listed([2, 64]) == (ErrorCode.UNSUPPORTED_VERSION, [])
    assert ask(ApiKey.LIST_CONFIG_RESOURCES, {}).config_resources == ()  # v0: client metrics only
