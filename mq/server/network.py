"""The broker's network layer: one asyncio listener, one ``Connection`` per socket.

A connection receives into buffers it owns (asyncio's BufferedProtocol), so a large request is copied once, by the
kernel, into the array that becomes its frame. It cuts its byte stream into frames (refusing an oversized frame
from its size prefix alone), hands them one at a time, in arrival order, to the request handler, and writes each
response before the next request is handled, as Kafka's brokers do. A response is ``bytes`` or a list of ``bytes`` and file slices; slices go out with
``loop.sendfile`` so record data never passes through Python. A malformed frame closes only its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mq.errors import KafkaError
from mq.protocol.framing import FrameReceiver
from mq.protocol.response_writer import FileRegion

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 16
"""Reading from a socket pauses while this many of its requests wait to be handled."""


Response = bytes | list[bytes | FileRegion]


@dataclass(frozen=True)
class ClientAddress:
    host: str
    port: int
    connection_id: int


RequestHandler = Callable[[bytearray, ClientAddress], Awaitable[Response | None]]
"""Handles one request frame, which it owns and may modify; None means no response (acks=0). Raising KafkaError
closes the connection."""


class Connection(asyncio.BufferedProtocol):
    """One client socket: frames in, responses out, strictly in order."""

    def __init__(self, server: SocketServer, connection_id: int) -> None:
        self._server = server
        self._connection_id = connection_id
        self._receiver = FrameReceiver(server.max_request_bytes)
        self._frames: deque[bytearray] = deque()
        self._wakeup = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.address = ClientAddress("", 0, connection_id)

    # --- asyncio.BufferedProtocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        self.address = ClientAddress(str(peer[0]), int(peer[1]), self._connection_id)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._server.tune_socket(sock)
        self._task = asyncio.get_running_loop().create_task(self._process())
        self._server.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._receiver.received(nbytes)
        except KafkaError as exc:
            log.warning("closing connection from %s:%s: %s", self.address.host, self.address.port, exc)
            self.close()
            return
        if frames:
            self._frames.extend(frames)
            self._wakeup.set()
            if len(self._frames) >= MAX_QUEUED_FRAMES and self._transport is not None:
                self._transport.pause_reading()
                self._reading_paused = True

    def eof_received(self) -> bool | None:
        self._closing = True
        self._wakeup.set()
        return True  # keep the write side open until queued requests are answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._transport = None
        self._wakeup.set()
        self._can_write.set()
        self._server.connections.discard(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # --- request loop ------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._transport is None

    def drain_and_close(self) -> None:
        """Read no more requests; answer those already received, then close."""
        if self._transport is not None:
            self._transport.pause_reading()
        self._closing = True
        self._wakeup.set()

    async def _process(self) -> None:
        while True:
            while not self._frames:
                if self._closing or self._transport is None:
                    self.close()
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            frame = self._frames.popleft()
            if self._reading_paused and len(self._frames) < MAX_QUEUED_FRAMES // 2 and self._transport is not None:
                self._transport.resume_reading()
                self._reading_paused = False
            try:
                response = await self._server.handler(frame, self.address)
                if response is not None:
                    await self._send(response)
            except KafkaError as exc:
                log.warning("closing connection from %s:%s: %s", self.address.host, self.address.port, exc)
                self.close()
                return
            except (ConnectionError, OSError):
                self.close()
                return
            except Exception:
                log.exception("unexpected error answering %s:%s", self.address.host, self.address.port)
                self.close()
                return
            finally:
                self._server.request_done.set()

    async def _send(self, response: Response) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if isinstance(response, bytes):
            transport.write(response)
        else:
            loop = asyncio.get_running_loop()
            for piece in response:
                if isinstance(piece, bytes):
                    transport.write(piece)
                    continue
                with open(piece.fd, "rb", closefd=False, buffering=0) as file:
                    await loop.sendfile(transport, file, piece.position, piece.length)
        if not self._can_write.is_set():
            await self._can_write.wait()

    def abort(self) -> None:
        """Drop the socket now, without flushing what the peer has not read."""
        self._closing = True
        self._wakeup.set()
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        self._closing = True
        self._wakeup.set()
        if self._transport is not None:
            self._transport.close()


class SocketServer:
    """Accepts connections on one listener and runs a Connection for each."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: RequestHandler,
        *,
        max_request_bytes: int,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connections: set[Connection] = set()
        self.request_done = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._next_connection_id = 0

    def tune_socket(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)

    def _new_connection(self) -> Connection:
        self._next_connection_id += 1
        return Connection(self, self._next_connection_id)

    async def start(self) -> tuple[str, int]:
        """Bind and listen; returns the bound (host, port) — port 0 picks a free one."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, self.host or None, self.port, reuse_address=True, backlog=1024
        )
        bound = self._server.sockets[0].getsockname()
        self.port = int(bound[1])
        return str(bound[0]), self.port

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Stop accepting, answer every request already received, then close all connections."""
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.drain_and_close()
        deadline = asyncio.get_running_loop().time() + grace_seconds
        while self.connections and asyncio.get_running_loop().time() < deadline:
            self.request_done.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.request_done.wait(), timeout=0.05)
        for connection in list(self.connections):
            connection.abort()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), grace_seconds)
