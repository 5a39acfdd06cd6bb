"""Asyncio admin client: topics, partitions, configs, offsets, records deletion, leader election, cluster.

Each method sends one request kind (to the controller where Kafka routes it there), retries retriable errors after a
metadata refresh, and returns dataclasses. A failed topic or resource raises ``KafkaError`` carrying the wire code
and the broker's error message when it sent one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from mq.client.cluster import BrokerMetadata, Cluster, TopicMetadata, kafka_error, topic_id_string
from mq.client.connection import DEFAULT_CLIENT_ID
from mq.client.consumer import ISOLATION_LEVELS, list_offsets
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.topic_partition import TopicPartition


class ResourceType(IntEnum):
    TOPIC = 2
    BROKER = 4


class AlterOp(IntEnum):
    """IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


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
    """Kafka's ConfigSource: 1 topic, 4 static broker, 5 default, ..."""
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
    """How far the replica's log end is behind the partition's high watermark."""


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerMetadata, ...]


class AsyncAdmin:
    """Admin operations over one ``Cluster`` (created from ``bootstrap_servers`` unless given)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        cluster: Cluster | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self._owns_cluster = cluster is None
        if cluster is None:
            if bootstrap_servers is None:
                raise ValueError("bootstrap_servers or cluster is required")
            cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms)
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
        topics = await self.cluster.with_retries(lambda: self.cluster.refresh_metadata(wanted))
        for topic in topics.values():
            if topic.error != ErrorCode.NONE:
                raise kafka_error(topic.error, None, f"topic {topic.name!r}")
        return [topics[name] for name in (wanted if wanted is not None else sorted(topics))]

    async def describe_cluster(self) -> ClusterDescription:
        async def attempt() -> Any:
            return await self.cluster.send(
                None, ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
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
        changes: Mapping[str, tuple[AlterOp, str | None]],
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
        """Broker resources go to that broker (empty name: any broker); topic resources to any broker."""

        async def attempt() -> Any:
            node = int(name) if resource_type == ResourceType.BROKER and name else None
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
        body = {"timeout": self.timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
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
        """The replicas (of ``partitions``; None: all) each of ``brokers`` holds, with their directory and size."""
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in partitions:
                by_topic[tp.topic].append(tp.partition)
            topics = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        result: dict[int, dict[TopicPartition, ReplicaLogInfo]] = {}
        for broker in brokers:

            async def attempt(node: int = broker) -> Any:
                if node not in self.cluster.brokers:
                    await self.cluster.refresh_metadata([])
                return await self.cluster.send(node, ApiKey.DESCRIBE_LOG_DIRS, {"topics": topics})

            response = await self.cluster.with_retries(attempt)
            code = getattr(response, "error_code", ErrorCode.NONE)
            if code != ErrorCode.NONE:
                raise kafka_error(code, None, f"describe log dirs of broker {broker}")
            result[broker] = {
                TopicPartition(t.name, int(p.partition_index)): ReplicaLogInfo(
                    d.log_dir, int(p.partition_size), int(p.offset_lag)
                )
                for d in response.results
                if d.error_code == ErrorCode.NONE
                for t in d.topics
                for p in t.partitions
            }
        return result


def _raise_for_responses(responses: Iterable[Any], context: str) -> None:
    for response in responses:
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message, context)
