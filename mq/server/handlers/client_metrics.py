"""Client metrics (KIP-714): GetTelemetrySubscriptions, PushTelemetry, and ListConfigResources.

mq keeps no client-metrics subscriptions, so it answers as a Kafka broker whose subscriptions match no client: a
GetTelemetrySubscriptions assigns a client instance id when the client has none (the zero UUID) and answers an empty
``requested_metrics`` with Kafka's default push interval, so a client asks again after that interval and never
pushes. A PushTelemetry is answered and its metrics are dropped; one without a client instance id (null, the zero
UUID or Kafka's reserved id 1) is INVALID_REQUEST, as Kafka answers it. Neither is authorized, as in Kafka.

ListConfigResources v0 (Kafka's ListClientMetricsResources) lists the client-metrics resources: none. v1 (KIP-1142)
lists the resources of the types asked (every supported type for an empty list), in Kafka's order of types: groups
with configs (none: mq keeps no group configs), client-metrics resources (none), each broker on the request's
listener as a BROKER_LOGGER and then as a BROKER resource, and every topic (internal ones included); within a type
by name (brokers by id). A type outside those five fails the whole request with UNSUPPORTED_VERSION. Either version
needs DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.configs import ResourceType
from mq.records.batch_header import Codec
from mq.records.crc import crc32c
from mq.security.acl import AclOperation
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allows_cluster
from mq.server.metadata_cache import MetadataCache

PUSH_INTERVAL_MS = 300_000
"""How long a client waits before asking for its subscriptions again (Kafka's ``ClientMetricsConfigs`` default)."""
TELEMETRY_MAX_BYTES = 1024 * 1024
"""The largest metrics payload a client may push (Kafka's ``telemetry.max.bytes`` default)."""
ACCEPTED_COMPRESSION_TYPES = (Codec.ZSTD, Codec.LZ4, Codec.GZIP, Codec.SNAPPY)
"""In Kafka's order of preference."""
RESERVED_INSTANCE_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})
"""Kafka's ``Uuid.RESERVED``: the zero UUID and the metadata topic's id; never a client instance id."""
CLIENT_METRICS = 16
GROUP = 32
"""Kafka's ``ConfigResource.Type`` of the resources whose configs mq does not keep."""
LISTED_TYPES = (GROUP, CLIENT_METRICS, ResourceType.BROKER_LOGGER, ResourceType.BROKER, ResourceType.TOPIC)
"""The types ListConfigResources v1 lists, in the order it lists them."""


def subscription_id(client_instance_id: uuid.UUID) -> int:
    """The id of the empty subscription of a client, as Kafka computes it: CRC-32C of the subscribed metrics and the
    push interval (``"[]300000"``) XOR Java's ``Uuid.hashCode`` of the client instance id, as a signed int32."""
    crc = crc32c(f"[]{PUSH_INTERVAL_MS}".encode())
    both = (client_instance_id.int >> 64) ^ (client_instance_id.int & (1 << 64) - 1)
    hashed = (both >> 32) ^ (both & 0xFFFFFFFF)
    value = (crc ^ hashed) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def client_metrics_apis(cache: MetadataCache, acl: AclCache | None = None) -> list[Api]:
    """The three APIs, ListConfigResources listing from ``cache`` and authorized by ``acl`` (None: no
    authorizer)."""

    async def get_subscriptions(context: RequestContext, request: Any) -> dict[str, Any]:
        instance_id = request.client_instance_id
        if instance_id is None or instance_id == uuid.UUID(int=0):
            instance_id = uuid.uuid4()
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.NONE,
            "client_instance_id": instance_id,
            "subscription_id": subscription_id(instance_id),
            "accepted_compression_types": [int(codec) for codec in ACCEPTED_COMPRESSION_TYPES],
            "push_interval": PUSH_INTERVAL_MS,
            "telemetry_max_bytes": TELEMETRY_MAX_BYTES,
            "delta_temporality": True,
            "requested_metrics": [],
        }

    def get_subscriptions_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "client_instance_id": uuid.UUID(int=0)}

    async def push(context: RequestContext, request: Any) -> dict[str, Any]:
        if request.client_instance_id is None or request.client_instance_id in RESERVED_INSTANCE_IDS:
            return push_error(context, request, ErrorCode.INVALID_REQUEST)
        return {"throttle_time": 0, "error_code": ErrorCode.NONE}

    def push_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code}

    async def list_resources(context: RequestContext, request: Any) -> dict[str, Any]:
        if not allows_cluster(acl, context, AclOperation.DESCRIBE_CONFIGS):
            return list_error(context, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if context.version == 0:
            return {"throttle_time": 0, "error_code": ErrorCode.NONE, "config_resources": []}
        asked = set(request.resource_types) or set(LISTED_TYPES)
        if not asked <= set(LISTED_TYPES):
            return list_error(context, request, ErrorCode.UNSUPPORTED_VERSION)
        brokers = sorted(b.broker_id for b in cache.brokers_on(context.client.listener))
        names: dict[int, list[str]] = {
            ResourceType.BROKER_LOGGER: [str(b) for b in brokers],
            ResourceType.BROKER: [str(b) for b in brokers],
            ResourceType.TOPIC: sorted(cache.topics),
        }
        resources = [
            {"resource_name": name, "resource_type": kind}
            for kind in LISTED_TYPES
            if kind in asked
            for name in names.get(kind, ())
        ]
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "config_resources": resources}

    def list_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "config_resources": []}

    return [
        Api(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, get_subscriptions, get_subscriptions_error),
        Api(ApiKey.PUSH_TELEMETRY, 0, 0, push, push_error),
        Api(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, list_resources, list_error),
    ]
