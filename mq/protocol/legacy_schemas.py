"""Produce v0-v2 and Fetch v0-v3, declared in kio's style (kio starts at Produce v3 and Fetch v4), so the generic
codec can decode and encode them (tests, the error paths); the broker reads and writes their frames with the
hand-written ``produce_request``/``produce_response`` and ``fetch_request``/``fetch_response``.

Produce: v0-v2 requests carry no transactional_id; responses gain throttle_time_ms (v1) and log_append_time (v2).
Fetch: v3 requests add max_bytes; responses gain throttle_time_ms (v1); partitions carry no last_stable_offset,
log_start_offset or aborted transactions (v4+). Their record sets are message sets (magic 0 for Produce and Fetch
v0-v1, 1 for v2 and v2-v3). (No postponed annotations here: kio reads the field types at run time.)
"""

from dataclasses import field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import Records, TZAware, i16, i32, i32Timedelta, i64

from mq.protocol.inter_broker import declared_schema

PRODUCE, FETCH = 0, 1


def _int16() -> Any:
    return field(metadata={"kafka_type": "int16"})


def _int32() -> Any:
    return field(metadata={"kafka_type": "int32"})


def _int64() -> Any:
    return field(metadata={"kafka_type": "int64"})


def _timedelta() -> Any:
    return field(metadata={"kafka_type": "timedelta_i32"})


def _string() -> Any:
    return field(metadata={"kafka_type": "string"})


def _error() -> Any:
    return field(metadata={"kafka_type": "error_code"})


def _records() -> Any:
    return field(metadata={"kafka_type": "records"})


# --- Produce ---------------------------------------------------------------------------------------------------------


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class PartitionProduceData:
    index: i32 = _int32()
    records: Records | None = _records()


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class TopicProduceData:
    name: str = _string()
    partition_data: tuple[PartitionProduceData, ...]


@declared_schema(PRODUCE, 0, EntityType.request, flexible=False)
class ProduceRequest:
    acks: i16 = _int16()
    timeout: i32Timedelta = _timedelta()
    topic_data: tuple[TopicProduceData, ...]


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class PartitionProduceResponseV0:
    index: i32 = _int32()
    error_code: ErrorCode = _error()
    base_offset: i64 = _int64()


@declared_schema(PRODUCE, 0, EntityType.nested, flexible=False)
class TopicProduceResponseV0:
    name: str = _string()
    partition_responses: tuple[PartitionProduceResponseV0, ...]


@declared_schema(PRODUCE, 0, EntityType.response, flexible=False)
class ProduceResponseV0:
    responses: tuple[TopicProduceResponseV0, ...]


@declared_schema(PRODUCE, 1, EntityType.response, flexible=False)
class ProduceResponseV1:
    responses: tuple[TopicProduceResponseV0, ...]
    throttle_time: i32Timedelta = _timedelta()


@declared_schema(PRODUCE, 2, EntityType.nested, flexible=False)
class PartitionProduceResponseV2:
    index: i32 = _int32()
    error_code: ErrorCode = _error()
    base_offset: i64 = _int64()
    log_append_time: TZAware | None = field(metadata={"kafka_type": "datetime_i64"}, default=None)


@declared_schema(PRODUCE, 2, EntityType.nested, flexible=False)
class TopicProduceResponseV2:
    name: str = _string()
    partition_responses: tuple[PartitionProduceResponseV2, ...]


@declared_schema(PRODUCE, 2, EntityType.response, flexible=False)
class ProduceResponseV2:
    responses: tuple[TopicProduceResponseV2, ...]
    throttle_time: i32Timedelta = _timedelta()


# --- Fetch -----------------------------------------------------------------------------------------------------------


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class FetchPartition:
    partition: i32 = _int32()
    fetch_offset: i64 = _int64()
    partition_max_bytes: i32 = _int32()


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class FetchTopic:
    topic: str = _string()
    partitions: tuple[FetchPartition, ...]


@declared_schema(FETCH, 0, EntityType.request, flexible=False)
class FetchRequestV0:
    replica_id: i32 = _int32()
    max_wait: i32Timedelta = _timedelta()
    min_bytes: i32 = _int32()
    topics: tuple[FetchTopic, ...]


@declared_schema(FETCH, 3, EntityType.request, flexible=False)
class FetchRequestV3:
    replica_id: i32 = _int32()
    max_wait: i32Timedelta = _timedelta()
    min_bytes: i32 = _int32()
    max_bytes: i32 = _int32()
    topics: tuple[FetchTopic, ...]


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class PartitionData:
    partition_index: i32 = _int32()
    error_code: ErrorCode = _error()
    high_watermark: i64 = _int64()
    records: Records | None = _records()


@declared_schema(FETCH, 0, EntityType.nested, flexible=False)
class FetchableTopicResponse:
    topic: str = _string()
    partitions: tuple[PartitionData, ...]


@declared_schema(FETCH, 0, EntityType.response, flexible=False)
class FetchResponseV0:
    responses: tuple[FetchableTopicResponse, ...]


@declared_schema(FETCH, 1, EntityType.response, flexible=False)
class FetchResponseV1:
    throttle_time: i32Timedelta = _timedelta()
    responses: tuple[FetchableTopicResponse, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (PRODUCE, 0): (ProduceRequest, ProduceResponseV0),
    (PRODUCE, 1): (ProduceRequest, ProduceResponseV1),
    (PRODUCE, 2): (ProduceRequest, ProduceResponseV2),
    (FETCH, 0): (FetchRequestV0, FetchResponseV0),
    (FETCH, 1): (FetchRequestV0, FetchResponseV1),
    (FETCH, 2): (FetchRequestV0, FetchResponseV1),
    (FETCH, 3): (FetchRequestV3, FetchResponseV1),
}
"""(api_key, version) -> (request schema, response schema)."""
