"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat): membership and server-side assignment.

INCOMPLETE: groups live in memory only (no ``__consumer_offsets`` records of membership: a coordinator that restarts or
moves forgets them, and members rejoin when fenced), no static membership, no regex subscriptions, no rack awareness;
DeleteGroups and OffsetDelete do not know these groups (ListGroups lists them; DescribeGroups answers them as not
classic groups, as Kafka does).

A group has an epoch, bumped whenever its members or their subscriptions change (or a subscribed topic's partition
count does); each bump computes a target assignment with the chosen assignor (``uniform`` by default, or ``range``).
A member converges to its target by heartbeats: partitions it holds that its target no longer has are revoked first
(its answer is its current assignment minus them, at its old epoch); once its heartbeat reports them released it moves
to the group epoch with its target minus the partitions other members still hold, and gets those once released.
A member silent for its session timeout, or still holding partitions it was asked to release past its rebalance
timeout, is removed; both are checked whenever any member of its group heartbeats.

Pure logic: no asyncio; times are milliseconds passed in by the caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mq.errors import ErrorCode

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


@dataclass
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)

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
    ) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat; ``subscribed``/``owned`` None: unchanged since the member's last heartbeat."""
        if assignor is not None and assignor not in ASSIGNORS:
            return HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR, message=f"Assignor {assignor} is not supported.")
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id or None)
            group = self.groups[group_id] = ConsumerGroup(group_id)
        self._expire(group, now_ms)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if group.members.pop(member_id, None) is not None:
                self._bump(group)
            return HeartbeatResult(ErrorCode.NONE, member_id, member_epoch)
        member = group.members.get(member_id)
        changed = False
        if member_epoch == 0:
            if not subscribed and member is None:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST, message="SubscribedTopicNames must be set in first request."
                )
            if member is None:
                member_id = member_id or str(uuid.uuid4())
                member = group.members[member_id] = Member(
                    member_id, 0, frozenset(subscribed or ()), assignor, client_id, client_host, now_ms
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
        if subscribed is not None and frozenset(subscribed) != member.subscribed:
            member.subscribed = frozenset(subscribed)
            changed = True
        if assignor is not None and assignor != member.assignor:
            member.assignor = assignor
            changed = True
        counts = {name: count for name, (_, count) in self.topics().items()}
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
        member.epoch = group.epoch

    def _bump(self, group: ConsumerGroup) -> None:
        group.epoch += 1

    def _expire(self, group: ConsumerGroup, now_ms: int) -> None:
        silent = [
            m
            for m, member in group.members.items()
            if now_ms - member.last_seen_ms >= SESSION_TIMEOUT_MS
            or (member.revoking and now_ms - member.revoking_since_ms >= member.rebalance_timeout_ms)
        ]
        for member_id in silent:
            del group.members[member_id]
        if silent:
            self._bump(group)

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
