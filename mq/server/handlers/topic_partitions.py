"""DescribeTopicPartitions (KIP-966): the partitions of topics, a page at a time, from the metadata cache.

An empty ``topics`` asks for every topic. Topics are answered in name order from the request's ``cursor`` (a topic
name and the partition index to start at within it): at most ``min(response_partition_limit,
MAX_PARTITIONS_PER_RESPONSE)`` partitions (at least 1) per response, and ``next_cursor`` names where the next page
starts (null once everything was answered). A page ends inside a topic only when the limit falls inside it; a topic
whose partitions are exhausted exactly at the limit is followed by a cursor at partition 0 of the next topic. A cursor
whose topic the request's list lacks, or whose partition index is negative, makes the request INVALID_REQUEST.

A partition reads as Metadata describes it (leader -1 unless it is a live broker; offline replicas, including those
in this broker's offline log dirs), with error code 0 as Kafka's brokers answer this API; mq keeps no eligible leader
replicas (KIP-966 ELR), so those fields are null.

Authorization as Metadata's: DESCRIBE on each topic. Every topic is left out for a client that may not describe it
when all topics are asked for; a named one answers TOPIC_AUTHORIZATION_FAILED with no id, after the page, without
revealing whether it exists. Each topic answered carries the client's authorized operations on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names, authorized_operations
from mq.server.handlers.metadata import _describe
from mq.server.metadata_cache import MetadataCache
from mq.topic_partition import INTERNAL_TOPICS, topic_name_error

MAX_PARTITIONS_PER_RESPONSE = 2000
"""The most partitions one response holds (Kafka's ``max.request.partition.size.limit`` default)."""


def describe_topic_partitions_api(cache: MetadataCache, acl: AclCache | None = None) -> Api:
    """DescribeTopicPartitions from ``cache``, authorized by ``acl`` (None: no authorizer)."""

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        every = not request.topics
        cursor = request.cursor
        start_name = "" if cursor is None else cursor.topic_name
        if every:
            candidates: Iterable[str] = cache.topics
        else:
            candidates = {topic.name for topic in request.topics}
            if cursor is not None and cursor.topic_name not in candidates:
                raise KafkaError(
                    f"DescribeTopicPartitions topic list should contain the cursor topic: {cursor.topic_name}",
                    ErrorCode.INVALID_REQUEST,
                )
        if cursor is not None and cursor.partition_index < 0:
            raise KafkaError(
                f"DescribeTopicPartitions cursor partition must be valid: {cursor.partition_index}",
                ErrorCode.INVALID_REQUEST,
            )
        names = sorted(name for name in candidates if name >= start_name)
        described = allowed_names(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit), 1)
        topics: list[dict[str, Any]] = []
        next_cursor: dict[str, Any] | None = None
        for name in (name for name in names if name in described):
            if remaining == 0:
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            info = cache.topics.get(name)
            if info is None:
                if not every:
                    topics.append(_unknown_topic(name))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            described_topic = _describe(cache, info, 1)  # as Metadata v1+ describes a topic
            partitions = [
                {**partition, "error_code": ErrorCode.NONE, "eligible_leader_replicas": None, "last_known_elr": None}
                for partition in described_topic["partitions"]
                if partition["partition_index"] >= start
            ]
            page = partitions[:remaining]
            topics.append(
                {
                    **described_topic,
                    "partitions": page,
                    "topic_authorized_operations": authorized_operations(acl, context, ResourceType.TOPIC, name),
                }
            )
            if len(page) < len(partitions):
                next_cursor = {"topic_name": name, "partition_index": partitions[len(page)]["partition_index"]}
                break
            remaining -= len(page)
        if not every:
            topics.extend(_refused_topic(name) for name in names if name not in described)
        return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "topics": [{**_refused_topic(topic.name), "error_code": code} for topic in request.topics],
            "next_cursor": None,
        }

    return Api(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, handle, error)


def _unknown_topic(name: str) -> dict[str, Any]:
    invalid = topic_name_error(name) is not None
    return {
        **_refused_topic(name),
        "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "is_internal": name in INTERNAL_TOPICS,
    }


def _refused_topic(name: str) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "name": name,
        "topic_id": None,  # the zero UUID on the wire
        "is_internal": False,
        "partitions": [],
    }
