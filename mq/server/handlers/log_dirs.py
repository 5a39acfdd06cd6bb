"""DescribeLogDirs: the size of every replica in each log directory of this broker (kafka-log-dirs and the
reassignment tool's progress read it). An offline log dir is listed with KAFKA_STORAGE_ERROR, no topics and -1 for
its sizes, as Kafka does."""

from __future__ import annotations

import shutil
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, RequestContext
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_manager import LogManager
from mq.topic_partition import TopicPartition


def log_dirs_apis(replica_manager: ReplicaManager) -> list[Api]:
    log_manager: LogManager = replica_manager.log_manager

    async def describe_log_dirs(context: RequestContext, request: Any) -> dict[str, Any]:
        wanted: set[TopicPartition] | None = None
        if request.topics is not None:
            wanted = {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}
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
            for tp, log in sorted(log_manager.logs.items()):
                if log.dir.parent != directory or (wanted is not None and tp not in wanted):
                    continue
                partition = replica_manager.partitions.get(tp)
                lag = 0 if partition is None else max(0, partition.high_watermark - log.log_end_offset)
                topics.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "partition_size": log.size_in_bytes,
                        "offset_lag": lag,
                        "is_future_key": False,
                    }
                )
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

    return [Api(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, describe_log_dirs, describe_log_dirs_error)]
