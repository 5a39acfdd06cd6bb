"""Where requests are authorized, as Kafka's request handler (KafkaApis) authorizes them.

Two kinds of check, each in one place:

- Whole-request checks: the APIs of ``CLUSTER_OPERATIONS`` need one operation on the CLUSTER resource. The dispatcher
  asks before the handler runs and, when refused, answers the API's error response with CLUSTER_AUTHORIZATION_FAILED
  for everything the request asked about (Kafka's ``authorizeClusterOperation``).
- Per-resource checks, in the handlers, through ``allows`` and ``allowed_names`` (Kafka's ``authorize`` and
  ``filterByAuthorized``: one decision per distinct name, logged with how many times the request names it): a topic
  refused answers TOPIC_AUTHORIZATION_FAILED for its partitions, a group GROUP_AUTHORIZATION_FAILED, and so on, while
  the rest of the request is served.

``acl`` is the broker's ``AclCache``, None without ``authorizer.class.name``: then everything is allowed, and the
immediate paths (Produce, Fetch, OffsetCommit) pay an ``is None`` test (Fetch also tests that it refused nothing). With an authorizer a decision is one dict
lookup once cached (per principal, host, operation and resource; the cache empties when an ACL changes, so a change
is in force for the next request of every connection).

Brokers send each other requests as their inter-broker principal (User:ANONYMOUS on a PLAINTEXT inter-broker
listener): LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown and WriteTxnMarkers need CLUSTER_ACTION, and so does a
follower's Fetch, so ``super.users`` must include that principal, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from mq.server.acl_cache import AclCache
    from mq.server.api_dispatch import RequestContext

CLUSTER_OPERATIONS: Mapping[int, AclOperation] = {
    ApiKey.LEADER_AND_ISR: AclOperation.CLUSTER_ACTION,
    ApiKey.STOP_REPLICA: AclOperation.CLUSTER_ACTION,
    ApiKey.UPDATE_METADATA: AclOperation.CLUSTER_ACTION,
    ApiKey.CONTROLLED_SHUTDOWN: AclOperation.CLUSTER_ACTION,
    ApiKey.WRITE_TXN_MARKERS: AclOperation.CLUSTER_ACTION,
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.ALTER_REPLICA_LOG_DIRS: AclOperation.ALTER,
    ApiKey.DESCRIBE_LOG_DIRS: AclOperation.DESCRIBE,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: AclOperation.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: AclOperation.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    ApiKey.DESCRIBE_ACLS: AclOperation.DESCRIBE,
    ApiKey.CREATE_ACLS: AclOperation.ALTER,
    ApiKey.DELETE_ACLS: AclOperation.ALTER,
}
"""API -> the operation on the CLUSTER resource its whole request needs (else CLUSTER_AUTHORIZATION_FAILED)."""

SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}
"""The operations each resource type has (Kafka's ``AclEntry.supportedOperations``): what an authorized-operations
field may list."""

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""An authorized-operations field the request did not ask for."""

DENIED_MESSAGES: Mapping[ErrorCode, str] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}
"""Kafka's messages of the authorization errors, for responses that carry an error message."""


def cluster_refused(acl: AclCache, context: RequestContext) -> bool:
    """Whether the request's API is one of ``CLUSTER_OPERATIONS`` and its client may not do that operation."""
    operation = CLUSTER_OPERATIONS.get(context.header.api_key)
    return operation is not None and not acl.authorize(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allows(
    acl: AclCache | None,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    audit: bool = True,
) -> bool:
    """Whether the client of ``context`` may do ``operation`` on the resource (always, without an authorizer);
    ``audit=False`` logs a refusal at DEBUG only (Kafka's ``logIfDenied = false``)."""
    return acl is None or acl.authorize(context, operation, resource_type, name, audit=audit)


def allows_cluster(
    acl: AclCache | None, context: RequestContext, operation: AclOperation, *, audit: bool = True
) -> bool:
    """``allows`` on the CLUSTER resource."""
    return allows(acl, context, operation, ResourceType.CLUSTER, CLUSTER_NAME, audit=audit)


def allowed_names(
    acl: AclCache | None,
    context: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    *,
    audit: bool = True,
) -> set[str]:
    """The ``names`` the client may do ``operation`` on: one decision per distinct name, logged with the number of
    times ``names`` holds it (Kafka's ``filterByAuthorized``)."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    if acl is None:
        return set(counts)
    return {
        name
        for name, count in counts.items()
        if acl.authorize(context, operation, resource_type, name, ref_count=count, audit=audit)
    }


def allows_any(
    acl: AclCache | None, context: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the client may do ``operation`` on at least one resource of the type (Kafka's
    ``authorizeByResourceType``)."""
    return acl is None or acl.authorize_by_resource_type(context, operation, resource_type)


def authorized_operations(acl: AclCache | None, context: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The bit field (bit = operation code) of the operations of ``SUPPORTED_OPERATIONS`` the client may do on the
    resource; every one without an authorizer. Decisions logged at DEBUG only."""
    operations = SUPPORTED_OPERATIONS[resource_type]
    if acl is not None:
        operations = tuple(op for op in operations if acl.authorize(context, op, resource_type, name, audit=False))
    field = 0
    for op in operations:
        field |= 1 << op
    return field
