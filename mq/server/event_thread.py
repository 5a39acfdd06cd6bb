"""A thread that runs posted callables one at a time, in the order posted: the controller's event queue.

``post`` may be called from any thread (the loop, kazoo's watch thread, the controller itself). ``call`` posts a
callable and returns a future of its result, which the loop awaits with ``asyncio.wrap_future``. An exception in a
posted callable is logged and the thread goes on; ``stop`` lets everything posted before it run, then ends.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class EventThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    def post(self, event: Callable[[], None]) -> None:
        self._queue.put(event)

    def call(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on this thread after everything posted before it; its result or exception goes to the future."""
        return call_through(self.post, fn)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Run what is queued, then end the thread (waiting up to ``timeout_s``)."""
        self._queue.put(None)
        if self._thread.is_alive() and not self.is_current:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                event()
            except Exception:
                log.exception("%s: event failed", self.name)


def call_through(post: Callable[[Callable[[], None]], object], fn: Callable[[], T]) -> Future[T]:
    """Hand ``fn`` to ``post`` (which runs it later, on some thread) and return a future of its outcome."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    post(run)
    return future
