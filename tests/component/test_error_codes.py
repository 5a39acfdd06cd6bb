"""Error codes per API, version and situation, as Kafka 2.8's request handlers answer them.

``TABLE`` is the specification: one row per API x version range x situation with the code Kafka 2.8 answers and
where it sits in the response; the comment of a row names the Kafka 2.8 code path it comes from (KafkaApis,
ReplicaManager, GroupCoordinator, AdminManager/ZkAdminManager, the *Request/*Response classes' version-dependent
mappings). A row's range is open-ended (``None``) when later Kafka versions answer the same, so the table follows the
versions the broker serves; a version below the broker's served range is skipped, a row whose versions the broker does
not serve yet is skipped as a whole, and every other row must cover at least one served version.

Every row is checked over TCP, with mq's own connection, against a broker of the component tier (standalone, in this
process): MAIN, or STRICT for the rows that need auto-creation and deletion off. The situations are states of these
brokers: topics with given configs, a partition the metadata names on other brokers, a follower replica (decided as
the controller's LeaderAndIsr would), a new leader whose high watermark lags behind its epoch, a partition in an
offline log dir, a stable group, and (set on the broker's loop for the duration of a request) the group coordinator
while it loads its partition or once it no longer owns it, or a leader without the request's listener. Rows where mq
answers otherwise than Kafka 2.8 name the code mq answers and why. Situations only a cluster has are in
``tests/integration/test_error_codes_cluster.py``."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode as E
from mq.protocol.api_keys import ApiKey as K
from mq.records.batch_header import Codec
from mq.records.default_batch import RecordBatchBuilder
from mq.records.legacy import encode_message
from mq.server.metadata_cache import BrokerEndpoint, PartitionInfo
from mq.server.partition_state import PartitionStateInfo
from mq.topic_partition import TopicPartition
from tests.component.conftest import InProcessBroker, start_broker, stop_broker

TOPIC = "ec"
"""One partition, one record (offset 0), leader epoch 0."""
MISSING = "ec-missing"
ELSEWHERE = "ec-elsewhere"
"""Named by the metadata with broker 2 as its only replica and leader: this broker hosts no replica."""
FOLLOWED = "ec-followed"
"""Replicas (2, this broker), led by broker 2 at leader epoch 1: this broker is a follower (without a fetcher, as
standalone brokers have none)."""
LAGGING = "ec-lagging"
"""Led by this broker at leader epoch 2, which began at offset 1, with ISR (this broker, 2) and a high watermark of 0:
broker 2 (not a live broker) never fetched the record appended at epoch 1."""
UNLISTENED = "ec-unlistened"
"""Named by the metadata only while ``leader_without_the_listener`` holds."""
OFFLINE = "ec-offline"
"""Its one partition lives in a log dir that went offline."""
ZSTD = "ec-zstd"
"""compression.type=zstd, one zstd batch."""
NO_DOWN_CONVERSION = "ec-noconv"
"""message.downconversion.enable=false, one record."""
MIN_ISR = "ec-minisr"
"""min.insync.replicas=2 with one replica."""
SMALL = "ec-small"
"""max.message.bytes=10."""
COMPACTED = "ec-compacted"
"""cleanup.policy=compact."""
DOTTED = "ec.dot"
"""Collides with ec_dot (Kafka: '.' and '_' collide in metric names)."""
GROUP = "ec-group"
"""A stable group of one member (``state.member``, generation ``state.generation``), protocol type consumer. The group
named "" exists too (an offset committed without group management)."""
OTHER_GROUP = "ec-idle"
"""Unknown to the coordinator: no row creates it."""
SIMPLE_GROUP = "ec-simple"
"""Commits without group management (generation -1) create it."""
JOINING_GROUP = "ec-joining"
"""A JoinGroup asking for a member id creates it."""


MAIN = "main"
"""The broker of most rows."""
STRICT = "strict"
"""The broker with auto.create.topics.enable and delete.topic.enable off, which holds TOPIC only."""


@dataclass
class State:
    """A broker and what its preparation recorded (the stable group's member and generation, its log dirs)."""

    broker: InProcessBroker
    member: str = ""
    generation: int = -1
    online_dir: str = ""
    offline_dir: str = ""


NO_STATE = State.__new__(State)
"""Builds requests that read nothing of a broker's state."""


def batch(codec: Codec = Codec.NONE) -> bytes:
    builder = RecordBatchBuilder(codec)
    builder.append(0, None, b"error-codes")
    return builder.build()


MAGIC1_SET = encode_message(0, 1, 0, 0, None, b"old")


def corrupted(records: bytes) -> bytes:
    """``records`` with its last byte changed: its CRC no longer matches."""
    return records[:-1] + bytes([records[-1] ^ 0xFF])


SUBSCRIPTION = struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode() + struct.pack(">i", -1)
"""ConsumerProtocol subscription v0 to TOPIC, without user data."""


# --- requests --------------------------------------------------------------------------------------------------------


def fixed(**values: Any) -> Callable[[int, State], dict[str, Any]]:
    """A body that is the same in every version (fields a version lacks are left out when it is built)."""
    return lambda version, state: values


def topic_id(state: State, topic: str) -> uuid.UUID:
    """The id the broker knows ``topic`` by (the zero id for a topic it does not know): what the versions that name
    topics by id (Produce v13+, Fetch v13+) send."""
    info = state.broker.server.cache.topics.get(topic) if hasattr(state, "broker") else None
    found = None if info is None else info.topic_uuid
    return uuid.UUID(int=0) if found is None else found


def produce(topic: str, records: bytes | None = None, acks: int = 1) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        data = batch() if records is None else records
        partition = {"index": 0, "records": MAGIC1_SET if version < 3 and records is None else data}
        named = {"name": topic, "topic_id": topic_id(state, topic), "partition_data": [partition]}
        return {"acks": acks, "timeout": 5000, "topic_data": [named]}

    return body


def produce_to_partition(topic: str, index: int) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        found = produce(topic)(version, state)
        found["topic_data"][0]["partition_data"][0]["index"] = index
        return found

    return body


def fetch(
    topic: str, offset: int = 0, leader_epoch: int = -1, partition: int = 0
) -> Callable[[int, State], dict[str, Any]]:
    index = partition

    def body(version: int, state: State) -> dict[str, Any]:
        partition = {
            "partition": index,
            "current_leader_epoch": leader_epoch,
            "fetch_offset": offset,
            "last_fetched_epoch": -1,
            "log_start_offset": -1,
            "partition_max_bytes": 1 << 20,
        }
        return {
            "replica_id": -1,
            "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": topic_id(state, topic), "partitions": [partition]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    return body


def list_offsets(
    topic: str, leader_epoch: int = -1, copies: int = 1, partition: int = 0, timestamp: int = -1
) -> Callable[[int, State], dict[str, Any]]:
    """Latest (-1) unless ``timestamp`` says otherwise (-2: earliest)."""
    index = partition

    def body(version: int, state: State) -> dict[str, Any]:
        partition = {
            "partition_index": index,
            "current_leader_epoch": leader_epoch,
            "timestamp": timestamp,
            "max_num_offsets": 1,
        }
        return {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [partition] * copies}],
        }

    return body


def delete_records(topic: str, offset: int = 0) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        return {"timeout": 5000, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}]}

    return body


def epoch_end(topic: str, current: int = -1, replica_id: int = -1) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        partition = {"partition": 0, "current_leader_epoch": current, "leader_epoch": 0}
        return {"replica_id": replica_id, "topics": [{"topic": topic, "partitions": [partition]}]}

    return body


