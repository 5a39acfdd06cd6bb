"""OffsetForLeaderEpoch: where a leader epoch ended in this broker's log (KIP-101, KIP-279, KIP-320).

A follower asks with its latest epoch before fetching and truncates to the answer; a consumer asks to check that its
position survived a leader change. Per partition: a replica this broker hosts in an online log dir answers
(else KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER for a partition hosted elsewhere, UNKNOWN_TOPIC_OR_PARTITION),
the requester's current leader epoch is checked (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), then only the leader
answers (NOT_LEADER_OR_FOLLOWER), except to a debugging requester (replica id -2, v3+). An epoch the log cannot
place answers leader epoch -1, end offset -1.

With an authorizer, a requester with CLUSTER_ACTION on the cluster (a broker) may ask about every topic; others need
DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode, KafkaError, NotLeaderOrFollowerError
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import allowed_names, allows_cluster
from mq.server.replica_manager import ReplicaManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

DEBUGGING_REPLICA_ID = -2
CONSUMER_REPLICA_ID = -1


def leader_epoch_apis(replica_manager: ReplicaManager, acl: AclCache | None = None) -> list[Api]:
    """OffsetForLeaderEpoch over ``replica_manager``, authorized by ``acl`` (None: no authorizer)."""

    def end_offset(
        tp: TopicPartition, current_leader_epoch: int, leader_epoch: int, only_leader: bool
    ) -> dict[str, Any]:
        answer: dict[str, Any] = {"partition": tp.partition, "error_code": ErrorCode.NONE}
        try:
            partition = replica_manager.hosted_partition(tp)
            partition.check_leader_epoch(current_leader_epoch)
            if only_leader and not partition.is_leader:
                raise NotLeaderOrFollowerError(f"This broker is not the leader for {tp}")
            log: Log = partition.log
            answer["leader_epoch"], answer["end_offset"] = log.end_offset_for_epoch(leader_epoch)
        except KafkaError as exc:
            answer["error_code"] = exc.code
        return answer

    async def handle(context: RequestContext, request: Any) -> dict[str, Any]:
        replica_id = int(getattr(request, "replica_id", CONSUMER_REPLICA_ID))
        only_leader = replica_id != DEBUGGING_REPLICA_ID
        names = [t.topic for t in request.topics]
        if allows_cluster(acl, context, AclOperation.CLUSTER_ACTION, audit=False):
            described = set(names)
        else:
            described = allowed_names(acl, context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        topics = [
            {
                "topic": t.topic,
                "partitions": [
                    end_offset(
                        TopicPartition(t.topic, p.partition),
                        int(p.current_leader_epoch),
                        int(p.leader_epoch),
                        only_leader,
                    )
                    if t.topic in described
                    else {"partition": p.partition, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        topics = [
            {"topic": t.topic, "partitions": [{"partition": p.partition, "error_code": code} for p in t.partitions]}
            for t in request.topics
        ]
        return {"throttle_time": 0, "topics": topics}

    return [Api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, handle, error)]
