"""Produce: per-partition appends through the replica manager; acks=0 gets no response at all.

Internal topics (``__consumer_offsets``) take appends only from their coordinators, not from clients: as in Kafka,
only the client id ``__admin_client`` may write to them; others get INVALID_TOPIC_EXCEPTION for those partitions.
"""

from __future__ import annotations

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.produce_request import ProduceRequest, decode_produce_request
from mq.protocol.produce_response import PartitionResponse, encode_produce_response
from mq.server.api_dispatch import Api, RequestContext
from mq.server.replica_manager import ReplicaManager
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition

ADMIN_CLIENT_ID = "__admin_client"


def produce_api(replica_manager: ReplicaManager) -> Api:
    async def handle(context: RequestContext, request: ProduceRequest) -> bytes | None:
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
        by_topic: dict[str, list[PartitionResponse]] = {}
        for topic in request.topic_data:
            for p in topic.partition_data:
                tp = TopicPartition(topic.name, p.index)
                if tp in invalid:
                    answer = PartitionResponse(p.index, invalid[tp])
                else:
                    r = results[tp]
                    answer = PartitionResponse(
                        p.index,
                        r.error,
                        r.base_offset,
                        r.log_append_time_ms,
                        r.log_start_offset,
                        r.message,
                        r.record_errors,
                    )
                by_topic.setdefault(topic.name, []).append(answer)
        return encode_produce_response(context.version, context.header.correlation_id, list(by_topic.items()))

    def error(context: RequestContext, request: ProduceRequest, code: ErrorCode) -> bytes | None:
        if request.acks == 0:
            return None
        topics = [(t.name, [PartitionResponse(p.index, code) for p in t.partition_data]) for t in request.topic_data]
        return encode_produce_response(context.version, context.header.correlation_id, topics)

    return Api(ApiKey.PRODUCE, 3, 9, handle, error, decode_produce_request)
