"""Delayed operations watched by key: Kafka's purgatory.

A ``DelayedOperation`` waits for something that other requests cause (an append to a partition, a high-watermark
move, a group's members rejoining). It is first tried at once; if it cannot complete it watches its keys
(topic-partitions, group ids) and is tried again only when one of those keys is checked, so an event costs the
watchers of its own key and nothing else. Expiry is a clock timer per operation (the loop's timer heap); an
operation completes exactly once, by ``try_complete`` returning True or by its timeout, and then leaves every
watcher list it was on. Everything runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

from mq.server.clock import Clock, TimerHandle

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class DelayedOperation:
    """Subclasses decide when they are done (``try_complete``) and what completing means (``on_complete``)."""

    def __init__(self, timeout_ms: float) -> None:
        self.timeout_ms = timeout_ms
        self.completed = False
        self._timer: TimerHandle | None = None

    def try_complete(self) -> bool:
        """Whether the operation can complete now; called at first and after each check of a watched key."""
        raise NotImplementedError

    def on_complete(self, expired: bool) -> None:
        """Called exactly once: when ``try_complete`` said yes (``expired`` False) or at the timeout."""
        raise NotImplementedError

    def force_complete(self, expired: bool = False) -> bool:
        """Complete now unless already completed; returns whether this call completed it."""
        if self.completed:
            return False
        self.completed = True
        self.cancel_timer()
        self.on_complete(expired)
        return True

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Purgatory(Generic[K]):
    """Watcher lists per key; ``len(purgatory)`` is the number of operations waiting."""

    def __init__(self, clock: Clock, name: str) -> None:
        self.clock = clock
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the operations' futures belong to: the running loop of the first ``park`` (asking for the running
        loop costs a getpid system call each time)."""
        self._watchers: dict[K, dict[DelayedOperation, None]] = {}
        self._keys: dict[DelayedOperation, tuple[K, ...]] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def watched(self, key: K) -> int:
        """Operations waiting on ``key``."""
        return len(self._watchers.get(key, ()))

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[K], *, tried: bool = False) -> bool:
        """Complete ``operation`` now if it can; else watch ``keys`` until a check completes it or it expires.
        Returns whether it completed at once. ``tried``: the caller has just found that it cannot complete (nothing
        can change before it is watched, as both run on the loop), so it is not tried again."""
        if not tried and operation.try_complete() and operation.force_complete():
            return True
        watched = self._keys[operation] = tuple(dict.fromkeys(keys))
        for key in watched:
            self._watchers.setdefault(key, {})[operation] = None
        operation._timer = self.clock.call_later(operation.timeout_ms, lambda: self._expire(operation))
        return False

    def watch(self, operation: DelayedOperation, keys: Iterable[K]) -> Watch | None:
        """``try_complete_else_watch``, returning a handle to cancel the operation while it waits (None when it
        completed at once)."""
        return None if self.try_complete_else_watch(operation, keys) else Watch(self, operation)

    def check_and_complete(self, key: K) -> int:
        """Try the operations watching ``key``; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for operation in list(watchers):
            if not operation.completed and operation.try_complete() and operation.force_complete():
                completed += 1
                self._unwatch(operation)
        return completed

    def complete_all(self) -> None:
        """Complete every waiting operation as expired (shutdown)."""
        for operation in list(self._keys):
            if operation.force_complete(expired=True):
                self._unwatch(operation)

    def cancel(self, operation: DelayedOperation) -> None:
        """Drop a waiting operation without completing it (its waiter has gone)."""
        if not operation.completed and operation in self._keys:
            operation.completed = True
            operation.cancel_timer()
            self._unwatch(operation)

    def _expire(self, operation: DelayedOperation) -> None:
        operation._timer = None
        if operation.force_complete(expired=True):
            self._unwatch(operation)

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in self._keys.pop(operation, ()):
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(operation, None)
                if not watchers:
                    del self._watchers[key]


class DelayedFuture(DelayedOperation, Generic[T]):
    """An operation whose answer is ``check()`` once that is not None, or ``final()`` at the timeout; the answer
    goes to ``future`` (unless the waiter has gone)."""

    def __init__(
        self, timeout_ms: float, check: Callable[[], T | None], final: Callable[[], T], future: asyncio.Future[T]
    ) -> None:
        super().__init__(timeout_ms)
        self._check = check
        self._final = final
        self._answer: T | None = None
        self.future = future

    def try_complete(self) -> bool:
        if self.future.done():
            return True
        self._answer = self._check()
        return self._answer is not None

    def on_complete(self, expired: bool) -> None:
        if self.future.done():
            return
        answer = self._answer if self._answer is not None and not expired else self._final()
        self.future.set_result(answer)


def answer_or_wait(
    purgatory: Purgatory[K], keys: Iterable[K], timeout_ms: float, check: Callable[[], T | None], final: Callable[[], T]
) -> T | asyncio.Future[T]:
    """``check()``'s answer now, else a future completed from ``purgatory`` (parked on ``keys``) by a check of one of
    them that answers, or by ``final()`` after ``timeout_ms``. With no time to wait, ``final()`` alone answers. An
    answer found at once costs no future, operation or timer; cancelling the future leaves the watcher lists."""
    if timeout_ms <= 0:
        return final()
    answer = check()
    if answer is not None:
        return answer
    return park(purgatory, keys, timeout_ms, check, final).future


def park(
    purgatory: Purgatory[K], keys: Iterable[K], timeout_ms: float, check: Callable[[], T | None], final: Callable[[], T]
) -> DelayedFuture[T]:
    """For a caller that has just found ``check()`` None: a waiting operation whose ``future`` gets ``check()``'s
    answer after a check of one of ``keys``, or ``final()`` after ``timeout_ms``. Costs a future, the operation and
    one timer, and no task. Cancelling the future takes the operation out of the watcher lists at once."""
    loop = purgatory.loop
    if loop is None or loop.is_closed():
        loop = purgatory.loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    operation = DelayedFuture(timeout_ms, check, final, future)
    purgatory.try_complete_else_watch(operation, keys, tried=True)

    def waiter_gone(done: asyncio.Future[T]) -> None:
        if done.cancelled():
            purgatory.cancel(operation)

    future.add_done_callback(waiter_gone)
    return operation


async def settled(answer: T | asyncio.Future[T]) -> T:
    """An answer given now or as a future (what ``answer_or_wait`` returns), once it is there."""
    return await answer if isinstance(answer, asyncio.Future) else answer


async def waited(operation: DelayedFuture[T]) -> T:
    """The answer of a parked operation (a cancelled waiter cancels its future, which drops the operation)."""
    return await operation.future


class DelayedCall(DelayedOperation):
    """An operation that calls ``action(expired)`` once ``ready()`` holds or at its timeout (Kafka's delayed join
    and heartbeat, whose completion is the coordinator's own work)."""

    def __init__(self, timeout_ms: float, ready: Callable[[], bool], action: Callable[[bool], None]) -> None:
        super().__init__(timeout_ms)
        self._ready = ready
        self._action = action

    def try_complete(self) -> bool:
        return self._ready()

    def on_complete(self, expired: bool) -> None:
        self._action(expired)


class Watch:
    """A handle on a waiting operation: ``cancel`` drops it without completing it."""

    def __init__(self, purgatory: Purgatory[Any], operation: DelayedOperation) -> None:
        self._purgatory = purgatory
        self._operation = operation

    def cancel(self) -> None:
        self._purgatory.cancel(self._operation)
