"""Znode paths of Kafka's ZooKeeper-era metadata tree, the metadata model of mq in both modes."""

from __future__ import annotations

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
CONFIG_TOPICS = "/config/topics"
CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "/log_dir_event_notification/log_dir_event_"
CLUSTER_ID = "/cluster/id"
CONSUMERS = "/consumers"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    CONFIG_BROKERS,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
)
"""Created at broker start-up when missing, as Kafka's brokers do."""


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def partition(name: str, partition_id: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition_id}"


def partition_state(name: str, partition_id: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition_id}/state"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def entity_config(entity_type: str, name: str) -> str:
    """``/config/<entity_type>/<name>`` for topics, clients, users or brokers."""
    return f"{CONFIG}/{entity_type}/{name}"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def consumer_offset(group: str, name: str, partition_id: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{name}/{partition_id}"


def consumer_group(group: str) -> str:
    return f"{CONSUMERS}/{group}"


def consumer_ids(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def consumer_registration(group: str, consumer_id: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer_id}"


def consumer_offsets(group: str, name: str | None = None) -> str:
    """``/consumers/<group>/offsets``, or the topic's directory under it."""
    return f"{CONSUMERS}/{group}/offsets" + ("" if name is None else f"/{name}")


def consumer_owners(group: str, name: str | None = None) -> str:
    """``/consumers/<group>/owners``, or the topic's directory under it."""
    return f"{CONSUMERS}/{group}/owners" + ("" if name is None else f"/{name}")


def consumer_owner(group: str, name: str, partition_id: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{name}/{partition_id}"
