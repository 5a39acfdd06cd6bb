"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups,
DescribeGroups and DeleteGroups, over the group coordinator.

FindCoordinator creates ``__consumer_offsets`` on first use (``offsets.topic.num.partitions`` partitions, compacted,
``offsets.topic.segment.bytes`` segments). Its replication factor is ``offsets.topic.replication.factor``; as in
Kafka, a cluster with fewer live brokers than that answers COORDINATOR_NOT_AVAILABLE until enough have registered.
A standalone broker is the only broker there will ever be, so it creates the topic with one replica.

With an authorizer: FindCoordinator needs DESCRIBE on the group (or the transactional id), JoinGroup, SyncGroup,
Heartbeat and LeaveGroup READ on the group, DescribeGroups DESCRIBE and DeleteGroups DELETE on each group (else
GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional id); ListGroups lists every
group to a client with DESCRIBE on the cluster, else only the groups it may DESCRIBE. DescribeGroups v3+ may ask for
each group's authorized operations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from mq.config import BrokerConfig
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DENIED_MESSAGES,
    allowed_names,
    allows,
    allows_cluster,
    authorized_operations,
)
from mq.server.group_coordinator import GroupCoordinator, JoinRequest
from mq.server.group_metadata import CONSUMER_PROTOCOL_TYPE, GroupState, JoinResult, SyncResult
from mq.server.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from mq.server.metadata_cache import MetadataCache
from mq.server.transaction_state_manager import TRANSACTION_STATE_TOPIC_NAME
from mq.zk.admin_zk_client import AdminZkClient

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
"""ListGroups v5 group types: the classic protocol's groups and KIP-848's."""
AUTHORIZED_OPERATIONS_FROM = 3
"""The first DescribeGroups version that may ask for the groups' authorized operations."""


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


def client_host(context: RequestContext) -> str:
    """The member host Kafka records: Java's InetAddress rendering, ``/<address>``."""
    return f"/{context.client.host}"


def internal_topic_creator(
    admin: AdminZkClient,
    cache: MetadataCache,
    config: BrokerConfig,
    name: str,
    partitions: int,
    replication_factor: int,
    factor_key: str,
    configs: dict[str, str],
) -> Callable[[], bool]:
    """A function that returns whether the internal topic ``name`` exists and, if not, starts its creation on a
    worker thread (once at a time) when the live brokers allow its ``replication_factor`` (set by the broker key
    ``factor_key``; 1 when standalone)."""
    creating: list[asyncio.Future[None]] = []

    def create() -> bool:
        if name in cache.topics:
            return True
        if creating and not creating[0].done():
            return False
        factor = 1 if config.standalone else replication_factor
        if len(cache.brokers) < factor:
            log.info(
                "Number of alive brokers '%d' does not meet the required replication factor '%d' for the %s topic "
                "(configured via '%s')",
                len(cache.brokers),
                factor,
                "offsets" if name == GROUP_METADATA_TOPIC_NAME else "transactions state",
                factor_key,
            )
            return False

        effective = dict(configs)
        if "min.insync.replicas" in effective:  # a standalone broker's single replica is always enough
            effective["min.insync.replicas"] = str(min(int(effective["min.insync.replicas"]), factor))

        def write() -> None:
            try:
                admin.create_topic(name, partitions, factor, effective)
                log.info("Created %s with %d partitions", name, partitions)
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("Could not create %s: %s", name, exc)

        creating[:] = [asyncio.get_running_loop().run_in_executor(None, write)]
        return False

    return create


def offsets_topic_creator(admin: AdminZkClient, cache: MetadataCache, config: BrokerConfig) -> Callable[[], bool]:
    """``internal_topic_creator`` of ``__consumer_offsets``."""
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
        "compression.type": "producer",
    }
    return internal_topic_creator(
        admin,
        cache,
        config,
        GROUP_METADATA_TOPIC_NAME,
        config.offsets_topic_num_partitions,
        config.offsets_topic_replication_factor,
        "offsets.topic.replication.factor",
        configs,
    )


def transaction_topic_creator(admin: AdminZkClient, cache: MetadataCache, config: BrokerConfig) -> Callable[[], bool]:
    """``internal_topic_creator`` of ``__transaction_state``."""
    configs = {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(config.transaction_state_log_min_isr),
        "segment.bytes": str(config.transaction_state_log_segment_bytes),
        "unclean.leader.election.enable": "false",
        "compression.type": "uncompressed",
    }
    return internal_topic_creator(
        admin,
        cache,
        config,
        TRANSACTION_STATE_TOPIC_NAME,
        config.transaction_state_log_num_partitions,
        config.transaction_state_log_replication_factor,
        "transaction.state.log.replication.factor",
        configs,
    )


