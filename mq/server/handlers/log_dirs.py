"""DescribeLogDirs and AlterReplicaLogDirs: the log directories of this broker and moving replicas between them.

DescribeLogDirs lists the size of every replica in each log directory (kafka-log-dirs and the reassignment tool's
progress read it), future replicas (being moved there) with ``is_future_key`` and, as their offset lag, how far their
log end is behind the current replica's; a current replica's lag is how far its log end is behind the high
watermark. An offline log dir is listed with KAFKA_STORAGE_ERROR, no topics and -1 for its sizes, as Kafka does.

AlterReplicaLogDirs (v1-v2: kio has no schema for v0) starts moving replicas this broker hosts into another of its
log dirs (``LogDirMover``); per partition: LOG_DIR_NOT_FOUND for a path that is not a configured log dir,
KAFKA_STORAGE_ERROR for an offline dir or replica, REPLICA_NOT_AVAILABLE for a partition this broker does not
host, NONE when the move started, runs already or is not needed (the replica is there).
"""

from __future__ import annotations

import shutil
from typing import Any

from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.log_dir_mover import LogDirMover
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition


def log_dirs_apis(replica_manager: ReplicaManager, mover: LogDirMover | None = None) -> list[Api]:
    log_manager: LogManager = replica_manager.log_manager

    def replica_entry(tp: TopicPartition, log: Log, future: bool) -> dict[str, Any]:
        if future:
            current = log_manager.logs.get(tp)
            lag = 0 if current is None else max(0, current.log_end_offset - log.log_end_offset)
        else:
            partition = replica_manager.partitions.get(tp)
            lag = 0 if partition is None else max(0, partition.high_watermark - log.log_end_offset)
        return {
            "partition_index": tp.partition,
            "partition_size": log.size_in_bytes,
            "offset_lag": lag,
            "is_future_key": future,
        }

    async def describe_log_dirs(context: RequestContext, request: Any) -> dict[str, Any]:
        wanted: set[TopicPartition] | None = None
        if request.topics is not None:
            wanted = {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}
        replicas = [(tp, log, False) for tp, log in log_manager.logs.items()]
        replicas += [(tp, log, True) for tp, log in log_manager.future_logs.items()]
        results = []
        for directory in log_manager.log_dirs:
            if directory in log_manager.offline_dirs:
                results.append(
                    {
                        "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                        "log_dir": str(directory),
                        "topics": [],
                        "total_bytes": -1,
                        "usable_bytes": -1,
                    }
                )
                continue
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp, log, future in sorted(replicas, key=lambda r: (r[0], r[2])):
                if log.dir.parent != directory or (wanted is not None and tp not in wanted):
                    continue
                topics.setdefault(tp.topic, []).append(replica_entry(tp, log, future))
            usage = shutil.disk_usage(directory)
            results.append(
                {
                    "error_code": ErrorCode.NONE,
                    "log_dir": str(directory),
                    "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
                    "total_bytes": usage.total,
                    "usable_bytes": usage.free,
                }
            )
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "results": results}

    def describe_log_dirs_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "results": []}

    def move_one(tp: TopicPartition, path: str) -> ErrorCode:
        try:
            directory = log_manager.log_dir_named(path)
            if log_manager.create_future_log(tp, directory) is not None and mover is not None:
                mover.wake()
        except KafkaError as exc:
            return exc.code
        except OSError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    async def alter_replica_log_dirs(context: RequestContext, request: Any) -> dict[str, Any]:
        outcomes: dict[str, list[dict[str, Any]]] = {}
        for entry in request.dirs:
            for topic in entry.topics:
                outcomes.setdefault(topic.name, []).extend(
                    {"partition_index": int(p), "error_code": move_one(TopicPartition(topic.name, int(p)), entry.path)}
                    for p in topic.partitions
                )
        moved = [f"{t}-{p['partition_index']}" for t, ps in outcomes.items() for p in ps if p["error_code"] == 0]
        if moved:
            audit(context, f"moved replicas {', '.join(moved)} between log dirs")
        return {"throttle_time": 0, "results": [{"topic_name": t, "partitions": ps} for t, ps in outcomes.items()]}

    def alter_replica_log_dirs_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        results = [
            {
                "topic_name": topic.name,
                "partitions": [{"partition_index": int(p), "error_code": code} for p in topic.partitions],
            }
            for entry in request.dirs
            for topic in entry.topics
        ]
        return {"throttle_time": 0, "results": results}

    return [
        Api(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, describe_log_dirs, describe_log_dirs_error),
        Api(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2, alter_replica_log_dirs, alter_replica_log_dirs_error),
    ]
