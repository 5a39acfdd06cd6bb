"""The group coordinator: classic consumer-group membership, rebalances and committed offsets.

A broker coordinates the groups whose ``__consumer_offsets`` partition it leads (``partition_for(group id)``).
Partitions become owned when this broker is elected their leader and has replayed their log; while one loads, its
groups get COORDINATOR_LOAD_IN_PROGRESS (except SyncGroup, answered REBALANCE_IN_PROGRESS, and Heartbeat, answered
NONE, as Kafka's coordinator answers them), and a partition this broker does not own answers NOT_COORDINATOR.

Rebalance protocol (Kafka's): members join (JoinGroup); once every known member has rejoined, or the rebalance
timeout passed, a new generation starts, the leader gets every member's metadata and returns the assignment in its
SyncGroup, which is stored before every member gets its share. Heartbeats keep members alive; a member silent for
its session timeout is removed and the group rebalances. Static members (``group.instance.id``) keep their place
across restarts: a rejoin with the same instance id takes over the old member without a rebalance, and the old
member id is fenced (FENCED_INSTANCE_ID). A rebalance waiting for members is a delayed join in the join purgatory
(keyed by group id: a member's join, leave or expiry checks only its own group); each member's session is one timer
that hearing from the member leaves alone (a heartbeat or commit moves the member's deadline; the timer, when it
fires before the deadline, re-arms itself for the rest); every timeout reads the broker's clock.

Offsets committed in a transaction (TxnOffsetCommit) are written at once but kept pending per producer until the
transaction's marker reaches the group's partition (``complete_txn``): a COMMIT makes them the group's offsets, an
ABORT drops them.

Consumer-protocol groups (``consumer_groups``, KIP-848) are loaded and unloaded with their partition like classic
ones; ``store_consumer_group`` writes what changed in one, and each of their members has a session timer due no later
than its ``deadline_ms``, so a silent member is removed without another member's heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import OffsetCommitValue, partition_for
from mq.server.clock import Clock, SystemClock, TimerHandle
from mq.server.consumer_groups import ConsumerGroups
from mq.server.coordinator_partitions import CoordinatorPartitions
from mq.server.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
    new_member_id,
)
from mq.server.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, GroupMetadataManager, LoadedPartition
from mq.server.purgatory import DelayedCall, Purgatory, Watch
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)
T = TypeVar("T")

NEW_MEMBER_JOIN_TIMEOUT_MS = 300000
"""How long a new member may wait for its first JoinGroup answer before it is dropped."""

Protocols = list[tuple[str, bytes]]


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols


class GroupCoordinator(CoordinatorPartitions[LoadedPartition]):
    topic = GROUP_METADATA_TOPIC_NAME

    def __init__(
        self,
        config: BrokerConfig,
        manager: GroupMetadataManager,
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.manager = manager
        self.clock = clock or SystemClock()
        self.time_ms = self.clock.time_ms
        self.join_purgatory: Purgatory[str] = Purgatory(self.clock, "Rebalance")
        self.groups: dict[str, GroupMetadata] = {}
        self.consumer_groups: ConsumerGroups | None = None
        """The groups of the KIP-848 consumer protocol (None: not served); their members commit at their epoch."""
        self._consumer_sessions: dict[str, dict[str, tuple[int, TimerHandle]]] = {}
        """Per consumer-protocol group, each member's session timer and the deadline (``time_ms``) it is due at."""
        self._completed_while_loading: dict[int, list[tuple[int, bool]]] = {}
        """Loading partition -> the transaction markers (producer id, commit) written to it meanwhile, in order: the
        read of its log may have ended before them, so they are applied to what it installs."""

    # --- ownership -----------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.manager.partition_count())

    def status(self, group_id: str | None) -> ErrorCode:
        """Whether this coordinator may act on ``group_id`` now (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...)."""
        return self._status(group_id)

    def _status(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: whether this coordinator may act on ``group_id`` now."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        return self.partition_status(self.partition_for(group_id))

    def _read_partition(self, partition: int) -> LoadedPartition:
        return self.manager.load(partition)

    def _install(self, partition: int, loaded: LoadedPartition) -> None:
        now = self.time_ms()
        pending_groups = {group_id for by_group in loaded.pending.values() for group_id in by_group}
        for group_id in set(loaded.groups) | set(loaded.offsets) | pending_groups:
            if group_id in self.groups:
                continue
            group = GroupMetadata(group_id, partition, state_timestamp_ms=now)
            value = loaded.groups.get(group_id)
            if value is not None:
                group.protocol_type = value.protocol_type or None
                group.generation_id = value.generation
                group.protocol_name = value.protocol
                group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else now
                for m in value.members:
                    member = MemberMetadata(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.rebalance_timeout,
                        m.session_timeout,
                        value.protocol_type,
                        [(value.protocol or "", m.subscription)],
                        m.assignment,
                    )
                    group.add(member, None)
                    if m.group_instance_id is not None:
                        group.static_members[m.group_instance_id] = m.member_id
                group.leader_id = value.leader if value.leader in group.members else group.leader_id
                if group.members:
                    group.state = GroupState.STABLE
                    group.subscribed = group.compute_subscribed()
            group.offsets = dict(loaded.offsets.get(group_id, {}))
            for producer_id, by_group in loaded.pending.items():
                if group_id in by_group:
                    group.pending_txn_offsets[producer_id] = dict(by_group[group_id])
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        if self.consumer_groups is not None:
            for group_id, records in loaded.consumer_groups.items():
                self.consumer_groups.install(group_id, records, now)
                self.watch_consumer_members(group_id)
        for producer_id, commit in self._completed_while_loading.pop(partition, []):
            self.complete_txn(partition, producer_id, commit)

    def _unload(self, partition: int) -> None:
        self._completed_while_loading.pop(partition, None)
        super()._unload(partition)

    def _uninstall(self, partition: int) -> None:
        for group_id, group in list(self.groups.items()):
            if group.partition != partition:
                continue
            del self.groups[group_id]
            self._fail_all(group, ErrorCode.NOT_COORDINATOR)
        if self.consumer_groups is not None:
            for group_id in [g for g in self.consumer_groups.groups if self.partition_for(g) == partition]:
                del self.consumer_groups.groups[group_id]
                self.watch_consumer_members(group_id)

    def _fail_all(self, group: GroupMetadata, error: ErrorCode) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        for timer in group.pending_members.values():
            if timer is not None:
                timer.cancel()
        for member in group.members.values():
            self._stop_heartbeat(member)
            self._answer_join(member, JoinResult(error, member.member_id))
            self._answer_sync(member, SyncResult(error))

    # --- consumer-protocol groups --------------------------------------------------------------------------------

    async def store_consumer_group(self, group_id: str) -> ErrorCode:
        """Write the records of a consumer-protocol group that changed; a failed write is retried by the next."""
        if self.consumer_groups is None:
            return ErrorCode.NONE
        records = self.consumer_groups.unwritten(group_id)
        if not records:
            return ErrorCode.NONE
        error = await self.manager.store_records(self.partition_for(group_id), records)
        if error != ErrorCode.NONE:
            self.consumer_groups.not_written(group_id, records)
        return error

    async def delete_consumer_group(self, group_id: str) -> ErrorCode:
        """Forget an (empty) consumer-protocol group, tombstoning its records."""
        if self.consumer_groups is None:
            return ErrorCode.NONE
        records = self.consumer_groups.delete(group_id)
        self.watch_consumer_members(group_id)
        if not records:
            return ErrorCode.NONE
        return await self.manager.store_records(self.partition_for(group_id), records)

    def watch_consumer_members(self, group_id: str) -> None:
        """(Re)arm the session of every member of the group; drop those of members it no longer has."""
        groups = self.consumer_groups
        group = None if groups is None else groups.groups.get(group_id)
        sessions = self._consumer_sessions.get(group_id, {})
        for member_id in [m for m in sessions if group is None or m not in group.members]:
            sessions.pop(member_id)[1].cancel()
        for member_id in () if group is None else group.members:
            self.watch_consumer_member(group_id, member_id)
        if not self._consumer_sessions.get(group_id, True):
            del self._consumer_sessions[group_id]

    def watch_consumer_member(self, group_id: str, member_id: str) -> None:
        """(Re)arm a consumer-protocol member's session: at its deadline its group expires silent members. A timer
        due no later than a deadline still ahead is kept (when it fires early, the member is re-armed then), so a
        heartbeat sets no timer; a deadline already past fires at once."""
        deadline = None if self.consumer_groups is None else self.consumer_groups.deadline_ms(group_id, member_id)
        sessions = self._consumer_sessions.setdefault(group_id, {})
        armed = sessions.get(member_id)
        now = self.time_ms()
        if armed is not None:
            if deadline is not None and now < deadline and armed[0] <= deadline:
                return
            del sessions[member_id]
            armed[1].cancel()
        if deadline is not None:
            timer = self.clock.call_later(deadline - now, lambda: self._consumer_session_due(group_id, member_id))
            sessions[member_id] = (deadline, timer)
        elif not sessions:
            del self._consumer_sessions[group_id]

    def _consumer_session_due(self, group_id: str, member_id: str) -> None:
        sessions = self._consumer_sessions.get(group_id)
        if sessions is not None:
            sessions.pop(member_id, None)
        self._consumer_session_expired(group_id)

    def _consumer_session_expired(self, group_id: str) -> None:
        if self.consumer_groups is not None and self.consumer_groups.expire(group_id, self.time_ms()):
            log.info("Removed expired members of consumer group %s", group_id)
            self._spawn(self.store_consumer_group(group_id))
        self.watch_consumer_members(group_id)

    # --- answers and timers ------------------------------------------------------------------------------------

    @staticmethod
    def _answer_join(member: MemberMetadata, result: JoinResult) -> None:
        future, member.join_future = member.join_future, None
        if future is not None and not future.done():
            future.set_result(result)

    @staticmethod
    def _answer_sync(member: MemberMetadata, result: SyncResult) -> None:
        future, member.sync_future = member.sync_future, None
        if future is not None and not future.done():
            future.set_result(result)

    def _current(self, group: GroupMetadata) -> bool:
        return self.groups.get(group.group_id) is group

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """Move the member's session deadline to ``timeout_ms`` (default: its session timeout) from now. A deadline
        later than the armed timer's (every heartbeat and commit of a live member) only moves
        ``heartbeat_deadline_ms``: the timer, when it fires early, re-arms itself for the rest, so hearing from a
        member costs no timer."""
        now = self.clock.monotonic_ms()
        deadline = now + (timeout_ms if timeout_ms is not None else member.session_timeout_ms)
        member.heartbeat_deadline_ms = deadline
        if member.heartbeat_timer is not None:
            if member.heartbeat_due_ms <= deadline:
                return
            member.heartbeat_timer.cancel()
        self._arm_heartbeat(group, member, now)

    def _arm_heartbeat(self, group: GroupMetadata, member: MemberMetadata, now: float) -> None:
        """Set the member's timer for its deadline (``now`` on the clock's ``monotonic_ms``)."""
        member.heartbeat_due_ms = due = member.heartbeat_deadline_ms
        member.heartbeat_timer = self.clock.call_later(due - now, lambda: self._heartbeat_due(group, member))

    def _stop_heartbeat(self, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _heartbeat_due(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """The member's timer fired: re-arm it while its deadline is ahead, else its session has expired."""
        member.heartbeat_timer = None
        if not self._current(group) or group.members.get(member.member_id) is not member:
            return
        now = self.clock.monotonic_ms()
        if now < member.heartbeat_deadline_ms:
            self._arm_heartbeat(group, member, now)
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            self._schedule_heartbeat(group, member)  # a rebalance in progress counts as liveness
            return
        log.info("Member %s in group %s has failed, removing it from the group", member.member_id, group.group_id)
        self._remove_member_and_update(group, member)

    def _add_pending_member(self, group: GroupMetadata, member_id: str, session_timeout_ms: int) -> None:
        group.pending_members[member_id] = self.clock.call_later(
            session_timeout_ms, lambda: self._pending_expired(group, member_id)
        )

    def _pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        if self._current(group) and group.pending_members.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _remove_pending(self, group: GroupMetadata, member_id: str) -> None:
        timer = group.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    # --- membership changes ------------------------------------------------------------------------------------

    def _remove_member_and_update(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._answer_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._stop_heartbeat(member)
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member_id: str, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member = MemberMetadata(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
            is_new=True,
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if request.group_instance_id is not None:
            group.static_members[request.group_instance_id] = member_id
        else:
            self._remove_pending(group, member_id)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        self._update_member(group, member, request, future)
        self._maybe_prepare_rebalance(group)

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.time_ms())
        if group.join_timer is not None:
            group.join_timer.cancel()
        log.info(
            "Preparing to rebalance group %s in state PreparingRebalance with old generation %d",
            group.group_id,
            group.generation_id,
        )
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self.clock.call_later(delay, lambda: self._initial_join_expired(group, remaining))
            group.initial_delay_active = True
        else:
            self._watch_join(group)

    def _initial_join_expired(self, group: GroupMetadata, remaining_ms: int) -> None:
        """Kafka's InitialDelayedJoin: while new members keep arriving, wait another initial delay (bounded by the
        rebalance timeout) before forming the first generation."""
        if not self._current(group) or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        delay = self.config.group_initial_rebalance_delay_ms
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            later = max(remaining_ms - delay, 0)
            group.join_timer = self.clock.call_later(
                min(delay, remaining_ms), lambda: self._initial_join_expired(group, later)
            )
            return
        group.initial_delay_active = False
        group.join_timer = None
        self._complete_join(group)

    def _watch_join(self, group: GroupMetadata) -> None:
        """Kafka's DelayedJoin: the next generation forms once every known member rejoined, or at the rebalance
        timeout with those that did; it is tried at once and after each change to the group's membership."""
        join = DelayedCall(
            group.rebalance_timeout_ms(), lambda: self._join_ready(group), lambda expired: self._join_done(group)
        )
        group.join_timer = Watch(self.join_purgatory, join)
        self.join_purgatory.try_complete_else_watch(join, [group.group_id])

    def _join_ready(self, group: GroupMetadata) -> bool:
        return (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_delay_active
            and group.has_all_members_joined()
        )

    def _join_done(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if self._current(group) and group.is_in(GroupState.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        self.join_purgatory.check_and_complete(group.group_id)

    def _complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                log.info("Member %s of group %s did not rejoin; removing it", member.member_id, group.group_id)
                self._stop_heartbeat(member)
                self._answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
                group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            self._watch_join(group)
            return
        group.init_next_generation(self.time_ms())
        if group.is_in(GroupState.EMPTY):
            self._spawn(self._store_empty_group(group))
            return
        log.info(
            "Stabilized group %s generation %d with %d members", group.group_id, group.generation_id, len(group.members)
        )
        for member in group.members.values():
            self._answer_join(member, group.join_result_for(member))
            self._schedule_heartbeat(group, member)
            member.is_new = False

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self.manager.store_group(group, {})
        if error != ErrorCode.NONE:
            log.warning("Failed to write empty metadata for group %s: %s", group.group_id, error.name)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            self._answer_sync(member, SyncResult(error))

    # --- JoinGroup ---------------------------------------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResult:
        error = self._status(request.group_id)
        if error != ErrorCode.NONE:
            return JoinResult(error, request.member_id)
        if self.consumer_groups is not None and request.group_id in self.consumer_groups.groups:
            if self.consumer_groups.has_members(request.group_id):
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
            error = await self.delete_consumer_group(request.group_id)  # an empty one becomes a classic group
            if error != ErrorCode.NONE:
                return JoinResult(error, request.member_id)
        if not (
            self.config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        unknown_member = request.member_id == ""
        group = self.groups.get(request.group_id)
        if group is None:
            if not unknown_member:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = GroupMetadata(
                request.group_id, self.partition_for(request.group_id), state_timestamp_ms=self.time_ms()
            )
            self.groups[request.group_id] = group
        if not self._accept_joining_member(group, request.member_id):
            member = group.members.get(request.member_id)
            if member is not None:
                self._remove_member_and_update(group, member)
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if unknown_member:
            self._join_new_member(group, request, future)
        else:
            self._join_known_member(group, request, future)
        self._try_complete_join(group)
        return await future

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) or group.awaiting_join_count() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, group: GroupMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]) -> None:
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))
            return
        if not group.supports_protocols(request.protocol_type, request.protocols):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
            return
        member_id = new_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and group.has(old_id):
                self._replace_static_member(group, old_id, member_id, request, future)
            else:
                self._add_member_and_rebalance(group, member_id, request, future)
        elif request.require_known_member_id:
            self._add_pending_member(group, member_id, request.session_timeout_ms)
            future.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
        else:
            self._add_member_and_rebalance(group, member_id, request, future)

    def _replace_static_member(
        self,
        group: GroupMetadata,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        future: asyncio.Future[JoinResult],
    ) -> None:
        """A static member rejoined with a fresh member id: it takes over the old member. In a Stable group whose
        protocol stays the same this is persisted and answered with the current generation, without a rebalance."""
        assert request.group_instance_id is not None
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(request.group_instance_id, old_id, new_id)
        old_state = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._schedule_heartbeat(group, member)
        self._update_member(group, member, request, future)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self._spawn(self._store_static_rejoin(group, member, old_id, old_state, previous_leader, assignment))
            else:
                self._maybe_prepare_rebalance(group)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)

    async def _store_static_rejoin(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old_id: str,
        old_state: tuple[Protocols, int, int],
        previous_leader: str,
        assignment: dict[str, bytes],
    ) -> None:
        """Persist the replaced static member and answer it with the current generation (it is never told it leads,
        so it does not reassign); on failure the old member is restored."""
        new_id = member.member_id
        error = await self.manager.store_group(group, assignment)
        if error != ErrorCode.NONE:
            self._answer_join(member, JoinResult(error, ""))
            if self._current(group) and group.members.get(new_id) is member and member.group_instance_id is not None:
                group.replace_static_member(member.group_instance_id, new_id, old_id)
                group.update_member(member, old_state[0], None)
                member.rebalance_timeout_ms, member.session_timeout_ms = old_state[1], old_state[2]
            return
        self._answer_join(
            member,
            JoinResult(
                ErrorCode.NONE,
                new_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                previous_leader,
            ),
        )

    @staticmethod
    def _update_member(
        group: GroupMetadata, member: MemberMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        group.update_member(member, request.protocols, future)

    def _join_known_member(
        self, group: GroupMetadata, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> None:
        member_id = request.member_id
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(request.protocol_type, request.protocols):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, request, future)
            return
        instance_id = request.group_instance_id
        if group.is_static_member_fenced(member_id, instance_id):
            future.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        member = group.members.get(member_id)
        if member is None or (instance_id is not None and instance_id not in group.static_members):
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                future.set_result(group.join_result_for(member))
            else:
                self._update_member_and_rebalance(group, member, request, future)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, future)
            else:
                future.set_result(group.join_result_for(member))
        else:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _member_error(group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        """The checks every request of a member in a generation passes, in Kafka's order."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # --- SyncGroup ---------------------------------------------------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        error = self._status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance in flight was lost with the coordinator's state: the member starts over at JoinGroup
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if error != ErrorCode.NONE:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        error = self._member_error(group, member_id, group_instance_id, generation_id)
        if error != ErrorCode.NONE:
            return SyncResult(error)
        member = group.members[member_id]
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self._schedule_heartbeat(group, member)
        if group.is_in(GroupState.STABLE):
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self._answer_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = future
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}
            self._spawn(self._store_assignment(group, group.generation_id, full))
        return await future

    async def _store_assignment(self, group: GroupMetadata, generation_id: int, assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        if not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
            return
        if error != ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group)
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
            self._answer_sync(
                member, SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
            )
        group.transition_to(GroupState.STABLE, self.time_ms())

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self._status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # answered blindly while the group loads, as Kafka's coordinator does
        if error != ErrorCode.NONE:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._member_error(group, member_id, group_instance_id, generation_id)
        if error != ErrorCode.NONE:
            return error
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, leaving: Iterable[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Remove members given as (member id, group instance id); returns the request's error and each member's."""
        leaving = list(leaving)
        error = self._status(group_id)
        if error != ErrorCode.NONE:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        if member_id == "":
            if instance_id is None or instance_id not in group.static_members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            member_id = group.static_members[instance_id]
        elif group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id in group.pending_members:
            self._remove_pending(group, member_id)
            self._try_complete_join(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        log.info("Member %s has left group %s through explicit LeaveGroup", member_id, group.group_id)
        self._remove_member_and_update(group, member)
        return ErrorCode.NONE

    # --- offsets -----------------------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetCommitValue],
        answer: Callable[[ErrorCode], T],
    ) -> T | asyncio.Future[T]:
        """Store ``offsets`` for the group: ``answer(error)``, one error for all of them (the handler adds
        per-partition checks), now or (while the write waits for the ISR) as a future."""
        error = self._status(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return answer(error)
        member_error = (
            None
            if self.consumer_groups is None
            else self.consumer_groups.member_epoch_error(group_id, member_id, generation_id)
        )
        if member_error is not None and generation_id >= 0:
            if member_error != ErrorCode.NONE:
                return answer(member_error)
            generation_id = -1  # a consumer-protocol member at its epoch: stored as a commit outside any generation
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return answer(ErrorCode.ILLEGAL_GENERATION)
            group = GroupMetadata(group_id, self.partition_for(group_id), state_timestamp_ms=self.time_ms())
            self.groups[group_id] = group
        standalone_commit = (
            generation_id < 0
            and group.is_in(GroupState.EMPTY)
            and not group.is_static_member_fenced(member_id, group_instance_id)
        )
        if not standalone_commit:
            error = self._member_error(group, member_id, group_instance_id, generation_id)
            if error != ErrorCode.NONE:
                return answer(error)
            if group.is_in(GroupState.COMPLETING_REBALANCE):
                return answer(ErrorCode.REBALANCE_IN_PROGRESS)
            self._schedule_heartbeat(group, group.members[member_id])
        if not offsets:
            return answer(ErrorCode.NONE)
        stored_group = group

        def stored(error: ErrorCode) -> T:
            if error == ErrorCode.NONE and self._current(stored_group):
                stored_group.offsets.update(offsets)
            return answer(error)

        return self.manager.store_offsets(group, offsets, stored)

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, OffsetCommitValue],
        answer: Callable[[ErrorCode], T],
        member: tuple[str, str | None, int] = ("", None, -1),
    ) -> T | asyncio.Future[T]:
        """Store ``offsets`` in the producer's transaction (TxnOffsetCommit): written now, they count once the
        transaction's COMMIT marker reaches the group's partition (``complete_txn``). ``member`` (member id,
        group instance id, generation; v3+, KIP-447) fences a producer whose consumer left the group or missed a
        rebalance: a member id that is set must be the group's (UNKNOWN_MEMBER_ID), a generation that is set its
        current one (ILLEGAL_GENERATION; a consumer-protocol group's member epoch), a static instance its current
        member (FENCED_INSTANCE_ID)."""
        error = self._status(group_id)
        if error != ErrorCode.NONE:
            return answer(error)
        error = self._txn_member_error(group_id, *member)
        if error != ErrorCode.NONE:
            return answer(error)
        group = self.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, self.partition_for(group_id), state_timestamp_ms=self.time_ms())
            self.groups[group_id] = group
        if not offsets:
            return answer(ErrorCode.NONE)
        stored_group = group

        def stored(error: ErrorCode) -> T:
            if error == ErrorCode.NONE and self._current(stored_group):
                stored_group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
            return answer(error)

        return self.manager.store_offsets(group, offsets, stored, (producer_id, producer_epoch))

    def _txn_member_error(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Kafka's checks of a transactional offset commit's member (see ``commit_txn_offsets``)."""
        if self.consumer_groups is not None and (member_id or generation_id >= 0):
            epoch_error = self.consumer_groups.member_epoch_error(group_id, member_id, generation_id)
            if epoch_error is not None:
                if member_id and epoch_error == ErrorCode.UNKNOWN_MEMBER_ID:
                    return epoch_error
                if generation_id >= 0 and epoch_error != ErrorCode.NONE:
                    return ErrorCode.ILLEGAL_GENERATION
                return ErrorCode.NONE
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID if member_id else ErrorCode.NONE
        if group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions of the group with an offset committed in a transaction not yet ended."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for offsets in group.pending_txn_offsets.values() for tp in offsets}

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of ``producer_id`` was written to ``__consumer_offsets`` ``partition``: its pending
        offsets in the groups there count (COMMIT) or are dropped (ABORT). A marker on a partition still loading
        waits for its install (the last marker of a producer there: it ends every offset commit that load finds
        pending for it)."""
        if partition in self.loading_partitions:
            self._completed_while_loading.setdefault(partition, []).append((producer_id, commit))
            return
        for group in self.groups.values():
            if group.partition != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetCommitValue | None]]:
        """Committed offsets of ``partitions`` (None: every partition with one); None where nothing is committed.
        A fetch naming a member (OffsetFetch v9+) of a consumer-protocol group must name one at its epoch
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); one with neither is an admin's."""
        error = self._status(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, {}
        if self.consumer_groups is not None and (member_id or member_epoch >= 0):
            member_error = self.consumer_groups.member_epoch_error(group_id, member_id or "", member_epoch)
            if member_error is not None and member_error != ErrorCode.NONE:
                return member_error, {}
        group = self.groups.get(group_id)
        stored = {} if group is None or group.is_in(GroupState.DEAD) else group.offsets
        if partitions is None:
            return ErrorCode.NONE, dict(stored)
        return ErrorCode.NONE, {tp: stored.get(tp) for tp in partitions}

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self._status(group_id)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        subscribed = frozenset() if self.consumer_groups is None else self.consumer_groups.subscribed_topics(group_id)
        if subscribed:
            deletable = []
            for tp in partitions:
                if tp.topic in subscribed:
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        elif group.is_in(GroupState.EMPTY):
            deletable = partitions
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = []
            for tp in partitions:
                if group.is_subscribed_to(tp.topic):
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        removed = [tp for tp in deletable if group.offsets.pop(tp, None) is not None]
        code = await self.manager.write_tombstones(group.partition, group.group_id, removed, False)
        results.update({tp: code for tp in deletable})
        return ErrorCode.NONE, results

    # --- listing, describing, deleting -------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[GroupMetadata]]:
        wanted = {s.lower() for s in states}
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading_partitions else ErrorCode.NONE
        groups = [
            g
            for g in self.groups.values()
            if g.partition in self.owned_partitions
            and not g.is_in(GroupState.DEAD)
            and (not wanted or g.state.value.lower() in wanted)
        ]
        return error, groups

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupMetadata | None]:
        error = self._status(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, None if group is None or group.is_in(GroupState.DEAD) else group

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self._status(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            consumer = self.consumer_groups is not None and group_id in self.consumer_groups.groups
            if error != ErrorCode.NONE:
                results[group_id] = error
            elif consumer and self.consumer_groups is not None and self.consumer_groups.has_members(group_id):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            elif consumer and (error := await self.delete_consumer_group(group_id)) != ErrorCode.NONE:
                results[group_id] = error
            elif consumer and (group is None or group.is_in(GroupState.DEAD)):
                results[group_id] = ErrorCode.NONE  # a consumer-protocol group without offsets
            elif group is None or group.is_in(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_in(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, self.time_ms())
                del self.groups[group_id]
                offsets, group.offsets = list(group.offsets), {}
                results[group_id] = await self.manager.write_tombstones(group.partition, group_id, offsets, True)
        return results

    # --- offset expiration -------------------------------------------------------------------------------------

    def _expired_offsets(self, group: GroupMetadata, now: int, retention_ms: int) -> list[TopicPartition]:
        def commit_expired(value: OffsetCommitValue) -> bool:
            if value.expire_timestamp >= 0:
                return value.expire_timestamp <= now
            return value.commit_timestamp + retention_ms <= now

        if group.protocol_type is None:
            subscribed = (
                frozenset() if self.consumer_groups is None else self.consumer_groups.subscribed_topics(group.group_id)
            )  # a consumer-protocol group's members keep the offsets of the topics they subscribe to
            return [tp for tp, v in group.offsets.items() if tp.topic not in subscribed and commit_expired(v)]
        if group.is_in(GroupState.EMPTY):
            if group.state_timestamp_ms + retention_ms <= now:
                return list(group.offsets)
            return []
        if group.is_in(GroupState.STABLE) and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            return [tp for tp, v in group.offsets.items() if not group.is_subscribed_to(tp.topic) and commit_expired(v)]
        return []

    def schedule_offset_expiration(self) -> None:
        self._spawn(self.expire_offsets())

    async def expire_offsets(self) -> int:
        """Remove offsets past ``offsets.retention.minutes`` (for an empty group, counted from when it became
        empty) and groups left empty without offsets; returns how many offsets were removed."""
        now = self.time_ms()
        retention_ms = self.config.offsets_retention_minutes * 60000
        removed = 0
        for group in list(self.groups.values()):
            if group.partition in self.owned_partitions:
                removed += await self._remove_offsets(group, self._expired_offsets(group, now, retention_ms), now)
        if removed:
            log.info("Removed %d expired offsets", removed)
        return removed

    def schedule_topic_removal(self, topic: str) -> None:
        self._spawn(self.remove_offsets_of_topic(topic))

    async def remove_offsets_of_topic(self, topic: str) -> int:
        """Drop every group's offsets for a deleted topic (and groups left empty without offsets)."""
        now = self.time_ms()
        removed = 0
        for group in list(self.groups.values()):
            if group.partition in self.owned_partitions:
                removed += await self._remove_offsets(group, [tp for tp in group.offsets if tp.topic == topic], now)
        if removed:
            log.info("Removed %d offsets of deleted topic %s", removed, topic)
        return removed

    async def _remove_offsets(self, group: GroupMetadata, partitions: list[TopicPartition], now: int) -> int:
        """Kafka's cleanupGroupMetadata for one group: remove ``partitions``' offsets, and the group itself when it
        is empty with no offsets left; tombstones record both."""
        for tp in partitions:
            group.offsets.pop(tp, None)
        group_gone = group.is_in(GroupState.EMPTY) and not group.offsets
        if group_gone:
            group.transition_to(GroupState.DEAD, now)
            del self.groups[group.group_id]
        if partitions or group_gone:
            await self.manager.write_tombstones(group.partition, group.group_id, partitions, group_gone)
        return len(partitions)
