"""Partition assignors the group leader runs: Kafka's "range" and "roundrobin".

Both order members as Kafka's ``MemberInfo`` does: static members (with a ``group.instance.id``) first, by instance
id, then dynamic members by member id. ``assign`` takes each member's subscribed topics and the partition count of
every topic in the cluster (topics absent from it are skipped) and returns every member's partitions, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from mq.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    topics: frozenset[str]
    group_instance_id: str | None = None


def member_order(member: GroupMember) -> tuple[int, str, str]:
    """Kafka's member order: static members by instance id, then dynamic members by member id."""
    if member.group_instance_id is not None:
        return (0, member.group_instance_id, member.member_id)
    return (1, member.member_id, "")


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]: ...


class RangeAssignor:
    """Per topic: partitions in order split into contiguous ranges over the topic's subscribers in member order;
    with P partitions and C subscribers each gets P // C, and the first P % C subscribers one more."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        ordered = sorted(members, key=member_order)
        for topic in sorted({t for m in members for t in m.topics}):
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            subscribers = [m for m in ordered if topic in m.topics]
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for index, member in enumerate(subscribers):
                length = quota + (1 if index < extra else 0)
                result[member.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return result


class RoundRobinAssignor:
    """Every subscribed topic-partition, sorted by topic then partition, dealt to members in member order; a member
    not subscribed to a partition's topic is skipped (and keeps its turn in the cycle, as in Kafka)."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        ordered = sorted(members, key=member_order)
        if not ordered:
            return result
        topics = sorted({t for m in members for t in m.topics} & set(partitions_per_topic))
        turn = 0
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                while topic not in ordered[turn % len(ordered)].topics:
                    turn += 1
                result[ordered[turn % len(ordered)].member_id].append(TopicPartition(topic, partition))
                turn += 1
        return result


ASSIGNORS: Mapping[str, PartitionAssignor] = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor())}


def assignor_named(name: str) -> PartitionAssignor:
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown partition assignment strategy {name!r}; known: {', '.join(ASSIGNORS)}") from None
