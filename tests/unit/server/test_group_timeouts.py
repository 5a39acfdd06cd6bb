"""Group timeouts on a driven clock: sessions and rebalance timeouts expire when the clock says so, never by
sleeping, and a member's join checks only its own group's delayed join."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.server.clock import ManualClock
from mq.server.group_coordinator import GroupCoordinator
from mq.server.group_metadata import GroupState
from tests.unit.server.group_fakes import FakeManager
from tests.unit.server.test_group_coordinator import request, sync


def coordinator_on(clock: ManualClock) -> GroupCoordinator:
    config = BrokerConfig(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=0)
    coordinator = GroupCoordinator(config, FakeManager(), clock)  # type: ignore[arg-type]
    coordinator.owned_partitions[0] = 0
    return coordinator


async def join(coordinator: GroupCoordinator, clock: ManualClock, group: str = "g", **kwargs: Any) -> Any:
    """A new member's two JoinGroups; the (zero) initial rebalance delay passes on the clock."""
    first = await coordinator.join_group(replace(request(**kwargs), group_id=group))
    second = asyncio.create_task(coordinator.join_group(replace(request(first.member_id, **kwargs), group_id=group)))
    while not second.done():
        await asyncio.sleep(0)
        clock.advance(0)
    return second.result()


def test_a_silent_member_expires_at_its_session_timeout_on_the_clock() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        coordinator = coordinator_on(clock)
        joined = await join(coordinator, clock, session_ms=10_000)
        await sync(coordinator, joined, {joined.member_id: b"a"})
        group = coordinator.groups["g"]
        member = group.members[joined.member_id]
        timer = member.heartbeat_timer
        assert timer is not None
        clock.advance(9_999)
        assert coordinator.heartbeat("g", joined.member_id, None, 1) == ErrorCode.NONE  # resets the session
        assert member.heartbeat_timer is timer  # hearing from a member moves its deadline, it sets no timer
        clock.advance(9_999)
        assert joined.member_id in group.members
        clock.advance(1)
        assert not group.members and group.state == GroupState.EMPTY
        assert member.heartbeat_timer is None

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_rebalance_waits_for_known_members_until_its_timeout_and_only_its_group_is_checked() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        coordinator = coordinator_on(clock)
        first = await join(coordinator, clock, session_ms=60_000, rebalance_ms=30_000)
        await sync(coordinator, first, {first.member_id: b"a"})
        other = await join(coordinator, clock, "other", session_ms=60_000)
        assert other.generation_id == 1
        request_id = await coordinator.join_group(request(session_ms=60_000, rebalance_ms=30_000))
        newcomer = asyncio.create_task(
            coordinator.join_group(request(request_id.member_id, session_ms=60_000, rebalance_ms=30_000))
        )
        for _ in range(3):
            await asyncio.sleep(0)
        group = coordinator.groups["g"]
        assert group.state == GroupState.PREPARING_REBALANCE and coordinator.join_purgatory.watched("g") == 1
        assert coordinator.join_purgatory.watched("other") == 0
        clock.advance(29_999)
        assert not newcomer.done()
        clock.advance(1)  # the first member never rejoined: the generation forms without it
        result = await asyncio.wait_for(newcomer, 1)
        assert (result.error, result.generation_id) == (ErrorCode.NONE, 2)
        assert list(group.members) == [result.member_id] and coordinator.join_purgatory.watched("g") == 0

    asyncio.run(asyncio.wait_for(scenario(), 10))
