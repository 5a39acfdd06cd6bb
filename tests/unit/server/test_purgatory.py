"""The purgatory: operations complete once, by their own keys' checks or at their timeout, on a driven clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from mq.server.clock import ManualClock
from mq.server.purgatory import DelayedOperation, Purgatory, answer_or_wait, park

T = TypeVar("T")


class Counter(DelayedOperation):
    """Completes once ``ready`` is set; counts how often it was tried."""

    def __init__(self, timeout_ms: float) -> None:
        super().__init__(timeout_ms)
        self.ready = False
        self.tries = 0
        self.outcomes: list[bool] = []

    def try_complete(self) -> bool:
        self.tries += 1
        return self.ready

    def on_complete(self, expired: bool) -> None:
        self.outcomes.append(expired)


def test_an_operation_that_can_complete_at_once_is_never_watched() -> None:
    purgatory: Purgatory[str] = Purgatory(ManualClock(), "test")
    operation = Counter(100)
    operation.ready = True
    assert purgatory.try_complete_else_watch(operation, ["a"])
    assert operation.outcomes == [False] and len(purgatory) == 0 and purgatory.watched("a") == 0


def test_a_check_tries_only_the_watchers_of_its_key() -> None:
    clock = ManualClock()
    purgatory: Purgatory[str] = Purgatory(clock, "test")
    idle = [Counter(500) for _ in range(500)]
    for operation in idle:
        purgatory.try_complete_else_watch(operation, ["idle"])
    busy = Counter(500)
    purgatory.try_complete_else_watch(busy, ["busy", "other"])
    for _ in range(100):
        assert purgatory.check_and_complete("busy") == 0
    assert busy.tries == 101 and all(op.tries == 1 for op in idle)  # appends elsewhere never touch idle waiters
    busy.ready = True
    assert purgatory.check_and_complete("other") == 1
    assert busy.outcomes == [False] and purgatory.watched("busy") == 0 and purgatory.watched("other") == 0
    assert len(purgatory) == 500


def test_expiry_completes_once_at_the_deadline_and_unwatches() -> None:
    clock = ManualClock()
    purgatory: Purgatory[str] = Purgatory(clock, "test")
    early, late = Counter(100), Counter(300)
    purgatory.try_complete_else_watch(early, ["k"])
    purgatory.try_complete_else_watch(late, ["k"])
    clock.advance(99)
    assert early.outcomes == [] and len(purgatory) == 2
    clock.advance(1)
    assert early.outcomes == [True] and late.outcomes == [] and purgatory.watched("k") == 1
    late.ready = True
    purgatory.check_and_complete("k")
    clock.advance(1000)  # the completed operation's timer was cancelled: no second completion
    assert late.outcomes == [False] and len(purgatory) == 0 and clock.pending == 0


def test_complete_all_expires_everything_waiting() -> None:
    purgatory: Purgatory[int] = Purgatory(ManualClock(), "test")
    operations = [Counter(1000) for _ in range(3)]
    for i, operation in enumerate(operations):
        purgatory.try_complete_else_watch(operation, [i, 99])
    purgatory.complete_all()
    assert [op.outcomes for op in operations] == [[True]] * 3 and len(purgatory) == 0


async def wait_for_answer(
    purgatory: Purgatory[str], keys: list[str], timeout_ms: float, check: Callable[[], T | None], final: Callable[[], T]
) -> T:
    answer = answer_or_wait(purgatory, keys, timeout_ms, check, final)
    return await answer if isinstance(answer, asyncio.Future) else answer


def test_wait_for_answer_returns_the_check_or_the_final_answer() -> None:
    clock = ManualClock()

    async def run() -> tuple[str, str, int]:
        purgatory: Purgatory[str] = Purgatory(clock, "test")
        state = {"value": None}
        answered = asyncio.create_task(wait_for_answer(purgatory, ["k"], 1000, lambda: state["value"], lambda: "late"))
        timed_out = asyncio.create_task(wait_for_answer(purgatory, ["j"], 1000, lambda: None, lambda: "late"))
        await asyncio.sleep(0)
        state["value"] = "now"  # type: ignore[assignment]
        purgatory.check_and_complete("k")
        clock.advance(1000)
        return await answered, await timed_out, len(purgatory)

    assert asyncio.run(run()) == ("now", "late", 0)


def test_a_cancelled_waiter_leaves_the_watcher_lists() -> None:
    async def run() -> int:
        purgatory: Purgatory[str] = Purgatory(ManualClock(), "test")
        waiter = asyncio.create_task(wait_for_answer(purgatory, ["k"], 1000, lambda: None, lambda: 0))
        await asyncio.sleep(0)
        assert purgatory.watched("k") == 1
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        return purgatory.watched("k") + len(purgatory)

    assert asyncio.run(run()) == 0


def test_a_parked_future_is_answered_by_a_check_or_its_timer_and_a_cancelled_one_by_nothing() -> None:
    clock = ManualClock()
    purgatory: Purgatory[str] = Purgatory(clock, "test")
    answer: list[str] = []

    async def run() -> None:
        woken = park(purgatory, ["a"], 500, lambda: answer[0] if answer else None, lambda: "final")
        expired = park(purgatory, ["b"], 500, lambda: None, lambda: "final")
        dropped = park(purgatory, ["a"], 500, lambda: "never", lambda: "never")
        assert len(purgatory) == 3 and clock.pending == 3
        dropped.future.cancel()
        answer.append("data")
        assert purgatory.check_and_complete("a") == 2  # the woken one, and the cancelled one leaves
        assert woken.future.result() == "data" and dropped.future.cancelled()
        clock.advance(500)
        assert expired.future.result() == "final" and len(purgatory) == 0 and clock.pending == 0

    asyncio.run(run())
