"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) on the coordinator's ``ConsumerGroups``.

What is served and what is not: ``mq.server.consumer_groups``. A heartbeat that changed its group is answered once
the group's changed records are written to ``__consumer_offsets`` (a failed write answers its error, e.g.
NOT_COORDINATOR, and the member retries; the records are written again at the next heartbeat). Partitions travel by
topic id on the wire and by name inside; a heartbeat needs READ on its group and DESCRIBE on every topic it names
(else TOPIC_AUTHORIZATION_FAILED), and its regex matches only topics it may describe, as Kafka checks them;
ConsumerGroupDescribe needs DESCRIBE on each group and does not compute authorized operations. ConsumerGroupDescribe
answers GROUP_ID_NOT_FOUND for a group that is not a consumer-protocol group (a classic one included), so that
librdkafka falls back to DescribeGroups, as Kafka answers it. A heartbeat for a classic group with members is refused
with GROUP_ID_NOT_FOUND, and a JoinGroup for a consumer-protocol group with members with INCONSISTENT_GROUP_PROTOCOL
(an empty group of either kind becomes the other), as Kafka answers them without migration.
"""

from __future__ import annotations

import uuid
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names, allows
from mq.server.consumer_groups import HEARTBEAT_INTERVAL_MS, ConsumerGroups, Partitions
from mq.server.group_coordinator import GroupCoordinator
from mq.server.metadata_cache import MetadataCache

CONSUMER_MEMBER = 1
"""ConsumerGroupDescribe v1's member type of a member that speaks the consumer protocol (0: classic, -1: unknown)."""


def consumer_group_protocol_apis(
    coordinator: GroupCoordinator, cache: MetadataCache, acl: AclCache | None = None
) -> list[Api]:
    """The two APIs; installs the coordinator's ``consumer_groups``."""

    def topics() -> dict[str, tuple[uuid.UUID | None, int]]:
        return {name: (info.topic_uuid, len(info.partitions)) for name, info in cache.topics.items()}

    groups = coordinator.consumer_groups = ConsumerGroups(topics)

    def wire(partitions: Partitions) -> dict[str, Any]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)
        ids = {name: info.topic_uuid for name, info in cache.topics.items()}
        return {
            "topic_partitions": [
                {"topic_id": ids.get(topic), "topic_name": topic, "partitions": ps} for topic, ps in by_topic.items()
            ]
        }

    def owned_of(request: Any) -> Partitions | None:
        if request.topic_partitions is None:
            return None
        names = {info.topic_uuid: name for name, info in cache.topics.items()}
        return frozenset(
            (names[t.topic_id], int(p)) for t in request.topic_partitions if t.topic_id in names for p in t.partitions
        )

    async def heartbeat(context: RequestContext, request: Any) -> dict[str, Any]:
        if not allows(acl, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return heartbeat_error(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = request.subscribed_topic_names or ()
        if len(allowed_names(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
            return heartbeat_error(context, request, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        status = coordinator.status(request.group_id)
        if status != ErrorCode.NONE:
            return heartbeat_error(context, request, status)
        classic = coordinator.groups.get(request.group_id)
        if classic is not None and classic.members:  # no migration between the protocols
            return {
                **heartbeat_error(context, request, ErrorCode.GROUP_ID_NOT_FOUND),
                "error_message": f"Group {request.group_id} is not a consumer group.",
            }
        result = groups.heartbeat(
            request.group_id,
            request.member_id,
            int(request.member_epoch),
            request.subscribed_topic_names,
            request.server_assignor,
            owned_of(request),
            coordinator.time_ms(),
            context.header.client_id or "",
            context.client.host,
            int(request.rebalance_timeout.total_seconds() * 1000),
            request.instance_id,
            getattr(request, "subscribed_topic_regex", None),  # v1+; librdkafka sends "" for none
            None
            if acl is None
            else lambda topic: allows(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic, audit=False),
        )
        if result.error == ErrorCode.NONE:
            coordinator.watch_consumer_members(request.group_id)
            stored = await coordinator.store_consumer_group(request.group_id)
            if stored != ErrorCode.NONE:
                return heartbeat_error(context, request, stored)
        return {
            "throttle_time": 0,
            "error_code": result.error,
            "error_message": result.message,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": HEARTBEAT_INTERVAL_MS,
            "assignment": None if result.assignment is None else wire(result.assignment),
        }

    def heartbeat_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": None,
            "member_id": None,
            "member_epoch": 0,
            "heartbeat_interval": 0,
            "assignment": None,
        }

    async def describe(context: RequestContext, request: Any) -> dict[str, Any]:
        described = []
        for group_id in request.group_ids:
            if not allows(acl, context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                described.append(_missing(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
                continue
            status = coordinator.status(group_id)
            group = groups.groups.get(group_id)
            if status != ErrorCode.NONE or group is None:
                code = status if status != ErrorCode.NONE else ErrorCode.GROUP_ID_NOT_FOUND
                described.append(_missing(group_id, code))
                continue
            described.append(
                {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "group_id": group_id,
                    "group_state": group.state(),
                    "group_epoch": group.epoch,
                    "assignment_epoch": group.assignment_epoch,
                    "assignor_name": group.assignor,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "instance_id": m.instance_id,
                            "rack_id": None,
                            "member_epoch": m.epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": sorted(m.names),
                            "subscribed_topic_regex": m.regex,
                            "assignment": wire(m.assigned),
                            "target_assignment": wire(group.target.get(m.member_id, frozenset())),
                            "member_type": CONSUMER_MEMBER,  # v1+: no classic members (no migration)
                        }
                        for m in group.members.values()
                    ],
                    "authorized_operations": -2147483648,
                }
            )
        return {"throttle_time": 0, "groups": described}

    def describe_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "groups": [_missing(g, code) for g in request.group_ids]}

    return [
        Api(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, heartbeat, heartbeat_error),
        Api(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, describe, describe_error),
    ]


def _missing(group_id: str, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": None,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": -2147483648,
    }
