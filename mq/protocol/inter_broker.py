"""The ZooKeeper-era inter-broker APIs, declared in kio's style (kio leaves them out).

The controller sends LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) to brokers, and a stopping broker
sends ControlledShutdown (7) to the controller. One version of each is declared, the first flexible one of Kafka's
message definitions (LeaderAndIsr v5, StopReplica v3, UpdateMetadata v7, ControlledShutdown v3), with the same
fields and order, so kio's readers and writers encode them exactly as Kafka does. (No postponed annotations here:
kio reads the field types at run time.)
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7


def _int32(**extra: Any) -> Any:
    return field(metadata={"kafka_type": "int32"}, **extra)


def _int64(**extra: Any) -> Any:
    return field(metadata={"kafka_type": "int64"}, **extra)


def _string(**extra: Any) -> Any:
    return field(metadata={"kafka_type": "string"}, **extra)


def _int32s() -> Any:
    return field(metadata={"kafka_type": "int32"}, default=())


def _error() -> Any:
    return field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = _int32()
    controller_epoch: i32 = _int32()
    leader: i32 = _int32()
    leader_epoch: i32 = _int32()
    isr: tuple[i32, ...] = _int32s()
    zk_version: i32 = _int32()
    replicas: tuple[i32, ...] = _int32s()
    adding_replicas: tuple[i32, ...] = _int32s()
    removing_replicas: tuple[i32, ...] = _int32s()
    is_new: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = _string()
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrLiveLeader:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = _int32()
    host_name: str = _string()
    port: i32 = _int32()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = _int32()
    controller_epoch: i32 = _int32()
    max_broker_epoch: i64 = _int64(default=i64(-1))
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = _string()
    partition_index: i32 = _int32()
    error_code: ErrorCode = _error()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(LEADER_AND_ISR)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = _error()
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = _string()
    partition_indexes: tuple[i32, ...] = _int32s()


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = _int32()
    controller_epoch: i32 = _int32()
    max_broker_epoch: i64 = _int64(default=i64(-1))
    delete_partitions: bool = field(metadata={"kafka_type": "bool"})
    topics: tuple[StopReplicaTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaPartitionError:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = _string()
    partition_index: i32 = _int32()
    error_code: ErrorCode = _error()


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STOP_REPLICA)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = _error()
    partition_errors: tuple[StopReplicaPartitionError, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = _int32()
    controller_epoch: i32 = _int32()
    leader: i32 = _int32()
    leader_epoch: i32 = _int32()
    isr: tuple[i32, ...] = _int32s()
    zk_version: i32 = _int32()
    replicas: tuple[i32, ...] = _int32s()
    offline_replicas: tuple[i32, ...] = _int32s()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataTopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_name: str = _string()
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataEndpoint:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    port: i32 = _int32()
    host: str = _string()
    listener: str = _string()
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataBroker:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    id: i32 = _int32()
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = _string(default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = _int32()
    controller_epoch: i32 = _int32()
    max_broker_epoch: i64 = _int64(default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(UPDATE_METADATA)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = _error()


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = _int32()
    broker_epoch: i64 = _int64(default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = _string()
    partition_index: i32 = _int32()


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(CONTROLLED_SHUTDOWN)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = _error()
    remaining_partitions: tuple[RemainingPartition, ...]


SCHEMAS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (LEADER_AND_ISR, 5): (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (STOP_REPLICA, 3): (StopReplicaRequest, StopReplicaResponse),
    (UPDATE_METADATA, 7): (UpdateMetadataRequest, UpdateMetadataResponse),
    (CONTROLLED_SHUTDOWN, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
}
"""(api_key, version) -> (request schema, response schema)."""
