"""The one rate limiter: a token bucket that lends, so a taker learns how long to wait and sleeps its own way (a
thread on an event, a coroutine on ``asyncio.sleep``). Used by the log cleaner's I/O limit and the tools' rates."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


def default_burst(rate: float) -> int:
    """A tenth of a second of tokens (at least one): small enough that a run of a few seconds holds the rate."""
    return max(1, math.ceil(rate / 10))


class TokenBucket:
    """``rate`` tokens a second, holding at most ``burst`` (default ``default_burst``; ``math.inf``: every token
    since it was made) and starting with ``initial`` (default: full).

    ``reserve(n)`` takes n tokens at once and returns the seconds to wait before using them: the balance may go
    negative, a debt later reservations wait behind, so over any span of T seconds at most
    ``max(initial, burst) + rate * T`` tokens are used. Thread-safe."""

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        *,
        initial: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0:
            raise ValueError("the rate must be positive")
        self.rate = rate
        self.burst = burst if burst is not None else default_burst(rate)
        self._clock = clock
        self._mutex = threading.Lock()
        self._tokens = self.burst if initial is None else initial
        self._updated = clock()

    def reserve(self, count: float) -> float:
        with self._mutex:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
            self._updated = now
            self._tokens -= count
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate
