"""The ZooKeeper-era inter-broker APIs, declared in kio's style (kio leaves them out).

The controller sends LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) to brokers, and a stopping broker
sends ControlledShutdown (7) to the controller. One version of each is declared, the first flexible one of Kafka's
message definitions (LeaderAndIsr v5, StopReplica v3, UpdateMetadata v7, ControlledShutdown v3), with the same
fields and order, so kio's readers and writers encode them exactly as Kafka does. (No postponed annotations here:
kio reads the field types at run time.)
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
T = TypeVar("T")


def declared_schema(
    api_key: int, version: int, kind: EntityType, *, flexible: bool = True
) -> Callable[[type[T]], type[T]]:
    """Make a kio-style frozen dataclass entity of ``api_key``/``version`` with the class attributes kio's readers
    and writers look for (only a top-level entity's header schema is ever used)."""

    def decorate(cls: type[T]) -> type[T]:
        cls.__type__ = kind  # type: ignore[attr-defined]
        cls.__version__ = i16(version)  # type: ignore[attr-defined]
        cls.__flexible__ = flexible  # type: ignore[attr-defined]
        cls.__api_key__ = i16(api_key)  # type: ignore[attr-defined]
        if kind == EntityType.response:
            header: type[Any] = ResponseHeader if flexible else ResponseHeaderV0
        else:
            header = RequestHeader if flexible else RequestHeaderV1
        cls.__header_schema__ = header  # type: ignore[attr-defined]
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return decorate


def kafka_field(kafka_type: str, **extra: Any) -> Any:
    """A field of a declared schema with its Kafka wire type (``int32``, ``string``, ``error_code``, ...)."""
    return field(metadata={"kafka_type": kafka_type}, **extra)


@declared_schema(LEADER_AND_ISR, 5, EntityType.nested)
class LeaderAndIsrPartitionState:
    partition_index: i32 = kafka_field("int32")
    controller_epoch: i32 = kafka_field("int32")
    leader: i32 = kafka_field("int32")
    leader_epoch: i32 = kafka_field("int32")
    isr: tuple[i32, ...] = kafka_field("int32", default=())
    zk_version: i32 = kafka_field("int32")
    replicas: tuple[i32, ...] = kafka_field("int32", default=())
    adding_replicas: tuple[i32, ...] = kafka_field("int32", default=())
    removing_replicas: tuple[i32, ...] = kafka_field("int32", default=())
    is_new: bool = kafka_field("bool", default=False)


@declared_schema(LEADER_AND_ISR, 5, EntityType.nested)
class LeaderAndIsrTopicState:
    topic_name: str = kafka_field("string")
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@declared_schema(LEADER_AND_ISR, 5, EntityType.nested)
class LeaderAndIsrLiveLeader:
    broker_id: i32 = kafka_field("int32")
    host_name: str = kafka_field("string")
    port: i32 = kafka_field("int32")


@declared_schema(LEADER_AND_ISR, 5, EntityType.request)
class LeaderAndIsrRequest:
    controller_id: i32 = kafka_field("int32")
    controller_epoch: i32 = kafka_field("int32")
    max_broker_epoch: i64 = kafka_field("int64", default=i64(-1))
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@declared_schema(LEADER_AND_ISR, 5, EntityType.nested)
class LeaderAndIsrPartitionError:
    topic_name: str = kafka_field("string")
    partition_index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")


@declared_schema(LEADER_AND_ISR, 5, EntityType.response)
class LeaderAndIsrResponse:
    error_code: ErrorCode = kafka_field("error_code")
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@declared_schema(STOP_REPLICA, 3, EntityType.nested)
class StopReplicaTopic:
    name: str = kafka_field("string")
    partition_indexes: tuple[i32, ...] = kafka_field("int32", default=())


@declared_schema(STOP_REPLICA, 3, EntityType.request)
class StopReplicaRequest:
    controller_id: i32 = kafka_field("int32")
    controller_epoch: i32 = kafka_field("int32")
    max_broker_epoch: i64 = kafka_field("int64", default=i64(-1))
    delete_partitions: bool = kafka_field("bool")
    topics: tuple[StopReplicaTopic, ...]


@declared_schema(STOP_REPLICA, 3, EntityType.nested)
class StopReplicaPartitionError:
    topic_name: str = kafka_field("string")
    partition_index: i32 = kafka_field("int32")
    error_code: ErrorCode = kafka_field("error_code")


@declared_schema(STOP_REPLICA, 3, EntityType.response)
class StopReplicaResponse:
    error_code: ErrorCode = kafka_field("error_code")
    partition_errors: tuple[StopReplicaPartitionError, ...]


@declared_schema(UPDATE_METADATA, 7, EntityType.nested)
class UpdateMetadataPartitionState:
    partition_index: i32 = kafka_field("int32")
    controller_epoch: i32 = kafka_field("int32")
    leader: i32 = kafka_field("int32")
    leader_epoch: i32 = kafka_field("int32")
    isr: tuple[i32, ...] = kafka_field("int32", default=())
    zk_version: i32 = kafka_field("int32")
    replicas: tuple[i32, ...] = kafka_field("int32", default=())
    offline_replicas: tuple[i32, ...] = kafka_field("int32", default=())


@declared_schema(UPDATE_METADATA, 7, EntityType.nested)
class UpdateMetadataTopicState:
    topic_name: str = kafka_field("string")
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@declared_schema(UPDATE_METADATA, 7, EntityType.nested)
class UpdateMetadataEndpoint:
    port: i32 = kafka_field("int32")
    host: str = kafka_field("string")
    listener: str = kafka_field("string")
    security_protocol: i16 = kafka_field("int16")


@declared_schema(UPDATE_METADATA, 7, EntityType.nested)
class UpdateMetadataBroker:
    id: i32 = kafka_field("int32")
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = kafka_field("string", default=None)


@declared_schema(UPDATE_METADATA, 7, EntityType.request)
class UpdateMetadataRequest:
    controller_id: i32 = kafka_field("int32")
    controller_epoch: i32 = kafka_field("int32")
    max_broker_epoch: i64 = kafka_field("int64", default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@declared_schema(UPDATE_METADATA, 7, EntityType.response)
class UpdateMetadataResponse:
    error_code: ErrorCode = kafka_field("error_code")


@declared_schema(CONTROLLED_SHUTDOWN, 3, EntityType.request)
class ControlledShutdownRequest:
    broker_id: i32 = kafka_field("int32")
    broker_epoch: i64 = kafka_field("int64", default=i64(-1))


@declared_schema(CONTROLLED_SHUTDOWN, 3, EntityType.nested)
class RemainingPartition:
    topic_name: str = kafka_field("string")
    partition_index: i32 = kafka_field("int32")


@declared_schema(CONTROLLED_SHUTDOWN, 3, EntityType.response)
class ControlledShutdownResponse:
    error_code: ErrorCode = kafka_field("error_code")
    remaining_partitions: tuple[RemainingPartition, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (LEADER_AND_ISR, 5): (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (STOP_REPLICA, 3): (StopReplicaRequest, StopReplicaResponse),
    (UPDATE_METADATA, 7): (UpdateMetadataRequest, UpdateMetadataResponse),
    (CONTROLLED_SHUTDOWN, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
}
"""(api_key, version) -> (request schema, response schema)."""
