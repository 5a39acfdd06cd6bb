"""The broker's view of the cluster: live brokers and every partition's leader, epoch, replicas and ISR.

It is fed the way Kafka's ZK-era brokers were fed: by UpdateMetadata from the controller (in standalone mode the
controller runs in the same process and calls ``update`` directly). Handlers answer Metadata from it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from mq.topic_partition import TopicPartition


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker: ``host`` and ``port`` of its inter-broker listener, and ``listeners`` (name, host, port) of every
    listener it registered (empty: it is known by that one address)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()

    def on(self, listener: str) -> BrokerEndpoint | None:
        """This broker as a client of ``listener`` reaches it; None when it has no such listener."""
        if not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return replace(self, host=host, port=port)
        return None


@dataclass(frozen=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass
class TopicInfo:
    name: str
    topic_id: str | None
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)

    @property
    def topic_uuid(self) -> uuid.UUID | None:
        """The topic id as a UUID (the wire form); ids are stored as unpadded URL-safe base64."""
        if self.topic_id is None:
            return None
        return uuid.UUID(bytes=base64.urlsafe_b64decode(self.topic_id + "=="))


class MetadataCache:
    def __init__(self, broker_id: int, cluster_id: str) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller_id = -1
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicInfo] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}
        self._changed: asyncio.Event | None = None
        self.topic_removed_listener: Callable[[str], None] | None = None
        """Told the name of each deleted topic: the group coordinator drops the offsets committed for it."""
        self.local_replica_offline: Callable[[TopicPartition], bool] = lambda tp: False
        """Whether this broker's replica of a partition is in an offline log dir (the replica manager answers)."""

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` holds after some update, at most ``timeout_s``; returns whether it holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            if self._changed is None:
                self._changed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    def brokers_on(self, listener: str) -> list[BrokerEndpoint]:
        """The live brokers by id as clients of ``listener`` reach them (those without it left out)."""
        found = (b.on(listener) for _, b in sorted(self.brokers.items()))
        return [b for b in found if b is not None]

    def update_brokers(self, brokers: Iterable[BrokerEndpoint], controller_id: int) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id
        self._notify()

    def update_partition(self, topic: str, topic_id: str | None, partition: int, info: PartitionInfo) -> None:
        entry = self.topics.get(topic)
        if entry is None:
            entry = self.topics[topic] = TopicInfo(topic, topic_id)
        elif entry.topic_id is None:
            entry.topic_id = topic_id
        known = entry.topic_uuid
        if known is not None:
            self._names_by_id[known] = topic
        entry.partitions[partition] = info
        self._notify()

    def remove_topic(self, topic: str) -> None:
        entry = self.topics.pop(topic, None)
        if entry is not None:
            known = entry.topic_uuid
            if known is not None and self._names_by_id.get(known) == topic:
                del self._names_by_id[known]
            if self.topic_removed_listener is not None:
                self.topic_removed_listener(topic)
        self._notify()

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic whose id is ``topic_id``; None when no known topic has it."""
        return self._names_by_id.get(topic_id)

    def current_leader(self, tp: TopicPartition, listener: str) -> tuple[tuple[int, int], BrokerEndpoint | None]:
        """KIP-951's current leader of ``tp``: (leader id, leader epoch), (-1, -1) for an unknown partition, and the
        leader as clients of ``listener`` reach it (None when it is not live there)."""
        info = self.partition(tp)
        if info is None:
            return (-1, -1), None
        broker = self.brokers.get(info.leader)
        return (info.leader, info.leader_epoch), None if broker is None else broker.on(listener)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def contains(self, topic: str) -> bool:
        return topic in self.topics
