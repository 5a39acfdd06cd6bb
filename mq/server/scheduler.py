"""Named background tasks whose I/O runs on worker threads, never on the event loop.

A periodic task fires on the clock, takes an optional snapshot of loop-owned state on the loop (cheap: copying a
dict), runs its work with that snapshot on a worker thread, and is scheduled again ``period_ms`` after the work
ended, so one task never overlaps itself. A one-shot task with a key runs at most once at a time per key;
requests made meanwhile are folded into one more run after it. Work never mutates loop-owned state from its thread: what it returns goes to ``done``, called on the loop.
A failing task is logged under its name and, if periodic, runs again at its next period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mq.server.clock import Clock, TimerHandle

log = logging.getLogger(__name__)

NEVER_MS = 2**31
"""A period at or above this (Kafka's Long.MaxValue defaults) disables a periodic task."""


@dataclass
class _Periodic:
    name: str
    period_ms: int
    snapshot: Callable[[], Any] | None
    work: Callable[..., Any]
    done: Callable[[Any], None] | None
    timer: TimerHandle | None = None


class Scheduler:
    def __init__(self, clock: Clock, threads: int, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.clock = clock
        self._loop = loop or asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max(threads, 1), thread_name_prefix="mq-scheduler")
        self._periodic: dict[str, _Periodic] = {}
        self._loop_timers: dict[str, TimerHandle] = {}
        self._keyed: dict[Hashable, bool] = {}
        """Keys of one-shot tasks queued or at work -> whether another run was asked for meanwhile."""
        self._in_flight: set[Future[Any]] = set()
        self._stopped = False

    # --- periodic ----------------------------------------------------------------------------------------------

    def schedule(
        self,
        name: str,
        period_ms: int,
        work: Callable[..., Any],
        *,
        snapshot: Callable[[], Any] | None = None,
        done: Callable[[Any], None] | None = None,
        delay_ms: int | None = None,
    ) -> None:
        """Run ``work()`` (or ``work(snapshot())``) every ``period_ms`` on a worker thread, first after
        ``delay_ms`` (default: one period); ``done(result)`` runs on the loop after each run."""
        if period_ms >= NEVER_MS or self._stopped:
            return
        task = self._periodic[name] = _Periodic(name, period_ms, snapshot, work, done)
        self._arm(task, period_ms if delay_ms is None else delay_ms)

    def _arm(self, task: _Periodic, delay_ms: int) -> None:
        if not self._stopped and self._periodic.get(task.name) is task:
            task.timer = self.clock.call_later(delay_ms, lambda: self._fire(task))

    def _fire(self, task: _Periodic) -> None:
        task.timer = None
        try:
            args = () if task.snapshot is None else (task.snapshot(),)
        except Exception:
            log.exception("%s failed", task.name)
            self._arm(task, task.period_ms)
            return

        def finished(result: Any) -> None:
            if task.done is not None:
                task.done(result)
            self._arm(task, task.period_ms)

        self._run(task.name, task.work, args, finished, lambda: self._arm(task, task.period_ms))

    def schedule_on_loop(self, name: str, period_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` on the loop every ``period_ms``: for in-memory work (ISR expiry) and hand-offs to other
        threads; it must not block."""
        if period_ms >= NEVER_MS or self._stopped:
            return

        def fire() -> None:
            try:
                action()
            except Exception:
                log.exception("%s failed", name)
            arm()

        def arm() -> None:
            if not self._stopped:
                self._loop_timers[name] = self.clock.call_later(period_ms, fire)

        arm()

    def cancel(self, name: str) -> None:
        """Stop the periodic task ``name`` (work under way finishes)."""
        timer = self._loop_timers.pop(name, None)
        if timer is not None:
            timer.cancel()
        task = self._periodic.pop(name, None)
        if task is not None and task.timer is not None:
            task.timer.cancel()

    # --- one-shot ----------------------------------------------------------------------------------------------

    def submit(
        self,
        name: str,
        work: Callable[[], Any],
        *,
        key: Hashable | None = None,
        done: Callable[[Any], None] | None = None,
    ) -> None:
        """Run ``work`` once on a worker thread. With a ``key``, a request made while that key's task is queued or
        running is folded into one more run after it."""
        if self._stopped:
            return
        if key is not None:
            if key in self._keyed:
                self._keyed[key] = True
                return
            self._keyed[key] = False

        def finished(result: Any) -> None:
            if done is not None:
                done(result)
            after()

        def after() -> None:
            if key is not None and self._keyed.pop(key, False):
                self.submit(name, work, key=key, done=done)

        self._run(name, work, (), finished, after)

    # --- running -----------------------------------------------------------------------------------------------

    def _run(
        self,
        name: str,
        work: Callable[..., Any],
        args: tuple[Any, ...],
        finished: Callable[[Any], None],
        failed: Callable[[], None],
    ) -> None:
        future = self._executor.submit(work, *args)
        self._in_flight.add(future)

        def on_loop() -> None:
            self._in_flight.discard(future)
            exception = future.exception()
            if exception is not None:
                log.error("%s failed", name, exc_info=exception)
                failed()
                return
            try:
                finished(future.result())
            except Exception:
                log.exception("%s failed", name)

        future.add_done_callback(lambda _: self._call_soon(on_loop))

    def _call_soon(self, callback: Callable[[], None]) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback)

    async def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop firing; wait (up to ``timeout_s``) for work under way, then release the threads."""
        self._stopped = True
        for name in [*self._periodic, *self._loop_timers]:
            self.cancel(name)
        pending = [asyncio.wrap_future(f) for f in self._in_flight]
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        self._executor.shutdown(wait=False, cancel_futures=True)
