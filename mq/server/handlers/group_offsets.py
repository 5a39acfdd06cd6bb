"""Committed offsets: OffsetCommit, OffsetFetch (one group, or v8+ several; null topics = every committed
partition) and OffsetDelete, over the group coordinator.

Per-partition checks come first (unknown topic: UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE); the rest is committed together and shares one outcome.
A partition without a committed offset fetches as offset -1 with empty metadata and no error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.consumer_offsets import OffsetCommitValue
from mq.server.api_dispatch import Api, RequestContext
from mq.server.group_coordinator import GroupCoordinator
from mq.server.metadata_cache import MetadataCache
from mq.topic_partition import TopicPartition

NO_OFFSET = -1
NO_METADATA = ""


def _partition_answers(
    topics: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def group_offset_apis(
    coordinator: GroupCoordinator,
    cache: MetadataCache,
    config: BrokerConfig,
    time_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> list[Api]:
    # --- OffsetCommit --------------------------------------------------------------------------------------------

    async def offset_commit(context: RequestContext, request: Any) -> dict[str, Any]:
        now = time_ms()
        retention = getattr(request, "retention_time", None)
        retention_ms = -1 if retention is None else int(retention.total_seconds() * 1000)
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetCommitValue] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                metadata = p.committed_metadata or NO_METADATA
                if topic.name not in cache.topics:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata) > config.offset_metadata_max_bytes:
                    errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    valid[tp] = OffsetCommitValue(
                        offset=p.committed_offset,
                        metadata=metadata,
                        commit_timestamp=now,
                        leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                        expire_timestamp=now + retention_ms if retention_ms >= 0 else -1,
                    )
        if valid:
            code = await coordinator.commit_offsets(
                request.group_id,
                getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None),
                int(getattr(request, "generation_id_or_member_epoch", -1)),
                valid,
            )
            errors.update(dict.fromkeys(valid, code))
        return commit_response(request, errors)

    def commit_response(request: Any, errors: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic in request.topics:
            for p in topic.partitions:
                code = errors[TopicPartition(topic.name, p.partition_index)]
                topics.setdefault(topic.name, []).append({"partition_index": p.partition_index, "error_code": code})
        return {"throttle_time": 0, "topics": _partition_answers(topics)}

    def offset_commit_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        everything = {TopicPartition(t.name, p.partition_index): code for t in request.topics for p in t.partitions}
        return commit_response(request, everything)

    # --- OffsetFetch ---------------------------------------------------------------------------------------------

    def fetch_group(group_id: str, topics: Any, per_partition_errors: bool) -> dict[str, Any]:
        """One group's answer: ``error_code`` and ``topics``; groups answered per partition (v0-v1) carry the
        group's error on every partition instead."""
        partitions = (
            None if topics is None else [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
        )
        code, offsets = coordinator.fetch_offsets(group_id, partitions)
        if code != ErrorCode.NONE:
            offsets = {} if partitions is None else dict.fromkeys(partitions)
        partition_code = code if per_partition_errors else ErrorCode.NONE
        answered: dict[str, list[dict[str, Any]]] = {}
        for tp, value in offsets.items():
            answered.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": NO_OFFSET if value is None else value.offset,
                    "committed_leader_epoch": -1 if value is None else value.leader_epoch,
                    "metadata": NO_METADATA if value is None else value.metadata,
                    "error_code": partition_code,
                }
            )
        return {"group_id": group_id, "error_code": code, "topics": _partition_answers(answered)}

    async def offset_fetch(context: RequestContext, request: Any) -> dict[str, Any]:
        if context.version >= 8:
            groups = [fetch_group(g.group_id, g.topics, False) for g in request.groups]
            return {"throttle_time": 0, "groups": groups}
        answer = fetch_group(request.group_id, request.topics, context.version < 2)
        return {"throttle_time": 0, "error_code": answer["error_code"], "topics": answer["topics"]}

    def offset_fetch_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        if context.version >= 8:
            return {
                "throttle_time": 0,
                "groups": [{"group_id": g.group_id, "error_code": code, "topics": []} for g in request.groups],
            }
        return {"throttle_time": 0, "error_code": code, "topics": []}

    # --- OffsetDelete --------------------------------------------------------------------------------------------

    async def offset_delete(context: RequestContext, request: Any) -> dict[str, Any]:
        errors: dict[TopicPartition, ErrorCode] = {}
        known: list[TopicPartition] = []
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if topic.name in cache.topics:
                    known.append(tp)
                else:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        code, results = await coordinator.delete_offsets(request.group_id, known)
        if code != ErrorCode.NONE:
            return offset_delete_error(context, request, code)
        errors.update(results)
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                topics.setdefault(topic.name, []).append(
                    {"partition_index": p.partition_index, "error_code": errors.get(tp, ErrorCode.NONE)}
                )
        return {"error_code": 0, "throttle_time": 0, "topics": _partition_answers(topics)}

    def offset_delete_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, "throttle_time": 0, "topics": []}

    return [
        Api(ApiKey.OFFSET_COMMIT, 2, 9, offset_commit, offset_commit_error),
        Api(ApiKey.OFFSET_FETCH, 1, 9, offset_fetch, offset_fetch_error),
        Api(ApiKey.OFFSET_DELETE, 0, 0, offset_delete, offset_delete_error),
    ]
