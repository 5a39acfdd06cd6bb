"""An in-memory GroupAdmin for the consumer group tools' unit tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mq.client.admin import GroupDescription, GroupListing, MemberDescription
from mq.client.cluster import BrokerMetadata
from mq.errors import ErrorCode, KafkaError
from mq.topic_partition import TopicPartition as TP

COORDINATOR = BrokerMetadata(1, "broker1", 9092, None)


def member(member_id: str, *partitions: TP, host: str = "/10.0.0.5", client_id: str = "") -> MemberDescription:
    return MemberDescription(member_id, None, client_id or member_id.rsplit("-", 1)[0], host, tuple(partitions))


def group(group_id: str, state: str, *members: MemberDescription, protocol: str = "range") -> GroupDescription:
    return GroupDescription(group_id, state, "consumer", protocol, tuple(members), COORDINATOR)


@dataclass
class FakeGroupAdmin:
    groups: dict[str, GroupDescription] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    """Group id -> ListGroups type (``classic`` when absent)."""
    committed: dict[str, dict[TP, int]] = field(default_factory=dict)
    starts: dict[TP, int] = field(default_factory=dict)
    ends: dict[TP, int] = field(default_factory=dict)
    by_time: dict[int, dict[TP, int]] = field(default_factory=dict)
    timestamps: dict[tuple[TP, int], int] = field(default_factory=dict)
    delete_results: dict[str, ErrorCode] = field(default_factory=dict)
    offset_delete_error: ErrorCode = ErrorCode.NONE
    offset_delete_results: dict[TP, ErrorCode] = field(default_factory=dict)
    altered: list[tuple[str, dict[TP, int]]] = field(default_factory=list)
    timestamp_requests: list[dict[TP, int]] = field(default_factory=list)

    def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        wanted = None if states is None else set(states)
        kinds = None if types is None else set(types)
        return [
            GroupListing(g.group_id, "consumer", g.state, self.types.get(g.group_id, "classic"))
            for g in sorted(self.groups.values(), key=lambda g: g.group_id)
            if (wanted is None or g.state in wanted)
            and (kinds is None or self.types.get(g.group_id, "classic") in kinds)
        ]

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        return [self.groups.get(g) or group(g, "Dead") for g in group_ids]

    def list_group_offsets(self, group_id: str) -> dict[TP, int]:
        return dict(self.committed.get(group_id, {}))

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TP, int]) -> None:
        self.altered.append((group_id, dict(offsets)))
        self.committed.setdefault(group_id, {}).update(offsets)

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        return {g: self.delete_results.get(g, ErrorCode.NONE) for g in group_ids}

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TP]) -> dict[TP, ErrorCode]:
        if self.offset_delete_error != ErrorCode.NONE:
            raise KafkaError("refused", code=self.offset_delete_error)
        return {tp: self.offset_delete_results.get(tp, ErrorCode.NONE) for tp in partitions}

    def list_offsets(self, timestamps: Mapping[TP, int]) -> dict[TP, int]:
        result = {}
        for tp, ts in timestamps.items():
            if ts == -2:
                result[tp] = self.starts.get(tp, 0)
            elif ts == -1:
                result[tp] = self.ends[tp]
            else:
                result[tp] = self.by_time.get(ts, {}).get(tp, -1)
        return result

    def partitions_of(self, topics: Sequence[str]) -> list[TP]:
        known = sorted(self.ends)
        for topic in topics:
            if not any(tp.topic == topic for tp in known):
                raise KafkaError(
                    f"topic {topic!r}: UNKNOWN_TOPIC_OR_PARTITION", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
        return [tp for tp in known if tp.topic in topics]

    def record_timestamps(self, positions: Mapping[TP, int]) -> dict[TP, int]:
        self.timestamp_requests.append(dict(positions))
        return {tp: self.timestamps[(tp, o)] for tp, o in positions.items() if (tp, o) in self.timestamps}
