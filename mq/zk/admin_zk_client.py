"""Validated admin operations on the metadata tree: what CreateTopics, CreatePartitions, DeleteTopics and
AlterConfigs do on a broker, and what ``mq topics --zookeeper`` does directly. Messages follow Kafka's wording.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from mq.config import DynamicBrokerConfig, TopicConfig
from mq.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from mq.topic_partition import INTERNAL_TOPICS, topic_name_error
from mq.zk.assignment import AssignmentError, assign_replicas
from mq.zk.codecs import TopicAssignment
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import NodeExistsError


def _metric_name(topic: str) -> str:
    return topic.replace(".", "_")


DEFAULT_BROKER_ENTITY = "<default>"
"""Entity name of the cluster-wide dynamic broker config, ``/config/brokers/<default>``."""


def broker_entity(broker_id: int | None) -> str:
    """The ``/config/brokers`` child for one broker, or for the cluster default when ``broker_id`` is None."""
    return DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)


class AdminZkClient:
    def __init__(self, zk: KafkaZkClient, rng: random.Random | None = None) -> None:
        self.zk = zk
        self._rng = rng or random.Random()

    def validate_topic_config(self, config: Mapping[str, str]) -> None:
        """Raises ConfigError (INVALID_CONFIG) for an unknown topic config name or an ill-typed value."""
        TopicConfig().with_overrides(config, source="the request")

    def _validate_new_topic(self, topic: str) -> None:
        error = topic_name_error(topic)
        if error is not None:
            raise InvalidTopicError(error)
        existing = self.zk.get_all_topics()
        if topic in existing:
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        collisions = [t for t in existing if _metric_name(t) == _metric_name(topic)]
        if collisions:
            raise InvalidTopicError(f"Topic '{topic}' collides with existing topics: {', '.join(collisions)}")

    def assignment_for(
        self, partitions: int, replication_factor: int, *, start_partition: int = 0, start_index: int = -1
    ) -> dict[int, list[int]]:
        """Automatic assignment over the registered brokers (rack-aware when every broker has a rack)."""
        brokers = self.zk.get_all_brokers()
        racks = {b: r.rack for b, r in brokers.items() if r.rack is not None}
        try:
            return assign_replicas(
                sorted(brokers),
                partitions,
                replication_factor,
                racks=racks if len(racks) == len(brokers) else None,
                start_index=start_index,
                start_partition=start_partition,
                rng=self._rng,
            )
        except AssignmentError as exc:
            if partitions <= 0:
                raise InvalidPartitionsError(str(exc)) from None
            raise InvalidReplicationFactorError(str(exc)) from None

    @staticmethod
    def validate_manual_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
        """Partitions numbered 0..n-1, one replication factor, no broker twice in a list."""
        if sorted(assignment) != list(range(len(assignment))):
            raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")
        factors = {len(r) for r in assignment.values()}
        for partition, replicas in sorted(assignment.items()):
            if not replicas:
                raise InvalidReplicaAssignmentError(f"Partition {partition} has no replicas")
            if len(set(replicas)) != len(replicas):
                duplicates = sorted({b for b in replicas if list(replicas).count(b) > 1})
                raise InvalidReplicaAssignmentError(
                    f"Partition replica lists may not contain duplicate entries: {','.join(map(str, duplicates))}"
                )
            if len(factors) > 1 and len(replicas) != len(assignment[0]):
                raise InvalidReplicaAssignmentError(
                    f"Partition {partition} has different replication factor: {','.join(map(str, replicas))}"
                )

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str] | None = None,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Validate and (unless ``validate_only``) write a new topic; returns its assignment."""
        config = dict(config or {})
        self._validate_new_topic(topic)
        self.validate_topic_config(config)
        if replica_assignment:
            self.validate_manual_assignment(replica_assignment)
            assignment = {p: list(r) for p, r in replica_assignment.items()}
        else:
            if partitions <= 0:
                raise InvalidPartitionsError("Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
            assignment = self.assignment_for(partitions, replication_factor)
        if not validate_only:
            try:
                self.zk.create_topic(topic, TopicAssignment(assignment), config)
            except NodeExistsError:
                raise TopicExistsError(f"Topic '{topic}' already exists.") from None
        return assignment

    def add_partitions(
        self,
        topic: str,
        total: int,
        replica_assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> dict[int, list[int]]:
        """Grow ``topic`` to ``total`` partitions; ``replica_assignment`` lists only the new partitions."""
        current = self.zk.get_topic_assignment(topic)
        if current is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        existing = len(current.partitions)
        if topic in INTERNAL_TOPICS:
            raise InvalidPartitionsError(f"The number of partitions for the internal topic {topic} cannot be changed.")
        if total <= existing:
            raise InvalidPartitionsError(
                f"Topic currently has {existing} partitions, which is higher than the requested {total}."
                if total < existing
                else f"Topic already has {existing} partitions."
            )
        factor = len(current.partitions[0])
        if replica_assignment:
            if len(replica_assignment) != total - existing:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {total - existing} but {len(replica_assignment)} "
                    "assignments provided."
                )
            added = {existing + i: list(r) for i, r in enumerate(replica_assignment)}
            live = set(self.zk.get_all_brokers())
            for partition, replicas in added.items():
                if len(replicas) != factor:
                    raise InvalidReplicaAssignmentError(
                        f"Partition {partition} has different replication factor: {','.join(map(str, replicas))}"
                    )
                unknown = sorted(set(replicas) - live)
                if unknown:
                    raise InvalidReplicaAssignmentError(
                        f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
                    )
        else:
            brokers = sorted(self.zk.get_all_brokers())
            first = current.partitions[0][0]
            start = brokers.index(first) if first in brokers else -1
            added = self.assignment_for(total - existing, factor, start_partition=existing, start_index=start)
        if not validate_only:
            current.partitions.update(added)
            self.zk.set_topic_assignment(topic, current)
        return added

    def delete_topic(self, topic: str) -> bool:
        """Mark ``topic`` for deletion; False if it was already marked."""
        if topic in INTERNAL_TOPICS:
            raise InvalidTopicError(
                f"Topic {topic} is a kafka internal topic and is not allowed to be marked for deletion."
            )
        if self.zk.get_topic_assignment(topic) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        return self.zk.mark_topic_for_deletion(topic)

    def change_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace ``topic``'s overrides with ``config`` and notify every broker."""
        if self.zk.get_topic_assignment(topic) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        self.validate_topic_config(config)
        self.zk.set_entity_config("topics", topic, dict(config))

    def validate_broker_config(self, config: Mapping[str, str], per_broker: bool) -> None:
        """Raises KafkaError INVALID_REQUEST for a key that cannot change at runtime (or only per broker, when not
        ``per_broker``), ConfigError (INVALID_CONFIG) for an unknown key or an ill-typed value."""
        DynamicBrokerConfig.validate(config, per_broker)

    def dynamic_broker_configs(self, broker_id: int) -> tuple[dict[str, str], dict[str, str]]:
        """``/config/brokers/<broker_id>`` and ``/config/brokers/<default>``."""
        entity_config = self.zk.get_entity_config
        return entity_config("brokers", str(broker_id)), entity_config("brokers", DEFAULT_BROKER_ENTITY)

    def change_broker_config(self, broker_id: int | None, config: Mapping[str, str]) -> None:
        """Replace the dynamic config of broker ``broker_id`` (None: the cluster default) and notify every broker."""
        self.validate_broker_config(config, per_broker=broker_id is not None)
        self.zk.set_entity_config("brokers", broker_entity(broker_id), dict(config))
