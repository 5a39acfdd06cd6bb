"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat): membership and server-side assignment.

Not served: rack-aware assignment (racks are ignored) and migration to or from classic groups.

A member subscribes to topic names, a regular expression (KIP-848's subscribed_topic_regex, matched whole against
every topic name but the internal topics, of those the member may describe), or both; the topics a regex matches are
resolved again at each of the member's heartbeats, so a new matching topic joins its subscription (and bumps the
epoch) at its next heartbeat.

A group is kept in ``__consumer_offsets`` as Kafka's records 3, 5, 6, 7 and 8 (``mq.protocol.consumer_offsets``):
``unwritten`` gives the records that changed since the last write (tombstones for removed members) and ``install``
rebuilds a group from them, so a coordinator that restarts or moves keeps its epochs and assignments.

A group has an epoch, bumped whenever its members or their subscriptions change (or a subscribed topic's partition
count does); each bump computes a target assignment with the chosen assignor (``uniform`` by default, or ``range``).
A member converges to its target by heartbeats: partitions it holds that its target no longer has are revoked first
(its answer is its current assignment minus them, at its old epoch); once its heartbeat reports them released it moves
to the group epoch with its target minus the partitions other members still hold, and gets those once released.
A static member (an instance id) that leaves with epoch -2 keeps its place and partitions until its session times
out: a new member joining with its instance id takes them over at its epoch without a rebalance, while one joining
with the instance id of a member still active is refused (UNRELEASED_INSTANCE_ID), and a heartbeat of a replaced
member id with that instance id is fenced (FENCED_INSTANCE_ID).
A member silent for its session timeout, or still holding partitions it was asked to release past its rebalance
timeout, is removed; both are checked whenever any member of its group heartbeats, and at ``deadline_ms`` (the
coordinator's timer calls ``expire``).

Pure logic: no asyncio; times are milliseconds passed in by the caller.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupEpochValue,
    ConsumerGroupKey,
    ConsumerGroupMemberValue,
    ConsumerGroupValue,
    CurrentMemberAssignmentValue,
    TargetAssignmentMemberValue,
    TopicIdPartitions,
    encode_consumer_group_key,
    encode_consumer_group_value,
)

Partitions = frozenset[tuple[str, int]]
"""(topic name, partition) pairs."""
TopicsView = Callable[[], Mapping[str, tuple[uuid.UUID | None, int]]]
"""The topics of the metadata cache: name -> (topic id, partition count)."""

ASSIGNORS = ("uniform", "range")
"""Server-side assignors, the default first (Kafka's ``group.consumer.assignors``)."""
SESSION_TIMEOUT_MS = 45_000
HEARTBEAT_INTERVAL_MS = 5_000
"""Kafka's ``group.consumer.session.timeout.ms`` and ``group.consumer.heartbeat.interval.ms`` defaults."""
REBALANCE_TIMEOUT_MS = 300_000
"""A member's rebalance timeout when its join does not say (Kafka's ``max.poll.interval.ms`` default)."""
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass
class Member:
    member_id: str
    epoch: int
    subscribed: frozenset[str]
    assignor: str | None
    client_id: str
    client_host: str
    last_seen_ms: int
    assigned: Partitions = frozenset()
    """What the member was last told it holds."""
    revoking: Partitions = frozenset()
    """Partitions it was asked to give up and has not yet reported released."""
    rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS
    revoking_since_ms: int = 0
    """When it was asked to give up ``revoking``: past its rebalance timeout it is removed from the group."""
    previous_epoch: int = -1
    instance_id: str | None = None
    names: frozenset[str] = frozenset()
    """The topic names the member subscribed to; ``subscribed`` adds the topics ``regex`` matches."""
    regex: str | None = None


