"""The broker's one source of time for timeouts: wall-clock milliseconds and timers.

Every timeout (delayed fetch and produce, session and rebalance timers, ISR lag, retention, periodic tasks) reads
``Clock``. ``SystemClock`` is the real time with timers on the event loop; ``ManualClock`` stands still until a
test advances it, firing the timers that fall due in deadline order (ties in the order they were set), so
timeouts are tested without sleeping. Timers always run on the loop's thread.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time_ms(self) -> int:
        """Milliseconds since the epoch."""

    def monotonic_ms(self) -> float:
        """Milliseconds on the timers' clock: never moves back, and ``call_later(d, f)`` runs ``f`` once it has
        moved ``d`` on (give or take a loop turn)."""

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` on the loop once ``delay_ms`` have passed (at once for a delay <= 0)."""


class SystemClock:
    """Real time; timers are the running loop's (a heap of handles; cancelled ones cost nothing when they pop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def time_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        loop = self._loop or asyncio.get_running_loop()
        return loop.call_later(max(delay_ms, 0.0) / 1000, callback)


class _ManualTimer:
    __slots__ = ("callback", "cancelled", "due_ms")

    def __init__(self, due_ms: float, callback: Callable[[], None]) -> None:
        self.due_ms = due_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time that moves only through ``advance``; timers fire inside ``advance`` on the caller's thread."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = float(start_ms)
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._sequence = itertools.count()

    def time_ms(self) -> int:
        return int(self._now_ms)

    def monotonic_ms(self) -> float:
        return self._now_ms

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer(self._now_ms + max(delay_ms, 0.0), callback)
        heapq.heappush(self._timers, (timer.due_ms, next(self._sequence), timer))
        return timer

    @property
    def pending(self) -> int:
        """Timers set and neither fired nor cancelled."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms``, firing each timer due on the way at its own deadline; a timer set by a
        callback fires in the same call when it falls within the interval."""
        target = self._now_ms + ms
        while self._timers and self._timers[0][0] <= target:
            due, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now_ms = max(self._now_ms, due)
            timer.callback()
        self._now_ms = target
