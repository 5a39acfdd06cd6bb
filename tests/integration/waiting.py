"""Polling for conditions that other processes make true (brokers, ZooKeeper, clients)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout: float = 30.0, interval: float = 0.1) -> bool:
    """Poll ``condition`` every ``interval`` seconds until it is truthy (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return False
