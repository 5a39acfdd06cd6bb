"""Asyncio admin client: topics, partitions, configs, offsets, records deletion, leader election, cluster, groups,
transactions.

Each method sends one request kind (to the controller where Kafka routes it there), retries retriable errors after a
metadata refresh, and returns dataclasses. A failed topic or resource raises ``KafkaError`` carrying the wire code
and the broker's error message when it sent one.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mq.client.cluster import BrokerMetadata, Cluster, TopicMetadata, kafka_error, topic_id_string
from mq.client.connection import DEFAULT_CLIENT_ID, UnsupportedVersionError
from mq.client.consumer import ISOLATION_LEVELS, AsyncConsumer, list_offsets
from mq.client.group_protocol import ConsumerProtocolError, decode_assignment
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError, exception_for
from mq.protocol.acls import binding_fields, binding_of, filter_fields
from mq.protocol.api_keys import ApiKey
from mq.protocol.configs import AlterConfigOp, ResourceType
from mq.security.acl import AclBinding, AclBindingFilter
from mq.security.scram import ScramMechanism, mechanism_of_type
from mq.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    """-1: the broker's num.partitions (or the assignment's size)."""
    replication_factor: int = -1
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: str | None
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: int
    """A ``ConfigSource`` value (-1 when the broker sent none)."""
    is_sensitive: bool
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ElectionResult:
    error: ErrorCode
    message: str | None = None


ReassignmentResult = ElectionResult
"""AlterPartitionReassignments' outcome for one partition: an error code and message, as an election's."""


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition being reassigned: its current (enlarged) replica list and the replicas joining and leaving."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """One replica's log as its broker reports it (DescribeLogDirs)."""

    log_dir: str
    size_bytes: int
    offset_lag: int
    """How far the replica's log end is behind the partition's high watermark (a future replica: behind the current
    replica's log end)."""
    is_future: bool = False
    """A copy being made in another directory of the same broker (AlterReplicaLogDirs) that replaces the current
    replica once it caught up."""


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of a broker (DescribeLogDirs): its error (KAFKA_STORAGE_ERROR when offline) and replicas."""

    log_dir: str
    error: ErrorCode
    replicas: tuple[tuple[TopicPartition, ReplicaLogInfo], ...]


@dataclass(frozen=True, slots=True)
class DeletedRecords:
    """DeleteRecords' outcome for one partition: the new log start offset, or the error (low_watermark -1)."""

    low_watermark: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerMetadata, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    """Empty when the broker answered ListGroups below v4 (no states)."""
    group_type: str = ""
    """``classic`` or ``consumer`` (KIP-848) from ListGroups v5; empty from older versions."""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    """Decoded from the consumer protocol; empty for other protocol types or before the first assignment."""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    """Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead."""
    protocol_type: str
    protocol: str
    """The assignment strategy the group agreed on (e.g. range)."""
    members: tuple[MemberDescription, ...]
    coordinator: BrokerMetadata


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """A transactional id a broker's transaction coordinator holds (ListTransactions)."""

    transactional_id: str
    producer_id: int
    state: str
    """Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
    PrepareEpochFence."""


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id's state at its coordinator (DescribeTransactions)."""

    coordinator_id: int
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    """None when no transaction is open (the coordinator answers -1)."""
    topic_partitions: frozenset[TopicPartition]
    """The partitions of the open transaction; while it prepares to commit or abort, those still without a marker."""


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer a partition replica keeps state for (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    """None when the replica knows none (the broker answers -1)."""
    current_transaction_start_offset: int | None
    """The first offset of the producer's open transaction on the partition; None when none is open."""


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """The open transaction of one partition to abort with an ABORT marker (WriteTxnMarkers to its leader)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        """Kafka's ``AbortTransactionSpec.toString``, which its tool and errors print."""
        return (
            f"AbortTransactionSpec(topicPartition={self.topic_partition}, producerId={self.producer_id}, "
            f"producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})"
        )


GROUP_KEY, TRANSACTION_KEY = 0, 1
"""FindCoordinator key types: a consumer group id, a transactional id."""

COORDINATOR_MOVED = frozenset(
    {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
)
"""Coordinator request errors (groups, transactional ids) that mean: look the coordinator up again and retry."""


@dataclass(frozen=True)
class ClientQuotaEntry:
    """One entity's client quotas: entity type (``user``, ``client-id``) -> name (None: the default), and the
    quota values by key."""

    entity: dict[str, str | None]
    values: dict[str, float]


@dataclass(frozen=True)
class UserScramCredentials:
    """DescribeUserScramCredentials' answer for one user: its credentials as (mechanism name, iterations), or the
    error the broker gave for that user."""

    user: str
    credentials: tuple[tuple[str, int], ...] = ()
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True)
class ScramUpsertion:
    """A credential to set with AlterUserScramCredentials: the client salts the password itself."""

    user: str
    mechanism: ScramMechanism
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


class AsyncAdmin:
    """Admin operations over one ``Cluster`` (created from ``bootstrap_servers`` unless given)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        cluster: Cluster | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        request_timeout_ms: int = 30_000,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._owns_cluster = cluster is None
        if cluster is None:
            if bootstrap_servers is None:
                raise ValueError("bootstrap_servers or cluster is required")
            cluster = Cluster(
                bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms, security=security
            )
        self.cluster = cluster
        self.timeout_ms = request_timeout_ms

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()

    async def _controller(self) -> int:
        if self.cluster.controller_id not in self.cluster.brokers:
            await self.cluster.refresh_metadata([])
        if self.cluster.controller_id < 0:
            raise KafkaError("the cluster has no controller", code=ErrorCode.NOT_CONTROLLER)
        return self.cluster.controller_id

    async def _to_controller(self, api_key: int, body: Mapping[str, Any]) -> Any:
        async def attempt() -> Any:
            return await self.cluster.send(await self._controller(), api_key, body)

        return await self.cluster.with_retries(attempt)

    async def list_topics(self, include_internal: bool = True) -> list[str]:
        topics = await self.cluster.with_retries(lambda: self.cluster.refresh_metadata(None))
        return sorted(name for name, t in topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicMetadata]:
        """Partition leaders, replicas, ISR and topic ids; raises for a topic that does not exist."""
        wanted = None if names is None else list(names)
        topics = await self.cluster.with_retries(
            lambda: self.cluster.refresh_metadata(wanted, allow_auto_topic_creation=False)
        )
        for topic in topics.values():
            if topic.error != ErrorCode.NONE:
                raise kafka_error(topic.error, None, f"topic {topic.name!r}")
        return [topics[name] for name in (wanted if wanted is not None else sorted(topics))]

    async def describe_cluster(self) -> ClusterDescription:
        async def attempt() -> Any:
            return await self.cluster.send(
                None,
                ApiKey.DESCRIBE_CLUSTER,
                {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": False},
            )

        response = await self.cluster.with_retries(attempt)
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, "describe cluster")
        brokers = tuple(
            sorted(
                (BrokerMetadata(int(b.broker_id), b.host, int(b.port), b.rack) for b in response.brokers),
                key=lambda b: b.node_id,
            )
        )
        return ClusterDescription(response.cluster_id, int(response.controller_id), brokers)

    async def create_topics(self, topics: Sequence[NewTopic], validate_only: bool = False) -> list[CreatedTopic]:
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": -1 if t.replica_assignment else t.num_partitions,
                    "replication_factor": -1 if t.replica_assignment else t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(ids)}
                        for p, ids in sorted((t.replica_assignment or {}).items())
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in topics
            ],
            "timeout": self.timeout_ms,
            "validate_only": validate_only,
        }
        response = await self._to_controller(ApiKey.CREATE_TOPICS, body)
        results = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                raise kafka_error(topic.error_code, topic.error_message, f"create topic {topic.name!r}")
            results.append(
                CreatedTopic(
                    topic.name,
                    topic_id_string(getattr(topic, "topic_id", None)),
                    int(getattr(topic, "num_partitions", -1)),
                    int(getattr(topic, "replication_factor", -1)),
                )
            )
        return results

    async def delete_topics(self, names: Sequence[str]) -> None:
        body = {"topic_names": list(names), "topics": [{"name": n} for n in names], "timeout": self.timeout_ms}
        response = await self._to_controller(ApiKey.DELETE_TOPICS, body)
        for topic in response.responses:
            if topic.error_code != ErrorCode.NONE:
                message = getattr(topic, "error_message", None)
                raise kafka_error(topic.error_code, message, f"delete topic {topic.name!r}")

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow each topic to ``new_totals[topic]`` partitions, optionally placing the new ones' replicas."""
        topics = []
        for name, count in new_totals.items():
            topic: dict[str, Any] = {"name": name, "count": count}
            if assignments and name in assignments:
                topic["assignments"] = [{"broker_ids": list(ids)} for ids in assignments[name]]
            topics.append(topic)
        body = {"topics": topics, "timeout": self.timeout_ms, "validate_only": validate_only}
        response = await self._to_controller(ApiKey.CREATE_PARTITIONS, body)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise kafka_error(result.error_code, result.error_message, f"create partitions of {result.name!r}")

    async def describe_configs(
        self, resource_type: ResourceType, name: str, keys: Sequence[str] | None = None, include_synonyms: bool = False
    ) -> list[ConfigEntry]:
        resource: dict[str, Any] = {
            "resource_type": int(resource_type),
            "resource_name": name,
            "configuration_keys": None if keys is None else list(keys),
        }
        body = {"resources": [resource], "include_synonyms": include_synonyms, "include_documentation": False}
        response = await self._send_for_resource(resource_type, name, ApiKey.DESCRIBE_CONFIGS, body)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            raise kafka_error(result.error_code, result.error_message, f"describe configs of {name!r}")
        return [
            ConfigEntry(
                c.name,
                c.value,
                bool(c.read_only),
                int(getattr(c, "config_source", -1)),
                bool(c.is_sensitive),
                tuple((s.name, s.value, int(s.source)) for s in getattr(c, "synonyms", ())),
            )
            for c in result.configs
        ]

    async def alter_configs(
        self, resource_type: ResourceType, name: str, configs: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Replace the resource's whole dynamic config with ``configs`` (AlterConfigs)."""
        resource = {
            "resource_type": int(resource_type),
            "resource_name": name,
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }
        body = {"resources": [resource], "validate_only": validate_only}
        response = await self._send_for_resource(resource_type, name, ApiKey.ALTER_CONFIGS, body)
        _raise_for_responses(response.responses, f"alter configs of {name!r}")

    async def incremental_alter_configs(
        self,
        resource_type: ResourceType,
        name: str,
        changes: Mapping[str, tuple[AlterConfigOp, str | None]],
        validate_only: bool = False,
    ) -> None:
        """Apply ``changes`` (key -> (operation, value)) with IncrementalAlterConfigs."""
        resource = {
            "resource_type": int(resource_type),
            "resource_name": name,
            "configs": [{"name": k, "config_operation": int(op), "value": v} for k, (op, v) in changes.items()],
        }
        body = {"resources": [resource], "validate_only": validate_only}
        response = await self._send_for_resource(resource_type, name, ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        _raise_for_responses(response.responses, f"alter configs of {name!r}")

    async def _send_for_resource(
        self, resource_type: ResourceType, name: str, api_key: int, body: Mapping[str, Any]
    ) -> Any:
        """Broker and broker-logger resources go to that broker (empty name: any broker); topic resources to any
        broker."""

        async def attempt() -> Any:
            per_broker = resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER)
            node = int(name) if per_broker and name else None
            if node is not None and node not in self.cluster.brokers:
                await self.cluster.refresh_metadata([])
            return await self.cluster.send(node, api_key, body)

        return await self.cluster.with_retries(attempt)

    async def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], isolation_level: str = "read_uncommitted"
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets for -2 (earliest), -1 (latest) or a timestamp in ms, per partition."""
        found = await list_offsets(self.cluster, timestamps, ISOLATION_LEVELS[isolation_level])
        return {tp: OffsetAndTimestamp(offset, timestamp) for tp, (offset, timestamp) in found.items()}

    async def record_timestamps(
        self, positions: Mapping[TopicPartition, int], timeout_ms: int = 2000
    ) -> dict[TopicPartition, int]:
        """Timestamp of the record a consumer at ``positions[tp]`` reads next (the first at or after it; from the
        log start when retention removed it); partitions without such a record within ``timeout_ms`` are left out."""
        consumer = AsyncConsumer(cluster=self.cluster, auto_offset_reset="earliest", fetch_max_wait_ms=100)
        consumer.assign(positions)
        for tp, offset in positions.items():
            consumer.seek(tp, offset)
        found: dict[TopicPartition, int] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while len(found) < len(positions) and loop.time() < deadline:
            for record in await consumer.poll(int((deadline - loop.time()) * 1000)):
                found.setdefault(TopicPartition(record.topic, record.partition), record.timestamp)
            consumer.assign(tp for tp in positions if tp not in found)
        return found

    async def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Delete records before ``offsets[tp]`` (-1: the high watermark); returns each new low watermark."""

        async def attempt() -> dict[TopicPartition, int]:
            by_leader: dict[int, dict[str, list[dict[str, int]]]] = defaultdict(lambda: defaultdict(list))
            for tp, offset in offsets.items():
                by_leader[await self.cluster.leader_for(tp)][tp.topic].append(
                    {"partition_index": tp.partition, "offset": offset}
                )
            result = {}
            for leader, topics in by_leader.items():
                body = {
                    "topics": [{"name": n, "partitions": parts} for n, parts in topics.items()],
                    "timeout": self.timeout_ms,
                }
                response = await self.cluster.send(leader, ApiKey.DELETE_RECORDS, body)
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, int(part.partition_index))
                        if part.error_code != ErrorCode.NONE:
                            raise kafka_error(part.error_code, None, f"delete records of {tp}")
                        result[tp] = int(part.low_watermark)
            return result

        return await self.cluster.with_retries(attempt, {tp.topic for tp in offsets})

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None = None, election_type: int = 0
    ) -> dict[TopicPartition, ElectionResult]:
        """Run a preferred (0) or unclean (1) election; None means every partition. Results are per partition."""
        body: dict[str, Any] = {"election_type": election_type, "timeout": self.timeout_ms}
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            body["topic_partitions"] = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        response = await self._to_controller(ApiKey.ELECT_LEADERS, body)
        code = getattr(response, "error_code", ErrorCode.NONE)
        if code != ErrorCode.NONE:
            raise kafka_error(code, None, "elect leaders")
        return {
            TopicPartition(r.topic, int(p.partition_id)): ElectionResult(ErrorCode(p.error_code), p.error_message)
            for r in response.replica_election_results
            for p in r.partition_result
        }

    async def alter_partition_reassignments(
        self, moves: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult]:
        """Start (a replica list) or cancel (None) each partition's reassignment; the outcome is per partition."""
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, replicas in moves.items():
            by_topic[tp.topic].append(
                {"partition_index": tp.partition, "replicas": None if replicas is None else list(replicas)}
            )
        body = {
            "timeout": self.timeout_ms,
            "allow_replication_factor_change": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        response = await self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, "alter partition reassignments")
        return {
            TopicPartition(t.name, int(p.partition_index)): ReassignmentResult(ErrorCode(p.error_code), p.error_message)
            for t in response.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OngoingReassignment]:
        """Ongoing reassignments of ``partitions`` (None: of every partition)."""
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = {"timeout": self.timeout_ms, "topics": topics}
        response = await self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, body)
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, "list partition reassignments")
        return {
            TopicPartition(t.name, int(p.partition_index)): OngoingReassignment(
                tuple(map(int, p.replicas)), tuple(map(int, p.adding_replicas)), tuple(map(int, p.removing_replicas))
            )
            for t in response.topics
            for p in t.partitions
        }

    async def describe_log_dirs(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] | None = None
    ) -> dict[int, dict[TopicPartition, ReplicaLogInfo]]:
        """The current replicas (of ``partitions``; None: all) each of ``brokers`` holds, with their directory and
        size (future replicas and offline directories are left out)."""
        descriptions = await self.describe_log_dir_descriptions(brokers, partitions)
        return {
            broker: {
                tp: info for d in dirs if d.error == ErrorCode.NONE for tp, info in d.replicas if not info.is_future
            }
            for broker, dirs in descriptions.items()
        }

    async def find_coordinator(self, key: str, key_type: int = GROUP_KEY) -> BrokerMetadata:
        """The broker coordinating group ``key`` (or transactional id ``key`` with TRANSACTION_KEY; FindCoordinator);
        known to the cluster's connections afterwards."""
        body = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
        response = await self.cluster.send(None, ApiKey.FIND_COORDINATOR, body)
        entry = response.coordinators[0] if getattr(response, "coordinators", None) else response
        if entry.error_code != ErrorCode.NONE:
            raise kafka_error(entry.error_code, entry.error_message, f"find coordinator of {_key_name(key, key_type)}")
        broker = BrokerMetadata(int(entry.node_id), entry.host, int(entry.port), None)
        known = self.cluster.brokers.get(broker.node_id)
        if known is None or (known.host, known.port) != (broker.host, broker.port):
            self.cluster.brokers[broker.node_id] = broker
        return self.cluster.brokers[broker.node_id]

    async def _to_coordinator(self, group_id: str, api_key: int, body: Mapping[str, Any]) -> Any:
        """Send to the group's coordinator; a moved or loading coordinator is looked up again and retried."""
        return (await self._at_coordinator(group_id, api_key, body))[1]

    async def _at_coordinator(self, group_id: str, api_key: int, body: Mapping[str, Any]) -> tuple[BrokerMetadata, Any]:
        """The coordinator that answered and its response (see ``_to_coordinator``)."""

        async def attempt() -> tuple[BrokerMetadata, Any]:
            coordinator = await self.find_coordinator(group_id)
            response = await self.cluster.send(coordinator.node_id, api_key, body)
            code = _group_error(response)
            if code in COORDINATOR_MOVED:
                raise kafka_error(code, None, f"group {group_id!r}")
            return coordinator, response

        return await self.cluster.with_retries(attempt)

    async def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        """Groups of every broker (ListGroups), sorted by id; ``states`` keeps only groups in those states, ``types``
        only groups of those types (``classic``, ``consumer``; asked of brokers that answer ListGroups v5)."""
        wanted = None if states is None else set(states)
        kinds = None if types is None else {t.lower() for t in types}
        await self.cluster.with_retries(lambda: self.cluster.refresh_metadata([]))
        body = {"states_filter": sorted(wanted or ()), "types_filter": sorted(kinds or ())}
        found: dict[str, GroupListing] = {}
        for node in sorted(self.cluster.brokers):

            async def attempt(node: int = node) -> Any:
                return await self.cluster.send(node, ApiKey.LIST_GROUPS, body)

            response = await self.cluster.with_retries(attempt)
            if response.error_code != ErrorCode.NONE:
                raise kafka_error(response.error_code, None, f"list groups of broker {node}")
            for group in response.groups:
                kind = getattr(group, "group_type", "")
                listing = GroupListing(group.group_id, group.protocol_type, getattr(group, "group_state", ""), kind)
                if (wanted is None or listing.state in wanted) and (kinds is None or kind.lower() in kinds):
                    found[listing.group_id] = listing
        return [found[g] for g in sorted(found)]

    async def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """State, protocol and members of each group (DescribeGroups at its coordinator); unknown groups are Dead."""
        result = []
        for group_id in group_ids:
            body = {"groups": [group_id], "include_authorized_operations": False}
            coordinator, response = await self._at_coordinator(group_id, ApiKey.DESCRIBE_GROUPS, body)
            group = response.groups[0]
            state = group.group_state
            if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                described = await self._describe_consumer_group(group_id)
                if described is not None:
                    result.append(described)
                    continue
                state = "Dead"
            elif group.error_code != ErrorCode.NONE:
                raise kafka_error(group.error_code, getattr(group, "error_message", None), f"describe {group_id!r}")
            consumer = group.protocol_type in ("consumer", "")
            members = tuple(
                MemberDescription(
                    m.member_id,
                    getattr(m, "group_instance_id", None),
                    m.client_id,
                    m.client_host,
                    _assignment(m.member_assignment) if consumer else (),
                )
                for m in group.members
            )
            result.append(
                GroupDescription(group_id, state, group.protocol_type, group.protocol_data, members, coordinator)
            )
        return result

    async def _describe_consumer_group(self, group_id: str) -> GroupDescription | None:
        """A KIP-848 consumer group (ConsumerGroupDescribe), or None when the coordinator knows no such group or does
        not serve the API. Its protocol is the server-side assignor; assignments are the members' current ones."""
        body = {"group_ids": [group_id], "include_authorized_operations": False}
        try:
            coordinator, response = await self._at_coordinator(group_id, ApiKey.CONSUMER_GROUP_DESCRIBE, body)
        except UnsupportedVersionError:
            return None
        group = response.groups[0]
        if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if group.error_code != ErrorCode.NONE:
            raise kafka_error(group.error_code, group.error_message, f"describe {group_id!r}")
        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                tuple(TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
            )
            for m in group.members
        )
        return GroupDescription(group_id, group.group_state, "consumer", group.assignor_name, members, coordinator)

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of the group (OffsetFetch; None: every partition it committed); -1 entries omitted."""
        topics = None if partitions is None else _by_topic(partitions, "partition_indexes")
        body = {
            "group_id": group_id,
            "topics": topics,
            "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": topics}],
            "require_stable": False,
        }
        response = await self._to_coordinator(group_id, ApiKey.OFFSET_FETCH, body)
        group = response.groups[0] if getattr(response, "groups", None) else response
        result = {}
        for topic in group.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, int(part.partition_index))
                if part.error_code != ErrorCode.NONE:
                    raise kafka_error(part.error_code, None, f"fetch offset of {tp} for group {group_id!r}")
                if part.committed_offset >= 0:
                    result[tp] = int(part.committed_offset)
        return result

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for the group as an admin does (generation -1, no member): the group must be empty,
        else the coordinator's error (e.g. UNKNOWN_MEMBER_ID) is raised."""
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, offset in offsets.items():
            by_topic[tp.topic].append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "commit_timestamp": -1,
                    "committed_metadata": "",
                }
            )
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        response = await self._to_coordinator(group_id, ApiKey.OFFSET_COMMIT, body)
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != ErrorCode.NONE:
                    tp = TopicPartition(topic.name, int(part.partition_index))
                    raise kafka_error(part.error_code, None, f"commit offset of {tp} for group {group_id!r}")

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """Delete each group at its coordinator (DeleteGroups); the outcome is per group (NON_EMPTY_GROUP, ...)."""
        result = {}
        for group_id in group_ids:
            response = await self._to_coordinator(group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]})
            for entry in response.results:
                result[entry.group_id] = ErrorCode(entry.error_code)
        return result

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Delete the group's committed offsets of ``partitions`` (OffsetDelete); the outcome is per partition."""
        body = {"group_id": group_id, "topics": _by_topic(partitions, "partitions", "partition_index")}
        response = await self._to_coordinator(group_id, ApiKey.OFFSET_DELETE, body)
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, None, f"delete offsets of group {group_id!r}")
        return {
            TopicPartition(t.name, int(p.partition_index)): ErrorCode(p.error_code)
            for t in response.topics
            for p in t.partitions
        }

    async def delete_records_each(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, DeletedRecords]:
        """Delete records before ``offsets[tp]`` (-1: the high watermark), partition by partition: one partition's
        error (unknown, beyond the high watermark, ...) is its own outcome and the others are still done. Retriable
        errors are retried after a metadata refresh while retries last."""
        result: dict[TopicPartition, DeletedRecords] = {}
        pending = dict(offsets)
        for attempt in range(self.cluster.retries + 1):
            if attempt:
                await asyncio.sleep(min(self.cluster.retry_backoff_ms * 2 ** (attempt - 1), 1000) / 1000)
                refresh = functools.partial(self.cluster.refresh_metadata, {tp.topic for tp in pending})
                await self.cluster.with_retries(refresh)
            by_leader: dict[int, dict[str, list[dict[str, int]]]] = defaultdict(lambda: defaultdict(list))
            for tp, offset in pending.items():
                try:
                    leader = await self.cluster.leader_for(tp)
                except KafkaError as exc:
                    result[tp] = DeletedRecords(-1, exc.code)
                    continue
                by_leader[leader][tp.topic].append({"partition_index": tp.partition, "offset": offset})
            for leader, topics in by_leader.items():
                body = {
                    "topics": [{"name": n, "partitions": parts} for n, parts in topics.items()],
                    "timeout": self.timeout_ms,
                }
                try:
                    response = await self.cluster.send(leader, ApiKey.DELETE_RECORDS, body)
                except KafkaError as exc:
                    for name, parts in topics.items():
                        for part in parts:
                            result[TopicPartition(name, part["partition_index"])] = DeletedRecords(-1, exc.code)
                    continue
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, int(part.partition_index))
                        result[tp] = DeletedRecords(int(part.low_watermark), ErrorCode(part.error_code))
            pending = {tp: o for tp, o in pending.items() if result[tp].error.retriable}
            if not pending:
                break
        return {tp: result[tp] for tp in offsets}

    async def describe_log_dir_descriptions(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] | None = None
    ) -> dict[int, tuple[LogDirDescription, ...]]:
        """Every log directory of each of ``brokers`` with its error and its replicas (current and future; of
        ``partitions`` only when given)."""
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            topics = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        result: dict[int, tuple[LogDirDescription, ...]] = {}
        for broker in brokers:

            async def attempt(node: int = broker) -> Any:
                if node not in self.cluster.brokers:
                    await self.cluster.refresh_metadata([])
                return await self.cluster.send(node, ApiKey.DESCRIBE_LOG_DIRS, {"topics": topics})

            response = await self.cluster.with_retries(attempt)
            code = getattr(response, "error_code", ErrorCode.NONE)
            if code != ErrorCode.NONE:
                raise kafka_error(code, None, f"describe log dirs of broker {broker}")
            result[broker] = tuple(
                LogDirDescription(
                    d.log_dir,
                    ErrorCode(d.error_code),
                    tuple(
                        (
                            TopicPartition(t.name, int(p.partition_index)),
                            ReplicaLogInfo(d.log_dir, int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)),
                        )
                        for t in d.topics
                        for p in t.partitions
                    ),
                )
                for d in response.results
            )
        return result

    async def broker_api_versions(self) -> dict[BrokerMetadata, dict[int, tuple[int, int]] | KafkaError]:
        """Each broker of the cluster's metadata with the (min, max) versions it advertises per API key (its
        ApiVersions answer), or the error that prevented asking it."""
        await self.cluster.with_retries(lambda: self.cluster.refresh_metadata([]))
        result: dict[BrokerMetadata, dict[int, tuple[int, int]] | KafkaError] = {}
        for node_id in sorted(self.cluster.brokers):
            connection = self.cluster.connection(node_id)
            try:
                await connection.connect()
            except KafkaError as exc:
                result[self.cluster.brokers[node_id]] = exc
                continue
            result[self.cluster.brokers[node_id]] = dict(connection.api_versions)
        return result

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[TopicPartition, int], str]
    ) -> dict[tuple[TopicPartition, int], ErrorCode]:
        """Move the replica of partition ``tp`` on broker ``b`` to log directory ``moves[tp, b]`` of that broker
        (AlterReplicaLogDirs to each broker); the outcome is per replica."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list))
        )
        for (tp, broker), path in moves.items():
            by_broker[broker][path][tp.topic].append(tp.partition)
        result: dict[tuple[TopicPartition, int], ErrorCode] = {}
        for broker, dirs in by_broker.items():
            body = {
                "dirs": [
                    {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                    for path, topics in dirs.items()
                ]
            }

            async def attempt(node: int = broker, request: dict[str, Any] = body) -> Any:
                if node not in self.cluster.brokers:
                    await self.cluster.refresh_metadata([])
                return await self.cluster.send(node, ApiKey.ALTER_REPLICA_LOG_DIRS, request)

            response = await self.cluster.with_retries(attempt)
            for topic in response.results:
                for part in topic.partitions:
                    result[TopicPartition(topic.topic_name, int(part.partition_index)), broker] = ErrorCode(
                        part.error_code
                    )
        return result

    async def describe_client_quotas(
        self, components: Sequence[tuple[str, int, str | None]], strict: bool = False
    ) -> list[ClientQuotaEntry]:
        """DescribeClientQuotas: the entities whose quotas the filter matches; each component is (entity type
        ``user`` or ``client-id``, match type 0 exact / 1 default / 2 any, name for an exact match)."""
        body = {
            "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            "strict": strict,
        }
        response = await self.cluster.with_retries(lambda: self.cluster.send(None, ApiKey.DESCRIBE_CLIENT_QUOTAS, body))
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, "describe client quotas")
        return [
            ClientQuotaEntry(
                {e.entity_type: e.entity_name for e in entry.entity}, {v.key: float(v.value) for v in entry.values}
            )
            for entry in response.entries or ()
        ]

    async def alter_client_quotas(
        self,
        entity: Mapping[str, str | None],
        add: Mapping[str, float],
        remove: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """AlterClientQuotas of one entity (entity type -> name, None for the default): set ``add``, remove
        ``remove``."""
        ops = [{"key": k, "value": float(v), "remove": False} for k, v in add.items()]
        ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
        entry = {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()], "ops": ops}
        body = {"entries": [entry], "validate_only": validate_only}
        response = await self.cluster.with_retries(lambda: self.cluster.send(None, ApiKey.ALTER_CLIENT_QUOTAS, body))
        _raise_for_responses(response.entries, "alter client quotas")

    async def describe_user_scram_credentials(self, users: Sequence[str] = ()) -> list[UserScramCredentials]:
        """DescribeUserScramCredentials of ``users`` (none: every user holding a credential), in the broker's order;
        a failed request raises, a failed user carries its error."""
        body = {"users": [{"name": user} for user in users] or None}
        response = await self.cluster.with_retries(
            lambda: self.cluster.send(None, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
        )
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, "describe user SCRAM credentials")
        described = []
        for result in response.results:
            credentials = []
            for info in result.credential_infos:
                mechanism = mechanism_of_type(int(info.mechanism))
                credentials.append((mechanism.name if mechanism is not None else "UNKNOWN", int(info.iterations)))
            described.append(
                UserScramCredentials(
                    result.user, tuple(credentials), ErrorCode(result.error_code), result.error_message
                )
            )
        return described

    async def alter_user_scram_credentials(
        self, upsertions: Sequence[ScramUpsertion] = (), deletions: Sequence[tuple[str, ScramMechanism]] = ()
    ) -> None:
        """AlterUserScramCredentials: set ``upsertions`` and delete ``deletions`` ((user, mechanism) pairs); the
        first user the broker refused raises."""
        body = {
            "deletions": [{"name": user, "mechanism": mechanism.type} for user, mechanism in deletions],
            "upsertions": [
                {
                    "name": u.user,
                    "mechanism": u.mechanism.type,
                    "iterations": u.iterations,
                    "salt": u.salt,
                    "salted_password": u.salted_password,
                }
                for u in upsertions
            ],
        }
        response = await self.cluster.with_retries(
            lambda: self.cluster.send(None, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
        )
        _raise_for_responses(response.results, "alter user SCRAM credentials")

    async def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the bindings ``binding_filter`` matches (SECURITY_DISABLED without an authorizer)."""
        body = filter_fields(binding_filter)
        response = await self.cluster.with_retries(lambda: self.cluster.send(None, ApiKey.DESCRIBE_ACLS, body))
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, "describe ACLs")
        return [binding_of(r, a) for r in response.resources for a in r.acls]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """CreateAcls; raises the first binding's error."""
        body = {"creations": [binding_fields(b, "resource_pattern_type") for b in bindings]}
        response = await self.cluster.with_retries(lambda: self.cluster.send(None, ApiKey.CREATE_ACLS, body))
        _raise_for_responses(response.results, "create ACLs")

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: per filter, the bindings it removed; raises the first filter's or binding's error."""
        body = {"filters": [filter_fields(f) for f in filters]}
        response = await self.cluster.with_retries(lambda: self.cluster.send(None, ApiKey.DELETE_ACLS, body))
        _raise_for_responses(response.filter_results, "delete ACLs")
        for result in response.filter_results:
            _raise_for_responses(result.matching_acls, "delete ACLs")
        return [[binding_of(m, m) for m in result.matching_acls] for result in response.filter_results]

    async def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> dict[int, list[TransactionListing]]:
        """The transactions of every broker's transaction coordinator (ListTransactions to each), by broker id;
        ``states`` and ``producer_ids`` keep only those matching, ``duration_ms`` >= 0 only those running longer
        (ListTransactions v1: a broker answering only v0 fails the call with UNSUPPORTED_VERSION, as Kafka's admin
        client does). A loading coordinator is asked again; any other error fails the call."""
        await self.cluster.with_retries(lambda: self.cluster.refresh_metadata([]))
        body = {
            "state_filters": list(states),
            "producer_id_filters": list(producer_ids),
            "duration_filter": duration_ms,
        }
        result: dict[int, list[TransactionListing]] = {}
        for node in sorted(self.cluster.brokers):

            async def attempt(node: int = node) -> Any:
                if duration_ms >= 0:
                    connection = self.cluster.connection(node)
                    await connection.connect()
                    if connection.version_for(ApiKey.LIST_TRANSACTIONS) < 1:
                        raise UnsupportedVersionError(
                            "Duration filter can be set only when using API version 1 or higher. If client is "
                            "connected to an older broker, do not specify duration filter or set duration filter "
                            "to -1."
                        )
                response = await self.cluster.send(node, ApiKey.LIST_TRANSACTIONS, body)
                if response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    raise kafka_error(response.error_code, None, f"list transactions of broker {node}")
                return response

            response = await self.cluster.with_retries(attempt)
            sent_to = f"ListTransactions request sent to broker {node} failed"
            if response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                raise exception_for(response.error_code, f"{sent_to} because the coordinator is shutting down")
            if response.error_code != ErrorCode.NONE:
                raise exception_for(response.error_code, f"{sent_to} with an unexpected exception")
            result[node] = [
                TransactionListing(t.transactional_id, int(t.producer_id), t.transaction_state)
                for t in response.transaction_states
            ]
        return result

    async def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription | KafkaError]:
        """Each transactional id's state at its coordinator (FindCoordinator for each id, then one
        DescribeTransactions per coordinator for its ids; ids whose coordinator moved or is loading are looked up
        again and retried), or the error for that id in Kafka's words (TRANSACTIONAL_ID_NOT_FOUND for an id the
        coordinator does not know; the last retried error for ids still unanswered when retries ran out)."""
        wanted = list(dict.fromkeys(transactional_ids))
        result: dict[str, TransactionDescription | KafkaError] = {}

        async def attempt() -> None:
            by_coordinator: dict[int, list[str]] = defaultdict(list)
            for transactional_id in wanted:
                if transactional_id in result:
                    continue
                try:
                    coordinator = await self.find_coordinator(transactional_id, TRANSACTION_KEY)
                except KafkaError as exc:
                    if exc.code.retriable:
                        raise
                    result[transactional_id] = exc
                    continue
                by_coordinator[coordinator.node_id].append(transactional_id)
            retry: KafkaError | None = None
            for node, ids in by_coordinator.items():
                response = await self.cluster.send(node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
                for state in response.transaction_states:
                    if state.transactional_id not in ids:
                        continue
                    if state.error_code in COORDINATOR_MOVED:
                        retry = kafka_error(state.error_code, None, _key_name(state.transactional_id, TRANSACTION_KEY))
                    else:
                        result[state.transactional_id] = _transaction_description(node, state)
                left_out = [i for i in ids if i not in result]
                if left_out and retry is None:
                    retry = KafkaError(
                        f"broker {node} did not describe transactionalId `{left_out[0]}`", ErrorCode.NOT_COORDINATOR
                    )
            if retry is not None:
                raise retry

        try:
            await self.cluster.with_retries(attempt)
        except KafkaError as exc:
            for transactional_id in wanted:
                result.setdefault(transactional_id, exc)
        return {i: result[i] for i in wanted}

    async def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, tuple[ProducerState, ...]]:
        """The active producers of each partition (DescribeProducers to its leader, or to ``broker_id``'s replica).
        A moved leader or an unknown partition is retried after a metadata refresh (NOT_LEADER_OR_FOLLOWER from
        ``broker_id`` fails instead); the first other error fails the call, worded as Kafka's admin client words
        it."""
        wanted = list(dict.fromkeys(partitions))
        result: dict[TopicPartition, tuple[ProducerState, ...]] = {}

        async def attempt() -> KafkaError | None:
            """The error that ends the call, or None; a retriable error is raised."""
            by_broker: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in wanted:
                if tp in result:
                    continue
                if broker_id is None:
                    by_broker[await self.cluster.leader_for(tp)].append(tp)
                else:
                    by_broker[broker_id].append(tp)
            if broker_id is not None and broker_id not in self.cluster.brokers:
                await self.cluster.refresh_metadata([])
            retry: KafkaError | None = None
            for node, tps in by_broker.items():
                body = {"topics": _by_topic(tps, "partition_indexes")}
                response = await self.cluster.send(node, ApiKey.DESCRIBE_PRODUCERS, body)
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, int(part.partition_index))
                        if tp not in tps:
                            continue
                        if part.error_code == ErrorCode.NONE:
                            result[tp] = tuple(_producer_state(p) for p in part.active_producers)
                            continue
                        error, again = _producers_error(tp, ErrorCode(part.error_code), part.error_message, broker_id)
                        if not again:
                            return error
                        retry = error
                for tp in tps:
                    if tp not in result and retry is None:
                        retry = KafkaError(f"broker {node} did not describe the producers of {tp}", code=_RETRY)
            if retry is not None:
                raise retry
            return None

        failed = await self.cluster.with_retries(attempt, {tp.topic for tp in wanted})
        if failed is not None:
            raise failed
        return {tp: result[tp] for tp in wanted}

    async def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        """Write an ABORT marker for the spec's producer id, epoch and coordinator epoch to its partition's leader
        (WriteTxnMarkers), as Kafka's admin client aborts a hanging transaction. A moved leader is looked up again
        and retried; another error fails the call in Kafka's words."""
        tp = spec.topic_partition
        marker = {
            "producer_id": spec.producer_id,
            "producer_epoch": spec.producer_epoch,
            "transaction_result": False,
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
            "coordinator_epoch": spec.coordinator_epoch,
        }

        async def attempt() -> KafkaError | None:
            leader = await self.cluster.leader_for(tp)
            response = await self.cluster.send(leader, ApiKey.WRITE_TXN_MARKERS, {"markers": [marker]})
            return _abort_outcome(spec, response)

        failed = await self.cluster.with_retries(attempt, [tp.topic])
        if failed is not None:
            raise failed


def _group_error(response: Any) -> int:
    """The error a group response reports for the whole group (or its first group entry)."""
    for name in ("groups", "results"):
        entries = getattr(response, name, None)
        if entries:
            return int(entries[0].error_code)
    return int(getattr(response, "error_code", ErrorCode.NONE))


_RETRY = ErrorCode.NOT_LEADER_OR_FOLLOWER
"""The code of an error raised only to look a partition's leader up again and retry."""
_LEADER_MOVED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
"""WriteTxnMarkers errors after which Kafka's admin client looks the leader up again and retries."""


def _transaction_description(coordinator_id: int, state: Any) -> TransactionDescription | KafkaError:
    """A DescribeTransactions entry as a description, or its error in Kafka's words."""
    transactional_id = state.transactional_id
    code = ErrorCode(state.error_code)
    request = f"DescribeTransactions request for transactionalId `{transactional_id}`"
    if code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return exception_for(code, f"{request} failed due to authorization failure")
    if code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return exception_for(code, f"{request} failed because the ID could not be found")
    if code != ErrorCode.NONE:
        return exception_for(code, f"{request} failed due to unexpected error")
    start = state.transaction_start_time
    return TransactionDescription(
        coordinator_id,
        transactional_id,
        state.transaction_state,
        int(state.producer_id),
        int(state.producer_epoch),
        round(state.transaction_timeout.total_seconds() * 1000),
        None if start is None else round(start.timestamp() * 1000),
        frozenset(TopicPartition(t.topic, int(p)) for t in state.topics for p in t.partitions),
    )


def _producer_state(state: Any) -> ProducerState:
    coordinator_epoch, start_offset = int(state.coordinator_epoch), int(state.current_txn_start_offset)
    return ProducerState(
        int(state.producer_id),
        int(state.producer_epoch),
        int(state.last_sequence),
        int(state.last_timestamp),
        None if coordinator_epoch < 0 else coordinator_epoch,
        None if start_offset < 0 else start_offset,
    )


def _producers_error(
    tp: TopicPartition, code: ErrorCode, message: str | None, broker_id: int | None
) -> tuple[KafkaError, bool]:
    """DescribeProducers' error for one partition as Kafka's admin client words it, and whether to ask again (a
    moved leader, an unknown partition; NOT_LEADER_OR_FOLLOWER from a chosen broker is final)."""
    failed = f"Failed to describe active producers for partition {tp}"
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and broker_id is not None:
        return exception_for(code, f"{failed} on brokerId {broker_id}"), False
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return exception_for(code, message or f"{failed}: {code.name}"), True
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        detail = message or code.name
        return exception_for(
            code, f"Failed to fetch metadata for partition {tp} due to invalid topic error: {detail}"
        ), False
    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return exception_for(code, f"{failed} due to authorization failure on topic `{tp.topic}`"), False
    return exception_for(code, f"{failed} due to unexpected error"), False


def _abort_outcome(spec: AbortTransactionSpec, response: Any) -> KafkaError | None:
    """The error of a WriteTxnMarkers answer to ``spec``'s ABORT marker in Kafka's words, or None when it was
    written; a moved leader (or a leader not yet known) is raised to retry."""
    tp = spec.topic_partition
    unexpected = "WriteTxnMarkers response included unexpected"
    markers = response.markers
    if len(markers) != 1 or markers[0].producer_id != spec.producer_id:
        return KafkaError(f"{unexpected} marker entries (expected exactly one with producerId {spec.producer_id})")
    topics = markers[0].topics
    if len(topics) != 1 or topics[0].name != tp.topic:
        return KafkaError(f"{unexpected} topic entries (expected exactly one with topic partition {tp})")
    partitions = topics[0].partitions
    if len(partitions) != 1 or partitions[0].partition_index != tp.partition:
        return KafkaError(
            f"{unexpected} partition entries for topic {tp.topic} (expected exactly one with partition {tp.partition})"
        )
    code = ErrorCode(partitions[0].error_code)
    request = f"WriteTxnMarkers request with {spec}"
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return exception_for(code, f"{request} failed due to cluster authorization error")
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return exception_for(code, f"{request} failed due an invalid producer epoch")
    if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        return exception_for(
            code,
            f"{request} failed since the provided coordinator epoch {spec.coordinator_epoch} has been fenced by the "
            "active coordinator",
        )
    if code in _LEADER_MOVED:
        raise KafkaError(f"{request} failed due to {code.name}", _RETRY)
    return exception_for(code, f"{request} failed due to unexpected error: {code.name}")


def _key_name(key: str, key_type: int) -> str:
    return f"transactional id {key!r}" if key_type == TRANSACTION_KEY else f"group {key!r}"


def _assignment(data: bytes) -> tuple[TopicPartition, ...]:
    try:
        return decode_assignment(data).partitions
    except ConsumerProtocolError:
        return ()


def _by_topic(
    partitions: Iterable[TopicPartition], field_name: str, index_name: str | None = None
) -> list[dict[str, Any]]:
    """``[{"name": t, field_name: [p, ...]}]`` (or ``[{index_name: p}, ...]`` when ``index_name`` is given)."""
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition if index_name is None else {index_name: tp.partition})
    return [{"name": t, field_name: ps} for t, ps in by_topic.items()]


def _raise_for_responses(responses: Iterable[Any], context: str) -> None:
    for response in responses:
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, context)
