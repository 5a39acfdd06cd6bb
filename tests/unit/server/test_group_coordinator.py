"""The group coordinator's state machine on the event loop, with the ``__consumer_offsets`` writes faked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import GroupMetadataValue, MemberMetadataValue, OffsetCommitValue
from mq.server.group_coordinator import GroupCoordinator, JoinRequest
from mq.server.group_metadata import GroupMetadata, GroupState, JoinResult, MemberMetadata
from mq.topic_partition import TopicPartition
from tests.unit.server.group_fakes import committed, make

GROUP = "g"
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
"""Consumer protocol v0 subscribing to topic ``t``."""


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def request(
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    session_ms: int = 5000,
    rebalance_ms: int = 5000,
    require_known: bool = True,
    protocol_type: str = "consumer",
) -> JoinRequest:
    return JoinRequest(
        GROUP,
        member_id,
        instance,
        require_known,
        "client",
        "/127.0.0.1",
        rebalance_ms,
        session_ms,
        protocol_type,
        protocols if protocols is not None else [("range", SUBSCRIPTION)],
    )


async def join_fully(coordinator: GroupCoordinator, **kwargs: Any) -> JoinResult:
    """A new member's two JoinGroups (the first answered MEMBER_ID_REQUIRED)."""
    first = await coordinator.join_group(request(**kwargs))
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("client-")
    return await coordinator.join_group(request(first.member_id, **kwargs))


async def sync(coordinator: GroupCoordinator, result: JoinResult, assignments: dict[str, bytes] | None = None) -> Any:
    return await coordinator.sync_group(
        GROUP, result.generation_id, result.member_id, None, None, None, assignments or {}
    )


def test_single_member_joins_syncs_and_is_stable() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        joined = await join_fully(coordinator)
        assert (joined.error, joined.generation_id, joined.leader_id) == (0, 1, joined.member_id)
        assert joined.protocol_name == "range"
        assert [m[0] for m in joined.members] == [joined.member_id]
        synced = await sync(coordinator, joined, {joined.member_id: b"assigned"})
        assert (synced.error, synced.assignment) == (0, b"assigned")
        group = coordinator.groups[GROUP]
        assert group.state == GroupState.STABLE
        assert manager.groups == [(GROUP, 1, {joined.member_id: b"assigned"})]
        assert coordinator.heartbeat(GROUP, joined.member_id, None, 1) == ErrorCode.NONE

    run(scenario)


