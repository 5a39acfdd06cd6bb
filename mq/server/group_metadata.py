"""One consumer group's state as its coordinator holds it: members, generation, protocol, committed offsets.

States and the moves between them (Kafka's classic group state machine)::

    Empty               -> PreparingRebalance (a member joins), Dead (group removed or offsets expired)
    PreparingRebalance  -> CompletingRebalance (every known member rejoined or the rebalance timed out),
                           Empty (nobody rejoined), Dead
    CompletingRebalance -> Stable (the leader's assignment is stored), PreparingRebalance (membership changed), Dead
    Stable              -> PreparingRebalance (membership or protocols changed), Dead
    Dead                -> nothing: the group is gone from the coordinator

Members waiting for a JoinGroup or SyncGroup answer hold an asyncio future the coordinator completes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import OffsetCommitValue, subscribed_topics
from mq.server.clock import TimerHandle
from mq.topic_partition import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True)
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    """(member id, group instance id, metadata) of every member: only the leader gets them."""


@dataclass(frozen=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(protocol name, metadata) in the member's order of preference."""
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    heartbeat_timer: TimerHandle | None = None
    """Armed while the member is in its group, due at ``heartbeat_due_ms``, never after ``heartbeat_deadline_ms``."""
    heartbeat_deadline_ms: float = 0.0
    """When the member's session expires unless it is heard from before (the clock's ``monotonic_ms``)."""
    heartbeat_due_ms: float = 0.0

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str | None) -> bytes:
        return next((data for name, data in self.protocols if name == protocol), b"")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        return next(name for name, _ in self.protocols if name in candidates)


def new_member_id(client_id: str, group_instance_id: str | None) -> str:
    """Kafka's member ids: ``<instance id or client id>-<random UUID>``."""
    return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"


@dataclass
class GroupMetadata:
    group_id: str
    partition: int
    """The ``__consumer_offsets`` partition the group lives in."""
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: dict[str, TimerHandle | None] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet (and their expiry timers)."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetCommitValue]] = field(default_factory=dict)
    """Producer id -> offsets committed in its open transaction: they join ``offsets`` at its COMMIT marker."""
    new_member_added: bool = False
    initial_delay_active: bool = False
    """The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms`` for more members."""
    join_timer: TimerHandle | None = None
    subscribed: frozenset[str] | None = None
    """Topics the members subscribe to (consumer protocol), None when unknown."""
    _protocol_counts: Counter[str] = field(default_factory=Counter)

    # --- state ---------------------------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id} cannot move from {self.state.value} to {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # --- members -------------------------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, join_future: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._protocol_counts.update(name for name, _ in member.protocols)
        member.join_future = join_future

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._protocol_counts.subtract(name for name, _ in member.protocols)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        join_future: asyncio.Future[JoinResult] | None,
    ) -> None:
        self._protocol_counts.subtract(name for name, _ in member.protocols)
        self._protocol_counts.update(name for name, _ in protocols)
        member.protocols = protocols
        member.join_future = join_future

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """Give the static member ``instance_id`` a new member id; the old id's pending answers fail with
        FENCED_INSTANCE_ID."""
        member = self.members.pop(old_id)
        fenced = ErrorCode.FENCED_INSTANCE_ID
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(fenced, old_id))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(fenced))
        member.join_future = member.sync_future = None
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return member

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False when nobody rejoined."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols -----------------------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        count = len(self.members)
        return protocol_type == self.protocol_type and any(
            self._protocol_counts[name] == count for name, _ in protocols
        )

    def select_protocol(self) -> str:
        """Among the protocols every member supports, the one most members prefer (ties: the first voted for)."""
        candidates = {name for name, n in self._protocol_counts.items() if n == len(self.members) and n > 0}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed = self.compute_subscribed()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def compute_subscribed(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed is None or topic in self.subscribed

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values())

    def join_result_for(self, member: MemberMetadata, error: int = 0) -> JoinResult:
        return JoinResult(
            error,
            member.member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            self.current_member_metadata() if self.is_leader(member.member_id) else (),
        )

    def summary(self) -> dict[str, Any]:
        """DescribeGroups' view: members carry metadata and assignment only while Stable."""
        stable = self.state == GroupState.STABLE
        return {
            "group_id": self.group_id,
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(self.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in self.members.values()
            ],
        }
