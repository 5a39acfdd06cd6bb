"""Typed reads and writes of ``/consumers``: the groups of ZooKeeper-coordinated consumers (Kafka 0.8's design).

``/consumers/<g>/ids/<consumer id>`` (ephemeral) holds a ``ConsumerRegistration``; ``/consumers/<g>/owners/<t>/<p>``
(ephemeral) the consumer *thread* id owning the partition; ``/consumers/<g>/offsets/<t>/<p>`` (persistent) the
next offset to consume as decimal text. Used by the consumer, the offset tools and the group listings alike.

A registration subscribes to topics by name (``static``) or, as Kafka 0.8's ``createMessageStreamsByFilter``, to
one regular expression (``white_list``: the topics it matches, ``black_list``: the others); a wildcard subscription
stands for the matching children of ``/brokers/topics`` at the time it is read, each with the registered streams.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from mq.topic_partition import TopicFilter, TopicPartition
from mq.zk import paths
from mq.zk.codecs import ConsumerRegistration
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import MetadataStore, NodeExistsError, NoNodeError


class ConsumerIdTakenError(Exception):
    """A consumer id is already registered in its group."""


def registration_filter(registration: ConsumerRegistration) -> TopicFilter | None:
    """The topic filter of a wildcard registration (its one regex), None for a static one (Kafka reads a pattern
    other than ``white_list``/``black_list``, or an empty subscription, as static)."""
    if registration.pattern not in ("white_list", "black_list") or not registration.subscription:
        return None
    regex = next(iter(registration.subscription))
    return TopicFilter(regex, blacklist=registration.pattern == "black_list")


def topic_streams(
    registration: ConsumerRegistration, topics: Sequence[str], exclude_internal: bool = True
) -> dict[str, int]:
    """Streams per topic a registration stands for: a static one as written, a wildcard one its streams for each
    of ``topics`` (the existing topics) its filter allows (Kafka's ``WildcardTopicCount``)."""
    topic_filter = registration_filter(registration)
    if topic_filter is None:
        return dict(registration.subscription)
    streams = next(iter(registration.subscription.values()))
    return {topic: streams for topic in sorted(topics) if topic_filter.allows(topic, exclude_internal)}


class ZkConsumerGroups:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def _children(self, path: str) -> list[str]:
        try:
            return self.store.get_children(path)
        except NoNodeError:
            return []

    def groups(self) -> list[str]:
        """Every group with a node under ``/consumers``, sorted."""
        return self._children(paths.CONSUMERS)

    def exists(self, group: str) -> bool:
        return self.store.exists(paths.consumer_group(group)) is not None

    # --- members -------------------------------------------------------------------------------------------------

    def register(self, group: str, consumer_id: str, registration: ConsumerRegistration) -> None:
        """Create the ephemeral registration; ConsumerIdTakenError when the id is registered already."""
        path = paths.consumer_registration(group, consumer_id)
        try:
            self.store.create(path, registration.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            raise ConsumerIdTakenError(
                f"Consumer id {consumer_id} is already registered in group {group} ({path} exists): each consumer "
                "of a group needs its own consumer.id"
            ) from None

    def consumer_ids(self, group: str) -> list[str]:
        return self._children(paths.consumer_ids(group))

    def registrations(self, group: str) -> dict[str, ConsumerRegistration]:
        """Registered consumers whose data is readable (one that left meanwhile is skipped)."""
        found: dict[str, ConsumerRegistration] = {}
        for consumer_id in self.consumer_ids(group):
            data = self.store.get_or_none(paths.consumer_registration(group, consumer_id))
            if data is not None:
                found[consumer_id] = ConsumerRegistration.decode(data)
        return found

    def subscriptions(self, group: str, exclude_internal: bool = True) -> dict[str, dict[str, int]]:
        """Streams per topic of every registered consumer, wildcard registrations applied to the existing topics."""
        topics = KafkaZkClient(self.store).get_all_topics()
        return {cid: topic_streams(r, topics, exclude_internal) for cid, r in self.registrations(group).items()}

    # --- owners --------------------------------------------------------------------------------------------------

    def owner(self, group: str, tp: TopicPartition) -> str | None:
        data = self.store.get_or_none(paths.consumer_owner(group, tp.topic, tp.partition))
        return None if data is None else data.decode("utf-8")

    def owned_topics(self, group: str) -> list[str]:
        return self._children(paths.consumer_owners(group))

    def owners(self, group: str) -> dict[TopicPartition, str]:
        found: dict[TopicPartition, str] = {}
        for topic in self.owned_topics(group):
            for child in self._children(paths.consumer_owners(group, topic)):
                owner = self.owner(group, TopicPartition(topic, int(child)))
                if owner is not None:
                    found[TopicPartition(topic, int(child))] = owner
        return found

    def claim(self, group: str, tp: TopicPartition, thread_id: str) -> bool:
        """Create the ephemeral owner node; False when another thread owns ``tp`` (owning it already counts)."""
        path = paths.consumer_owner(group, tp.topic, tp.partition)
        try:
            self.store.create(path, thread_id.encode("utf-8"), ephemeral=True, makepath=True)
        except NodeExistsError:
            return self.owner(group, tp) == thread_id
        return True

    def release(self, group: str, tp: TopicPartition) -> None:
        with contextlib.suppress(NoNodeError):
            self.store.delete(paths.consumer_owner(group, tp.topic, tp.partition))

    # --- offsets -------------------------------------------------------------------------------------------------

    def offset(self, group: str, tp: TopicPartition) -> int | None:
        data = self.store.get_or_none(paths.consumer_offset(group, tp.topic, tp.partition))
        if data is None or not data.strip():
            return None
        return int(data)

    def offset_topics(self, group: str) -> list[str]:
        return self._children(paths.consumer_offsets(group))

    def offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (nodes without data are skipped), sorted by topic and partition."""
        found: dict[TopicPartition, int] = {}
        for topic in self.offset_topics(group):
            for child in sorted(self._children(paths.consumer_offsets(group, topic)), key=int):
                offset = self.offset(group, TopicPartition(topic, int(child)))
                if offset is not None:
                    found[TopicPartition(topic, int(child))] = offset
        return found

    def set_offset_path(self, path: str, offset: int) -> None:
        """Write ``offset`` into ``path``, creating it and its parents when missing (an unconditional set)."""
        data = str(offset).encode("ascii")
        try:
            self.store.set(path, data)
        except NoNodeError:
            try:
                self.store.create(path, data, makepath=True)
            except NodeExistsError:
                self.store.set(path, data)

    def set_offset(self, group: str, tp: TopicPartition, offset: int) -> None:
        self.set_offset_path(paths.consumer_offset(group, tp.topic, tp.partition), offset)

    def delete_offsets(self, group: str) -> None:
        with contextlib.suppress(NoNodeError):
            self.store.delete(paths.consumer_offsets(group), recursive=True)

    def delete_group(self, group: str) -> None:
        with contextlib.suppress(NoNodeError):
            self.store.delete(paths.consumer_group(group), recursive=True)
