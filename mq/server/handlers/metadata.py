"""Metadata: brokers, controller and per-partition leader/replicas/ISR from the metadata cache.

``topics`` null asks for every topic, an empty list for none. An unknown topic is auto-created when both the broker
(``auto.create.topics.enable``) and the request (v4+ ``allow_auto_topic_creation``; always for older versions) allow
it; the first answer then carries LEADER_NOT_AVAILABLE, as Kafka's does. A v10 or v11 request naming a topic by id
alone is invalid: each of its topics answers INVALID_REQUEST (under the name "", as Kafka's brokers answer).

With an authorizer, a topic is listed only to a client that may DESCRIBE it: a request for every topic leaves the
others out, a named one answers TOPIC_AUTHORIZATION_FAILED (by id: with its id and no name). Auto-creation needs
CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. v8+ requests may ask for the authorized
operations of the cluster (v8-v10: DESCRIBE on the cluster needed, else 0) and of each topic listed.

v13 adds a top-level error code (KIP-1102), which a broker sets only to send a client back to its bootstrap servers
(REBOOTSTRAP_REQUIRED); mq never does, so it is always NONE.

v0 asks for every topic with an empty list (it has no null). As Kafka's brokers do, only a v0 answer lists just the
replicas and ISR members on registered brokers and marks a partition that names another REPLICA_NOT_AVAILABLE; v1+
answers list the replica set as assigned, with no error while the leader is live. A live leader without the listener
the request came on answers leader -1 and LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before).

A broker learns the live brokers and the controller from its first UpdateMetadata, moments after it starts. A
Metadata request that comes before waits for it (at most ``FIRST_UPDATE_WAIT_S``): answered at once, it would name
no broker and no controller, and a client that then waits for the controller (librdkafka's admin requests) may not
ask again before its request times out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    allowed_names,
    allows,
    allows_cluster,
    authorized_operations,
)
from mq.server.metadata_cache import MetadataCache, TopicInfo
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition, topic_name_error

NULL_NAMES_FROM = 12
"""The first version whose topics may be named by id alone (v10 and v11 carry ids but answer by name)."""

FIRST_UPDATE_WAIT_S = 5.0
"""How long a Metadata request waits for the broker's first UpdateMetadata."""

LISTENER_NOT_FOUND_FROM = 6
"""Metadata v6+ answers LISTENER_NOT_FOUND for a leader without the request's listener; older versions get
LEADER_NOT_AVAILABLE."""
AUTHORIZED_OPERATIONS_FROM = 8
CLUSTER_OPERATIONS_UNTIL = 10
"""The versions that may ask for authorized operations: of topics from v8, of the cluster from v8 to v10."""

AutoCreate = Callable[[str], ErrorCode]
"""Creates a topic for a Metadata request and returns the error code to answer with."""