def test_second_member_triggers_a_rebalance_both_rejoin() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        first = await join_fully(coordinator)
        await sync(coordinator, first, {first.member_id: b"all"})
        second_task = asyncio.create_task(join_fully(coordinator))
        await asyncio.sleep(0.05)
        assert coordinator.groups[GROUP].state == GroupState.PREPARING_REBALANCE
        assert coordinator.heartbeat(GROUP, first.member_id, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = await coordinator.join_group(request(first.member_id))
        second = await second_task
        assert rejoined.generation_id == second.generation_id == 2
        assert rejoined.leader_id == first.member_id
        assert {m[0] for m in rejoined.members} == {first.member_id, second.member_id}
        assert second.members == ()
        leader_sync = asyncio.create_task(sync(coordinator, rejoined, {first.member_id: b"a", second.member_id: b"b"}))
        follower = await sync(coordinator, second)
        assert (follower.error, follower.assignment) == (0, b"b")
        assert (await leader_sync).assignment == b"a"

    run(scenario)


def test_old_generation_and_unknown_members_are_refused() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        joined = await join_fully(coordinator)
        await sync(coordinator, joined)
        assert coordinator.heartbeat(GROUP, joined.member_id, None, 0) == ErrorCode.ILLEGAL_GENERATION
        assert coordinator.heartbeat(GROUP, "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.heartbeat("other", "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
        stale = await coordinator.sync_group(GROUP, 7, joined.member_id, None, None, None, {})
        assert stale.error == ErrorCode.ILLEGAL_GENERATION
        unknown = await coordinator.join_group(request("nobody"))
        assert unknown.error == ErrorCode.UNKNOWN_MEMBER_ID

    run(scenario)


def test_join_validation_errors() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make(group_max_session_timeout_ms=1000)
        assert (await coordinator.join_group(request(session_ms=5))).error == ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await coordinator.join_group(request(session_ms=2000))).error == ErrorCode.INVALID_SESSION_TIMEOUT
        joined = await join_fully(coordinator, session_ms=500)
        await sync(coordinator, joined)
        other = await coordinator.join_group(request(protocols=[("sticky", b"")], session_ms=500))
        assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert (await coordinator.join_group(request(protocols=[], protocol_type=""))).error in (
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            ErrorCode.INVALID_SESSION_TIMEOUT,
        )
        blank = JoinRequest("", "", None, True, "c", "/h", 500, 500, "consumer", [("range", b"")])
        assert (await coordinator.join_group(blank)).error == ErrorCode.INVALID_GROUP_ID

    run(scenario)


def test_the_shipped_minimum_session_timeout_refuses_a_three_second_session() -> None:
    """mq ships Kafka's group.min.session.timeout.ms (6 s): a 3 s session, which kafka-python's own group test asks
    for, is refused with INVALID_SESSION_TIMEOUT before the member touches the group; a 6 s one joins."""
    shipped = BrokerConfig().group_min_session_timeout_ms
    assert shipped == 6000

    async def scenario() -> None:
        coordinator, _, _ = make(group_min_session_timeout_ms=shipped)
        refused = await coordinator.join_group(request(session_ms=3000))
        assert refused.error == ErrorCode.INVALID_SESSION_TIMEOUT
        assert GROUP not in coordinator.groups
        joined = await join_fully(coordinator, session_ms=shipped)
        assert (joined.error, joined.generation_id) == (0, 1)

    run(scenario)


def test_coordinator_ownership_errors() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        coordinator.owned_partitions.clear()
        assert (await coordinator.join_group(request())).error == ErrorCode.NOT_COORDINATOR
        coordinator.loading_partitions.add(0)
        assert (await coordinator.join_group(request())).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert coordinator.fetch_offsets(GROUP, None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    run(scenario)


def test_session_timeout_removes_the_member_and_rebalances_the_rest() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        first = await join_fully(coordinator, session_ms=5000)
        await sync(coordinator, first)
        second_task = asyncio.create_task(join_fully(coordinator, session_ms=100))
        await asyncio.sleep(0.02)
        first = await coordinator.join_group(request(first.member_id, session_ms=5000))
        second = await second_task
        await asyncio.gather(sync(coordinator, first), sync(coordinator, second))
        group = coordinator.groups[GROUP]
        assert group.state == GroupState.STABLE and len(group.members) == 2
        for _ in range(6):  # only the first member keeps heartbeating
            await asyncio.sleep(0.05)
            coordinator.heartbeat(GROUP, first.member_id, None, first.generation_id)
        assert second.member_id not in group.members
        assert group.state == GroupState.PREPARING_REBALANCE
        assert coordinator.heartbeat(GROUP, second.member_id, None, 2) == ErrorCode.UNKNOWN_MEMBER_ID
        again = await coordinator.join_group(request(first.member_id, session_ms=5000))
        assert (again.error, again.generation_id, len(again.members)) == (0, 3, 1)

    run(scenario)


def test_leave_group_empties_the_group_which_can_then_be_deleted() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        joined = await join_fully(coordinator)
        await sync(coordinator, joined)
        assert await coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NON_EMPTY_GROUP}
        code, members = coordinator.leave_group(GROUP, [(joined.member_id, None), ("ghost", None)])
        assert code == ErrorCode.NONE
        assert [m[2] for m in members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
        await asyncio.sleep(0.01)
        assert coordinator.groups[GROUP].state == GroupState.EMPTY
        assert manager.groups[-1][1] == 2  # the empty generation is written
        assert await coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
        assert manager.tombstones[-1] == (GROUP, [], True)
        assert await coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.GROUP_ID_NOT_FOUND}

    run(scenario)


def test_static_member_rejoins_without_rebalance_and_fences_the_old_id() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        first = await coordinator.join_group(request(instance="i1"))  # static members skip MEMBER_ID_REQUIRED
        assert first.error == 0 and first.member_id.startswith("i1-")
        await sync(coordinator, first, {first.member_id: b"mine"})
        group = coordinator.groups[GROUP]
        writes = len(manager.groups)
        rejoined = await coordinator.join_group(request(instance="i1"))
        assert rejoined.error == ErrorCode.NONE
        assert rejoined.member_id != first.member_id
        assert rejoined.generation_id == first.generation_id == group.generation_id
        assert rejoined.leader_id == first.member_id  # not told it leads: it keeps its assignment
        assert group.state == GroupState.STABLE
        assert len(manager.groups) == writes + 1
        synced = await coordinator.sync_group(GROUP, rejoined.generation_id, rejoined.member_id, "i1", None, None, {})
        assert synced.assignment == b"mine"
        fenced = ErrorCode.FENCED_INSTANCE_ID
        assert coordinator.heartbeat(GROUP, first.member_id, "i1", first.generation_id) == fenced
        assert (await coordinator.join_group(request(first.member_id, instance="i1"))).error == fenced
        commit = await committed(coordinator, GROUP, first.member_id, "i1", first.generation_id, {})
        assert commit == fenced
        assert coordinator.leave_group(GROUP, [(first.member_id, "i1")])[1][0][2] == fenced
        assert coordinator.leave_group(GROUP, [("", "i1")])[1][0][2] == ErrorCode.NONE
        await asyncio.sleep(0.01)
        assert group.state == GroupState.EMPTY

    run(scenario)


def test_protocol_is_chosen_by_votes_among_common_protocols() -> None:
    group = GroupMetadata(GROUP, 0)
    for name, protocols in [
        ("a", [("range", b""), ("roundrobin", b"")]),
        ("b", [("roundrobin", b""), ("range", b"")]),
        ("c", [("sticky", b""), ("roundrobin", b""), ("range", b"")]),
    ]:
        group.add(MemberMetadata(name, None, "c", "h", 1, 1, "consumer", protocols), None)
    assert group.select_protocol() == "roundrobin"
    group.state = GroupState.STABLE  # an empty group accepts any protocol
    assert group.supports_protocols("consumer", [("range", b"")])
    assert not group.supports_protocols("consumer", [("sticky", b"")])


def test_simple_commits_fetch_and_delete_offsets() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        tp = TopicPartition("t", 0)
        value = OffsetCommitValue(5, "meta", 1)
        assert await committed(coordinator, GROUP, "", None, 3, {tp: value}) == ErrorCode.ILLEGAL_GENERATION
        assert await committed(coordinator, GROUP, "", None, -1, {tp: value}) == ErrorCode.NONE
        assert coordinator.fetch_offsets(GROUP, None) == (ErrorCode.NONE, {tp: value})
        other = TopicPartition("t", 1)
        assert coordinator.fetch_offsets(GROUP, [tp, other]) == (ErrorCode.NONE, {tp: value, other: None})
        assert coordinator.fetch_offsets("nobody", [tp]) == (ErrorCode.NONE, {tp: None})
        assert manager.offsets == [{tp: value}]
        code, results = await coordinator.delete_offsets(GROUP, [tp])
        assert (code, results) == (ErrorCode.NONE, {tp: ErrorCode.NONE})
        assert coordinator.fetch_offsets(GROUP, [tp])[1] == {tp: None}
        assert (await coordinator.delete_offsets("nobody", [tp]))[0] == ErrorCode.GROUP_ID_NOT_FOUND

    run(scenario)


def test_failed_offset_write_is_not_applied() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        manager.error = ErrorCode.NOT_COORDINATOR
        tp = TopicPartition("t", 0)
        code = await committed(coordinator, GROUP, "", None, -1, {tp: OffsetCommitValue(1, "", 1)})
        assert code == ErrorCode.NOT_COORDINATOR
        assert coordinator.fetch_offsets(GROUP, [tp])[1] == {tp: None}

    run(scenario)


def test_member_commits_need_the_current_generation_and_subscribed_offsets_stay() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        joined = await join_fully(coordinator)
        await sync(coordinator, joined)
        tp = TopicPartition("t", 0)
        value = OffsetCommitValue(3, "", 1)
        assert await committed(coordinator, GROUP, "", None, -1, {tp: value}) == ErrorCode.UNKNOWN_MEMBER_ID
        assert await committed(coordinator, GROUP, joined.member_id, None, 9, {tp: value}) == (
            ErrorCode.ILLEGAL_GENERATION
        )
        assert await committed(coordinator, GROUP, joined.member_id, None, 1, {tp: value}) == ErrorCode.NONE
        other = TopicPartition("u", 0)
        await committed(coordinator, GROUP, joined.member_id, None, 1, {other: value})
        code, results = await coordinator.delete_offsets(GROUP, [tp, other])
        assert code == ErrorCode.NONE
        assert results == {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, other: ErrorCode.NONE}

    run(scenario)


def test_loading_a_partition_restores_groups_and_offsets() -> None:
    async def scenario() -> None:
        coordinator, manager, clock = make()
        coordinator.owned_partitions.clear()
        tp = TopicPartition("t", 2)
        member = MemberMetadataValue("m-1", "client", "/h", 5000, 5000, SUBSCRIPTION, b"assigned", "i1")
        manager.loaded.groups[GROUP] = GroupMetadataValue("consumer", 4, "range", "m-1", clock.now, (member,))
        manager.loaded.offsets[GROUP] = {tp: OffsetCommitValue(42, "", 1)}
        manager.loaded.offsets["simple"] = {tp: OffsetCommitValue(7, "", 1)}
        coordinator.on_leadership_change(TopicPartition("__consumer_offsets", 0), True)
        assert 0 in coordinator.loading_partitions
        for _ in range(50):
            await asyncio.sleep(0.01)
            if 0 in coordinator.owned_partitions:
                break
        group = coordinator.groups[GROUP]
        assert (group.state, group.generation_id, group.leader_id) == (GroupState.STABLE, 4, "m-1")
        assert group.static_members == {"i1": "m-1"}
        assert coordinator.fetch_offsets(GROUP, [tp])[1][tp] == OffsetCommitValue(42, "", 1)
        assert coordinator.groups["simple"].state == GroupState.EMPTY
        assert coordinator.heartbeat(GROUP, "m-1", "i1", 4) == ErrorCode.NONE
        coordinator.on_leadership_change(TopicPartition("__consumer_offsets", 0), False)
        assert coordinator.heartbeat(GROUP, "m-1", "i1", 4) == ErrorCode.NOT_COORDINATOR
        assert not coordinator.groups

    run(scenario)


@pytest.mark.parametrize("empty_for_ms", [0, 60_000 * 10])
def test_offsets_of_long_empty_groups_expire(empty_for_ms: int) -> None:
    async def scenario() -> None:
        coordinator, manager, clock = make(offsets_retention_minutes=5)
        joined = await join_fully(coordinator)
        await sync(coordinator, joined)
        tp = TopicPartition("t", 0)
        await committed(coordinator, GROUP, joined.member_id, None, 1, {tp: OffsetCommitValue(1, "", clock.now)})
        coordinator.leave_group(GROUP, [(joined.member_id, None)])
        await asyncio.sleep(0.01)
        clock.now += empty_for_ms
        removed = await coordinator.expire_offsets()
        if empty_for_ms:
            assert removed == 1 and GROUP not in coordinator.groups
            assert manager.tombstones == [(GROUP, [tp], True)]
        else:
            assert removed == 0 and coordinator.groups[GROUP].offsets

    run(scenario)


def test_offsets_of_a_deleted_topic_are_removed() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)
        value = OffsetCommitValue(1, "", 1)
        await committed(coordinator, GROUP, "", None, -1, {t0: value, u0: value})
        assert await coordinator.remove_offsets_of_topic("t") == 1
        assert coordinator.fetch_offsets(GROUP, None)[1] == {u0: value}
        assert manager.tombstones == [(GROUP, [t0], False)]
        assert await coordinator.remove_offsets_of_topic("u") == 1
        assert GROUP not in coordinator.groups
        assert manager.tombstones[-1] == (GROUP, [u0], True)

    run(scenario)


