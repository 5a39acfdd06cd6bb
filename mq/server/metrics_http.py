"""The broker's HTTP listener (``metrics.listener``): ``GET /metrics`` (Prometheus text), ``/health``, ``/ready``.

A minimal HTTP/1.1 server on the broker's event loop (``asyncio.start_server``): one request per connection
(``Connection: close``), a request line and headers of at most ``MAX_HEAD_BYTES``, answered within
``READ_TIMEOUT_S``. A scrape runs on the loop, so the collector reads loop-owned state without locks; the
controller's counts are asked of the controller thread first (bounded by ``CONTROLLER_WAIT_S``; the last ones are
used when it does not answer in time). ``/health`` answers 200 while the process serves HTTP; ``/ready`` 200 once
the broker has loaded its logs, registered and serves, 503 before and from the start of its shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from mq.errors import ConfigError

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 10.0
CONTROLLER_WAIT_S = 1.0


def parse_metrics_listener(text: str) -> tuple[str, int]:
    """(host, port) of ``http://HOST:PORT``; raises ConfigError naming ``metrics.listener`` otherwise."""
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None or parts.path not in ("", "/"):
        raise ConfigError(f"metrics.listener must be http://HOST:PORT, not {text!r}")
    return parts.hostname or "", port


class MetricsServer:
    """Serves the registry; ``ready`` says whether /ready answers 200; ``before_scrape`` refreshes what the
    collector cannot read on the loop."""

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        before_scrape: Callable[[], Awaitable[None]],
    ) -> None:
        self.registry = registry
        self.ready = ready
        self.before_scrape = before_scrape
        self._server: asyncio.Server | None = None

    async def start(self, text: str) -> int:
        """Bind ``metrics.listener``; the bound port. Raises ConfigError (one line) when it cannot be bound."""
        host, port = parse_metrics_listener(text)
        try:
            self._server = await asyncio.start_server(self._serve, host or None, port, reuse_address=True)
        except OSError as exc:
            raise ConfigError(f"metrics.listener {text}: cannot listen: {exc.strerror or exc}") from exc
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, content_type, body = await self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode("ascii")
        )
        if not head.startswith(b"HEAD "):
            writer.write(body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    async def _answer(self, head: bytes) -> tuple[int, str, bytes]:
        parts = head[:MAX_HEAD_BYTES].split(b"\r\n", 1)[0].split()
        if len(parts) < 2:
            return 405, "text/plain", b"bad request\n"
        method, path = parts[0], urlsplit(parts[1].decode("latin-1")).path
        if method not in (b"GET", b"HEAD"):
            return 405, "text/plain", b"only GET\n"
        if path == "/health":
            return 200, "text/plain", b"ok\n"
        if path == "/ready":
            return (200, "text/plain", b"ready\n") if self.ready() else (503, "text/plain", b"not ready\n")
        if path == "/metrics":
            await self.before_scrape()
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        return 404, "text/plain", b"not found\n"
