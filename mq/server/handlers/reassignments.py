"""AlterPartitionReassignments and ListPartitionReassignments on the metadata tree.

Both meet the ZooKeeper-era tool in one place: a requested move is merged into ``/admin/reassign_partitions`` (an
entry for the same partition is replaced), which the controller executes; a cancellation asks for the partition's
original replicas (the current ones minus those being added), which completes at once because they are in sync.
Ongoing reassignments are read from the topics' ``adding_replicas``/``removing_replicas``, plus requests the
controller has not picked up yet. Any broker can answer. A name that is not a legal topic name names no topic.
A v1 request with ``allow_replication_factor_change`` false (KIP-860) refuses a move to a different number of replicas
than the partition's original ones with INVALID_REPLICATION_FACTOR, and the answer repeats the flag.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.topic_partition import TopicPartition, topic_name_error
from mq.zk import paths
from mq.zk.codecs import TopicAssignment, decode_reassignment, encode_reassignment
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, NodeExistsError, NoNodeError

Moves = dict[TopicPartition, list[int]]


def _requested(zk: KafkaZkClient) -> Moves:
    data = zk.store.get_or_none(paths.REASSIGN_PARTITIONS)
    return {} if data is None else {TopicPartition(t, p): r for t, p, r in decode_reassignment(data)}


def merge_reassignments(zk: KafkaZkClient, moves: Moves, cancelled: Iterable[TopicPartition] = ()) -> None:
    """Add ``moves`` to ``/admin/reassign_partitions`` and drop ``cancelled`` entries, conditionally on the znode's
    version (retried when someone else wrote in between)."""
    dropped = set(cancelled)
    store = zk.store
    while True:
        try:
            data, stat = store.get(paths.REASSIGN_PARTITIONS)
            current = {TopicPartition(t, p): r for t, p, r in decode_reassignment(data)}
            version = stat.version
        except NoNodeError:
            current, version = {}, None
        merged = {tp: r for tp, r in {**current, **moves}.items() if tp not in dropped}
        encoded = encode_reassignment([(tp.topic, tp.partition, r) for tp, r in sorted(merged.items())])
        try:
            if version is None:
                if merged:
                    store.create(paths.REASSIGN_PARTITIONS, encoded, makepath=True)
            elif merged:
                store.set(paths.REASSIGN_PARTITIONS, encoded, version)
            else:
                store.delete(paths.REASSIGN_PARTITIONS, version)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue


def ongoing_reassignments(zk: KafkaZkClient, topics: Iterable[str]) -> dict[TopicPartition, tuple[list[int], ...]]:
    """(replicas, adding, removing) of every partition of ``topics`` being reassigned or requested to be."""
    requested = _requested(zk)
    result: dict[TopicPartition, tuple[list[int], ...]] = {}
    for topic in topics:
        assignment = zk.get_topic_assignment(topic)
        if assignment is None:
            continue
        for partition, replicas in sorted(assignment.partitions.items()):
            tp = TopicPartition(topic, partition)
            adding = assignment.adding_replicas.get(partition, [])
            removing = assignment.removing_replicas.get(partition, [])
            if adding or removing:
                result[tp] = (replicas, adding, removing)
            elif tp in requested and requested[tp] != replicas:
                target = requested[tp]
                result[tp] = (
                    target + [b for b in replicas if b not in target],
                    [b for b in target if b not in replicas],
                    [b for b in replicas if b not in target],
                )
    return result


def _original(assignment: TopicAssignment, partition: int) -> list[int]:
    adding = assignment.adding_replicas.get(partition, [])
    return [b for b in assignment.partitions[partition] if b not in adding]


def reassignment_apis(zk: KafkaZkClient) -> list[Api]:
    async def alter(context: RequestContext, request: Any) -> dict[str, Any]:
        answer = await asyncio.to_thread(alter_now, request)
        changed = [
            f"{topic['name']}-{p['partition_index']}"
            for topic in answer["responses"]
            for p in topic["partitions"]
            if p["error_code"] == ErrorCode.NONE
        ]
        if changed:
            audit(context, f"altered the reassignment of {', '.join(changed)}")
        return answer

    def alter_now(request: Any) -> dict[str, Any]:
        allow_factor_change = getattr(request, "allow_replication_factor_change", True)
        live = set(zk.get_all_brokers())
        requested = _requested(zk)
        moves: Moves = {}
        cancelled: list[TopicPartition] = []
        responses = []
        for topic in request.topics:
            assignment = None if topic_name_error(topic.name) else zk.get_topic_assignment(topic.name)
            results = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, int(part.partition_index))
                code, message = ErrorCode.NONE, None
                if assignment is None or tp.partition not in assignment.partitions:
                    code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
                elif part.replicas is None:
                    original = _original(assignment, tp.partition)
                    if original != assignment.partitions[tp.partition]:
                        moves[tp] = original
                    elif tp in requested:
                        cancelled.append(tp)
                    else:
                        code, message = (
                            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                            f"No reassignment is in progress for {tp}",
                        )
                else:
                    replicas = [int(b) for b in part.replicas]
                    unknown = sorted(set(replicas) - live)
                    if not replicas:
                        code, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica list is empty."
                    elif len(set(replicas)) != len(replicas):
                        code, message = (
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"The replica list of {tp} contains duplicate entries: {replicas}",
                        )
                    elif unknown:
                        code, message = (
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"The proposed assignment contains non-existent brokerIDs: {','.join(map(str, unknown))}",
                        )
                    elif not allow_factor_change and len(replicas) != len(_original(assignment, tp.partition)):
                        code, message = (
                            ErrorCode.INVALID_REPLICATION_FACTOR,
                            "The replication factor is changed from "
                            f"{len(_original(assignment, tp.partition))} to {len(replicas)}",
                        )
                    else:
                        moves[tp] = replicas
                results.append({"partition_index": tp.partition, "error_code": code, "error_message": message})
            responses.append({"name": topic.name, "partitions": results})
        if moves or cancelled:
            merge_reassignments(zk, moves, cancelled)
        return {
            "throttle_time": 0,
            "allow_replication_factor_change": allow_factor_change,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "responses": responses,
        }

    def alter_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "allow_replication_factor_change": getattr(request, "allow_replication_factor_change", True),
            "error_code": code,
            "error_message": None,
            "responses": [],
        }

    async def list_ongoing(context: RequestContext, request: Any) -> dict[str, Any]:
        return await asyncio.to_thread(list_now, request)

    def list_now(request: Any) -> dict[str, Any]:
        wanted: dict[str, set[int]] | None = None
        if request.topics is not None:
            wanted = {t.name: {int(p) for p in t.partition_indexes} for t in request.topics}
        topics = zk.get_all_topics() if wanted is None else sorted(t for t in wanted if not topic_name_error(t))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, (replicas, adding, removing) in ongoing_reassignments(zk, topics).items():
            if wanted is not None and tp.partition not in wanted.get(tp.topic, set()):
                continue
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "replicas": replicas,
                    "adding_replicas": adding,
                    "removing_replicas": removing,
                }
            )
        topics_out = [{"name": t, "partitions": p} for t, p in by_topic.items()]
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "topics": topics_out}

    def list_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": None, "topics": []}

    return [
        Api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1, alter, alter_error),
        Api(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, list_ongoing, list_error),
    ]
