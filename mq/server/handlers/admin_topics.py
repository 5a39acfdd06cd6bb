"""CreateTopics, DeleteTopics and CreatePartitions: validated writes to the metadata tree (on a worker thread, never
on the loop), then a wait (up to the request's timeout) until the controller's decisions reach this broker's
metadata cache, as Kafka's brokers wait. A name that is not a legal topic name is no existing topic: deleting it or
adding partitions to it answers UNKNOWN_TOPIC_OR_PARTITION. With delete.topic.enable=false every topic of a
DeleteTopics is refused first: TOPIC_DELETION_DISABLED, INVALID_REQUEST before v3 (which does not know that code). A
topic named twice in a CreateTopics or CreatePartitions request is refused with INVALID_REQUEST, before its
authorization.

With an authorizer, as Kafka: CreateTopics needs CREATE on the cluster or on each topic (else
TOPIC_AUTHORIZATION_FAILED), and a created topic's partitions, replication factor, configs and id are answered only
to a client with DESCRIBE_CONFIGS on it (else its ``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED);
DeleteTopics needs DELETE on each topic (and DESCRIBE on a topic named by id, whose name is otherwise not answered);
CreatePartitions needs ALTER on each topic.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from mq.config import BrokerConfig
from mq.errors import (
    ErrorCode,
    InvalidPartitionsError,
    KafkaError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names, allows_cluster
from mq.server.handlers.configs import describe_topic_configs
from mq.server.metadata_cache import MetadataCache
from mq.topic_partition import topic_name_error
from mq.zk.admin_zk_client import AdminZkClient

MAX_NEW_PARTITIONS = 10_000
"""The most partitions one topic of a CreateTopics or CreatePartitions request may add: a larger count is refused
with INVALID_PARTITIONS instead of computing (and writing) an assignment of that size."""

DELETION_DISABLED_FROM = 3
"""DeleteTopics v3+ answers TOPIC_DELETION_DISABLED; older versions get INVALID_REQUEST."""


def _check_new_partitions(count: int) -> None:
    if count > MAX_NEW_PARTITIONS:
        raise InvalidPartitionsError(f"Adding {count} partitions at once exceeds the limit of {MAX_NEW_PARTITIONS}.")


def _check_existing(name: str | None) -> str:
    """``name`` when it can name an existing topic; UnknownTopicOrPartitionError when it cannot."""
    if name is None or topic_name_error(name) is not None:
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    return name


def _seconds(timeout: timedelta) -> float:
    return max(0.0, timeout.total_seconds())


def _error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


def admin_topic_apis(
    admin: AdminZkClient, cache: MetadataCache, broker: BrokerConfig, broker_id: int, acl: AclCache | None = None
) -> list[Api]:
    """The topic admin APIs of broker ``broker_id``, authorized by ``acl`` (None: no authorizer); a created topic's
    configs are described as this broker sees them (its dynamic broker configs included)."""

    def topics_allowed(
        context: RequestContext, operation: AclOperation, names: list[str], audit: bool = True
    ) -> set[str]:
        return allowed_names(acl, context, operation, ResourceType.TOPIC, names, audit=audit)

    def has_leaders(topic: str, partitions: int) -> bool:
        info = cache.topics.get(topic)
        return (
            info is not None
            and len(info.partitions) >= partitions
            and all(p.leader >= 0 for p in info.partitions.values())
        )

    async def create_topics(context: RequestContext, request: Any) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        waiting: dict[str, int] = {}
        names = [t.name for t in request.topics]
        validate_only = bool(getattr(request, "validate_only", False))
        if allows_cluster(acl, context, AclOperation.CREATE, audit=False):
            creatable = set(names)
        else:
            creatable = topics_allowed(context, AclOperation.CREATE, names)
        describable = topics_allowed(context, AclOperation.DESCRIBE_CONFIGS, names, audit=False)
        per_broker, default = await asyncio.to_thread(admin.dynamic_broker_configs, broker_id)
        for topic in request.topics:
            result: dict[str, Any] = {"name": topic.name, **_error(ErrorCode.NONE, None)}
            if topic.name not in describable:
                result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            results.append(result)
            if names.count(topic.name) > 1:
                result.update(_error(ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
                continue
            if topic.name not in creatable:
                result.update(_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
                continue
            manual = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
            try:
                if manual and (topic.num_partitions != -1 or topic.replication_factor != -1):
                    raise KafkaError(
                        "Both numPartitions or replicationFactor and replicasAssignments were set. "
                        "Both cannot be used at the same time.",
                        ErrorCode.INVALID_REQUEST,
                    )
                partitions = topic.num_partitions if topic.num_partitions != -1 else broker.num_partitions
                factor = (
                    topic.replication_factor if topic.replication_factor != -1 else broker.default_replication_factor
                )
                _check_new_partitions(len(manual) or partitions)
                configs = {c.name: c.value for c in topic.configs if c.value is not None}
                assignment = await asyncio.to_thread(
                    admin.create_topic,
                    topic.name,
                    partitions,
                    factor,
                    configs,
                    manual or None,
                    validate_only=validate_only,
                )
            except KafkaError as exc:
                result.update(_error(exc.code, str(exc)), topic_config_error_code=ErrorCode.NONE)
                continue
            if topic.name in describable:
                result["num_partitions"] = len(assignment)
                result["replication_factor"] = len(assignment[min(assignment)])
                result["configs"] = [
                    {k: e[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
                    for e in describe_topic_configs(broker, configs, per_broker, default)
                ]
            if not validate_only:
                waiting[topic.name] = len(assignment)
                factor = len(assignment[min(assignment)])
                audit(
                    context,
                    f"created topic {topic.name} with {len(assignment)} partitions, replication factor {factor}",
                )
        timeout = _seconds(request.timeout)
        if waiting and timeout > 0:
            await cache.wait_until(lambda: all(has_leaders(t, n) for t, n in waiting.items()), timeout)
            for result in results:
                name = result["name"]
                if name in waiting and not has_leaders(name, waiting[name]):
                    result.update(_error(ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for the topic's leaders."))
        for result in results:
            info = cache.topics.get(result["name"])
            shown = result["error_code"] == 0 and result["name"] in describable
            result["topic_id"] = info.topic_uuid if info is not None and shown else None
        return {"throttle_time": 0, "topics": results}

    def create_topics_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "topics": [{"name": t.name, **_error(code, None)} for t in request.topics]}

    def requested_deletions(request: Any) -> list[tuple[str | None, Any, bool]]:
        """(name, topic id, named by id alone) of each topic to delete; the name of an unknown id is None."""
        if hasattr(request, "topic_names"):
            return [(name, None, False) for name in request.topic_names]
        found = []
        for t in request.topics:
            name = t.name
            if name is None:
                name = None if t.topic_id is None else cache.topic_name(t.topic_id)
            found.append((name, t.topic_id, t.name is None))
        return found

    async def delete_topics(context: RequestContext, request: Any) -> dict[str, Any]:
        responses: list[dict[str, Any]] = []
        pending: list[str] = []
        requested = requested_deletions(request)
        named = [name for name, _, _ in requested if name is not None]
        described = topics_allowed(context, AclOperation.DESCRIBE, named)
        deletable = topics_allowed(context, AclOperation.DELETE, named)
        for name, topic_id, by_id in requested:
            response: dict[str, Any] = {"name": name, "topic_id": topic_id, **_error(ErrorCode.NONE, None)}
            responses.append(response)
            try:
                if not broker.delete_topic_enable:
                    raise TopicDeletionDisabledError("Topic deletion is disabled.")
                if name is None:
                    raise KafkaError("Topic id does not exist.", ErrorCode.UNKNOWN_TOPIC_ID)
                if by_id and name not in described:  # the name is not told to a client that may not describe it
                    response.update(name=None, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    continue
                if name not in deletable:
                    response["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                await asyncio.to_thread(admin.delete_topic, _check_existing(name))
                pending.append(name)
                audit(context, f"deleted topic {name}")
            except KafkaError as exc:
                code = exc.code
                if isinstance(exc, UnknownTopicOrPartitionError):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif code == ErrorCode.TOPIC_DELETION_DISABLED and context.version < DELETION_DISABLED_FROM:
                    code = ErrorCode.INVALID_REQUEST
                response.update(_error(code, str(exc)))
        timeout = _seconds(request.timeout)
        if pending and timeout > 0:
            gone = await cache.wait_until(lambda: not any(cache.contains(t) for t in pending), timeout)
            if not gone:
                for response in responses:
                    if response["name"] in pending and cache.contains(response["name"]):
                        response.update(_error(ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for topic deletion."))
        return {"throttle_time": 0, "responses": responses}

    def delete_topics_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        responses = [{"name": n, "topic_id": i, **_error(code, None)} for n, i, _ in requested_deletions(request)]
        return {"throttle_time": 0, "responses": responses}

    async def create_partitions(context: RequestContext, request: Any) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        waiting: dict[str, int] = {}
        names = [t.name for t in request.topics]
        alterable = topics_allowed(context, AclOperation.ALTER, names)
        for topic in request.topics:
            result: dict[str, Any] = {"name": topic.name, **_error(ErrorCode.NONE, None)}
            results.append(result)
            if names.count(topic.name) > 1:
                result.update(_error(ErrorCode.INVALID_REQUEST, "Duplicate topic in request."))
                continue
            if topic.name not in alterable:
                result.update(_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed."))
                continue
            assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
            try:
                info = cache.topics.get(_check_existing(topic.name))
                _check_new_partitions(topic.count - (0 if info is None else len(info.partitions)))
                await asyncio.to_thread(
                    admin.add_partitions,
                    topic.name,
                    topic.count,
                    assignments,
                    validate_only=bool(request.validate_only),
                )
            except KafkaError as exc:
                result.update(_error(exc.code, str(exc)))
                continue
            if not request.validate_only:
                waiting[topic.name] = topic.count
                audit(context, f"increased the partitions of topic {topic.name} to {topic.count}")
        timeout = _seconds(request.timeout)
        if waiting and timeout > 0:
            await cache.wait_until(lambda: all(has_leaders(t, n) for t, n in waiting.items()), timeout)
        return {"throttle_time": 0, "results": results}

    def create_partitions_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"name": t.name, **_error(code, None)} for t in request.topics]}

    return [
        Api(ApiKey.CREATE_TOPICS, 2, 7, create_topics, create_topics_error),
        Api(ApiKey.DELETE_TOPICS, 1, 6, delete_topics, delete_topics_error),
        Api(ApiKey.CREATE_PARTITIONS, 0, 3, create_partitions, create_partitions_error),
    ]