def metadata(topic: str, auto_create: bool = False) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        name = f"{topic}-v{version}" if auto_create else topic
        return {
            "topics": [{"name": name, "topic_id": None}],
            "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }

    return body


def offset_commit(
    group: str, topic: str = TOPIC, member: bool = False, generation: int | None = None, metadata_bytes: int = 0
) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        partition = {
            "partition_index": 0,
            "committed_offset": 0,
            "committed_leader_epoch": -1,
            "commit_timestamp": -1,
            "committed_metadata": "m" * metadata_bytes,
        }
        return {
            "group_id": group,
            "generation_id_or_member_epoch": state.generation if generation is None else generation,
            "member_id": state.member if member else "",
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [{"name": topic, "partitions": [partition]}],
        }

    return body


def offset_fetch(group: str, topic: str = TOPIC) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        topics = [{"name": topic, "partition_indexes": [0]}]
        return {"group_id": group, "topics": topics, "groups": [{"group_id": group, "topics": topics}]}

    return body


def find_coordinator(key: str, key_type: int = 0) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        return {"key": key, "key_type": key_type, "coordinator_keys": [key]}

    return body


def join_group(
    group: str, member: str = "", session_timeout_ms: int = 30_000, protocol_type: str = "consumer"
) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        return {
            "group_id": group,
            "session_timeout": session_timeout_ms,
            "rebalance_timeout": session_timeout_ms,
            "member_id": member,
            "group_instance_id": None,
            "protocol_type": protocol_type,
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
            "reason": None,
        }

    return body


def member_request(
    group: str,
    member: bool = True,
    generation: int | None = None,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = "range",
) -> Callable[[int, State], dict[str, Any]]:
    """SyncGroup and Heartbeat: ``member`` the stable group's member (else an unknown id)."""

    def body(version: int, state: State) -> dict[str, Any]:
        return {
            "group_id": group,
            "generation_id": state.generation if generation is None else generation,
            "member_id": state.member if member else "ec-unknown-member",
            "group_instance_id": None,
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignments": [],
        }

    return body


def leave_group(group: str) -> Callable[[int, State], dict[str, Any]]:
    """An unknown member leaves: by ``member_id`` before v3, in ``members`` from v3."""
    member = "ec-unknown-member"
    return fixed(group_id=group, member_id=member, members=[{"member_id": member, "group_instance_id": None}])


def groups(*names: str) -> Callable[[int, State], dict[str, Any]]:
    """DescribeGroups (``groups``) and DeleteGroups (``groups_names``) of ``names``."""
    return fixed(groups=list(names), groups_names=list(names), include_authorized_operations=False)


def consumer_heartbeat(group: str, member_epoch: int) -> Callable[[int, State], dict[str, Any]]:
    """ConsumerGroupHeartbeat: a new member's join (epoch 0, subscribing to the topic) or a heartbeat at an epoch."""
    return fixed(
        group_id=group,
        member_id=str(uuid.uuid4()) if member_epoch else "",
        member_epoch=member_epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=[TOPIC],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )


def offset_delete(group: str, topic: str = TOPIC) -> Callable[[int, State], dict[str, Any]]:
    return fixed(group_id=group, topics=[{"name": topic, "partitions": [{"partition_index": 0}]}])


def create_topic_body(
    name: str, partitions: int = 1, replication: int = 1, configs: dict[str, str] | None = None, **extra: Any
) -> Callable[[int, State], dict[str, Any]]:
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
        **extra,
    }
    return fixed(topics=[topic], timeout=5000, validate_only=True)


def delete_topics(name: str | None, topic_id: uuid.UUID | None = None) -> Callable[[int, State], dict[str, Any]]:
    return fixed(topic_names=[name], topics=[{"name": name, "topic_id": topic_id or uuid.UUID(int=0)}], timeout=5000)


def create_partitions(name: str, count: int, assignments: list[list[int]] | None = None, twice: bool = False) -> Any:
    topic = {
        "name": name,
        "count": count,
        "assignments": None if assignments is None else [{"broker_ids": b} for b in assignments],
    }
    return fixed(topics=[topic] * (2 if twice else 1), timeout=5000, validate_only=True)


def config_resource(resource_type: int, name: str, configs: dict[str, str] | None = None, operation: int = 0) -> Any:
    entries = [{"name": k, "value": v, "config_operation": operation} for k, v in (configs or {}).items()]
    resource = {"resource_type": resource_type, "resource_name": name, "configuration_keys": None, "configs": entries}
    return fixed(resources=[resource], validate_only=True, include_synonyms=False, include_documentation=False)


def elect(topic: str, election_type: int = 0) -> Callable[[int, State], dict[str, Any]]:
    return fixed(election_type=election_type, topic_partitions=[{"topic": topic, "partitions": [0]}], timeout=5000)


def alter_log_dir(topic: str, path: Callable[[State], str]) -> Callable[[int, State], dict[str, Any]]:
    def body(version: int, state: State) -> dict[str, Any]:
        return {"dirs": [{"path": path(state), "topics": [{"name": topic, "partitions": [0]}]}]}

    return body


def reassign(topic: str, replicas: list[int] | None) -> Callable[[int, State], dict[str, Any]]:
    partition = {"partition_index": 0, "replicas": replicas}
    return fixed(
        timeout=5000, allow_replication_factor_change=True, topics=[{"name": topic, "partitions": [partition]}]
    )


ACL_FILTER = {
    "resource_type_filter": 2,
    "resource_name_filter": None,
    "pattern_type_filter": 3,
    "principal_filter": None,
    "host_filter": None,
    "operation": 2,
    "permission_type": 3,
}
ACL_CREATION = {
    "resource_type": 2,
    "resource_name": TOPIC,
    "resource_pattern_type": 3,
    "principal": "User:ec",
    "host": "*",
    "operation": 3,
    "permission_type": 3,
}


def quota(entity_type: str, key: str, value: float = 1024.0) -> Callable[[int, State], dict[str, Any]]:
    entry = {
        "entity": [{"entity_type": entity_type, "entity_name": "ec"}],
        "ops": [{"key": key, "value": value, "remove": False}],
    }
    return fixed(entries=[entry], validate_only=True)


def scram(deletions: list[tuple[str, int]] = [], upsertions: list[tuple[str, int, int]] = []) -> Any:  # noqa: B006
    return fixed(
        deletions=[{"name": n, "mechanism": m} for n, m in deletions],
        upsertions=[
            {"name": n, "mechanism": m, "iterations": i, "salt": b"salt", "salted_password": b"pw" * 16}
            for n, m, i in upsertions
        ],
    )


# --- situations of the coordinator -----------------------------------------------------------------------------------


def coordinator_loading(state: State) -> Callable[[], None]:
    """The coordinator is loading the group's __consumer_offsets partition (Kafka: isCoordinatorLoadInProgress)."""
    coordinator = state.broker.server.group_coordinator
    assert coordinator is not None
    owned = dict(coordinator.owned_partitions)
    coordinator.loading_partitions.update(owned)
    coordinator.owned_partitions.clear()

    def restore() -> None:
        coordinator.loading_partitions.difference_update(owned)
        coordinator.owned_partitions.update(owned)

    return restore


def coordinator_moved(state: State) -> Callable[[], None]:
    """The group's __consumer_offsets partition is led elsewhere now (Kafka: !isCoordinatorForGroup)."""
    coordinator = state.broker.server.group_coordinator
    assert coordinator is not None
    owned = dict(coordinator.owned_partitions)
    coordinator.owned_partitions.clear()
    return lambda: coordinator.owned_partitions.update(owned)


def leader_without_the_listener(state: State) -> Callable[[], None]:
    """UNLISTENED's leader, broker 3, is live but has only a listener named INTERNAL (the request comes on PLAINTEXT);
    the live brokers the controller tells the broker meanwhile (a topic another row created) keep broker 3."""
    cache = state.broker.server.cache
    internal = BrokerEndpoint(3, "127.0.0.1", 1, None, (("INTERNAL", "127.0.0.1", 1),))
    update_brokers = cache.update_brokers

    def keeping_broker_3(brokers: Iterable[BrokerEndpoint], controller_id: int) -> None:
        update_brokers([*(b for b in brokers if b.broker_id != 3), internal], controller_id)

    cache.update_brokers = keeping_broker_3  # type: ignore[method-assign]
    keeping_broker_3(list(cache.brokers.values()), cache.controller_id)
    cache.update_partition(UNLISTENED, None, 0, PartitionInfo(3, 0, (3,), (3,)))

    def restore() -> None:
        del cache.update_brokers
        cache.remove_topic(UNLISTENED)
        cache.update_brokers([b for b in cache.brokers.values() if b.broker_id != 3], cache.controller_id)

    return restore


# --- the table -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    api: K
    first: int
    last: int | None
    situation: str
    request: Callable[[int, State], dict[str, Any]]
    expected: E
    where: str | Callable[[Any, State], int]
    """Dotted path to the error code in the response (an int picks an element), or what finds it."""
    during: Callable[[State], Callable[[], None]] | None = None
    """Puts the broker in the situation on its loop for the request; returns what restores it."""
    ask: str = MAIN
    """Which broker is asked: MAIN, STRICT, or in the cluster table a broker of a cluster (see there)."""
    mq_answers: E | None = None
    """Where mq answers otherwise than Kafka 2.8 (the row says why): the code mq answers, checked so that the
    difference is noticed when it changes."""


P0 = "responses.0.partition_responses.0.error_code"  # Produce
F0 = "responses.0.partitions.0.error_code"  # Fetch
L0 = "topics.0.partitions.0.error_code"  # ListOffsets, DeleteRecords, OffsetFetch v1-v7, OffsetCommit, OffsetDelete
EP = "topics.0.partitions.0.error_code"  # OffsetForLeaderEpoch v2-v4 ("topics", "partitions")
MT = "topics.0.error_code"
MP = "topics.0.partitions.0.error_code"
G8 = "groups.0.error_code"  # OffsetFetch v8+