@dataclass
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    written: dict[bytes, bytes] = field(default_factory=dict)
    """Record key -> value as last written to ``__consumer_offsets`` (b"": a write of it failed)."""

    @property
    def assignor(self) -> str:
        chosen = {m.assignor for m in self.members.values() if m.assignor is not None}
        return next((name for name in ASSIGNORS if name in chosen), ASSIGNORS[0])

    def state(self) -> str:
        if not self.members:
            return "Empty"
        if any(m.epoch != self.epoch or m.assigned != self.target.get(m.member_id) for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Partitions | None = None
    """None: unchanged since the member's last answer."""
    message: str | None = None


def uniform(
    members: Mapping[str, frozenset[str]], partitions: Mapping[str, int], previous: Mapping[str, Partitions]
) -> dict[str, Partitions]:
    """Balanced and sticky: each member keeps what it had that it still subscribes to, the rest go one by one to the
    subscribed member holding fewest, then partitions move from fuller to emptier members until no subscriber of a
    partition holds two fewer than its holder."""
    owner: dict[tuple[str, int], str] = {}
    for member_id in sorted(members):
        for tp in sorted(previous.get(member_id, frozenset())):
            if tp[0] in members[member_id] and tp[1] < partitions.get(tp[0], 0) and tp not in owner:
                owner[tp] = member_id
    counts = {member_id: 0 for member_id in members}
    for member_id in owner.values():
        counts[member_id] += 1
    every = sorted((topic, p) for topic, count in partitions.items() for p in range(count))
    for tp in every:
        if tp in owner:
            continue
        eligible = [m for m in sorted(members) if tp[0] in members[m]]
        if eligible:
            chosen = min(eligible, key=lambda m: (counts[m], m))
            owner[tp] = chosen
            counts[chosen] += 1
    moved = True
    while moved:
        moved = False
        for tp in every:
            holder = owner.get(tp)
            if holder is None:
                continue
            eligible = [m for m in sorted(members) if tp[0] in members[m]]
            lightest = min(eligible, key=lambda m: (counts[m], m))
            if counts[holder] > counts[lightest] + 1:
                owner[tp] = lightest
                counts[holder] -= 1
                counts[lightest] += 1
                moved = True
    return _by_member(members, owner)


def range_assignor(
    members: Mapping[str, frozenset[str]], partitions: Mapping[str, int], previous: Mapping[str, Partitions]
) -> dict[str, Partitions]:
    """Per topic, its subscribers in member id order get consecutive ranges, the first ones one more."""
    owner: dict[tuple[str, int], str] = {}
    for topic, count in sorted(partitions.items()):
        subscribers = sorted(m for m, topics in members.items() if topic in topics)
        if not subscribers:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            size = share + (1 if index < extra else 0)
            for p in range(start, start + size):
                owner[(topic, p)] = member_id
            start += size
    return _by_member(members, owner)


def _by_member(members: Iterable[str], owner: Mapping[tuple[str, int], str]) -> dict[str, Partitions]:
    result: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    for tp, member_id in owner.items():
        result[member_id].add(tp)
    return {m: frozenset(tps) for m, tps in result.items()}


_ASSIGNOR_FUNCTIONS = {"uniform": uniform, "range": range_assignor}


class ConsumerGroups:
    """The consumer-protocol groups this coordinator knows, by group id."""

    def __init__(self, topics: TopicsView) -> None:
        self.topics = topics
        self.groups: dict[str, ConsumerGroup] = {}

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed: Iterable[str] | None,
        assignor: str | None,
        owned: Partitions | None,
        now_ms: int,
        client_id: str = "",
        client_host: str = "",
        rebalance_timeout_ms: int = -1,
        instance_id: str | None = None,
        regex: str | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat; ``subscribed``/``regex``/``owned`` None: unchanged since the member's last
        heartbeat (``regex`` "": none). ``visible``: the topics a regex may match (None: every topic)."""
        if assignor is not None and assignor not in ASSIGNORS:
            return HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR, message=f"Assignor {assignor} is not supported.")
        if regex and _pattern(regex) is None:
            return HeartbeatResult(ErrorCode.INVALID_REGULAR_EXPRESSION, message=f"Invalid regular expression {regex}.")
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id or None)
            group = self.groups[group_id] = ConsumerGroup(group_id)
        self._expire(group, now_ms)
        static = next((m for m in group.members.values() if instance_id and m.instance_id == instance_id), None)
        if static is not None and static.member_id != member_id and member_epoch != 0:
            return HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        if member_epoch == STATIC_LEAVE_EPOCH and static is not None:
            static.epoch, static.last_seen_ms = STATIC_LEAVE_EPOCH, now_ms  # keeps its partitions for a session
            return HeartbeatResult(ErrorCode.NONE, member_id, member_epoch)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if group.members.pop(member_id, None) is not None:
                group.target.pop(member_id, None)
                self._bump(group)
            return HeartbeatResult(ErrorCode.NONE, member_id, member_epoch)
        taking_over = member_epoch == 0 and static is not None and static.epoch == STATIC_LEAVE_EPOCH
        if static is not None and taking_over:
            member_id = member_id or str(uuid.uuid4())
            self._replace(group, static, member_id)
        elif member_epoch == 0 and static is not None and static.member_id != member_id:
            return HeartbeatResult(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                message=f"Static member {instance_id} of group {group_id} is still active.",
            )
        member = group.members.get(member_id)
        changed = False
        if taking_over and member is not None:
            member.client_id, member.client_host = client_id, client_host  # keeps the partitions it took over
        elif member_epoch == 0:
            if not subscribed and not regex and member is None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    message="SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
            if member is None:
                member_id = member_id or str(uuid.uuid4())
                member = group.members[member_id] = Member(
                    member_id,
                    0,
                    frozenset(subscribed or ()),
                    assignor,
                    client_id,
                    client_host,
                    now_ms,
                    instance_id=instance_id,
                )
                changed = True
            else:
                member.epoch, member.assigned, member.revoking = 0, frozenset(), frozenset()
        elif member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        elif member_epoch > member.epoch or member_epoch < member.epoch - 1:
            return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH, member_id)
        member.last_seen_ms = now_ms
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if subscribed is not None:
            member.names = frozenset(subscribed)
        if regex is not None:
            member.regex = regex or None
        counts = {name: count for name, (_, count) in self.topics().items()}
        resolved = _subscription(member, counts, visible)
        if resolved != member.subscribed:
            member.subscribed = resolved
            changed = True
        if assignor is not None and assignor != member.assignor:
            member.assignor = assignor
            changed = True
        subscribed_counts = {t: counts[t] for m in group.members.values() for t in m.subscribed if t in counts}
        if changed or subscribed_counts != group.partition_counts:
            self._bump(group)
        if group.assignment_epoch != group.epoch:
            group.partition_counts = subscribed_counts
            members = {m.member_id: m.subscribed for m in group.members.values()}
            group.target = _ASSIGNOR_FUNCTIONS[group.assignor](members, subscribed_counts, group.target)
            group.assignment_epoch = group.epoch
        if owned is not None:
            member.revoking = member.revoking & owned
        before = member.assigned
        self._reconcile(group, member, now_ms)
        changed = member.assigned != before or member_epoch == 0
        return HeartbeatResult(ErrorCode.NONE, member.member_id, member.epoch, member.assigned if changed else None)

    @staticmethod
    def _replace(group: ConsumerGroup, static: Member, member_id: str) -> None:
        """``member_id`` takes the place of the static member that left: its partitions and target, at epoch 0."""
        del group.members[static.member_id]
        target = group.target.pop(static.member_id, None)
        static.previous_epoch, static.epoch = static.epoch, 0
        static.member_id = member_id
        group.members[member_id] = static
        if target is not None:
            group.target[member_id] = target

    def _reconcile(self, group: ConsumerGroup, member: Member, now_ms: int) -> None:
        target = group.target.get(member.member_id, frozenset())
        revoke = member.assigned - target
        if revoke:
            if not member.revoking:
                member.revoking_since_ms = now_ms
            member.assigned -= revoke
            member.revoking |= revoke
            return
        if member.revoking:
            return  # the member stays at its epoch until it has released what it was asked to
        held_elsewhere: set[tuple[str, int]] = set()
        for other in group.members.values():
            if other is not member:
                held_elsewhere |= other.assigned | other.revoking
        member.assigned = frozenset(target - held_elsewhere) | member.assigned
        if member.epoch != group.epoch:
            member.previous_epoch, member.epoch = member.epoch, group.epoch

    def _bump(self, group: ConsumerGroup) -> None:
        group.epoch += 1

    def deadline_ms(self, group_id: str, member_id: str) -> int | None:
        """When the member is removed unless it heartbeats (or releases what it was asked to) before."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is None:
            return None
        deadline = member.last_seen_ms + SESSION_TIMEOUT_MS
        if member.revoking:
            deadline = min(deadline, member.revoking_since_ms + member.rebalance_timeout_ms)
        return deadline

    def expire(self, group_id: str, now_ms: int) -> bool:
        """Remove the group's members past their deadline; whether any was."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        before = group.epoch
        self._expire(group, now_ms)
        return group.epoch != before

    def _expire(self, group: ConsumerGroup, now_ms: int) -> None:
        silent = [
            m
            for m, member in group.members.items()
            if now_ms - member.last_seen_ms >= SESSION_TIMEOUT_MS
            or (member.revoking and now_ms - member.revoking_since_ms >= member.rebalance_timeout_ms)
        ]
        for member_id in silent:
            del group.members[member_id]
            group.target.pop(member_id, None)
        if silent:
            self._bump(group)

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def subscribed_topics(self, group_id: str) -> frozenset[str]:
        group = self.groups.get(group_id)
        return frozenset() if group is None else frozenset(t for m in group.members.values() for t in m.subscribed)

    def delete(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """Forget the group; the tombstones of every record it wrote."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return []
        return [(key, None) for key in reversed(group.written)]

    def member_epoch_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode | None:
        """For an offset commit of a consumer-protocol group: None if the group is not one, else the commit's error
        (NONE when ``member_id`` is a member at ``epoch``)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # --- records ---------------------------------------------------------------------------------------------------

    def _ids(self, partitions: Partitions) -> TopicIdPartitions:
        ids = {name: topic_id for name, (topic_id, _) in self.topics().items() if topic_id is not None}
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            if topic in ids:
                by_topic.setdefault(topic, []).append(p)
        return tuple((ids[topic], tuple(ps)) for topic, ps in by_topic.items())

    def _records(self, group: ConsumerGroup) -> dict[bytes, bytes]:
        """Every record of the group, in Kafka's write order."""
        records: list[tuple[ConsumerGroupKey, ConsumerGroupValue]] = []
        gid = group.group_id
        for m in group.members.values():
            value = ConsumerGroupMemberValue(
                m.instance_id,
                None,
                m.client_id,
                m.client_host,
                tuple(sorted(m.names)),
                m.regex,
                m.rebalance_timeout_ms,
                m.assignor,
            )
            records.append((ConsumerGroupKey(CONSUMER_GROUP_MEMBER_METADATA, gid, m.member_id), value))
        records.append((ConsumerGroupKey(CONSUMER_GROUP_METADATA, gid), ConsumerGroupEpochValue(group.epoch)))
        for member_id, target in group.target.items():
            key = ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id)
            records.append((key, TargetAssignmentMemberValue(self._ids(target))))
        key = ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid)
        records.append((key, ConsumerGroupEpochValue(group.assignment_epoch)))
        for m in group.members.values():
            state = (
                1 if m.revoking else 2 if m.epoch != group.epoch or m.assigned != group.target.get(m.member_id) else 0
            )
            current = CurrentMemberAssignmentValue(
                m.epoch, m.previous_epoch, state, self._ids(m.assigned), self._ids(m.revoking)
            )
            records.append((ConsumerGroupKey(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id), current))
        return {encode_consumer_group_key(k): encode_consumer_group_value(v) for k, v in records}

    def unwritten(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """The group's records that changed since they were last written, and tombstones for those it no longer has
        (all of them once the group is gone); taken as written until ``not_written`` says otherwise."""
        group = self.groups.get(group_id)
        if group is None:
            return []
        current = self._records(group) if group.members or group.epoch else {}
        changed: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in current.items() if group.written.get(k) != v]
        gone = [k for k in group.written if k not in current]
        tombstones: list[tuple[bytes, bytes | None]] = [(k, None) for k in reversed(gone)]
        group.written = dict(current)
        return changed + tombstones

    def not_written(self, group_id: str, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """A write of ``records`` (from ``unwritten``) failed: they are written again next time."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for key, value in records:
            if value is None:
                group.written[key] = b""
            else:
                group.written.pop(key, None)

    def install(self, group_id: str, records: Mapping[ConsumerGroupKey, ConsumerGroupValue], now_ms: int) -> None:
        """Rebuild a group from its records as loaded from ``__consumer_offsets``; its members' sessions start
        now. Partitions of topics that no longer exist are dropped."""
        names = {topic_id: name for name, (topic_id, _) in self.topics().items() if topic_id is not None}

        def by_name(partitions: TopicIdPartitions) -> Partitions:
            return frozenset((names[t], p) for t, ps in partitions if t in names for p in ps)

        group = ConsumerGroup(group_id)
        for key, value in records.items():
            if isinstance(value, ConsumerGroupEpochValue):
                if key.record == CONSUMER_GROUP_METADATA:
                    group.epoch = value.epoch
                else:
                    group.assignment_epoch = value.epoch
            elif isinstance(value, TargetAssignmentMemberValue) and key.member_id is not None:
                group.target[key.member_id] = by_name(value.partitions)
        for key, value in records.items():
            if isinstance(value, ConsumerGroupMemberValue) and key.member_id is not None:
                group.members[key.member_id] = Member(
                    key.member_id,
                    0,
                    frozenset(value.subscribed_topic_names),
                    value.server_assignor,
                    value.client_id,
                    value.client_host,
                    now_ms,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    instance_id=value.instance_id,
                    names=frozenset(value.subscribed_topic_names),
                    regex=value.subscribed_topic_regex or None,
                )
        for key, value in records.items():
            member = group.members.get(key.member_id or "")
            if isinstance(value, CurrentMemberAssignmentValue) and member is not None:
                member.epoch, member.previous_epoch = value.member_epoch, value.previous_member_epoch
                member.assigned, member.revoking = by_name(value.assigned), by_name(value.pending_revocation)
                member.revoking_since_ms = now_ms
        group.target = {m: ps for m, ps in group.target.items() if m in group.members}
        counts = {name: count for name, (_, count) in self.topics().items()}
        for member in group.members.values():
            member.subscribed = _subscription(member, counts, None)
        group.partition_counts = {t: counts[t] for m in group.members.values() for t in m.subscribed if t in counts}
        self.groups[group_id] = group
        group.written = self._records(group)


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Topics a regex never matches."""


@functools.lru_cache(maxsize=256)
def _pattern(regex: str) -> re.Pattern[str] | None:
    """``regex`` compiled (None: it does not compile)."""
    try:
        return re.compile(regex)
    except re.error:
        return None


def _subscription(member: Member, topics: Iterable[str], visible: Callable[[str], bool] | None) -> frozenset[str]:
    """The member's topic names and the topics its regex matches whole (of those ``visible``)."""
    pattern = None if member.regex is None else _pattern(member.regex)
    if pattern is None:
        return member.names
    matched = {
        t for t in topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t) and (visible is None or visible(t))
    }
    return member.names | matched
