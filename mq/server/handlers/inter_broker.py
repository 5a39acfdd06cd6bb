"""The broker side of the controller's requests: LeaderAndIsr, UpdateMetadata and StopReplica.

A request from a controller whose epoch is older than the newest this broker has seen is refused with
STALE_CONTROLLER_EPOCH, so a deposed controller cannot undo its successor's decisions.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, RequestContext
from mq.server.local_channel import apply_update_metadata
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache
from mq.server.partition_state import PartitionStateInfo
from mq.server.replica_manager import ReplicaManager
from mq.topic_partition import TopicPartition
from mq.zk.kafka_zk_client import KafkaZkClient


def _infos(request: Any, topic_ids: dict[str, str | None] | None = None) -> list[PartitionStateInfo]:
    return [
        PartitionStateInfo(
            TopicPartition(topic.topic_name, p.partition_index),
            (topic_ids or {}).get(topic.topic_name),
            p.leader,
            p.leader_epoch,
            tuple(p.isr),
            tuple(p.replicas),
            p.zk_version,
            p.controller_epoch,
        )
        for topic in request.topic_states
        for p in topic.partition_states
    ]


def inter_broker_apis(
    replica_manager: ReplicaManager,
    cache: MetadataCache,
    zk: KafkaZkClient,
    listener: str = "PLAINTEXT",
) -> list[Api]:
    """``listener``: the inter-broker listener's name (whose address a live broker is reached at)."""
    newest_epoch = [0]

    def topic_id(topic: str) -> str | None:
        """The topic's id: cached, else read once from its znode (the inter-broker requests do not carry it); runs
        off the loop."""
        known = cache.topics.get(topic)
        if known is not None and known.topic_id is not None:
            return known.topic_id
        assignment = zk.get_topic_assignment(topic)
        return None if assignment is None else assignment.topic_id

    def stale(request: Any) -> bool:
        if request.controller_epoch < newest_epoch[0]:
            return True
        newest_epoch[0] = request.controller_epoch
        return False

    async def leader_and_isr(context: RequestContext, request: Any) -> dict[str, Any]:
        infos = _infos(request)
        code = ErrorCode.STALE_CONTROLLER_EPOCH if stale(request) else ErrorCode.NONE
        if code == ErrorCode.NONE:
            await asyncio.get_running_loop().run_in_executor(None, replica_manager.prepare_logs, infos)
            replica_manager.become_leader_or_follower(infos)
        errors = [
            {
                "topic_name": i.tp.topic,
                "partition_index": i.tp.partition,
                "error_code": ErrorCode.KAFKA_STORAGE_ERROR if replica_manager.is_offline(i.tp) else code,
            }
            for i in infos
        ]
        return {"error_code": code, "partition_errors": errors}

    def leader_and_isr_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        errors = [
            {"topic_name": i.tp.topic, "partition_index": i.tp.partition, "error_code": code} for i in _infos(request)
        ]
        return {"error_code": code, "partition_errors": errors}

    async def update_metadata(context: RequestContext, request: Any) -> dict[str, Any]:
        if stale(request):
            return {"error_code": ErrorCode.STALE_CONTROLLER_EPOCH}
        brokers = [_live_broker(b, listener) for b in request.live_brokers if b.endpoints]
        names = [t.topic_name for t in request.topic_states]
        topic_ids = await asyncio.get_running_loop().run_in_executor(None, lambda: {t: topic_id(t) for t in names})
        apply_update_metadata(cache, _infos(request, topic_ids), brokers, request.controller_id)
        return {"error_code": ErrorCode.NONE}

    def update_metadata_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code}

    def stopped(request: Any) -> list[TopicPartition]:
        return [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]

    async def stop_replica(context: RequestContext, request: Any) -> dict[str, Any]:
        if stale(request):
            return stop_replica_error(context, request, ErrorCode.STALE_CONTROLLER_EPOCH)
        replica_manager.stop_replicas(stopped(request), bool(request.delete_partitions))
        return stop_replica_error(context, request, ErrorCode.NONE)

    def stop_replica_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        errors = [
            {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code} for tp in stopped(request)
        ]
        return {"error_code": code, "partition_errors": errors}

    return [
        Api(ApiKey.LEADER_AND_ISR, 5, 5, leader_and_isr, leader_and_isr_error),
        Api(ApiKey.STOP_REPLICA, 3, 3, stop_replica, stop_replica_error),
        Api(ApiKey.UPDATE_METADATA, 7, 7, update_metadata, update_metadata_error),
    ]


def _live_broker(broker: Any, listener: str) -> BrokerEndpoint:
    """An UpdateMetadata live broker: reached on ``listener`` (else its first endpoint), with all its listeners."""
    listeners = tuple((str(e.listener), str(e.host), int(e.port)) for e in broker.endpoints)
    _, host, port = next((entry for entry in listeners if entry[0] == listener), listeners[0])
    return BrokerEndpoint(broker.id, host, port, broker.rack, listeners)
