"""Committed offsets: OffsetCommit, OffsetFetch (one group, or v8+ several; null topics = every committed
partition) and OffsetDelete, over the group coordinator.

Per-partition checks come first (unknown topic: UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE); the rest is committed together and shares one outcome.
A partition without a committed offset fetches as offset -1 with empty metadata and no error.

OffsetCommit has an immediate path: the frames group members send are read by ``read_offset_commit`` (no entity),
the offsets are appended at once and the answer, written by ``encode_offset_commit_response``, leaves now or, while
the write waits for the ISR, when the produce purgatory completes it. Frames it does not read, and commits outside
any generation (generation -1: offset resets, and consumers that assign partitions themselves), take the general
path (kio), which answers through the same code. A commit outside any generation is an admin change: the first one
per connection and group is audited (a reset tool sends one; a self-assigning consumer is not logged at every
commit).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.consumer_offsets import OffsetCommitValue
from mq.protocol.offset_commit import (
    OffsetCommit,
    encode_offset_commit_response,
    offset_commit_of,
    read_offset_commit,
)
from mq.server.admin_audit import audit
from mq.server.api_dispatch import LATER, Api, NowResult, RequestContext
from mq.server.group_coordinator import GroupCoordinator
from mq.server.metadata_cache import MetadataCache
from mq.server.network import ClientAddress
from mq.server.purgatory import settled
from mq.topic_partition import TopicPartition

NO_OFFSET = -1
NO_METADATA = ""
AUDITED_COMMITTERS = 4096
"""How many (connection, group) pairs that committed outside a generation are remembered, so as to audit each once."""


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

    def commit(
        version: int,
        correlation_id: int,
        request: OffsetCommit,
        committed: Callable[[Mapping[TopicPartition, OffsetCommitValue]], None] | None = None,
    ) -> bytes | asyncio.Future[bytes]:
        """The response to ``request``: now, or a future while the write waits for the ISR. A topic named twice is
        answered once, with all its partitions. ``committed`` hears the offsets that were stored."""
        now = time_ms()
        retention_ms = request.retention_ms
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetCommitValue] = {}
        for name, partitions in request.topics:
            for index, offset, leader_epoch, metadata in partitions:
                tp = TopicPartition(name, index)
                metadata = metadata or NO_METADATA
                if name not in cache.topics:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif len(metadata) > config.offset_metadata_max_bytes:
                    errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    valid[tp] = OffsetCommitValue(
                        offset=offset,
                        metadata=metadata,
                        commit_timestamp=now,
                        leader_epoch=leader_epoch,
                        expire_timestamp=now + retention_ms if retention_ms >= 0 else -1,
                    )

        def answered(code: ErrorCode) -> bytes:
            if code == ErrorCode.NONE and committed is not None:
                committed(valid)
            errors.update(dict.fromkeys(valid, code))
            return commit_response(version, correlation_id, request, errors)

        if not valid:
            return answered(ErrorCode.NONE)
        return coordinator.commit_offsets(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id, valid, answered
        )

    def commit_response(
        version: int, correlation_id: int, request: OffsetCommit, errors: Mapping[TopicPartition, ErrorCode]
    ) -> bytes:
        topics: dict[str, list[tuple[int, int]]] = {}
        for name, partitions in request.topics:
            answers = topics.setdefault(name, [])
            answers.extend((p[0], errors[TopicPartition(name, p[0])]) for p in partitions)
        return encode_offset_commit_response(version, correlation_id, list(topics.items()))

    def offset_commit_now(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> NowResult:
        request = read_offset_commit(frame, version)
        if request is None or request.generation_id < 0:
            return LATER
        return commit(version, correlation_id, request)

    audited: OrderedDict[tuple[int, str], None] = OrderedDict()

    async def offset_commit(context: RequestContext, request: Any) -> bytes:
        everything = offset_commit_of(request)
        committer = (context.client.connection_id, everything.group_id)

        def committed_outside_generation(offsets: Mapping[TopicPartition, OffsetCommitValue]) -> None:
            if committer in audited:
                return
            audited[committer] = None
            if len(audited) > AUDITED_COMMITTERS:
                audited.popitem(last=False)
            listed = ", ".join(f"{tp}={value.offset}" for tp, value in offsets.items())
            audit(context, f"committed offsets of group {everything.group_id} outside any generation: {listed}")

        outside = committed_outside_generation if everything.generation_id < 0 else None
        return await settled(commit(context.version, context.header.correlation_id, everything, outside))

    def offset_commit_error(context: RequestContext, request: Any, code: ErrorCode) -> bytes:
        everything = offset_commit_of(request)
        errors = {TopicPartition(name, p[0]): code for name, partitions in everything.topics for p in partitions}
        return commit_response(context.version, context.header.correlation_id, everything, errors)

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
        deleted = [str(tp) for tp in known if errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE]
        if deleted:
            audit(context, f"deleted the offsets of group {request.group_id} for {', '.join(deleted)}")
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
        Api(ApiKey.OFFSET_COMMIT, 2, 9, offset_commit, offset_commit_error, now=offset_commit_now),
        Api(ApiKey.OFFSET_FETCH, 1, 9, offset_fetch, offset_fetch_error),
        Api(ApiKey.OFFSET_DELETE, 0, 0, offset_delete, offset_delete_error),
    ]
