"""Raw socket helpers for tests that speak Kafka's wire protocol themselves."""

from __future__ import annotations

import socket


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``; ConnectionError when the broker closes it first."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data