# fmt: off
TABLE: list[Row] = [
    # Produce: KafkaApis.handleProduceRequest, ReplicaManager.appendToLocalLog / getPartitionOrException.
    Row(K.PRODUCE, 0, 12, "unknown topic", produce(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, P0),  # !metadataCache.contains
    Row(K.PRODUCE, 13, None, "unknown topic id", produce(MISSING), E.UNKNOWN_TOPIC_ID, P0),  # topics by id (Kafka 4.1)
    Row(K.PRODUCE, 0, None, "not leader", produce(ELSEWHERE), E.NOT_LEADER_OR_FOLLOWER, P0),  # known, no local replica
    Row(K.PRODUCE, 0, None, "follower", produce(FOLLOWED), E.NOT_LEADER_OR_FOLLOWER, P0),
    Row(K.PRODUCE, 0, None, "log dir offline", produce(OFFLINE), E.KAFKA_STORAGE_ERROR, P0),  # HostedPartition.Offline; no down-mapping for old versions
    Row(K.PRODUCE, 0, None, "partition the topic lacks", produce_to_partition(TOPIC, 5), E.UNKNOWN_TOPIC_OR_PARTITION, P0),
    Row(K.PRODUCE, 0, None, "batch above max.message.bytes", produce(SMALL), E.MESSAGE_TOO_LARGE, P0),  # LogValidator / Log.append
    Row(K.PRODUCE, 0, 2, "keyless record, compacted topic", produce(COMPACTED), E.CORRUPT_MESSAGE, P0),  # mq: Kafka 0.8-0.10's InvalidMessageCode; 2.8 sends INVALID_RECORD (87), a code these clients do not know
    Row(K.PRODUCE, 3, None, "keyless record, compacted topic", produce(COMPACTED), E.INVALID_RECORD, P0),  # LogValidator.validateKey
    Row(K.PRODUCE, 0, 2, "CRC mismatch", produce(TOPIC, corrupted(MAGIC1_SET)), E.CORRUPT_MESSAGE, P0),
    Row(K.PRODUCE, 3, None, "CRC mismatch", produce(TOPIC, corrupted(batch())), E.CORRUPT_MESSAGE, P0),  # RecordBatch.ensureValid
    Row(K.PRODUCE, 0, None, "internal topic", produce("__consumer_offsets"), E.INVALID_TOPIC_EXCEPTION, P0),  # !internalTopicsAllowed
    Row(K.PRODUCE, 3, None, "magic 1 set in v3+", produce(TOPIC, MAGIC1_SET), E.INVALID_RECORD, P0),  # ProduceRequest.validateRecords
    Row(K.PRODUCE, 3, 6, "zstd before v7", produce(TOPIC, batch(Codec.ZSTD)), E.UNSUPPORTED_COMPRESSION_TYPE, P0),  # validateRecords
    Row(K.PRODUCE, 7, None, "zstd from v7", produce(TOPIC, batch(Codec.ZSTD)), E.NONE, P0),
    Row(K.PRODUCE, 0, None, "acks=2", produce(TOPIC, acks=2), E.INVALID_REQUIRED_ACKS, P0),  # ReplicaManager.isValidRequiredAcks
    Row(K.PRODUCE, 0, None, "acks=all below min.insync", produce(MIN_ISR, acks=-1), E.NOT_ENOUGH_REPLICAS, P0),  # Partition.appendRecordsToLeader
    # Fetch: KafkaApis.handleFetchRequest, ReplicaManager.readFromLocalLog.
    Row(K.FETCH, 0, 12, "unknown topic", fetch(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, F0),  # !metadataCache.contains
    Row(K.FETCH, 13, None, "unknown topic id", fetch(MISSING), E.UNKNOWN_TOPIC_ID, F0),  # topics by id (Kafka 3.1, KIP-516)
    Row(K.FETCH, 0, None, "partition the topic lacks", fetch(TOPIC, partition=5), E.UNKNOWN_TOPIC_OR_PARTITION, F0),
    Row(K.FETCH, 0, 3, "down-conversion disabled", fetch(NO_DOWN_CONVERSION), E.UNSUPPORTED_VERSION, F0),  # !messageDownConversionEnable
    Row(K.FETCH, 0, 3, "down-conversion disabled, nothing to read", fetch(NO_DOWN_CONVERSION, 1), E.NONE, F0),  # hasCompatibleMagic
    Row(K.FETCH, 4, None, "down-conversion disabled, none needed", fetch(NO_DOWN_CONVERSION), E.NONE, F0),
    Row(K.FETCH, 0, None, "not leader", fetch(ELSEWHERE), E.NOT_LEADER_OR_FOLLOWER, F0),
    Row(K.FETCH, 0, 10, "follower", fetch(FOLLOWED), E.NOT_LEADER_OR_FOLLOWER, F0),  # fetchOnlyFromLeader without ClientMetadata
    Row(K.FETCH, 11, None, "follower", fetch(FOLLOWED), E.NONE, F0),  # KIP-392: with ClientMetadata a consumer may read a follower
    Row(K.FETCH, 9, None, "leader epoch behind (follower)", fetch(FOLLOWED, 0, 0), E.FENCED_LEADER_EPOCH, F0),  # epoch checked before leadership
    Row(K.FETCH, 0, 5, "log dir offline", fetch(OFFLINE), E.NOT_LEADER_OR_FOLLOWER, F0),  # maybeDownConvertStorageError (v <= 5)
    Row(K.FETCH, 6, None, "log dir offline", fetch(OFFLINE), E.KAFKA_STORAGE_ERROR, F0),
    Row(K.FETCH, 0, None, "offset past the log end", fetch(TOPIC, 99), E.OFFSET_OUT_OF_RANGE, F0),  # Log.read
    Row(K.FETCH, 9, None, "leader epoch ahead", fetch(TOPIC, 0, 7), E.UNKNOWN_LEADER_EPOCH, F0),  # Partition.localLogWithEpochOrException
    Row(K.FETCH, 0, 9, "zstd topic before v10", fetch(ZSTD), E.UNSUPPORTED_COMPRESSION_TYPE, F0),  # maybeConvertFetchedData
    Row(K.FETCH, 10, None, "zstd topic from v10", fetch(ZSTD), E.NONE, F0),
    # ListOffsets: handleListOffsetRequestV0 / V1AndAbove, ReplicaManager.fetchOffsetForTimestamp.
    Row(K.LIST_OFFSETS, 0, None, "unknown topic", list_offsets(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, L0),
    Row(K.LIST_OFFSETS, 0, None, "partition the topic lacks", list_offsets(TOPIC, partition=5), E.UNKNOWN_TOPIC_OR_PARTITION, L0),
    Row(K.LIST_OFFSETS, 0, None, "not leader", list_offsets(ELSEWHERE), E.NOT_LEADER_OR_FOLLOWER, L0),
    Row(K.LIST_OFFSETS, 0, None, "follower", list_offsets(FOLLOWED), E.NOT_LEADER_OR_FOLLOWER, L0),
    Row(K.LIST_OFFSETS, 4, None, "leader epoch behind (follower)", list_offsets(FOLLOWED, 0), E.FENCED_LEADER_EPOCH, L0),
    Row(K.LIST_OFFSETS, 1, 4, "latest, new leader's HW behind its epoch", list_offsets(LAGGING), E.LEADER_NOT_AVAILABLE, L0),  # OffsetNotAvailableException before v5
    Row(K.LIST_OFFSETS, 5, None, "latest, new leader's HW behind its epoch", list_offsets(LAGGING), E.OFFSET_NOT_AVAILABLE, L0),  # Partition.fetchOffsetForTimestamp
    Row(K.LIST_OFFSETS, 1, None, "earliest, new leader's HW behind its epoch", list_offsets(LAGGING, timestamp=-2), E.NONE, L0),
    Row(K.LIST_OFFSETS, 0, 0, "latest, new leader's HW behind its epoch (v0)", list_offsets(LAGGING), E.NONE, L0),  # legacyFetchOffsetsForTimestamp
    Row(K.LIST_OFFSETS, 0, None, "log dir offline", list_offsets(OFFLINE), E.KAFKA_STORAGE_ERROR, L0),
    Row(K.LIST_OFFSETS, 4, None, "leader epoch ahead", list_offsets(TOPIC, 7), E.UNKNOWN_LEADER_EPOCH, L0),
    Row(K.LIST_OFFSETS, 1, None, "partition twice", list_offsets(TOPIC, copies=2), E.INVALID_REQUEST, L0),  # duplicatePartitions
    Row(K.LIST_OFFSETS, 0, 0, "partition twice (v0 has no check)", list_offsets(TOPIC, copies=2), E.NONE, L0),
    # DeleteRecords: ReplicaManager.deleteRecordsOnLocalLog.
    Row(K.DELETE_RECORDS, 0, None, "unknown topic", delete_records(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, L0),
    Row(K.DELETE_RECORDS, 0, None, "not leader", delete_records(ELSEWHERE), E.NOT_LEADER_OR_FOLLOWER, L0),
    Row(K.DELETE_RECORDS, 0, None, "follower", delete_records(FOLLOWED), E.NOT_LEADER_OR_FOLLOWER, L0),
    Row(K.DELETE_RECORDS, 0, None, "log dir offline", delete_records(OFFLINE), E.KAFKA_STORAGE_ERROR, L0),
    Row(K.DELETE_RECORDS, 0, None, "offset past the high watermark", delete_records(TOPIC, 99), E.OFFSET_OUT_OF_RANGE, L0),  # Partition.deleteRecordsOnLeader
    # OffsetForLeaderEpoch: ReplicaManager.lastOffsetForLeaderEpoch, Partition.lastOffsetForLeaderEpoch.
    Row(K.OFFSET_FOR_LEADER_EPOCH, 2, None, "unknown topic", epoch_end(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, EP),
    Row(K.OFFSET_FOR_LEADER_EPOCH, 2, None, "not leader", epoch_end(ELSEWHERE), E.NOT_LEADER_OR_FOLLOWER, EP),
    Row(K.OFFSET_FOR_LEADER_EPOCH, 2, None, "follower", epoch_end(FOLLOWED), E.NOT_LEADER_OR_FOLLOWER, EP),  # fetchOnlyFromLeader = true
    Row(K.OFFSET_FOR_LEADER_EPOCH, 2, None, "leader epoch behind (follower)", epoch_end(FOLLOWED, 0), E.FENCED_LEADER_EPOCH, EP),
    Row(K.OFFSET_FOR_LEADER_EPOCH, 2, None, "log dir offline", epoch_end(OFFLINE), E.KAFKA_STORAGE_ERROR, EP),
    Row(K.OFFSET_FOR_LEADER_EPOCH, 2, None, "leader epoch ahead", epoch_end(TOPIC, 7), E.UNKNOWN_LEADER_EPOCH, EP),
    # Metadata: KafkaApis.handleTopicMetadataRequest / getTopicMetadata, MetadataCache.getPartitionMetadata.
    Row(K.METADATA, 4, None, "unknown topic, no auto-creation", metadata(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, MT),
    Row(K.METADATA, 4, None, "invalid topic name", metadata("bad/name"), E.INVALID_TOPIC_EXCEPTION, MT),  # Topic.validate
    Row(K.METADATA, 0, 3, "unknown topic, auto-creation off on the broker", metadata(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, MT, ask=STRICT),
    Row(K.METADATA, 4, None, "auto-creation asked, off on the broker", metadata(MISSING, True), E.UNKNOWN_TOPIC_OR_PARTITION, MT, ask=STRICT),
    Row(K.METADATA, 0, 3, "unknown topic (auto-created before v4)", metadata("ec-implicit", True), E.LEADER_NOT_AVAILABLE, MT),  # allowAutoTopicCreation defaults to true
    Row(K.METADATA, 4, None, "auto-created topic", metadata("ec-auto", True), E.LEADER_NOT_AVAILABLE, MT),  # AutoTopicCreationManager
    Row(K.METADATA, 0, 5, "leader without the request's listener", metadata(UNLISTENED), E.LEADER_NOT_AVAILABLE, MP, leader_without_the_listener),  # errorUnavailableListeners (v6+)
    Row(K.METADATA, 6, None, "leader without the request's listener", metadata(UNLISTENED), E.LISTENER_NOT_FOUND, MP, leader_without_the_listener),
    Row(K.METADATA, 0, None, "leader not a live broker", metadata(ELSEWHERE), E.LEADER_NOT_AVAILABLE, MP),  # MetadataCache.getPartitionMetadata
    Row(K.METADATA, 0, 0, "a replica not a live broker", metadata(LAGGING), E.REPLICA_NOT_AVAILABLE, MP),  # errorUnavailableEndpoints (v0 only)
    Row(K.METADATA, 1, None, "a replica not a live broker", metadata(LAGGING), E.NONE, MP),
    Row(K.METADATA, 0, None, "partition in an offline log dir", metadata(OFFLINE), E.LEADER_NOT_AVAILABLE, MP),  # its only replica offline: the controller left it without a leader
    # OffsetCommit: KafkaApis.handleOffsetCommitRequest, GroupCoordinator.handleCommitOffsets / doCommitOffsets.
    Row(K.OFFSET_COMMIT, 1, None, "unknown topic", offset_commit(OTHER_GROUP, MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, L0),
    Row(K.OFFSET_COMMIT, 1, None, "coordinator loading", offset_commit(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, L0, coordinator_loading),
    Row(K.OFFSET_COMMIT, 1, None, "not coordinator", offset_commit(GROUP), E.NOT_COORDINATOR, L0, coordinator_moved),
    Row(K.OFFSET_COMMIT, 1, None, "unknown group, generation -1", offset_commit(SIMPLE_GROUP, generation=-1), E.NONE, L0),
    Row(K.OFFSET_COMMIT, 1, None, "empty group id", offset_commit("", generation=-1), E.NONE, L0),  # isValidGroupId allows ""
    Row(K.OFFSET_COMMIT, 1, None, "unknown group, a generation", offset_commit(OTHER_GROUP, generation=3), E.ILLEGAL_GENERATION, L0),
    Row(K.OFFSET_COMMIT, 1, None, "unknown member", offset_commit(GROUP), E.UNKNOWN_MEMBER_ID, L0),  # !group.has(memberId)
    Row(K.OFFSET_COMMIT, 1, None, "stale generation", offset_commit(GROUP, member=True, generation=99), E.ILLEGAL_GENERATION, L0),
    Row(K.OFFSET_COMMIT, 1, None, "member of the stable group", offset_commit(GROUP, member=True), E.NONE, L0),
    Row(K.OFFSET_COMMIT, 1, None, "metadata too large", offset_commit(SIMPLE_GROUP, generation=-1, metadata_bytes=5000), E.OFFSET_METADATA_TOO_LARGE, L0),  # GroupMetadataManager.validateOffsetMetadataLength
    # OffsetFetch: KafkaApis.handleOffsetFetchRequest, OffsetFetchRequest.getErrorResponse (v < 2: in every partition).
    Row(K.OFFSET_FETCH, 1, 1, "coordinator loading", offset_fetch(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, L0, coordinator_loading),
    Row(K.OFFSET_FETCH, 2, 7, "coordinator loading", offset_fetch(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, "error_code", coordinator_loading),
    Row(K.OFFSET_FETCH, 8, None, "coordinator loading", offset_fetch(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, G8, coordinator_loading),
    Row(K.OFFSET_FETCH, 1, 1, "not coordinator", offset_fetch(GROUP), E.NOT_COORDINATOR, L0, coordinator_moved),
    Row(K.OFFSET_FETCH, 2, 7, "not coordinator", offset_fetch(GROUP), E.NOT_COORDINATOR, "error_code", coordinator_moved),
    Row(K.OFFSET_FETCH, 8, None, "not coordinator", offset_fetch(GROUP), E.NOT_COORDINATOR, G8, coordinator_moved),
    Row(K.OFFSET_FETCH, 1, 7, "unknown topic", offset_fetch(GROUP, MISSING), E.NONE, L0),  # getOffsets: INVALID_OFFSET, no error
    Row(K.OFFSET_FETCH, 1, 7, "empty group id", offset_fetch(""), E.NONE, L0),
    # FindCoordinator: KafkaApis.handleFindCoordinatorRequest (loading is not its concern).
    Row(K.FIND_COORDINATOR, 0, 3, "coordinator loading", find_coordinator(GROUP), E.NONE, "error_code", coordinator_loading),
    Row(K.FIND_COORDINATOR, 4, None, "coordinator loading", find_coordinator(GROUP), E.NONE, "coordinators.0.error_code", coordinator_loading),
    # JoinGroup: KafkaApis.handleJoinGroupRequest, GroupCoordinator.handleJoinGroup / doUnknownJoinGroup.
    Row(K.JOIN_GROUP, 0, None, "empty group id", join_group(""), E.INVALID_GROUP_ID, "error_code"),  # validateGroupStatus
    Row(K.JOIN_GROUP, 0, None, "coordinator loading", join_group(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, "error_code", coordinator_loading),
    Row(K.JOIN_GROUP, 0, None, "not coordinator", join_group(GROUP), E.NOT_COORDINATOR, "error_code", coordinator_moved),
    Row(K.JOIN_GROUP, 0, None, "session timeout too small", join_group(OTHER_GROUP, session_timeout_ms=1), E.INVALID_SESSION_TIMEOUT, "error_code"),
    Row(K.JOIN_GROUP, 0, None, "member id of an unknown group", join_group(OTHER_GROUP, "ec-unknown-member"), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.JOIN_GROUP, 0, None, "other protocol type", join_group(GROUP, protocol_type="connect"), E.INCONSISTENT_GROUP_PROTOCOL, "error_code"),
    Row(K.JOIN_GROUP, 4, None, "new dynamic member", join_group(JOINING_GROUP), E.MEMBER_ID_REQUIRED, "error_code"),  # requireKnownMemberId
    # SyncGroup: GroupCoordinator.handleSyncGroup / doSyncGroup.
    Row(K.SYNC_GROUP, 0, None, "empty group id", member_request(""), E.INVALID_GROUP_ID, "error_code"),
    Row(K.SYNC_GROUP, 0, None, "coordinator loading", member_request(GROUP), E.REBALANCE_IN_PROGRESS, "error_code", coordinator_loading),  # older clients do not expect LOAD_IN_PROGRESS
    Row(K.SYNC_GROUP, 0, None, "not coordinator", member_request(GROUP), E.NOT_COORDINATOR, "error_code", coordinator_moved),
    Row(K.SYNC_GROUP, 0, None, "unknown group", member_request(OTHER_GROUP), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.SYNC_GROUP, 0, None, "unknown member", member_request(GROUP, member=False), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.SYNC_GROUP, 0, None, "stale generation", member_request(GROUP, generation=99), E.ILLEGAL_GENERATION, "error_code"),
    Row(K.SYNC_GROUP, 5, None, "other protocol type", member_request(GROUP, protocol_type="connect"), E.INCONSISTENT_GROUP_PROTOCOL, "error_code"),
    Row(K.SYNC_GROUP, 5, None, "other protocol name", member_request(GROUP, protocol_name="roundrobin"), E.INCONSISTENT_GROUP_PROTOCOL, "error_code"),
    Row(K.SYNC_GROUP, 5, None, "protocol type missing", member_request(OTHER_GROUP, protocol_type=None), E.INCONSISTENT_GROUP_PROTOCOL, "error_code"),  # areMandatoryProtocolTypeAndNamePresent, before the group
    # Heartbeat: GroupCoordinator.handleHeartbeat.
    Row(K.HEARTBEAT, 0, None, "empty group id", member_request(""), E.INVALID_GROUP_ID, "error_code"),
    Row(K.HEARTBEAT, 0, None, "coordinator loading", member_request(GROUP), E.NONE, "error_code", coordinator_loading),  # "respond blindly"
    Row(K.HEARTBEAT, 0, None, "not coordinator", member_request(GROUP), E.NOT_COORDINATOR, "error_code", coordinator_moved),
    Row(K.HEARTBEAT, 0, None, "unknown group", member_request(OTHER_GROUP), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.HEARTBEAT, 0, None, "unknown member", member_request(GROUP, member=False), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.HEARTBEAT, 0, None, "stale generation", member_request(GROUP, generation=99), E.ILLEGAL_GENERATION, "error_code"),
    Row(K.HEARTBEAT, 0, None, "member of the stable group", member_request(GROUP), E.NONE, "error_code"),
    # LeaveGroup: GroupCoordinator.handleLeaveGroup; LeaveGroupResponse (v <= 2: the first member error on top).
    Row(K.LEAVE_GROUP, 0, 2, "unknown group", leave_group(OTHER_GROUP), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.LEAVE_GROUP, 3, None, "unknown group", leave_group(OTHER_GROUP), E.UNKNOWN_MEMBER_ID, "members.0.error_code"),
    Row(K.LEAVE_GROUP, 3, None, "unknown group (top level)", leave_group(OTHER_GROUP), E.NONE, "error_code"),
    Row(K.LEAVE_GROUP, 0, None, "coordinator loading", leave_group(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, "error_code", coordinator_loading),
    Row(K.LEAVE_GROUP, 0, None, "not coordinator", leave_group(GROUP), E.NOT_COORDINATOR, "error_code", coordinator_moved),
    Row(K.LEAVE_GROUP, 0, None, "empty group id", leave_group(""), E.INVALID_GROUP_ID, "error_code"),
    # DescribeGroups / ListGroups / DeleteGroups / OffsetDelete: GroupCoordinator.handleDescribeGroup, handleListGroups,
    # handleDeleteGroups, handleDeleteOffsets.
    Row(K.DESCRIBE_GROUPS, 0, 5, "unknown group (Dead)", groups(OTHER_GROUP), E.NONE, "groups.0.error_code"),
    Row(K.DESCRIBE_GROUPS, 6, None, "unknown group", groups(OTHER_GROUP), E.GROUP_ID_NOT_FOUND, "groups.0.error_code"),  # v6 (KIP-1043, Kafka 4.0)
    Row(K.DESCRIBE_GROUPS, 0, None, "empty group id", groups(""), E.NONE, "groups.0.error_code"),
    Row(K.DESCRIBE_GROUPS, 0, None, "coordinator loading", groups(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, "groups.0.error_code", coordinator_loading),
    Row(K.DESCRIBE_GROUPS, 0, None, "not coordinator", groups(GROUP), E.NOT_COORDINATOR, "groups.0.error_code", coordinator_moved),
    Row(K.LIST_GROUPS, 0, None, "coordinator loading", fixed(states_filter=[], types_filter=[]), E.COORDINATOR_LOAD_IN_PROGRESS, "error_code", coordinator_loading),
    Row(K.DELETE_GROUPS, 0, None, "unknown group", groups(OTHER_GROUP), E.GROUP_ID_NOT_FOUND, "results.0.error_code"),
    Row(K.DELETE_GROUPS, 0, None, "group with members", groups(GROUP), E.NON_EMPTY_GROUP, "results.0.error_code"),
    Row(K.DELETE_GROUPS, 0, None, "coordinator loading", groups(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, "results.0.error_code", coordinator_loading),
    Row(K.DELETE_GROUPS, 0, None, "not coordinator", groups(GROUP), E.NOT_COORDINATOR, "results.0.error_code", coordinator_moved),
    Row(K.OFFSET_DELETE, 0, None, "unknown group", offset_delete(OTHER_GROUP), E.GROUP_ID_NOT_FOUND, "error_code"),
    Row(K.OFFSET_DELETE, 0, None, "topic the group consumes", offset_delete(GROUP), E.GROUP_SUBSCRIBED_TO_TOPIC, L0),
    Row(K.OFFSET_DELETE, 0, None, "unknown topic", offset_delete(GROUP, MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, L0),  # !metadataCache.contains
    Row(K.OFFSET_DELETE, 0, None, "not coordinator", offset_delete(GROUP), E.NOT_COORDINATOR, "error_code", coordinator_moved),
    Row(K.OFFSET_DELETE, 0, None, "coordinator loading", offset_delete(GROUP), E.COORDINATOR_LOAD_IN_PROGRESS, "error_code", coordinator_loading),
    # CreateTopics: KafkaApis.handleCreateTopicsRequest, ZkAdminManager.createTopics, AdminZkClient.validateTopicCreate.
    Row(K.CREATE_TOPICS, 2, None, "topic exists", create_topic_body(TOPIC), E.TOPIC_ALREADY_EXISTS, "topics.0.error_code"),
    Row(K.CREATE_TOPICS, 2, None, "replication factor above the brokers", create_topic_body("ec-new", 1, 3), E.INVALID_REPLICATION_FACTOR, "topics.0.error_code"),
    Row(K.CREATE_TOPICS, 2, None, "no partitions", create_topic_body("ec-new", 0), E.INVALID_PARTITIONS, "topics.0.error_code"),
    Row(K.CREATE_TOPICS, 2, None, "invalid name", create_topic_body("bad/name"), E.INVALID_TOPIC_EXCEPTION, "topics.0.error_code"),  # Topic.validate
    Row(K.CREATE_TOPICS, 2, None, "name colliding by '.'/'_'", create_topic_body("ec_dot"), E.INVALID_TOPIC_EXCEPTION, "topics.0.error_code"),
    Row(K.CREATE_TOPICS, 2, None, "unknown config key", create_topic_body("ec-new", configs={"no.such.key": "1"}), E.INVALID_CONFIG, "topics.0.error_code"),  # LogConfig.validateNames
    Row(K.CREATE_TOPICS, 2, None, "bad config value", create_topic_body("ec-new", configs={"retention.ms": "soon"}), E.INVALID_CONFIG, "topics.0.error_code"),  # ConfigException
    Row(K.CREATE_TOPICS, 2, None, "assignment and partition count", create_topic_body("ec-new", 1, 1, assignments=[{"partition_index": 0, "broker_ids": [1]}]), E.INVALID_REQUEST, "topics.0.error_code"),
    Row(K.CREATE_TOPICS, 2, None, "valid (validate only)", create_topic_body("ec-new"), E.NONE, "topics.0.error_code"),
    Row(K.CREATE_TOPICS, 4, None, "broker defaults (-1, -1)", create_topic_body("ec-new", -1, -1), E.NONE, "topics.0.error_code"),  # KIP-464
    # DeleteTopics: KafkaApis.handleDeleteTopicsRequest.
    Row(K.DELETE_TOPICS, 1, None, "unknown topic", delete_topics(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, "responses.0.error_code"),
    Row(K.DELETE_TOPICS, 1, 2, "deletion disabled", delete_topics(TOPIC), E.INVALID_REQUEST, "responses.0.error_code", ask=STRICT),  # !deleteTopicEnable, before any other check
    Row(K.DELETE_TOPICS, 3, None, "deletion disabled", delete_topics(TOPIC), E.TOPIC_DELETION_DISABLED, "responses.0.error_code", ask=STRICT),
    Row(K.DELETE_TOPICS, 1, 2, "deletion disabled, unknown topic", delete_topics(MISSING), E.INVALID_REQUEST, "responses.0.error_code", ask=STRICT),
    Row(K.DELETE_TOPICS, 3, None, "deletion disabled, unknown topic", delete_topics(MISSING), E.TOPIC_DELETION_DISABLED, "responses.0.error_code", ask=STRICT),
    Row(K.DELETE_TOPICS, 6, None, "unknown topic id", delete_topics(None, uuid.UUID(int=7)), E.UNKNOWN_TOPIC_ID, "responses.0.error_code"),
    # CreatePartitions: ZkAdminManager.createPartitions, AdminZkClient.addPartitions.
    Row(K.CREATE_PARTITIONS, 0, None, "unknown topic", create_partitions(MISSING, 2), E.UNKNOWN_TOPIC_OR_PARTITION, "results.0.error_code"),
    Row(K.CREATE_PARTITIONS, 0, None, "count not above the current", create_partitions(TOPIC, 1), E.INVALID_PARTITIONS, "results.0.error_code"),
    Row(K.CREATE_PARTITIONS, 0, None, "assignment to an unknown broker", create_partitions(TOPIC, 2, [[9]]), E.INVALID_REPLICA_ASSIGNMENT, "results.0.error_code"),
    Row(K.CREATE_PARTITIONS, 0, None, "topic twice", create_partitions(TOPIC, 2, twice=True), E.INVALID_REQUEST, "results.0.error_code"),  # dupes
    Row(K.CREATE_PARTITIONS, 0, None, "valid (validate only)", create_partitions(TOPIC, 2), E.NONE, "results.0.error_code"),
    # DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: ConfigHelper.describeConfigs, ZkAdminManager.alterConfigs.
    Row(K.DESCRIBE_CONFIGS, 1, None, "unknown topic", config_resource(2, MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, "results.0.error_code"),
    Row(K.DESCRIBE_CONFIGS, 1, None, "another broker", config_resource(4, "7"), E.INVALID_REQUEST, "results.0.error_code", mq_answers=E.NONE),  # "Unexpected broker id"; mq answers any broker id from the metadata tree (handlers/configs.py)
    Row(K.DESCRIBE_CONFIGS, 1, None, "broker id not a number", config_resource(4, "x"), E.INVALID_REQUEST, "results.0.error_code"),
    Row(K.ALTER_CONFIGS, 0, None, "unknown topic", config_resource(2, MISSING, {"retention.ms": "1000"}), E.UNKNOWN_TOPIC_OR_PARTITION, "responses.0.error_code"),
    Row(K.ALTER_CONFIGS, 0, None, "bad config value", config_resource(2, TOPIC, {"retention.ms": "soon"}), E.INVALID_CONFIG, "responses.0.error_code"),
    Row(K.ALTER_CONFIGS, 0, None, "unknown config key", config_resource(2, TOPIC, {"no.such.key": "1"}), E.INVALID_CONFIG, "responses.0.error_code"),
    Row(K.ALTER_CONFIGS, 0, None, "another broker", config_resource(4, "7", {"log.retention.ms": "2000"}), E.INVALID_REQUEST, "responses.0.error_code", mq_answers=E.NONE),  # getBrokerId; mq writes any broker's entry (handlers/configs.py)
    Row(K.INCREMENTAL_ALTER_CONFIGS, 0, None, "unknown topic", config_resource(2, MISSING, {"retention.ms": "1000"}), E.UNKNOWN_TOPIC_OR_PARTITION, "responses.0.error_code"),
    Row(K.INCREMENTAL_ALTER_CONFIGS, 0, None, "bad config value", config_resource(2, TOPIC, {"retention.ms": "soon"}), E.INVALID_CONFIG, "responses.0.error_code"),
    Row(K.INCREMENTAL_ALTER_CONFIGS, 0, None, "append to a non-list key", config_resource(2, TOPIC, {"retention.ms": "1"}, 2), E.INVALID_REQUEST, "responses.0.error_code"),  # prepareIncrementalConfigs
    Row(K.INCREMENTAL_ALTER_CONFIGS, 0, None, "subtract from a non-list key", config_resource(2, TOPIC, {"retention.ms": "1"}, 3), E.INVALID_REQUEST, "responses.0.error_code"),
    Row(K.INCREMENTAL_ALTER_CONFIGS, 0, None, "append to a list key", config_resource(2, TOPIC, {"cleanup.policy": "compact"}, 2), E.NONE, "responses.0.error_code"),
    # ControlledShutdown, ElectLeaders: KafkaApis.handleElectReplicaLeader, KafkaController.doElectLeaders.
    Row(K.CONTROLLED_SHUTDOWN, 0, None, "unknown broker", fixed(broker_id=77, broker_epoch=-1), E.BROKER_NOT_AVAILABLE, "error_code"),  # KafkaController.doControlledShutdown
    Row(K.ELECT_LEADERS, 0, None, "unknown partition", elect(MISSING), E.UNKNOWN_TOPIC_OR_PARTITION, "replica_election_results.0.partition_result.0.error_code"),
    Row(K.ELECT_LEADERS, 0, None, "preferred leader leads", elect(TOPIC), E.ELECTION_NOT_NEEDED, "replica_election_results.0.partition_result.0.error_code"),
    Row(K.ELECT_LEADERS, 0, None, "preferred replica offline", elect(OFFLINE), E.PREFERRED_LEADER_NOT_AVAILABLE, "replica_election_results.0.partition_result.0.error_code"),  # online replicas only
    Row(K.ELECT_LEADERS, 1, None, "unclean, no eligible replica", elect(OFFLINE, 1), E.ELIGIBLE_LEADERS_NOT_AVAILABLE, "replica_election_results.0.partition_result.0.error_code"),  # online replicas only
    # DescribeLogDirs / AlterReplicaLogDirs: KafkaApis.handleDescribeLogDirsRequest, ReplicaManager.alterReplicaLogDirs.
    Row(K.DESCRIBE_LOG_DIRS, 0, None, "offline log dir", fixed(topics=None), E.KAFKA_STORAGE_ERROR, lambda r, s: next(d.error_code for d in r.results if d.log_dir == s.offline_dir)),
    Row(K.DESCRIBE_LOG_DIRS, 0, None, "online log dir", fixed(topics=None), E.NONE, lambda r, s: next(d.error_code for d in r.results if d.log_dir == s.online_dir)),
    Row(K.ALTER_REPLICA_LOG_DIRS, 1, None, "dir not configured", alter_log_dir(TOPIC, lambda s: "/nowhere"), E.LOG_DIR_NOT_FOUND, "results.0.partitions.0.error_code"),
    Row(K.ALTER_REPLICA_LOG_DIRS, 1, None, "offline destination", alter_log_dir(TOPIC, lambda s: s.offline_dir), E.KAFKA_STORAGE_ERROR, "results.0.partitions.0.error_code"),
    Row(K.ALTER_REPLICA_LOG_DIRS, 1, None, "replica in an offline dir", alter_log_dir(OFFLINE, lambda s: s.online_dir), E.KAFKA_STORAGE_ERROR, "results.0.partitions.0.error_code"),
    Row(K.ALTER_REPLICA_LOG_DIRS, 1, None, "no local replica", alter_log_dir(ELSEWHERE, lambda s: s.online_dir), E.REPLICA_NOT_AVAILABLE, "results.0.partitions.0.error_code"),  # NotLeaderOrFollower kept as REPLICA_NOT_AVAILABLE
    Row(K.ALTER_REPLICA_LOG_DIRS, 1, None, "already in that dir", alter_log_dir(TOPIC, lambda s: s.online_dir), E.NONE, "results.0.partitions.0.error_code"),
    # AlterPartitionReassignments: KafkaController.onApiPartitionReassignment / validateReassignment.
    Row(K.ALTER_PARTITION_REASSIGNMENTS, 0, None, "unknown partition", reassign(MISSING, [1]), E.UNKNOWN_TOPIC_OR_PARTITION, "responses.0.partitions.0.error_code"),
    Row(K.ALTER_PARTITION_REASSIGNMENTS, 0, None, "cancel without reassignment", reassign(TOPIC, None), E.NO_REASSIGNMENT_IN_PROGRESS, "responses.0.partitions.0.error_code"),
    Row(K.ALTER_PARTITION_REASSIGNMENTS, 0, None, "empty replica list", reassign(TOPIC, []), E.INVALID_REPLICA_ASSIGNMENT, "responses.0.partitions.0.error_code"),
    Row(K.ALTER_PARTITION_REASSIGNMENTS, 0, None, "replica twice", reassign(TOPIC, [1, 1]), E.INVALID_REPLICA_ASSIGNMENT, "responses.0.partitions.0.error_code"),
    Row(K.ALTER_PARTITION_REASSIGNMENTS, 0, None, "unknown broker", reassign(TOPIC, [9]), E.INVALID_REPLICA_ASSIGNMENT, "responses.0.partitions.0.error_code"),
    Row(K.LIST_PARTITION_REASSIGNMENTS, 0, None, "nothing moving", fixed(timeout=5000, topics=None), E.NONE, "error_code"),
    # ACLs without an authorizer: KafkaApis.handleDescribeAcls / handleCreateAcls / handleDeleteAcls.
    Row(K.DESCRIBE_ACLS, 0, None, "no authorizer", fixed(**ACL_FILTER), E.SECURITY_DISABLED, "error_code"),
    Row(K.CREATE_ACLS, 0, None, "no authorizer", fixed(creations=[ACL_CREATION]), E.SECURITY_DISABLED, "results.0.error_code"),
    Row(K.DELETE_ACLS, 0, None, "no authorizer", fixed(filters=[ACL_FILTER]), E.SECURITY_DISABLED, "filter_results.0.error_code"),
    # Client quotas: ZkAdminManager.describeClientQuotas / alterClientQuotas.
    Row(K.DESCRIBE_CLIENT_QUOTAS, 0, None, "custom entity type", fixed(components=[{"entity_type": "bogus", "match_type": 0, "match": "x"}], strict=False), E.UNSUPPORTED_VERSION, "error_code"),  # "Custom entity type not supported"
    Row(K.DESCRIBE_CLIENT_QUOTAS, 0, None, "user component twice", fixed(components=[{"entity_type": "user", "match_type": 1, "match": None}] * 2, strict=False), E.INVALID_REQUEST, "error_code"),
    Row(K.ALTER_CLIENT_QUOTAS, 0, None, "unknown quota key", quota("user", "no.such.quota"), E.INVALID_REQUEST, "entries.0.error_code"),
    Row(K.ALTER_CLIENT_QUOTAS, 0, None, "unknown entity type", quota("bogus", "producer_byte_rate"), E.INVALID_REQUEST, "entries.0.error_code"),
    Row(K.ALTER_CLIENT_QUOTAS, 0, None, "valid (validate only)", quota("user", "producer_byte_rate"), E.NONE, "entries.0.error_code"),
    # SCRAM credentials: ZkAdminManager.describeUserScramCredentials / alterUserScramCredentials.
    Row(K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, None, "unknown user", fixed(users=[{"name": "ec-nobody"}]), E.RESOURCE_NOT_FOUND, "results.0.error_code"),
    Row(K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, None, "user twice", fixed(users=[{"name": "ec-nobody"}] * 2), E.DUPLICATE_RESOURCE, "results.0.error_code"),
    Row(K.ALTER_USER_SCRAM_CREDENTIALS, 0, None, "too few iterations", scram(upsertions=[("ec-user", 1, 1)]), E.UNACCEPTABLE_CREDENTIAL, "results.0.error_code"),
    Row(K.ALTER_USER_SCRAM_CREDENTIALS, 0, None, "unknown mechanism", scram(upsertions=[("ec-user", 0, 8192)]), E.UNSUPPORTED_SASL_MECHANISM, "results.0.error_code"),
    Row(K.ALTER_USER_SCRAM_CREDENTIALS, 0, None, "delete a missing credential", scram(deletions=[("ec-nobody", 1)]), E.RESOURCE_NOT_FOUND, "results.0.error_code"),
    Row(K.ALTER_USER_SCRAM_CREDENTIALS, 0, None, "empty user name", scram(deletions=[("", 1)]), E.UNACCEPTABLE_CREDENTIAL, "results.0.error_code"),
    # SASL after authentication (a PLAINTEXT listener): KafkaApis.handleSaslHandshakeRequest / handleSaslAuthenticateRequest.
    Row(K.SASL_HANDSHAKE, 0, None, "plaintext listener", fixed(mechanism="PLAIN"), E.ILLEGAL_SASL_STATE, "error_code"),
    Row(K.SASL_AUTHENTICATE, 0, None, "plaintext listener", fixed(auth_bytes=b""), E.ILLEGAL_SASL_STATE, "error_code"),
    # ApiVersions, InitProducerId, DescribeCluster.
    Row(K.API_VERSIONS, 3, None, "invalid client software name", fixed(client_software_name="bad name!", client_software_version="1"), E.INVALID_REQUEST, "error_code"),  # ApiVersionsRequest.isValid
    Row(K.INIT_PRODUCER_ID, 0, None, "idempotent producer", fixed(transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1), E.NONE, "error_code"),
    # Transactions (the ids' states and markers are covered by the coordinator's tests; this broker has no
    # __transaction_state partition, so it coordinates no id): TransactionCoordinator.handleInitProducerId / handleAddPartitionsToTransaction / handleEndTransaction,
    # KafkaApis.handleTxnOffsetCommitRequest / handleWriteTxnMarkersRequest / handleDescribeProducersRequest (3.0).
    Row(K.INIT_PRODUCER_ID, 0, None, "empty transactional id", fixed(transactional_id="", transaction_timeout=60000, producer_id=-1, producer_epoch=-1), E.INVALID_REQUEST, "error_code"),
    Row(K.INIT_PRODUCER_ID, 0, None, "timeout above transaction.max.timeout.ms", fixed(transactional_id="ec-tx", transaction_timeout=900001, producer_id=-1, producer_epoch=-1), E.INVALID_TRANSACTION_TIMEOUT, "error_code"),
    Row(K.ADD_PARTITIONS_TO_TXN, 0, 3, "not the id's coordinator (no __transaction_state here)", fixed(v3_and_below_transactional_id="ec-unknown-tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0, v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}]), E.NOT_COORDINATOR, "results_by_topic_v3_and_below.0.results_by_partition.0.partition_error_code"),
    Row(K.ADD_OFFSETS_TO_TXN, 0, None, "not the id's coordinator (no __transaction_state here)", fixed(transactional_id="ec-unknown-tx", producer_id=1, producer_epoch=0, group_id=GROUP), E.NOT_COORDINATOR, "error_code"),
    Row(K.END_TXN, 0, None, "not the id's coordinator (no __transaction_state here)", fixed(transactional_id="ec-unknown-tx", producer_id=1, producer_epoch=0, committed=True), E.NOT_COORDINATOR, "error_code"),
    Row(K.TXN_OFFSET_COMMIT, 0, None, "unknown topic", fixed(transactional_id="ec-unknown-tx", group_id=GROUP, producer_id=1, producer_epoch=0, generation_id=-1, member_id="", group_instance_id=None, topics=[{"name": MISSING, "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}]), E.UNKNOWN_TOPIC_OR_PARTITION, "topics.0.partitions.0.error_code"),
    Row(K.WRITE_TXN_MARKERS, 1, None, "unknown partition", fixed(markers=[{"producer_id": 1, "producer_epoch": 0, "transaction_result": False, "topics": [{"name": MISSING, "partition_indexes": [0]}], "coordinator_epoch": 0}]), E.UNKNOWN_TOPIC_OR_PARTITION, "markers.0.topics.0.partitions.0.error_code"),
    Row(K.DESCRIBE_TRANSACTIONS, 0, None, "not the id's coordinator (no __transaction_state here)", fixed(transactional_ids=["ec-unknown-tx"]), E.NOT_COORDINATOR, "transaction_states.0.error_code"),
    Row(K.LIST_TRANSACTIONS, 0, None, "every transaction", fixed(state_filters=[], producer_id_filters=[], duration_filter=-1), E.NONE, "error_code"),
    Row(K.DESCRIBE_PRODUCERS, 0, None, "unknown topic", fixed(topics=[{"name": MISSING, "partition_indexes": [0]}]), E.UNKNOWN_TOPIC_OR_PARTITION, "topics.0.partitions.0.error_code"),
    Row(K.DESCRIBE_PRODUCERS, 0, None, "a hosted partition", fixed(topics=[{"name": TOPIC, "partition_indexes": [0]}]), E.NONE, "topics.0.partitions.0.error_code"),
    Row(K.DESCRIBE_PRODUCERS, 0, None, "a partition hosted elsewhere", fixed(topics=[{"name": ELSEWHERE, "partition_indexes": [0]}]), E.NOT_LEADER_OR_FOLLOWER, "topics.0.partitions.0.error_code"),
    Row(K.DESCRIBE_CLUSTER, 0, None, "the cluster", fixed(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False), E.NONE, "error_code"),
    # APIs after Kafka 2.8, as the Kafka release that added them answers: DescribeTopicPartitions (3.8, KIP-966),
    # GetTelemetrySubscriptions / PushTelemetry (3.7, KIP-714), ListConfigResources v0 (3.7, ListClientMetricsResources).
    Row(K.DESCRIBE_TOPIC_PARTITIONS, 0, None, "unknown topic", fixed(topics=[{"name": MISSING}], response_partition_limit=100, cursor=None), E.UNKNOWN_TOPIC_OR_PARTITION, "topics.0.error_code"),
    Row(K.DESCRIBE_TOPIC_PARTITIONS, 0, None, "cursor outside the topics asked", fixed(topics=[{"name": TOPIC}], response_partition_limit=100, cursor={"topic_name": MISSING, "partition_index": 0}), E.INVALID_REQUEST, "topics.0.error_code"),
    Row(K.DESCRIBE_TOPIC_PARTITIONS, 0, None, "a topic", fixed(topics=[{"name": TOPIC}], response_partition_limit=100, cursor=None), E.NONE, "topics.0.error_code"),
    Row(K.GET_TELEMETRY_SUBSCRIPTIONS, 0, None, "a new client", fixed(client_instance_id=uuid.UUID(int=0)), E.NONE, "error_code"),
    Row(K.PUSH_TELEMETRY, 0, None, "no client instance id", fixed(client_instance_id=uuid.UUID(int=0), subscription_id=0, terminating=False, compression_type=0, metrics=b""), E.INVALID_REQUEST, "error_code"),
    Row(K.LIST_CONFIG_RESOURCES, 0, None, "client-metrics resources", fixed(), E.NONE, "error_code"),
    # KIP-848 (Kafka 4.0's GroupCoordinatorService): a classic group is not a consumer group
    Row(K.CONSUMER_GROUP_DESCRIBE, 0, None, "unknown group", fixed(group_ids=[OTHER_GROUP], include_authorized_operations=False), E.GROUP_ID_NOT_FOUND, "groups.0.error_code"),
    Row(K.CONSUMER_GROUP_DESCRIBE, 0, None, "a classic group", fixed(group_ids=[GROUP], include_authorized_operations=False), E.GROUP_ID_NOT_FOUND, "groups.0.error_code"),
    Row(K.CONSUMER_GROUP_DESCRIBE, 0, None, "not coordinator", fixed(group_ids=[OTHER_GROUP], include_authorized_operations=False), E.NOT_COORDINATOR, "groups.0.error_code", coordinator_moved),
    Row(K.CONSUMER_GROUP_HEARTBEAT, 0, None, "joining a classic group with members", consumer_heartbeat(GROUP, 0), E.GROUP_ID_NOT_FOUND, "error_code"),
    Row(K.CONSUMER_GROUP_HEARTBEAT, 0, None, "unknown member", consumer_heartbeat(OTHER_GROUP, 3), E.UNKNOWN_MEMBER_ID, "error_code"),
    Row(K.CONSUMER_GROUP_HEARTBEAT, 0, None, "not coordinator", consumer_heartbeat(OTHER_GROUP, 0), E.NOT_COORDINATOR, "error_code", coordinator_moved),
]
# fmt: on


# --- the broker in its situations ------------------------------------------------------------------------------------


def on_loop(broker: InProcessBroker, fn: Callable[[], Any]) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.loop).result(10)


async def create_topic(connection: BrokerConnection, name: str, configs: dict[str, str] | None = None) -> None:
    topic = {
        "name": name,
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }
    answer = await connection.send(K.CREATE_TOPICS, {"topics": [topic], "timeout": 30_000, "validate_only": False}, 5)
    assert answer.topics[0].error_code == E.NONE, answer
    for _ in range(100):  # until this broker leads it
        meta = await connection.send(K.METADATA, metadata(name)(9, NO_STATE), 9)
        if meta.topics[0].error_code == E.NONE and meta.topics[0].partitions[0].leader_id >= 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} has no leader")


async def produce_to(connection: BrokerConnection, topic: str, records: bytes) -> None:
    answer = await connection.send(K.PRODUCE, produce(topic, records)(9, NO_STATE), 9)
    assert answer.responses[0].partition_responses[0].error_code == E.NONE, answer


async def prepare_strict(state: State) -> None:
    connection = BrokerConnection("127.0.0.1", state.broker.port, client_id="error-codes")
    try:
        await create_topic(connection, TOPIC)
    finally:
        await connection.close()


async def prepare(state: State) -> None:
    broker = state.broker
    connection = BrokerConnection("127.0.0.1", broker.port, client_id="error-codes")
    try:
        await create_topic(connection, OFFLINE)
        log_manager = broker.server.log_manager
        assert log_manager is not None
        offline_log = log_manager.get_log(TopicPartition(OFFLINE, 0))
        assert offline_log is not None
        directory = offline_log.dir.parent
        log_manager.mark_offline(directory, OSError(5, "Input/output error"))
        zk = broker.server.zk
        assert zk is not None
        for _ in range(200):  # until the controller took the partition offline (no other replica to lead it)
            found = await asyncio.to_thread(zk.get_partition_state, OFFLINE, 0)
            if found is not None and found[0].leader == -1:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the controller did not take {OFFLINE} offline")
        await create_topic(connection, TOPIC)
        await produce_to(connection, TOPIC, batch())
        await create_topic(connection, ZSTD, {"compression.type": "zstd"})
        await produce_to(connection, ZSTD, batch(Codec.ZSTD))
        await create_topic(connection, NO_DOWN_CONVERSION, {"message.downconversion.enable": "false"})
        await produce_to(connection, NO_DOWN_CONVERSION, batch())
        await create_topic(connection, MIN_ISR, {"min.insync.replicas": "2"})
        await create_topic(connection, DOTTED)
        await create_topic(connection, SMALL, {"max.message.bytes": "10"})
        await create_topic(connection, COMPACTED, {"cleanup.policy": "compact"})
        for topic in (TOPIC, ZSTD, NO_DOWN_CONVERSION, MIN_ISR):
            log = log_manager.get_log(TopicPartition(topic, 0))
            assert log is not None and log.dir.parent != directory
            state.online_dir = str(log.dir.parent)
        state.offline_dir = str(directory)
        cache = broker.server.cache
        elsewhere_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        on_loop(broker, lambda: cache.update_partition(ELSEWHERE, elsewhere_id, 0, PartitionInfo(2, 0, (2,), (2,))))
        await create_topic(connection, FOLLOWED)
        me = broker.server.broker_id
        followed = PartitionStateInfo(TopicPartition(FOLLOWED, 0), None, 2, 1, (2, me), (2, me), 1, 1)
        replica_manager = broker.server.replica_manager
        assert replica_manager is not None
        on_loop(broker, lambda: replica_manager.become_leader_or_follower([followed]))
        on_loop(broker, lambda: cache.update_partition(FOLLOWED, None, 0, PartitionInfo(2, 1, (2, me), (2, me))))
        await create_topic(connection, LAGGING)

        def lead(epoch: int) -> list[PartitionStateInfo]:
            return [PartitionStateInfo(TopicPartition(LAGGING, 0), None, me, epoch, (me, 2), (me, 2), epoch, 1)]

        on_loop(broker, lambda: replica_manager.become_leader_or_follower(lead(1)))
        await produce_to(connection, LAGGING, batch())
        on_loop(broker, lambda: replica_manager.become_leader_or_follower(lead(2)))
        on_loop(broker, lambda: cache.update_partition(LAGGING, None, 0, PartitionInfo(me, 2, (me, 2), (me, 2))))
        for _ in range(100):
            found = await connection.send(K.FIND_COORDINATOR, find_coordinator(GROUP)(3, state), 3)
            if found.error_code == E.NONE:
                break
            await asyncio.sleep(0.05)
        joined = await connection.send(K.JOIN_GROUP, join_group(GROUP)(3, state), 3)
        assert joined.error_code == E.NONE, joined
        state.member, state.generation = joined.member_id, joined.generation_id
        assignment = [{"member_id": state.member, "assignment": b""}]
        synced = await connection.send(K.SYNC_GROUP, {**member_request(GROUP)(3, state), "assignments": assignment}, 3)
        assert synced.error_code == E.NONE, synced
        for committing in (offset_commit(GROUP, member=True), offset_commit("", generation=-1)):
            committed = await connection.send(K.OFFSET_COMMIT, committing(8, state), 8)
            assert committed.topics[0].partitions[0].error_code == E.NONE, committed
    finally:
        await connection.close()


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, State]]:
    """The MAIN and the STRICT broker, in their situations."""
    base = tmp_path_factory.mktemp("error-codes")
    started = [
        start_broker(
            [
                f"log.dirs={base / 'a'},{base / 'b'}",
                "group.initial.rebalance.delay.ms=0",
                "offsets.topic.num.partitions=1",
                "auto.create.topics.enable=true",
            ]
        ),
        start_broker([f"log.dirs={base / 'strict'}", "auto.create.topics.enable=false", "delete.topic.enable=false"]),
    ]
    try:
        found = {MAIN: State(started[0][0]), STRICT: State(started[1][0])}
        asyncio.run(prepare(found[MAIN]))
        asyncio.run(prepare_strict(found[STRICT]))
        yield found
    finally:
        for broker, thread in started:
            stop_broker(broker, thread)


def at(response: Any, where: str | Callable[[Any, State], int], state: State) -> int:
    if callable(where):
        return where(response, state)
    found = response
    for step in where.split("."):
        found = found[int(step)] if step.isdigit() else getattr(found, step)
    return int(found)


@contextlib.contextmanager
def situation(state: State, during: Callable[[State], Callable[[], None]] | None) -> Iterator[None]:
    if during is None:
        yield
        return
    restore = on_loop(state.broker, lambda: during(state))
    try:
        yield
    finally:
        on_loop(state.broker, restore)


def served(state: State, api: K) -> tuple[int, int]:
    dispatcher = state.broker.server.dispatcher
    assert dispatcher is not None
    (entry,) = [a for a in dispatcher.advertised() if a["api_key"] == api]
    return entry["min_version"], entry["max_version"]


@pytest.mark.parametrize(
    "row", TABLE, ids=[f"{r.api.name}-v{r.first}-{'' if r.last is None else r.last}-{r.situation}" for r in TABLE]
)
def test_error_code(states: dict[str, State], row: Row) -> None:
    state = states[row.ask]
    low, high = served(state, row.api)
    if row.first > high:
        pytest.skip(f"{row.api.name} v{row.first}+ is not served yet (v{low}-v{high})")
    versions = range(max(row.first, low), (high if row.last is None else min(row.last, high)) + 1)
    assert versions, f"{row.api.name} v{row.first}-{row.last}: no version the broker serves ({low}-{high})"

    async def answers() -> dict[int, int]:
        connection = BrokerConnection("127.0.0.1", state.broker.port, client_id="error-codes")
        found = {}
        try:
            for version in versions:
                with situation(state, row.during):
                    response = await connection.send(row.api, row.request(version, state), version)
                found[version] = at(response, row.where, state)
        finally:
            await connection.close()
        return found

    got = asyncio.run(answers())
    expected = row.expected if row.mq_answers is None else row.mq_answers
    wrong = {v: E(code).name for v, code in got.items() if code != expected}
    assert not wrong, f"{row.api.name} {row.situation}: expected {expected.name}, got {wrong}"


def test_every_api_the_broker_serves_has_rows(states: dict[str, State]) -> None:
    dispatcher = states[MAIN].broker.server.dispatcher
    assert dispatcher is not None
    served_apis = {K(a["api_key"]) for a in dispatcher.advertised()}
    assert served_apis - {row.api for row in TABLE} == set()
