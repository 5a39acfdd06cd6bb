"""Produce: per-partition appends through the replica manager; acks=0 gets no response at all.

Internal topics (``__consumer_offsets``) take appends only from their coordinators, not from clients: as in Kafka,
only the client id ``__admin_client`` may write to them; others get INVALID_TOPIC_EXCEPTION for those partitions.
"""

from __future__ import annotations

import datetime
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.produce_request import ProduceRequest, decode_produce_request
from mq.server.api_dispatch import Api, RequestContext
from mq.server.replica_manager import ReplicaManager
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition

ADMIN_CLIENT_ID = "__admin_client"


def _append_time(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def produce_api(replica_manager: ReplicaManager) -> Api:
    async def handle(context: RequestContext, request: ProduceRequest) -> dict[str, Any] | None:
        acks = request.acks
        internal_allowed = context.header.client_id == ADMIN_CLIENT_ID
        entries: dict[TopicPartition, memoryview] = {}
        invalid: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topic_data:
            for p in topic.partition_data:
                tp = TopicPartition(topic.name, p.index)
                if acks not in (-1, 0, 1):
                    invalid[tp] = ErrorCode.INVALID_REQUIRED_ACKS
                elif request.transactional_id is not None:
                    invalid[tp] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                elif topic.name in INTERNAL_TOPICS and not internal_allowed:
                    invalid[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif p.records is None or not p.records:
                    invalid[tp] = ErrorCode.CORRUPT_MESSAGE
                else:
                    entries[tp] = p.records
        results = await replica_manager.append_records(entries, acks, request.timeout_ms) if entries else {}
        if acks == 0:
            return None
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic in request.topic_data:
            for p in topic.partition_data:
                tp = TopicPartition(topic.name, p.index)
                answer: dict[str, Any] = {"index": p.index, "record_errors": [], "log_start_offset": -1}
                if tp in invalid:
                    answer.update(error_code=invalid[tp], base_offset=-1, log_append_time=None)
                else:
                    r = results[tp]
                    answer.update(
                        error_code=r.error,
                        base_offset=r.base_offset,
                        log_append_time=_append_time(r.log_append_time_ms),
                        log_start_offset=r.log_start_offset,
                        error_message=r.message,
                    )
                by_topic.setdefault(topic.name, []).append(answer)
        return {
            "responses": [{"name": name, "partition_responses": parts} for name, parts in by_topic.items()],
            "throttle_time": 0,
        }

    def error(context: RequestContext, request: ProduceRequest, code: ErrorCode) -> dict[str, Any] | None:
        if request.acks == 0:
            return None
        responses = [
            {
                "name": t.name,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": code,
                        "base_offset": -1,
                        "log_append_time": None,
                        "record_errors": [],
                    }
                    for p in t.partition_data
                ],
            }
            for t in request.topic_data
        ]
        return {"responses": responses, "throttle_time": 0}

    return Api(ApiKey.PRODUCE, 3, 9, handle, error, decode_produce_request)