def metadata_api(cache: MetadataCache, auto_create: AutoCreate | None, acl: AclCache | None = None) -> Api:
    """Metadata from ``cache``, creating topics with ``auto_create`` (None: auto.create.topics.enable is off),
    authorized by ``acl`` (None: no authorizer)."""

    def creatable(context: RequestContext, name: str) -> bool:
        return allows_cluster(acl, context, AclOperation.CREATE, audit=False) or allows(
            acl, context, AclOperation.CREATE, ResourceType.TOPIC, name
        )

    def requested(context: RequestContext, topic: Any, allow_auto: bool) -> dict[str, Any]:
        name = getattr(topic, "name", None)
        if name is None:
            topic_id = getattr(topic, "topic_id", None)
            known = None if topic_id is None else cache.topic_name(topic_id)
            found = None if known is None else cache.topics.get(known)
            if found is None:
                return _error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID)
            if not allows(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, found.name):
                return {**_error_topic(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED), "topic_id": topic_id}
            return _describe(cache, found, context.version, context.client.listener)
        if not allows(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            return {**_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED), "is_internal": False}
        info = cache.topics.get(name)
        if info is not None:
            return _describe(cache, info, context.version, context.client.listener)
        if topic_name_error(name) is not None:
            return _error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if auto_create is None or not allow_auto:
            return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if acl is not None and not creatable(context, name):
            return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return _error_topic(name, auto_create(name))

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        allow_auto = context.version < 4 or bool(request.allow_auto_topic_creation)
        if context.version < NULL_NAMES_FROM and any(t.name is None for t in request.topics or ()):
            raise KafkaError(f"Topic name can not be null for version {context.version}", ErrorCode.INVALID_REQUEST)
        if cache.controller_id < 0:
            await cache.wait_until(lambda: cache.controller_id >= 0, FIRST_UPDATE_WAIT_S)
        if request.topics is None or (context.version == 0 and not request.topics):
            names = sorted(cache.topics)
            if acl is not None:
                described = allowed_names(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, names, audit=False)
                names = [name for name in names if name in described]
            topics = [_describe(cache, cache.topics[name], context.version, context.client.listener) for name in names]
        else:
            topics = [requested(context, t, allow_auto) for t in request.topics]
        answer = _response(cache, context.client.listener, topics)
        if context.version >= AUTHORIZED_OPERATIONS_FROM:
            if context.version <= CLUSTER_OPERATIONS_UNTIL and request.include_cluster_authorized_operations:
                answer["cluster_authorized_operations"] = (
                    authorized_operations(acl, context, ResourceType.CLUSTER, CLUSTER_NAME)
                    if allows_cluster(acl, context, AclOperation.DESCRIBE)
                    else 0
                )
            if request.include_topic_authorized_operations:
                for topic in topics:
                    if topic["name"] is not None and topic["error_code"] != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                        topic["topic_authorized_operations"] = authorized_operations(
                            acl, context, ResourceType.TOPIC, topic["name"]
                        )
        return answer

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        named = context.version < NULL_NAMES_FROM  # these answers name every topic: a null name answers as ""
        names = ["" if t.name is None and named else t.name for t in request.topics or ()]
        return _response(cache, context.client.listener, [_error_topic(name, code) for name in names])

    return Api(ApiKey.METADATA, 0, 13, handle, error)


def _response(cache: MetadataCache, listener: str, topics: list[dict[str, Any]]) -> dict[str, Any]:
    """The answer with the brokers as clients of ``listener`` (the request's) reach them."""
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack} for b in cache.brokers_on(listener)
        ],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        "error_code": ErrorCode.NONE,
    }


def _error_topic(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _describe(cache: MetadataCache, info: TopicInfo, version: int, listener: str | None = None) -> dict[str, Any]:
    """``info`` as Metadata ``version`` describes it to a client of ``listener`` (None: any listener reaches every
    broker): a leader that is not a live broker is LEADER_NOT_AVAILABLE, one without that listener
    LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before v6), both with leader -1; v0 also leaves out the replicas it
    cannot reach (REPLICA_NOT_AVAILABLE), as Kafka 2.8's MetadataCache.getPartitionMetadata does."""

    def reachable(broker_id: int) -> bool:
        found = cache.brokers.get(broker_id)
        return found is not None and (listener is None or found.on(listener) is not None)

    partitions = []
    for index, p in sorted(info.partitions.items()):
        offline = list(p.offline_replicas)
        if (
            cache.broker_id in p.replicas
            and cache.broker_id not in offline
            and cache.local_replica_offline(TopicPartition(info.name, index))
        ):
            offline.append(cache.broker_id)  # as the controller's next decision will say: no leader in an offline dir
        leader_live = p.leader in cache.brokers and p.leader not in offline
        replicas, isr = list(p.replicas), list(p.isr)
        if version == 0:
            replicas = [r for r in replicas if reachable(r)]
            isr = [r for r in isr if reachable(r)]
        if not leader_live:
            code = ErrorCode.LEADER_NOT_AVAILABLE
        elif not reachable(p.leader):
            code = (
                ErrorCode.LISTENER_NOT_FOUND if version >= LISTENER_NOT_FOUND_FROM else ErrorCode.LEADER_NOT_AVAILABLE
            )
            leader_live = False
        elif len(replicas) < len(p.replicas) or len(isr) < len(p.isr):
            code = ErrorCode.REPLICA_NOT_AVAILABLE
        else:
            code = ErrorCode.NONE
        partitions.append(
            {
                "error_code": code,
                "partition_index": index,
                "leader_id": p.leader if leader_live else -1,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": replicas,
                "isr_nodes": isr,
                "offline_replicas": offline,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_uuid,
        "is_internal": info.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
