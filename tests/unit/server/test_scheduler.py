"""The scheduler: work runs on its threads, never on the loop; periods follow the driven clock; keyed one-shot
tasks coalesce; failures are logged and the task keeps its period."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mq.server.clock import ManualClock
from mq.server.scheduler import NEVER_MS, Scheduler


async def settle(condition: object, timeout_s: float = 5.0) -> None:
    """Let worker threads finish and their results reach the loop."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        await asyncio.sleep(0.01)


def test_periodic_work_runs_off_the_loop_with_a_snapshot_taken_on_it() -> None:
    async def run() -> None:
        clock = ManualClock()
        scheduler = Scheduler(clock, 2)
        loop_thread = threading.current_thread()
        seen: list[tuple[int, bool, bool]] = []
        done: list[int] = []
        counter = iter(range(100))

        def snapshot() -> int:
            assert threading.current_thread() is loop_thread
            return next(counter)

        def work(value: int) -> int:
            seen.append((value, threading.current_thread() is loop_thread, True))
            return value * 10

        scheduler.schedule("task", 1000, work, snapshot=snapshot, done=done.append)
        clock.advance(999)
        await asyncio.sleep(0.05)
        assert seen == []
        clock.advance(1)
        await settle(lambda: done == [0])
        clock.advance(1000)
        await settle(lambda: done == [0, 10])
        assert [s[:2] for s in seen] == [(0, False), (1, False)]
        scheduler.schedule("never", NEVER_MS, work)
        clock.advance(10**9)
        await settle(lambda: len(done) == 3)
        assert len(seen) == 3  # the disabled task never ran; the other fired once more (it is re-armed after work)
        await scheduler.shutdown()

    asyncio.run(run())


def test_a_failing_periodic_task_is_logged_and_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> int:
        clock = ManualClock()
        scheduler = Scheduler(clock, 1)
        calls: list[int] = []

        def fail() -> None:
            calls.append(1)
            raise OSError("disk gone")

        scheduler.schedule("retention", 100, fail)
        for expected in (1, 2, 3):
            clock.advance(100)
            await settle(lambda expected=expected: len(calls) == expected and "retention failed" in caplog.text)
        await scheduler.shutdown()
        return len(calls)

    assert asyncio.run(run()) == 3
    assert "retention failed" in caplog.text


def test_keyed_one_shot_tasks_coalesce_while_one_runs() -> None:
    async def run() -> list[str]:
        scheduler = Scheduler(ManualClock(), 4)
        release = threading.Event()
        runs: list[str] = []

        def flush() -> None:
            runs.append("start")
            release.wait(5)
            runs.append("end")

        scheduler.submit("flush", flush, key="log-a")
        await settle(lambda: runs == ["start"])
        for _ in range(10):
            scheduler.submit("flush", flush, key="log-a")  # folded into one more run after this one
        release.set()
        await settle(lambda: runs.count("end") == 2)
        await asyncio.sleep(0.05)
        await scheduler.shutdown()
        return runs

    assert asyncio.run(run()) == ["start", "end", "start", "end"]


def test_a_slow_task_does_not_hold_up_others() -> None:
    async def run() -> list[str]:
        scheduler = Scheduler(ManualClock(), 2)
        release = threading.Event()
        order: list[str] = []
        scheduler.submit("slow-disk flush", lambda: (release.wait(5), order.append("slow")), key="slow")
        scheduler.submit("fast-disk flush", lambda: order.append("fast"), key="fast")
        await settle(lambda: order == ["fast"])
        release.set()
        await settle(lambda: len(order) == 2)
        await scheduler.shutdown()
        return order

    assert asyncio.run(run()) == ["fast", "slow"]
