"""ListOffsets on the wire: the special timestamps of a request (Kafka's ``ListOffsetsRequest``), and version 0,
declared in kio's style (kio starts at v1).

A partition asked with a special timestamp gets that offset instead of the first offset whose record time is at or
after the timestamp. v0 asks for up to ``max_num_offsets`` offsets of each partition and answers them as a list,
``old_style_offsets`` (v1 replaced it by one offset and its timestamp). (No postponed annotations here: kio reads the
field types at run time.)
"""

from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i32, i64

from mq.protocol.inter_broker import declared_schema, kafka_field

LATEST: Final = -1
"""The log end offset (the high watermark for consumers)."""
EARLIEST: Final = -2
"""The log start offset."""
MAX_TIMESTAMP: Final = -3
"""The record with the largest timestamp (KIP-734, v7+): its offset and timestamp."""
EARLIEST_LOCAL: Final = -4
"""The start of the local log (KIP-405, v8+): the log start offset, as no log has remote segments."""
LATEST_TIERED: Final = -5
"""The last offset in remote storage (KIP-1005, v9+): -1 (with leader epoch -1), as no log has remote segments."""

SPECIAL_FROM: Final = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
"""The first version (v1+) that may ask for each special timestamp; any other negative timestamp, or one asked
before its version, answers UNSUPPORTED_VERSION for its partition, as Kafka's brokers answer."""

LIST_OFFSETS = 2


@declared_schema(LIST_OFFSETS, 0, EntityType.nested, flexible=False)
class ListOffsetsPartition:
    partition_index: i32 = kafka_field("int32")
    timestamp: i64 = kafka_field("int64")
    max_num_offsets: i32 = kafka_field("int32")


@declared_schema(LIST_OFFSETS, 0, EntityType.nested, flexible=False)
class ListOffsetsTopic:
    name: str = kafka_field("string")
    partitions: tuple[ListOffsetsPartition, ...]


@declared_schema(LIST_OFFSETS, 0, EntityType.request, flexible=False)
class ListOffsetsRequest:
    replica_id: i32 = kafka_field("int32")
    topics: tuple[ListOffsetsTopic, ...]


@declared_schema(LIST_OFFSETS, 0, EntityType.nested, flexible=False)
class ListOffsetsPartitionResponse:
    partition_index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")
    old_style_offsets: tuple[i64, ...] = kafka_field("int64", default=())


@declared_schema(LIST_OFFSETS, 0, EntityType.nested, flexible=False)
class ListOffsetsTopicResponse:
    name: str = kafka_field("string")
    partitions: tuple[ListOffsetsPartitionResponse, ...]


@declared_schema(LIST_OFFSETS, 0, EntityType.response, flexible=False)
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResponse, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (LIST_OFFSETS, 0): (ListOffsetsRequest, ListOffsetsResponse),
}
"""(api_key, version) -> (request schema, response schema)."""
