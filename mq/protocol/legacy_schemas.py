"""Produce v0-v2, Fetch v0-v3 and OffsetCommit v0-v1, declared in kio's style (kio starts at Produce v3, Fetch v4
and OffsetCommit v2), so the generic codec can decode and encode them (tests, the error paths); the broker reads and
writes Produce and Fetch frames with the hand-written ``produce_request``/``produce_response`` and
``fetch_request``/``fetch_response``.

Produce: v0-v2 requests carry no transactional_id; responses gain throttle_time_ms (v1) and log_append_time (v2).
Fetch: v3 requests add max_bytes; responses gain throttle_time_ms (v1); partitions carry no last_stable_offset,
log_start_offset or aborted transactions (v4+). Their record sets are message sets (magic 0 for Produce and Fetch
v0-v1, 1 for v2 and v2-v3).
OffsetCommit: v0 requests carry the group and its offsets only (Kafka keeps them in ZooKeeper); v1 adds the generation,
the member and a commit timestamp per partition; v2 replaced that timestamp by a retention time for the request. Their
responses are v2's. (No postponed annotations here: kio reads the field types at run time.)
"""

from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v2.response import OffsetCommitResponse
from kio.static.constants import EntityType
from kio.static.primitive import Records, TZAware, i16, i32, i32Timedelta, i64

from mq.protocol.inter_broker import declared_schema, kafka_field

PRODUCE, FETCH, OFFSET_COMMIT = 0, 1, 8


# --- Produce ---------------------------------------------------------------------------------------------------------


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class PartitionProduceData:
    index: i32 = kafka_field("int32")
    records: Records | None = kafka_field("records")


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class TopicProduceData:
    name: str = kafka_field("string")
    partition_data: tuple[PartitionProduceData, ...]


@declared_schema(PRODUCE, 0, EntityType.request, flexible=False)
class ProduceRequest:
    acks: i16 = kafka_field("int16")
    timeout: i32Timedelta = kafka_field("timedelta_i32")
    topic_data: tuple[TopicProduceData, ...]


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class PartitionProduceResponseV0:
    index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")
    base_offset: i64 = kafka_field("int64")


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class TopicProduceResponseV0:
    name: str = kafka_field("string")
    partition_responses: tuple[PartitionProduceResponseV0, ...]


@declared_schema(PRODUCE, 0, EntityType.response, flexible=False)
class ProduceResponseV0:
    responses: tuple[TopicProduceResponseV0, ...]


@declared_schema(PRODUCE, 1, EntityType.response, flexible=False)
class ProduceResponseV1:
    responses: tuple[TopicProduceResponseV0, ...]
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")


@declared_schema(PRODUCE, 2, EntityType.nested, flexible=False)
class PartitionProduceResponseV2:
    index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")
    base_offset: i64 = kafka_field("int64")
    log_append_time: TZAware | None = kafka_field("datetime_i64", default=None)


@declared_schema(PRODUCE, 2, EntityType.nested, flexible=False)
class TopicProduceResponseV2:
    name: str = kafka_field("string")
    partition_responses: tuple[PartitionProduceResponseV2, ...]


@declared_schema(PRODUCE, 2, EntityType.response, flexible=False)
class ProduceResponseV2:
    responses: tuple[TopicProduceResponseV2, ...]
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")


# --- Fetch -----------------------------------------------------------------------------------------------------------


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class FetchPartition:
    partition: i32 = kafka_field("int32")
    fetch_offset: i64 = kafka_field("int64")
    partition_max_bytes: i32 = kafka_field("int32")


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class FetchTopic:
    topic: str = kafka_field("string")
    partitions: tuple[FetchPartition, ...]


@declared_schema(FETCH, 0, EntityType.request, flexible=False)
class FetchRequestV0:
    replica_id: i32 = kafka_field("int32")
    max_wait: i32Timedelta = kafka_field("timedelta_i32")
    min_bytes: i32 = kafka_field("int32")
    topics: tuple[FetchTopic, ...]


@declared_schema(FETCH, 3, EntityType.request, flexible=False)
class FetchRequestV3:
    replica_id: i32 = kafka_field("int32")
    max_wait: i32Timedelta = kafka_field("timedelta_i32")
    min_bytes: i32 = kafka_field("int32")
    max_bytes: i32 = kafka_field("int32")
    topics: tuple[FetchTopic, ...]


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class PartitionData:
    partition_index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")
    high_watermark: i64 = kafka_field("int64")
    records: Records | None = kafka_field("records")


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class FetchableTopicResponse:
    topic: str = kafka_field("string")
    partitions: tuple[PartitionData, ...]


@declared_schema(FETCH, 0, EntityType.response, flexible=False)
class FetchResponseV0:
    responses: tuple[FetchableTopicResponse, ...]


@declared_schema(FETCH, 1, EntityType.response, flexible=False)
class FetchResponseV1:
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    responses: tuple[FetchableTopicResponse, ...]


# --- OffsetCommit ----------------------------------------------------------------------------------------------------


@declared_schema(OFFSET_COMMIT, 0, EntityType.nested, flexible=False)
class OffsetCommitRequestPartitionV0:
    partition_index: i32 = kafka_field("int32")
    committed_offset: i64 = kafka_field("int64")
    committed_metadata: str | None = kafka_field("string")


@declared_schema(OFFSET_COMMIT, 0, EntityType.nested, flexible=False)
class OffsetCommitRequestTopicV0:
    name: str = kafka_field("string")
    partitions: tuple[OffsetCommitRequestPartitionV0, ...]


@declared_schema(OFFSET_COMMIT, 0, EntityType.request, flexible=False)
class OffsetCommitRequestV0:
    group_id: str = kafka_field("string")
    topics: tuple[OffsetCommitRequestTopicV0, ...]


@declared_schema(OFFSET_COMMIT, 1, EntityType.nested, flexible=False)
class OffsetCommitRequestPartitionV1:
    partition_index: i32 = kafka_field("int32")
    committed_offset: i64 = kafka_field("int64")
    commit_timestamp: i64 = kafka_field("int64", default=-1)
    committed_metadata: str | None = kafka_field("string")


@declared_schema(OFFSET_COMMIT, 1, EntityType.nested, flexible=False)
class OffsetCommitRequestTopicV1:
    name: str = kafka_field("string")
    partitions: tuple[OffsetCommitRequestPartitionV1, ...]


@declared_schema(OFFSET_COMMIT, 1, EntityType.request, flexible=False)
class OffsetCommitRequestV1:
    group_id: str = kafka_field("string")
    generation_id_or_member_epoch: i32 = kafka_field("int32")
    member_id: str = kafka_field("string")
    topics: tuple[OffsetCommitRequestTopicV1, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (PRODUCE, 0): (ProduceRequest, ProduceResponseV0),
    (PRODUCE, 1): (ProduceRequest, ProduceResponseV1),
    (PRODUCE, 2): (ProduceRequest, ProduceResponseV2),
    (FETCH, 0): (FetchRequestV0, FetchResponseV0),
    (FETCH, 1): (FetchRequestV0, FetchResponseV1),
    (FETCH, 2): (FetchRequestV0, FetchResponseV1),
    (FETCH, 3): (FetchRequestV3, FetchResponseV1),
    (OFFSET_COMMIT, 0): (OffsetCommitRequestV0, OffsetCommitResponse),
    (OFFSET_COMMIT, 1): (OffsetCommitRequestV1, OffsetCommitResponse),
}
"""(api_key, version) -> (request schema, response schema)."""