def group_apis(
    coordinator: GroupCoordinator,
    cache: MetadataCache,
    create_offsets_topic: Callable[[], bool],
    acl: AclCache | None = None,
    create_transaction_topic: Callable[[], bool] | None = None,
    transaction_partition_for: Callable[[str], int] | None = None,
) -> list[Api]:
    """The group membership APIs over ``coordinator``, authorized by ``acl`` (None: no authorizer). FindCoordinator
    locates transaction coordinators with ``create_transaction_topic`` and ``transaction_partition_for`` (None: it
    answers COORDINATOR_NOT_AVAILABLE for them)."""

    def group_allows(context: RequestContext, operation: AclOperation, group_id: str) -> bool:
        return allows(acl, context, operation, ResourceType.GROUP, group_id)

    # --- FindCoordinator -----------------------------------------------------------------------------------------

    def locate(context: RequestContext, key: str, key_type: int) -> dict[str, Any]:
        answer: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1, "error_message": None}
        if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            return {**answer, "error_code": ErrorCode.INVALID_REQUEST, "error_message": "Unknown coordinator type"}
        refusal = None
        if key_type == GROUP_KEY_TYPE and not group_allows(context, AclOperation.DESCRIBE, key):
            refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif key_type == TRANSACTION_KEY_TYPE and not allows(
            acl, context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if refusal is not None:
            message = DENIED_MESSAGES[refusal] if context.version < 4 else None
            return {**answer, "error_code": refusal, "error_message": message}
        if key_type == TRANSACTION_KEY_TYPE:
            if create_transaction_topic is None or transaction_partition_for is None or not create_transaction_topic():
                return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
            topic_name, partition = TRANSACTION_STATE_TOPIC_NAME, transaction_partition_for(key)
        elif not create_offsets_topic():
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        else:
            topic_name, partition = GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(key)
        topic = cache.topics.get(topic_name)
        state = None if topic is None else topic.partitions.get(partition)
        leader = None if state is None else cache.brokers.get(state.leader)
        endpoint = None if leader is None else leader.on(context.client.listener)
        if endpoint is None:
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        return {**answer, "error_code": 0, "node_id": endpoint.broker_id, "host": endpoint.host, "port": endpoint.port}

    async def find_coordinator(context: RequestContext, request: Any) -> dict[str, Any]:
        key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
        if context.version >= 4:
            return {
                "throttle_time": 0,
                "coordinators": [locate(context, k, key_type) for k in request.coordinator_keys],
            }
        return {"throttle_time": 0, **locate(context, request.key, key_type)}

    def find_coordinator_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        base = {"node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": None}
        if context.version >= 4:
            return {"throttle_time": 0, "coordinators": [{"key": k, **base} for k in request.coordinator_keys]}
        return {"throttle_time": 0, **base}

    # --- JoinGroup -----------------------------------------------------------------------------------------------

    def join_response(context: RequestContext, result: JoinResult) -> dict[str, Any]:
        flexible_names = context.version >= 7
        return {
            "throttle_time": 0,
            "error_code": result.error,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name if flexible_names else result.protocol_name or "",
            "leader": result.leader_id,
            "member_id": result.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": data} for m, i, data in result.members],
        }

    async def join_group(context: RequestContext, request: Any) -> dict[str, Any]:
        if not group_allows(context, AclOperation.READ, request.group_id):
            return join_response(context, JoinResult(ErrorCode.GROUP_AUTHORIZATION_FAILED, ""))
        session_timeout_ms = _ms(request.session_timeout)
        rebalance = getattr(request, "rebalance_timeout", None)
        join = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            require_known_member_id=context.version >= 4,
            client_id=context.header.client_id or "",
            client_host=client_host(context),
            rebalance_timeout_ms=session_timeout_ms if rebalance is None else _ms(rebalance),
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        )
        return join_response(context, await coordinator.join_group(join))

    def join_group_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return join_response(context, JoinResult(code, request.member_id))

    # --- SyncGroup -----------------------------------------------------------------------------------------------

    def sync_response(result: SyncResult) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "error_code": result.error,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        }

    async def sync_group(context: RequestContext, request: Any) -> dict[str, Any]:
        if context.version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            return sync_response(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))  # mandatory from v5, as in Kafka
        if not group_allows(context, AclOperation.READ, request.group_id):
            return sync_response(SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
        result = await coordinator.sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in request.assignments},
        )
        return sync_response(result)

    def sync_group_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return sync_response(SyncResult(code))

    # --- Heartbeat -----------------------------------------------------------------------------------------------

    async def heartbeat(context: RequestContext, request: Any) -> dict[str, Any]:
        if not group_allows(context, AclOperation.READ, request.group_id):
            return heartbeat_error(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        code = coordinator.heartbeat(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None), request.generation_id
        )
        return {"throttle_time": 0, "error_code": code}

    def heartbeat_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code}

    # --- LeaveGroup ----------------------------------------------------------------------------------------------

    def leaving(context: RequestContext, request: Any) -> list[tuple[str, str | None]]:
        if context.version >= 3:
            return [(m.member_id, m.group_instance_id) for m in request.members]
        return [(request.member_id, None)]

    async def leave_group(context: RequestContext, request: Any) -> dict[str, Any]:
        if not group_allows(context, AclOperation.READ, request.group_id):
            return leave_group_error(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        code, members = coordinator.leave_group(request.group_id, leaving(context, request))
        if context.version < 3 and code == ErrorCode.NONE and members:
            code = members[0][2]  # one member: its error is the request's
        return {
            "throttle_time": 0,
            "error_code": code,
            "members": [{"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in members],
        }

    def leave_group_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "members": []}

    # --- ListGroups ----------------------------------------------------------------------------------------------

    async def list_groups(context: RequestContext, request: Any) -> dict[str, Any]:
        types = {t.lower() for t in getattr(request, "types_filter", ())}
        states = getattr(request, "states_filter", ())
        code, groups = coordinator.list_groups(states)
        consumer_groups = coordinator.consumer_groups.groups if coordinator.consumer_groups is not None else {}
        listed = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": CLASSIC_GROUP_TYPE,
            }
            for g in groups
            if g.group_id not in consumer_groups  # where a consumer-protocol group's offsets are kept
        ]
        if types and CLASSIC_GROUP_TYPE not in types:
            listed = []
        if not types or CONSUMER_GROUP_TYPE in types:
            wanted = {state.lower() for state in states}
            listed += [
                {
                    "group_id": g.group_id,
                    "protocol_type": CONSUMER_PROTOCOL_TYPE,
                    "group_state": g.state(),
                    "group_type": CONSUMER_GROUP_TYPE,
                }
                for g in consumer_groups.values()
                if coordinator.status(g.group_id) == ErrorCode.NONE and (not wanted or g.state().lower() in wanted)
            ]
        if not allows_cluster(acl, context, AclOperation.DESCRIBE):
            described = allowed_names(
                acl, context, AclOperation.DESCRIBE, ResourceType.GROUP, (g["group_id"] for g in listed), audit=False
            )
            listed = [g for g in listed if g["group_id"] in described]
        return {"throttle_time": 0, "error_code": code, "groups": listed}

    def list_groups_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "groups": []}

    # --- DescribeGroups ------------------------------------------------------------------------------------------

    def described(context: RequestContext, group_id: str, with_operations: bool) -> dict[str, Any]:
        empty = {
            "group_id": group_id,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
        if not group_allows(context, AclOperation.DESCRIBE, group_id):
            return {**empty, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_state": ""}
        code, group = coordinator.describe_group(group_id)
        if code != ErrorCode.NONE:
            return {**empty, "error_code": code, "group_state": ""}
        not_classic = coordinator.consumer_groups is not None and group_id in coordinator.consumer_groups.groups
        if not_classic:
            group = None  # its classic entry only keeps its offsets
        if group is None and context.version >= 6:
            return {
                **empty,
                "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {group_id} is not a classic group."
                if not_classic
                else f"Group {group_id} not found.",
                "group_state": GroupState.DEAD.value,
            }
        if with_operations:
            empty["authorized_operations"] = authorized_operations(acl, context, ResourceType.GROUP, group_id)
        if group is None:
            return {**empty, "error_code": 0, "group_state": GroupState.DEAD.value}
        return {**group.summary(), "error_code": 0, "authorized_operations": empty["authorized_operations"]}

    async def describe_groups(context: RequestContext, request: Any) -> dict[str, Any]:
        with_operations = context.version >= AUTHORIZED_OPERATIONS_FROM and bool(request.include_authorized_operations)
        return {"throttle_time": 0, "groups": [described(context, g, with_operations) for g in request.groups]}

    def describe_groups_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        groups = [
            {
                "error_code": code,
                "group_id": g,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
            for g in request.groups
        ]
        return {"throttle_time": 0, "groups": groups}

    # --- DeleteGroups --------------------------------------------------------------------------------------------

    async def delete_groups(context: RequestContext, request: Any) -> dict[str, Any]:
        names = request.groups_names
        deletable = allowed_names(acl, context, AclOperation.DELETE, ResourceType.GROUP, names)
        results = await coordinator.delete_groups([g for g in names if g in deletable])
        results.update((g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in names if g not in deletable)
        deleted = [g for g, c in results.items() if c == ErrorCode.NONE]
        if deleted:
            audit(context, f"deleted consumer groups {', '.join(deleted)}")
        return {"throttle_time": 0, "results": [{"group_id": g, "error_code": c} for g, c in results.items()]}

    def delete_groups_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"group_id": g, "error_code": code} for g in request.groups_names]}

    return [
        Api(ApiKey.FIND_COORDINATOR, 0, 6, find_coordinator, find_coordinator_error),
        Api(ApiKey.JOIN_GROUP, 0, 9, join_group, join_group_error),
        Api(ApiKey.SYNC_GROUP, 0, 5, sync_group, sync_group_error),
        Api(ApiKey.HEARTBEAT, 0, 4, heartbeat, heartbeat_error),
        Api(ApiKey.LEAVE_GROUP, 0, 5, leave_group, leave_group_error),
        Api(ApiKey.LIST_GROUPS, 0, 5, list_groups, list_groups_error),
        Api(ApiKey.DESCRIBE_GROUPS, 0, 6, describe_groups, describe_groups_error),
        Api(ApiKey.DELETE_GROUPS, 0, 2, delete_groups, delete_groups_error),
    ]
