"""Transaction API versions kio cannot read as Kafka writes them, declared in kio's style.

DescribeTransactions v0 response: kio reads TransactionStartTimeMs as a timestamp that must not be negative, but a
coordinator answers -1 for a transactional id with no transaction started; here the field is nullable (-1 <-> None),
with kio's field names and order. WriteTxnMarkers v0 (Kafka 0.11-2.7; kio starts at the flexible v1): the same
fields as v1 with classic strings and arrays::

    request:  [producer_id int64, producer_epoch int16, transaction_result bool (false = ABORT),
               [name string, [partition_index int32]], coordinator_epoch int32]
    response: [producer_id int64, [name string, [partition_index int32, error_code int16]]]

(No postponed annotations here: kio reads the field types at run time.)
"""

from typing import Any

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import TZAware, i16, i32, i32Timedelta, i64

from mq.protocol.inter_broker import declared_schema, kafka_field

WRITE_TXN_MARKERS, DESCRIBE_TRANSACTIONS = 27, 65


@declared_schema(DESCRIBE_TRANSACTIONS, 0, EntityType.nested)
class DescribedTopic:
    topic: str = kafka_field("string")
    partitions: tuple[i32, ...] = kafka_field("int32", default=())


@declared_schema(DESCRIBE_TRANSACTIONS, 0, EntityType.nested)
class DescribedTransaction:
    error_code: ErrorCode = kafka_field("error_code")
    transactional_id: str = kafka_field("string")
    transaction_state: str = kafka_field("string")
    transaction_timeout: i32Timedelta = kafka_field("timedelta_i32")
    transaction_start_time: TZAware | None = kafka_field("datetime_i64", default=None)
    """None: no transaction started (-1 on the wire)."""
    producer_id: i64 = kafka_field("int64")
    producer_epoch: i16 = kafka_field("int16")
    topics: tuple[DescribedTopic, ...] = ()


@declared_schema(DESCRIBE_TRANSACTIONS, 0, EntityType.response)
class DescribeTransactionsResponse:
    throttle_time: i32Timedelta = kafka_field("timedelta_i32")
    transaction_states: tuple[DescribedTransaction, ...] = ()


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.nested, flexible=False)
class WritableTxnMarkerTopic:
    name: str = kafka_field("string")
    partition_indexes: tuple[i32, ...] = kafka_field("int32", default=())


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.nested, flexible=False)
class WritableTxnMarker:
    producer_id: i64 = kafka_field("int64")
    producer_epoch: i16 = kafka_field("int16")
    transaction_result: bool = kafka_field("bool")
    topics: tuple[WritableTxnMarkerTopic, ...] = ()
    coordinator_epoch: i32 = kafka_field("int32")


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.request, flexible=False)
class WriteTxnMarkersRequest:
    markers: tuple[WritableTxnMarker, ...] = ()


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.nested, flexible=False)
class WritableTxnMarkerPartitionResult:
    partition_index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.nested, flexible=False)
class WritableTxnMarkerTopicResult:
    name: str = kafka_field("string")
    partitions: tuple[WritableTxnMarkerPartitionResult, ...] = ()


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.nested, flexible=False)
class WritableTxnMarkerResult:
    producer_id: i64 = kafka_field("int64")
    topics: tuple[WritableTxnMarkerTopicResult, ...] = ()


@declared_schema(WRITE_TXN_MARKERS, 0, EntityType.response, flexible=False)
class WriteTxnMarkersResponse:
    markers: tuple[WritableTxnMarkerResult, ...] = ()


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (DESCRIBE_TRANSACTIONS, 0): (DescribeTransactionsRequest, DescribeTransactionsResponse),
    (WRITE_TXN_MARKERS, 0): (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
}
"""(api_key, version) -> (request schema, response schema)."""
