"""Typed reads and writes of the metadata tree, on any MetadataStore backend.

This layer knows paths and JSON, not policy: validation of admin requests lives in ``admin_zk_client``.
"""

from __future__ import annotations

import contextlib

from mq.zk import paths
from mq.zk.codecs import (
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
    decode_cluster_id,
    decode_entity_config,
    decode_reassignment,
    encode_cluster_id,
    encode_config_change,
    encode_entity_config,
    encode_log_dir_event,
    encode_reassignment,
    new_topic_id,
)
from mq.zk.store import MetadataStore, NodeExistsError, NoNodeError


class KafkaZkClient:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def create_top_level_paths(self) -> None:
        for path in paths.PERSISTENT_PATHS:
            self.store.ensure_path(path)

    # --- cluster and brokers -----------------------------------------------------------------------------------

    def get_or_create_cluster_id(self) -> str:
        data = self.store.get_or_none(paths.CLUSTER_ID)
        if data is not None:
            return decode_cluster_id(data)
        cluster_id = new_topic_id()
        try:
            self.store.create(paths.CLUSTER_ID, encode_cluster_id(cluster_id), makepath=True)
        except NodeExistsError:
            return decode_cluster_id(self.store.get(paths.CLUSTER_ID)[0])
        return cluster_id

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch (its czxid)."""
        path = paths.broker(registration.broker_id)
        try:
            self.store.create(path, registration.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            raise NodeExistsError(
                f"A broker is already registered on the path {path}. This probably indicates that you either have "
                "configured a brokerid that is already in use, or else you have shutdown this broker and restarted it "
                "faster than the zookeeper timeout so it appears to be re-registering."
            ) from None
        return self.store.get(path)[1].czxid

    def update_broker_info(self, registration: BrokerRegistration) -> None:
        """Rewrite this broker's own ``/brokers/ids/<id>`` (new advertised endpoints); it stays ephemeral."""
        self.store.set(paths.broker(registration.broker_id), registration.encode())

    def get_all_brokers(self) -> dict[int, BrokerRegistration]:
        brokers: dict[int, BrokerRegistration] = {}
        with contextlib.suppress(NoNodeError):
            for child in self.store.get_children(paths.BROKER_IDS):
                data = self.store.get_or_none(paths.broker(int(child)))
                if data is not None:
                    brokers[int(child)] = BrokerRegistration.decode(int(child), data)
        return brokers

    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the registered brokers' first endpoints (empty when none is registered)."""
        endpoints = [r.host_port() for r in self.get_all_brokers().values()]
        return ",".join(f"{host}:{port}" for host, port in filter(None, endpoints))

    # --- topics ------------------------------------------------------------------------------------------------

    def get_all_topics(self) -> list[str]:
        try:
            return self.store.get_children(paths.BROKER_TOPICS)
        except NoNodeError:
            return []

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        data = self.store.get_or_none(paths.topic(topic))
        return None if data is None else TopicAssignment.decode(data)

    def create_topic(self, topic: str, assignment: TopicAssignment, config: dict[str, str]) -> None:
        """Write ``/config/topics/T`` then ``/brokers/topics/T`` (Kafka's order); NodeExistsError if T exists."""
        if assignment.topic_id is None:
            assignment.topic_id = new_topic_id()
        self.set_entity_config("topics", topic, config, notify=False)
        self.store.create(paths.topic(topic), assignment.encode(), makepath=True)

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment, version: int = -1) -> None:
        self.store.set(paths.topic(topic), assignment.encode(), version)

    def delete_topic_nodes(self, topic: str) -> None:
        """Remove the topic's assignment, partition states, config and deletion marker."""
        for path in (paths.topic(topic), paths.topic_config(topic), paths.delete_topic(topic)):
            with contextlib.suppress(NoNodeError):
                self.store.delete(path, recursive=True)

    def mark_topic_for_deletion(self, topic: str) -> bool:
        """Create ``/admin/delete_topics/T``; False when the marker was already there."""
        try:
            self.store.create(paths.delete_topic(topic), makepath=True)
        except NodeExistsError:
            return False
        return True

    def get_topics_marked_for_deletion(self) -> list[str]:
        try:
            return self.store.get_children(paths.DELETE_TOPICS)
        except NoNodeError:
            return []

    # --- reassignment -------------------------------------------------------------------------------------------

    def get_partition_reassignment(self) -> list[tuple[str, int, list[int]]] | None:
        """The moves in ``/admin/reassign_partitions``, or None when no reassignment is pending."""
        data = self.store.get_or_none(paths.REASSIGN_PARTITIONS)
        return None if data is None else decode_reassignment(data)

    def create_partition_reassignment(self, moves: list[tuple[str, int, list[int]]]) -> None:
        """Create ``/admin/reassign_partitions``; NodeExistsError while one is pending."""
        self.store.create(paths.REASSIGN_PARTITIONS, encode_reassignment(moves), makepath=True)

    # --- partition state ---------------------------------------------------------------------------------------

    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int] | None:
        """The state znode and its version, or None when the controller has not created it."""
        try:
            data, stat = self.store.get(paths.partition_state(topic, partition))
        except NoNodeError:
            return None
        return PartitionState.decode(data), stat.version

    def create_partition_state(self, topic: str, partition: int, state: PartitionState) -> None:
        self.store.create(paths.partition_state(topic, partition), state.encode(), makepath=True)

    def set_partition_state(self, topic: str, partition: int, state: PartitionState, version: int) -> int:
        """Conditional write; BadVersionError if someone else wrote since ``version``. Returns the new version."""
        return self.store.set(paths.partition_state(topic, partition), state.encode(), version).version

    # --- configs -----------------------------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        data = self.store.get_or_none(paths.entity_config(entity_type, name))
        return {} if data is None else decode_entity_config(data)

    def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        try:
            names = self.store.get_children(f"{paths.CONFIG}/{entity_type}")
        except NoNodeError:
            return {}
        return {name: self.get_entity_config(entity_type, name) for name in names}

    def set_entity_config(self, entity_type: str, name: str, config: dict[str, str], *, notify: bool = True) -> None:
        """Write ``/config/<type>/<name>`` and, when ``notify``, a ``/config/changes`` notification."""
        path = paths.entity_config(entity_type, name)
        data = encode_entity_config(config)
        try:
            self.store.set(path, data)
        except NoNodeError:
            self.store.create(path, data, makepath=True)
        if notify:
            self.store.create(
                paths.CONFIG_CHANGE_PREFIX, encode_config_change(f"{entity_type}/{name}"), sequence=True, makepath=True
            )

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller a log dir of ``broker_id`` failed (it re-elects leaders of the replicas there)."""
        self.store.create(paths.LOG_DIR_EVENT_PREFIX, encode_log_dir_event(broker_id), sequence=True, makepath=True)
