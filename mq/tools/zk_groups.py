"""ZooKeeper-coordinated consumer groups (``/consumers``) seen through the consumer group tools' ``GroupAdmin``.

A group is described from ZooKeeper: one member per consumer thread that owns partitions (member id = the thread
id, client id = the consumer id), state ``Stable`` while consumers are registered, else ``Empty``; protocol type
``zookeeper``. Committed offsets are the broker's where it has one (``offsets.storage=kafka``), else ZooKeeper's,
as Kafka 0.8.2's ConsumerOffsetChecker reads them. The broker is asked only once ``__consumer_offsets`` exists: before
that it holds no offsets, and a cluster with fewer brokers than ``offsets.topic.replication.factor`` (3 in Kafka
0.8's server.properties, which 0.8 capped at the live brokers) would answer COORDINATOR_NOT_AVAILABLE until the
request timed out. Log ends are asked of the brokers as for any group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from mq.client.admin import GroupDescription, GroupListing, MemberDescription
from mq.client.cluster import BrokerMetadata
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode
from mq.server.group_metadata_manager import GROUP_METADATA_TOPIC_NAME
from mq.tools.consumer_groups import ClientGroupAdmin
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.consumer_groups import ZkConsumerGroups

PROTOCOL_TYPE = "zookeeper"
NO_COORDINATOR = BrokerMetadata(-1, "", -1)


class ZkGroupAdmin(ClientGroupAdmin):
    def __init__(self, sync: SyncAdmin, groups: ZkConsumerGroups) -> None:
        super().__init__(sync)
        self.groups = groups

    def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        """ZooKeeper-coordinated groups are of none of the broker's group types: ``types`` keeps none of them."""
        if types:
            return []
        listings = [GroupListing(g, PROTOCOL_TYPE, self._state(g)) for g in self.groups.groups()]
        wanted = None if states is None else {s.lower() for s in states}
        return [g for g in listings if wanted is None or g.state.lower() in wanted]

    def _state(self, group: str) -> str:
        if not self.groups.exists(group):
            return "Dead"
        return "Stable" if self.groups.consumer_ids(group) else "Empty"

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        return [self._describe(group) for group in group_ids]

    def _describe(self, group: str) -> GroupDescription:
        by_thread: dict[str, list[TopicPartition]] = {}
        for tp, thread in sorted(self.groups.owners(group).items()):
            by_thread.setdefault(thread, []).append(tp)
        members = tuple(
            MemberDescription(thread, None, thread.rpartition("-")[0], "", tuple(tps))
            for thread, tps in sorted(by_thread.items())
        )
        return GroupDescription(group, self._state(group), PROTOCOL_TYPE, "", members, NO_COORDINATOR)

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        offsets = self.groups.offsets(group_id)
        if self.groups.store.exists(paths.topic(GROUP_METADATA_TOPIC_NAME)) is not None:
            offsets.update(super().list_group_offsets(group_id))
        return dict(sorted(offsets.items()))

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in sorted(offsets.items()):
            self.groups.set_offset(group_id, tp, offset)

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """Delete ``/consumers/<g>`` of each group without registered consumers (Kafka 1.x's ZooKeeper delete)."""
        results = {}
        for group in group_ids:
            if not self.groups.exists(group):
                results[group] = ErrorCode.GROUP_ID_NOT_FOUND
            elif self.groups.consumer_ids(group):
                results[group] = ErrorCode.NON_EMPTY_GROUP
            else:
                self.groups.delete_group(group)
                results[group] = ErrorCode.NONE
        return results
