"""The component tier: a whole broker (``mq.server.broker.KafkaServer``, standalone mode, listening on a free
loopback port) started in the test's own process, on an asyncio loop in a thread of its own, so a test can change
what the process sees (e.g. wrap ``os.fsync`` with ``monkeypatch``) while real clients talk to the broker over TCP.
A test may give the broker a ``ManualClock``: every timeout then waits for ``advance``, which moves the clock on the
broker's loop, so timeouts are tested without sleeping. Tests here assert how the broker behaves while one of its
parts is slow, and what its timeouts do; the broker must stay responsive for the parts that are not slow."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from mq.config import BrokerConfig
from mq.server.broker import KafkaServer, new_event_loop
from mq.server.clock import ManualClock

EVENT_LOOP_OVERRIDE = [f"event.loop={loop}"] if (loop := os.environ.get("MQ_TEST_EVENT_LOOP")) else []
"""The brokers' event loop is the configured default unless MQ_TEST_EVENT_LOOP names one (uvloop or asyncio)."""


@dataclass
class InProcessBroker:
    """A started broker and the loop it runs on; ``bootstrap`` is its 127.0.0.1 address."""

    server: KafkaServer
    loop: asyncio.AbstractEventLoop
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def advance(self, ms: float) -> None:
        """Move the broker's ManualClock forward on its loop, firing the timeouts that fall due."""
        clock = self.server.clock
        assert isinstance(clock, ManualClock)

        async def advance() -> None:
            clock.advance(ms)

        asyncio.run_coroutine_threadsafe(advance(), self.loop).result(10)


def start_broker(overrides: list[str], clock: ManualClock | None = None) -> tuple[InProcessBroker, threading.Thread]:
    """A standalone broker with ``overrides`` (``log.dirs`` among them) and optionally a driven ``clock``, started
    on a loop in a thread of its own."""
    config = BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", *EVENT_LOOP_OVERRIDE, *overrides])
    loop = new_event_loop(config.event_loop)
    thread = threading.Thread(target=loop.run_forever, name="broker-loop", daemon=True)
    thread.start()
    server = KafkaServer(config, clock)
    bound = asyncio.run_coroutine_threadsafe(server.startup(), loop).result(60)
    return InProcessBroker(server, loop, bound.port), thread


def stop_broker(broker: InProcessBroker, thread: threading.Thread) -> None:
    asyncio.run_coroutine_threadsafe(broker.server.shutdown(), broker.loop).result(60)
    broker.loop.call_soon_threadsafe(broker.loop.stop)
    thread.join(10)
    broker.loop.close()


@pytest.fixture
def in_process_broker() -> Iterator[Callable[..., InProcessBroker]]:
    """Starts a standalone broker with ``overrides`` (``log.dirs`` among them) and optionally a driven ``clock``;
    stopped cleanly after the test."""
    started: list[tuple[InProcessBroker, threading.Thread]] = []

    def start(overrides: list[str], clock: ManualClock | None = None) -> InProcessBroker:
        started.append(start_broker(overrides, clock))
        return started[-1][0]

    yield start
    for broker, thread in started:
        stop_broker(broker, thread)
