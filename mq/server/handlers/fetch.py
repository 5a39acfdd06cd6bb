"""Fetch: file slices from the partitions' logs, long-polled, answered with the piecewise encoder (sendfile).

Fetch sessions are answered as "no session" (session id 0), which every client accepts and then sends full
requests. read_committed reads up to the last stable offset, which is the high watermark without transactions.
"""

from __future__ import annotations

from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.fetch_response import FetchPartition, FetchTopic, encode_fetch_response
from mq.server.api_dispatch import Api, RequestContext
from mq.server.replica_manager import FetchRequestPartition, ReplicaManager
from mq.topic_partition import TopicPartition


def fetch_api(replica_manager: ReplicaManager) -> Api:
    async def handle(context: RequestContext, request: Any) -> list[Any]:
        wanted = [
            FetchRequestPartition(
                TopicPartition(t.topic, p.partition),
                p.fetch_offset,
                p.partition_max_bytes,
                int(getattr(p, "current_leader_epoch", -1)),
            )
            for t in request.topics
            for p in t.partitions
        ]
        results = await replica_manager.fetch(
            wanted,
            replica_id=int(request.replica_id),
            max_wait_ms=int(request.max_wait.total_seconds() * 1000),
            min_bytes=int(request.min_bytes),
            max_bytes=int(getattr(request, "max_bytes", 0x7FFFFFFF)),
        )
        topics: list[FetchTopic] = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                r = results[TopicPartition(t.topic, p.partition)]
                partitions.append(
                    FetchPartition(
                        p.partition,
                        r.error,
                        r.high_watermark,
                        r.last_stable_offset,
                        r.log_start_offset,
                        [] if int(getattr(request, "isolation_level", 0)) == 1 else None,
                        -1,
                        r.records if r.records is not None and r.records.length else b"",
                    )
                )
            topics.append(FetchTopic(t.topic, None, partitions))
        return encode_fetch_response(context.version, context.header.correlation_id, topics)

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": t.topic,
                    "partitions": [
                        {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""}
                        for p in t.partitions
                    ],
                }
                for t in request.topics
            ],
        }

    return Api(ApiKey.FETCH, 4, 12, handle, error)