def test_initial_rebalance_delay_gathers_members_into_the_first_generation() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make(group_initial_rebalance_delay_ms=300)
        first = asyncio.create_task(join_fully(coordinator))
        await asyncio.sleep(0.1)
        assert not first.done()  # the first member waits for others
        second = asyncio.create_task(join_fully(coordinator))
        one, two = await asyncio.gather(first, second)
        assert one.generation_id == two.generation_id == 1
        assert len(one.members if one.members else two.members) == 2

    run(scenario)


def test_group_max_size_refuses_extra_members() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make(group_max_size=1)
        joined = await join_fully(coordinator)
        await sync(coordinator, joined)
        extra = await join_fully_or_error(coordinator)
        assert extra.error == ErrorCode.GROUP_MAX_SIZE_REACHED
        assert list(coordinator.groups[GROUP].members) == [joined.member_id]

    run(scenario)


async def join_fully_or_error(coordinator: GroupCoordinator) -> JoinResult:
    first = await coordinator.join_group(request())
    if first.error != ErrorCode.MEMBER_ID_REQUIRED:
        return first
    return await coordinator.join_group(request(first.member_id))


def test_a_load_overtaken_by_resignation_installs_nothing() -> None:
    async def scenario() -> None:
        coordinator, manager, clock = make()
        coordinator.owned_partitions.clear()
        release = threading.Event()
        loaded = manager.loaded
        loaded.offsets[GROUP] = {TopicPartition("t", 0): OffsetCommitValue(1, "", clock.now)}

        def slow_load(partition: int) -> Any:
            release.wait(5)
            return loaded

        manager.load = slow_load  # type: ignore[method-assign]
        tp = TopicPartition("__consumer_offsets", 0)
        coordinator.on_leadership_change(tp, True)
        await asyncio.sleep(0.01)
        assert coordinator.fetch_offsets(GROUP, None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        coordinator.on_leadership_change(tp, False)
        assert coordinator.fetch_offsets(GROUP, None)[0] == ErrorCode.NOT_COORDINATOR
        release.set()
        await asyncio.sleep(0.05)
        assert not coordinator.groups and not coordinator.owned_partitions

    run(scenario)


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        first = await join_fully(coordinator, rebalance_ms=200)
        await sync(coordinator, first)
        second_task = asyncio.create_task(join_fully(coordinator, rebalance_ms=200))
        second = await second_task  # the first member never rejoins
        assert (second.error, second.generation_id, second.leader_id) == (0, 2, second.member_id)
        assert list(coordinator.groups[GROUP].members) == [second.member_id]

    run(scenario)


def test_a_failed_assignment_write_fails_the_sync_and_restarts_the_rebalance() -> None:
    async def scenario() -> None:
        coordinator, manager, _ = make()
        joined = await join_fully(coordinator)
        manager.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        synced = await sync(coordinator, joined, {joined.member_id: b"x"})
        assert synced.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert coordinator.groups[GROUP].state == GroupState.PREPARING_REBALANCE
        manager.error = ErrorCode.NONE
        again = await coordinator.join_group(request(joined.member_id))
        assert (again.error, again.generation_id) == (0, 2)

    run(scenario)


def test_a_pending_member_that_never_joins_holds_the_rebalance_only_for_its_session_timeout() -> None:
    async def scenario() -> None:
        coordinator, _, _ = make()
        first = await join_fully(coordinator)
        await sync(coordinator, first)
        pending = await coordinator.join_group(request(session_ms=100))  # announced, then silent
        assert pending.error == ErrorCode.MEMBER_ID_REQUIRED
        group = coordinator.groups[GROUP]
        assert pending.member_id in group.pending_members
        rejoin = asyncio.create_task(coordinator.join_group(request(first.member_id)))
        await asyncio.sleep(0.03)
        assert not rejoin.done()  # the leader's rejoin waits for the pending member
        result = await rejoin
        assert (result.error, result.generation_id, len(result.members)) == (0, 2, 1)
        assert not group.pending_members

    run(scenario)


def test_members_joining_at_the_same_moment_form_one_generation_after_the_initial_delay() -> None:
    """Four new members, each answered MEMBER_ID_REQUIRED first, all land in generation 1 with the whole group."""

    async def scenario() -> None:
        coordinator, manager, _ = make(group_initial_rebalance_delay_ms=50)
        joined = await asyncio.gather(*(join_fully(coordinator) for _ in range(4)))
        ids = {j.member_id for j in joined}
        assert len(ids) == 4
        assert {(j.error, j.generation_id) for j in joined} == {(0, 1)}
        (leader,) = [j for j in joined if j.leader_id == j.member_id]
        assert {m[0] for m in leader.members} == ids
        assignment = {member_id: member_id.encode() for member_id in ids}
        synced = await asyncio.gather(*(sync(coordinator, j, assignment if j is leader else None) for j in joined))
        assert [s.assignment for s in synced] == [j.member_id.encode() for j in joined]
        assert coordinator.groups[GROUP].state == GroupState.STABLE
        assert [(g, generation) for g, generation, _ in manager.groups] == [(GROUP, 1)]
        assert {coordinator.heartbeat(GROUP, j.member_id, None, 1) for j in joined} == {ErrorCode.NONE}

    run(scenario)


async def member_loop(coordinator: GroupCoordinator, settled: dict[int, tuple[str, int, bytes]], index: int) -> None:
    """A consumer's group loop: join (again on any error), sync (the leader assigns every member its own id),
    then heartbeat until told the group rebalances."""
    member_id = ""
    while True:
        joined = await coordinator.join_group(request(member_id))
        member_id = joined.member_id
        if joined.error != ErrorCode.NONE:
            continue
        settled.pop(index, None)
        assignment = {m[0]: m[0].encode() for m in joined.members}
        synced = await sync(coordinator, joined, assignment)
        if synced.error != ErrorCode.NONE:
            continue
        settled[index] = (member_id, joined.generation_id, synced.assignment)
        while coordinator.heartbeat(GROUP, member_id, None, joined.generation_id) == ErrorCode.NONE:
            await asyncio.sleep(0.005)
        settled.pop(index, None)


@pytest.mark.parametrize("delay_ms", [0, 30])
def test_members_joining_within_moments_converge_on_one_generation_without_waiting_out_a_timeout(
    delay_ms: int,
) -> None:
    """Members starting a few milliseconds apart: without an initial delay the first forms a generation alone, the
    others' joins rebalance it (heartbeats tell the settled members), and well before the 5 s rebalance timeout
    every member is in one generation holding its own assignment."""

    async def scenario() -> None:
        coordinator, _, _ = make(group_initial_rebalance_delay_ms=delay_ms)
        settled: dict[int, tuple[str, int, bytes]] = {}
        members = []
        for i in range(4):
            members.append(asyncio.create_task(member_loop(coordinator, settled, i)))
            await asyncio.sleep(0.01)
        try:
            async with asyncio.timeout(2):
                while len(settled) < 4:
                    await asyncio.sleep(0.01)
            generations = {generation for _, generation, _ in settled.values()}
            assert len(generations) == 1
            assert {assignment for _, _, assignment in settled.values()} == {m.encode() for m, _, _ in settled.values()}
            group = coordinator.groups[GROUP]
            assert group.state == GroupState.STABLE
            assert (group.generation_id, len(group.members)) == (generations.pop(), 4)
        finally:
            for task in members:
                task.cancel()
            await asyncio.gather(*members, return_exceptions=True)

    run(scenario)
