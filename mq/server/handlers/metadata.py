"""Metadata: brokers, controller and per-partition leader/replicas/ISR from the metadata cache.

``topics`` null asks for every topic, an empty list for none. An unknown topic is auto-created when both the broker
(``auto.create.topics.enable``) and the request (v4+ ``allow_auto_topic_creation``; always for older versions) allow
it; the first answer then carries LEADER_NOT_AVAILABLE, as Kafka's does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, RequestContext
from mq.server.metadata_cache import MetadataCache, TopicInfo
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition, topic_name_error

NO_AUTHORIZED_OPERATIONS = -2147483648

AutoCreate = Callable[[str], ErrorCode]
"""Creates a topic for a Metadata request and returns the error code to answer with."""


def metadata_api(cache: MetadataCache, auto_create: AutoCreate | None) -> Api:
    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        allow_auto = context.version < 4 or bool(request.allow_auto_topic_creation)
        if request.topics is None:
            topics = [_describe(cache, info) for _, info in sorted(cache.topics.items())]
        else:
            topics = [_requested(cache, t, auto_create if allow_auto else None) for t in request.topics]
        return _response(cache, topics)

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        names = [t.name for t in request.topics or ()]
        return _response(cache, [_error_topic(name, code) for name in names])

    return Api(ApiKey.METADATA, 1, 12, handle, error)


def _response(cache: MetadataCache, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
        ],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def _requested(cache: MetadataCache, topic: Any, auto_create: AutoCreate | None) -> dict[str, Any]:
    name = getattr(topic, "name", None)
    if name is None:
        topic_id = getattr(topic, "topic_id", None)
        found = next((info for info in cache.topics.values() if info.topic_uuid == topic_id), None)
        return _describe(cache, found) if found else _error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID)
    info = cache.topics.get(name)
    if info is not None:
        return _describe(cache, info)
    if topic_name_error(name) is not None:
        return _error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if auto_create is None:
        return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _error_topic(name, auto_create(name))


def _error_topic(name: str | None, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def _describe(cache: MetadataCache, info: TopicInfo) -> dict[str, Any]:
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
        if not leader_live:
            code = ErrorCode.LEADER_NOT_AVAILABLE
        elif offline:
            code = ErrorCode.REPLICA_NOT_AVAILABLE
        else:
            code = ErrorCode.NONE
        partitions.append(
            {
                "error_code": code,
                "partition_index": index,
                "leader_id": p.leader if leader_live else -1,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": offline,
            }
        )
    return {
        "error_code": ErrorCode.NONE,
        "name": info.name,
        "topic_id": info.topic_uuid,
        "is_internal": info.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
