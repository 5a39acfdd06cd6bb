"""DescribeProducers: the active producers of partitions this broker hosts, leader or follower, as their logs' producer
state holds them (``kafka-transactions describe-producers`` and ``find-hanging`` read it).

Each producer answers its id, epoch, last sequence, the timestamp of its last batch, the coordinator epoch of its last
transaction marker (-1 before one) and the first offset of its open transaction (-1 without one). As Kafka answers:
an illegal topic name INVALID_TOPIC_EXCEPTION, a topic the client may not READ TOPIC_AUTHORIZATION_FAILED, a topic
the metadata does not know UNKNOWN_TOPIC_OR_PARTITION (for each partition asked); then per partition a replica in an
offline log dir KAFKA_STORAGE_ERROR, a known partition this broker has no replica of NOT_LEADER_OR_FOLLOWER, an
unknown one UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names
from mq.server.metadata_cache import MetadataCache
from mq.server.replica_manager import ReplicaManager
from mq.topic_partition import TopicPartition, topic_name_error


def producers_api(replica_manager: ReplicaManager, cache: MetadataCache, acl: AclCache | None = None) -> Api:
    """DescribeProducers over ``replica_manager``'s partitions, authorized by ``acl`` (None: no authorizer)."""

    def partition_answer(tp: TopicPartition) -> dict[str, Any]:
        partition = replica_manager.partitions.get(tp)
        if partition is None:
            info = cache.topics.get(tp.topic)
            known = info is not None and tp.partition in info.partitions
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return _refused(tp.partition, code, None)
        if replica_manager.is_offline(tp):
            return _refused(tp.partition, ErrorCode.KAFKA_STORAGE_ERROR, None)
        active = [
            {
                "producer_id": producer_id,
                "producer_epoch": entry.epoch,
                "last_sequence": entry.last_sequence,
                "last_timestamp": entry.last_timestamp,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_start_offset": entry.current_txn_first_offset,
            }
            for producer_id, entry in partition.producers.producers.items()
        ]
        return {"partition_index": tp.partition, "error_code": 0, "error_message": None, "active_producers": active}

    async def describe(context: RequestContext, request: Any) -> dict[str, Any]:
        readable = allowed_names(acl, context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
        topics = []
        for topic in request.topics:
            illegal = topic_name_error(topic.name)
            refusal: tuple[ErrorCode, str | None] | None = None
            if illegal is not None:
                refusal = (ErrorCode.INVALID_TOPIC_EXCEPTION, illegal)
            elif topic.name not in readable:
                refusal = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            elif topic.name not in cache.topics:
                refusal = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            partitions = [
                partition_answer(TopicPartition(topic.name, p)) if refusal is None else _refused(p, *refusal)
                for p in topic.partition_indexes
            ]
            topics.append({"name": topic.name, "partitions": partitions})
        return {"throttle_time": 0, "topics": topics}

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        topics = [
            {"name": t.name, "partitions": [_refused(p, code, None) for p in t.partition_indexes]}
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    return Api(ApiKey.DESCRIBE_PRODUCERS, 0, 0, describe, error)


def _refused(partition: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": code, "error_message": message, "active_producers": []}
