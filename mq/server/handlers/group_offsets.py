"""Committed offsets: OffsetCommit, OffsetFetch (one group, or v8+ several; null topics = every committed
partition) and OffsetDelete, over the group coordinator.

Per-partition checks come first (unknown topic: UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE); the rest is committed together and shares one outcome.
A partition without a committed offset fetches as offset -1 with empty metadata and no error; offsets committed in
a transaction count from its COMMIT marker on, and OffsetFetch v7+ with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for a partition that has one pending.

Version 0 of both keeps offsets where Kafka 0.8.1 kept them, in the metadata tree (``/consumers/<group>/offsets/
<topic>/<partition>``, the ZooKeeper-coordinated consumers' place), written and read off the loop; those offsets are
not the coordinator's, and a v0 fetch of a partition of an unknown topic answers offset -1 without an error.

OffsetCommit has an immediate path: the frames group members send are read by ``read_offset_commit`` (no entity),
the offsets are appended at once and the answer, written by ``encode_offset_commit_response``, leaves now or, while
the write waits for the ISR, when the produce purgatory completes it. Frames it does not read, and commits outside
any generation (generation -1: offset resets, and consumers that assign partitions themselves), take the general
path (kio), which answers through the same code. A commit outside any generation is an admin change: the first one
per connection and group is audited (a reset tool sends one; a self-assigning consumer is not logged at every
commit).

With an authorizer (both paths): OffsetCommit needs READ on the group (else GROUP_AUTHORIZATION_FAILED for every
partition) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, before the unknown-topic
check). OffsetFetch needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on each topic: a named
partition of a refused topic answers TOPIC_AUTHORIZATION_FAILED, and a fetch of every committed partition leaves such
topics out. OffsetDelete needs DELETE on the group and READ on each topic.
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
    MIN_VERSION as OFFSET_COMMIT_READ_FROM,
)
from mq.protocol.offset_commit import (
    OffsetCommit,
    encode_offset_commit_response,
    offset_commit_of,
    read_offset_commit,
)
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.admin_audit import audit
from mq.server.api_dispatch import LATER, Api, NowResult, RequestContext
from mq.server.authorization import allowed_names, allows
from mq.server.group_coordinator import GroupCoordinator
from mq.server.metadata_cache import MetadataCache
from mq.server.network import ClientAddress
from mq.server.purgatory import settled
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups

NO_OFFSET = -1
NO_METADATA = ""
UNAUTHORIZED_PARTITION = (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
"""A named partition of a topic the client may not describe: no offset, TOPIC_AUTHORIZATION_FAILED."""
AUDITED_COMMITTERS = 4096
"""How many (connection, group) pairs that committed outside a generation are remembered, so as to audit each once."""


def _zookeeper_value(offset: int | None) -> OffsetCommitValue | None:
    return None if offset is None else OffsetCommitValue(offset=offset, metadata=NO_METADATA, commit_timestamp=-1)


def _partition_answers(
    topics: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def group_offset_apis(
    coordinator: GroupCoordinator,
    cache: MetadataCache,
    config: BrokerConfig,
    zk_offsets: ZkConsumerGroups,
    time_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    acl: AclCache | None = None,
) -> list[Api]:
    """The offset APIs over ``coordinator`` (v0 over the offsets ``zk_offsets`` keeps in the metadata tree),
    authorized by ``acl`` (None: no authorizer)."""

    # --- OffsetCommit --------------------------------------------------------------------------------------------

    def checked(
        request: OffsetCommit, context: RequestContext | None
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetCommitValue]]:
        """The partitions refused (with their error) and the offsets to commit. ``context`` is None only without an
        authorizer; a group the client may not read refuses every partition."""
        readable: set[str] | None = None
        if context is not None:
            if not allows(acl, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
                refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
                return {TopicPartition(n, p[0]): refused for n, partitions in request.topics for p in partitions}, {}
            names = (name for name, _ in request.topics)
            readable = allowed_names(acl, context, AclOperation.READ, ResourceType.TOPIC, names)
        now = time_ms()
        retention_ms = request.retention_ms
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetCommitValue] = {}
        for name, partitions in request.topics:
            for index, offset, leader_epoch, metadata in partitions:
                tp = TopicPartition(name, index)
                metadata = metadata or NO_METADATA
                if readable is not None and name not in readable:
                    errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif name not in cache.topics:
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
        return errors, valid

    def commit(
        version: int,
        correlation_id: int,
        request: OffsetCommit,
        context: RequestContext | None,
        committed: Callable[[Mapping[TopicPartition, OffsetCommitValue]], None] | None = None,
    ) -> bytes | asyncio.Future[bytes]:
        """The response to ``request``: now, or a future while the write waits for the ISR. A topic named twice is
        answered once, with all its partitions. ``context`` is None only without an authorizer; ``committed`` hears
        the offsets that were stored."""
        errors, valid = checked(request, context)

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
        if version < OFFSET_COMMIT_READ_FROM:
            return LATER
        request = read_offset_commit(frame, version)
        if request is None or request.generation_id < 0:
            return LATER
        context = None if acl is None else RequestContext.of_frame(frame, client)
        return commit(version, correlation_id, request, context)

    audited: OrderedDict[tuple[int, str], None] = OrderedDict()

    async def commit_to_zookeeper(context: RequestContext, request: OffsetCommit) -> bytes:
        """OffsetCommit v0: the offsets go to ``/consumers/<group>/offsets/<topic>/<partition>`` (metadata is checked
        for size, then dropped, as Kafka 0.8 keeps none there), outside any group generation."""
        errors, valid = checked(request, None if acl is None else context)
        offsets = {tp: value.offset for tp, value in valid.items()}

        def write() -> None:
            for tp, offset in offsets.items():
                zk_offsets.set_offset(request.group_id, tp, offset)

        if offsets:
            await asyncio.to_thread(write)
            errors.update(dict.fromkeys(offsets, ErrorCode.NONE))
        return commit_response(context.version, context.header.correlation_id, request, errors)

    async def offset_commit(context: RequestContext, request: Any) -> bytes:
        everything = offset_commit_of(request)
        if context.version == 0:
            return await commit_to_zookeeper(context, everything)
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
        checked = None if acl is None else context
        return await settled(commit(context.version, context.header.correlation_id, everything, checked, outside))

    def offset_commit_error(context: RequestContext, request: Any, code: ErrorCode) -> bytes:
        everything = offset_commit_of(request)
        errors = {TopicPartition(name, p[0]): code for name, partitions in everything.topics for p in partitions}
        return commit_response(context.version, context.header.correlation_id, everything, errors)

    # --- OffsetFetch ---------------------------------------------------------------------------------------------

    def zookeeper_offsets(group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets ZooKeeper keeps for those of ``partitions`` of known topics (blocking: off the loop)."""
        found = {}
        for tp in partitions:
            offset = zk_offsets.offset(group_id, tp) if tp.topic in cache.topics else None
            if offset is not None:
                found[tp] = offset
        return found

    def fetch_group(
        context: RequestContext,
        group_id: str,
        topics: Any,
        per_partition_errors: bool,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
        kept: Mapping[TopicPartition, int] | None = None,
    ) -> dict[str, Any]:
        """One group's answer: ``error_code`` and ``topics``. A group's error lists no partition, except in answers
        per partition (v0-v1), where every partition asked about carries it. With ``require_stable`` (v7+) a
        partition with an offset committed in an open transaction answers UNSTABLE_OFFSET_COMMIT. ``kept``: the
        offsets of the group's partitions kept in ZooKeeper, answered in place of the coordinator's (v0)."""
        partitions = (
            None if topics is None else [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
        )
        answers: dict[TopicPartition, tuple[OffsetCommitValue | None, ErrorCode]] = {}
        if not allows(acl, context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            asked = partitions
            if acl is not None and partitions is not None:
                described = allowed_names(
                    acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, (tp.topic for tp in partitions)
                )
                asked = [tp for tp in partitions if tp.topic in described]
            if kept is None:
                code, offsets = coordinator.fetch_offsets(group_id, asked, member_id, member_epoch)
            else:
                code, offsets = ErrorCode.NONE, {tp: _zookeeper_value(kept.get(tp)) for tp in asked or ()}
            if acl is not None and partitions is None:
                committed = (tp.topic for tp in offsets)  # a listing: refusals logged at DEBUG only
                described = allowed_names(
                    acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, committed, audit=False
                )
                offsets = {tp: value for tp, value in offsets.items() if tp.topic in described}
            for tp in offsets if partitions is None else partitions:
                answers[tp] = (offsets[tp], ErrorCode.NONE) if tp in offsets else UNAUTHORIZED_PARTITION
            if require_stable:
                for tp in coordinator.pending_txn_partitions(group_id) & answers.keys():
                    answers[tp] = (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        if code != ErrorCode.NONE:
            answers = dict.fromkeys((partitions or ()) if per_partition_errors else (), (None, code))
        answered: dict[str, list[dict[str, Any]]] = {}
        for tp, (value, partition_code) in answers.items():
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
        require_stable = bool(getattr(request, "require_stable", False))
        if context.version >= 8:
            groups = [
                fetch_group(
                    context,
                    g.group_id,
                    g.topics,
                    False,
                    require_stable,
                    getattr(g, "member_id", None),  # v9+
                    int(getattr(g, "member_epoch", -1)),
                )
                for g in request.groups
            ]
            return {"throttle_time": 0, "groups": groups}
        kept = None
        if context.version == 0:
            asked = [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
            kept = await asyncio.to_thread(zookeeper_offsets, request.group_id, asked)
        answer = fetch_group(context, request.group_id, request.topics, context.version < 2, require_stable, kept=kept)
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
        if not allows(acl, context, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
            return offset_delete_error(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        readable = allowed_names(acl, context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
        errors: dict[TopicPartition, ErrorCode] = {}
        known: list[TopicPartition] = []
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if topic.name not in readable:
                    errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif topic.name in cache.topics:
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
        Api(ApiKey.OFFSET_COMMIT, 0, 9, offset_commit, offset_commit_error, now=offset_commit_now),
        Api(ApiKey.OFFSET_FETCH, 0, 9, offset_fetch, offset_fetch_error),
        Api(ApiKey.OFFSET_DELETE, 0, 0, offset_delete, offset_delete_error),
    ]
