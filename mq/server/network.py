"""The broker's network layer: its own accept loop on the listener's sockets, one ``Connection`` per client socket.

A connection receives into buffers it owns (asyncio's BufferedProtocol), so a large request is copied once, by the
kernel, into the array that becomes its frame. It cuts its byte stream into frames (refusing an oversized frame
from its size prefix alone), hands them one at a time, in arrival order, to the request handler, and writes each
response before the next request is handled, as Kafka's brokers do. A response is ``bytes`` or a list of ``bytes`` and file slices; slices go out with
``loop.sendfile`` so record data never passes through Python. A malformed frame closes only its own connection.

Hostile or broken clients are bounded: requests too large for a connection's receive buffer grow, as their bytes
arrive, into memory reserved from one ``MemoryPool`` (``queued.max.request.bytes``; a connection whose frame cannot
grow is not read until memory is released, it is never dropped for it; smaller requests are bounded per connection
by the receive buffer and ``MAX_QUEUED_FRAMES``). As Kafka's acceptor, the accept loop stops accepting while
``max.connections`` are open (new connections wait in the listen backlog; a peer broker's liveness ping then times
out, which proves nothing, where a closed connection would look like a dead broker) and closes a connection over
``max.connections.per.ip`` at once; when accept fails for want of file descriptors or memory it stops accepting
for ``ACCEPT_BACKOFF_SECONDS``. Each of these is logged at most once per ``REPORT_INTERVAL_SECONDS``, and
established connections go on being served meanwhile. A periodic sweep closes connections
idle for ``connections.max.idle.ms`` and those whose request has been arriving for longer than
``socket.request.receive.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from mq.errors import KafkaError
from mq.protocol.framing import UNBOUNDED, FrameReceiver, MemoryPool
from mq.protocol.response_writer import FileRegion

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 16
"""Reading from a socket pauses while this many of its requests wait to be handled."""


ACCEPT_BATCH = 128
"""Connections accepted per readiness event of the listener before other work gets a turn."""

ACCEPT_BACKOFF_SECONDS = 0.5
"""How long the listener is not read after accept failed for want of file descriptors or memory."""

REPORT_INTERVAL_SECONDS = 10.0
"""Refused connections and accept failures are logged at most once per interval, with a count."""

OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

Response = bytes | list[bytes | FileRegion]


@dataclass(frozen=True)
class ClientAddress:
    host: str
    port: int
    connection_id: int


@dataclass(frozen=True)
class ConnectionLimits:
    """What clients may hold of the broker; the defaults are Kafka's, except that these leave the memory pool and the
    timeouts off (the broker passes its configured values).

    ``queued_max_request_bytes`` < 0 = no limit; a timeout < 0 = none; ``max_connections_per_ip_overrides`` maps an
    IP address or host name to its own limit.
    """

    queued_max_request_bytes: int = -1
    max_connections: int = 2147483647
    max_connections_per_ip: int = 2147483647
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = -1
    request_receive_timeout_ms: int = -1


class _Report:
    """Logs a recurring event at most once per ``REPORT_INTERVAL_SECONDS``, counting the occurrences in between."""

    __slots__ = ("_due", "_level", "_message", "count")

    def __init__(self, level: int, message: str) -> None:
        self._level = level
        self._message = message  # formatted with (count, detail)
        self._due = 0.0
        self.count = 0

    def __call__(self, detail: object) -> None:
        self.count += 1
        now = time.monotonic()
        if now >= self._due:
            log.log(self._level, self._message, self.count, detail)
            self._due = now + REPORT_INTERVAL_SECONDS
            self.count = 0


RequestHandler = Callable[[bytearray, ClientAddress], Awaitable[Response | None]]
"""Handles one request frame, which it owns and may modify; None means no response (acks=0). Raising KafkaError
closes the connection."""


class Connection(asyncio.BufferedProtocol):
    """One client socket: frames in, responses out, strictly in order."""

    def __init__(self, server: SocketServer, connection_id: int, host: str) -> None:
        self._server = server
        self._connection_id = connection_id
        self.host = host  # the address its per-IP count is kept under
        self._receiver = FrameReceiver(server.max_request_bytes, server.pool)
        self._frames: deque[bytearray] = deque()
        self.handling = False  # a request is in the handler or its response is being sent
        self.last_active = time.monotonic()  # when a request last arrived or was answered
        self.frame_started = 0.0  # when the partial frame in the receiver started arriving; 0 = none
        self._memory_paused = False
        self._wakeup = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.made = False
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
        self.made = True

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        receiver = self._receiver
        try:
            frames = receiver.received(nbytes)
        except KafkaError as exc:
            log.warning("closing connection from %s:%s: %s", self.address.host, self.address.port, exc)
            self.close()
            return
        if frames:
            self._frames.extend(frames)
            self._wakeup.set()
            self.last_active = now = time.monotonic()
            self.frame_started = now if receiver.buffered_bytes else 0.0
            if len(self._frames) >= MAX_QUEUED_FRAMES and self._transport is not None:
                self._transport.pause_reading()
                self._reading_paused = True
        elif not self.frame_started:
            self.frame_started = time.monotonic()
        if receiver.waiting_for_memory and self._transport is not None:
            self._transport.pause_reading()
            self._memory_paused = True
            self._server.pool.wait(self._memory_released)

    def _memory_released(self) -> bool:
        """The pool's retry: grow the frame being received and read again; False while the pool still refuses."""
        if self._transport is None:
            return True
        if not self._receiver.grow():
            return False
        self._memory_paused = False
        if not self._reading_paused:
            self._transport.resume_reading()
        return True

    def eof_received(self) -> bool | None:
        self._closing = True
        self._wakeup.set()
        return True  # keep the write side open until queued requests are answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._transport = None
        self._wakeup.set()
        self._can_write.set()
        self._server.pool.cancel(self._memory_released)
        self._receiver.discard()
        self._server.connection_closed(self)

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
        try:
            await self._serve()
        finally:
            pool, pooled = self._server.pool, self._receiver.min_pooled_frame
            while self._frames:  # received but never handled: the connection closed first
                size = len(self._frames.popleft())
                if size >= pooled:
                    pool.release(size)

    async def _serve(self) -> None:
        pool, pooled = self._server.pool, self._receiver.min_pooled_frame
        while True:
            while not self._frames:
                if self._closing or self._transport is None:
                    self.close()
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            frame = self._frames.popleft()
            size = len(frame)  # the handler owns the frame and may resize it
            if self._reading_paused and len(self._frames) < MAX_QUEUED_FRAMES // 2 and self._transport is not None:
                self._reading_paused = False
                if self.frame_started:  # a frame left half-read while requests queued was not slow to arrive
                    self.frame_started = time.monotonic()
                if not self._memory_paused:
                    self._transport.resume_reading()
            self.handling = True
            try:
                try:
                    response = await self._server.handler(frame, self.address)
                finally:  # the frame is done with (a produce request's records are appended by now)
                    del frame
                    if size >= pooled:
                        pool.release(size)
                if response is not None:
                    await self._send(response)  # a client that does not read holds its connection, not the pool
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
                self.handling = False
                self.last_active = time.monotonic()
                self._server.request_done.set()

    def expired(self, now: float, max_idle: float, receive_timeout: float) -> str | None:
        """Why the sweep should close this connection now, if it should (a timeout <= 0 is off)."""
        if self.handling or self._frames:
            return None
        if self.frame_started:
            if receive_timeout > 0 and now - self.frame_started > receive_timeout:
                return "its request did not arrive in time"
            return None
        if max_idle > 0 and now - self.last_active > max_idle:
            return "it was idle"
        return None

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
    """Accepts connections on one listener and runs a Connection for each, within ``limits``."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: RequestHandler,
        *,
        max_request_bytes: int,
        limits: ConnectionLimits | None = None,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.limits = limits = limits if limits is not None else ConnectionLimits()
        queued = limits.queued_max_request_bytes
        # a largest request is kept in reserve, so that one frame at a time can always be completed
        self.pool = MemoryPool(queued, min(queued, max_request_bytes)) if queued >= 0 else MemoryPool(UNBOUNDED)
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connections: set[Connection] = set()
        self.request_done = asyncio.Event()
        self._listeners: list[socket.socket] = []
        self._per_ip: dict[str, int] = {}
        self._per_ip_limits: dict[str, int] = {}
        self._open = 0  # accepted and not yet closed, including those still being set up
        self._next_connection_id = 0
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._resume_timers: dict[socket.socket, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._accepting = True  # False while max.connections are open
        self._full = _Report(
            logging.WARNING,
            "stopped accepting %d time(s): max.connections (%s) are open; new ones wait until one closes",
        )
        self._refused = _Report(
            logging.WARNING, "closed %d connection(s) over max.connections.per.ip, the last from %s"
        )
        self._accept_failed = _Report(
            logging.WARNING,
            f"accept failed %d time(s): %s; not accepting for {ACCEPT_BACKOFF_SECONDS} s at a time while "
            "established connections are served",
        )
        self._expired = _Report(logging.INFO, "closed %d connection(s) by timeout, the last because %s")

    def tune_socket(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)

    async def start(self) -> tuple[str, int]:
        """Bind and listen; returns the bound (host, port) — port 0 picks a free one."""
        loop = asyncio.get_running_loop()
        limits = self.limits
        for name, limit in limits.max_connections_per_ip_overrides.items():
            for address in await _addresses(name):
                self._per_ip_limits[address] = limit
        self._listeners = await _listen(self.host, self.port)
        for listener in self._listeners:
            loop.add_reader(listener.fileno(), self._accept, listener)
        timeouts = [t for t in (limits.connections_max_idle_ms, limits.request_receive_timeout_ms) if t > 0]
        if timeouts:
            self._schedule_sweep(min(1.0, max(0.01, min(timeouts) / 10000)))
        bound = self._listeners[0].getsockname()
        self.port = int(bound[1])
        return str(bound[0]), self.port

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            if self._open >= self.limits.max_connections:
                self._full(self.limits.max_connections)
                self._set_accepting(False)
                return
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                # Linux keeps reporting the listener readable while accept fails, so it is not read for a while
                # (asyncio's own accept loop logs every failed attempt of its batch through the exception handler).
                self._accept_failed(exc)
                if exc.errno in OUT_OF_RESOURCES:
                    loop = asyncio.get_running_loop()
                    loop.remove_reader(listener.fileno())
                    self._resume_timers[listener] = loop.call_later(
                        ACCEPT_BACKOFF_SECONDS, self._resume_accepting, listener
                    )
                return
            self._admit(sock, _host(peer[0]))

    def _resume_accepting(self, listener: socket.socket) -> None:
        del self._resume_timers[listener]
        if self._accepting:
            asyncio.get_running_loop().add_reader(listener.fileno(), self._accept, listener)

    def _set_accepting(self, accepting: bool) -> None:
        """Read the listeners or not, for ``max.connections`` (a listener backing off stays unread until then)."""
        if accepting == self._accepting:
            return
        self._accepting = accepting
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            if listener not in self._resume_timers:
                if accepting:
                    loop.add_reader(listener.fileno(), self._accept, listener)
                else:
                    loop.remove_reader(listener.fileno())

    def _admit(self, sock: socket.socket, host: str) -> None:
        limits = self.limits
        count = self._per_ip.get(host, 0)
        if count >= self._per_ip_limits.get(host, limits.max_connections_per_ip):
            sock.close()
            self._refused(host)
            return
        self._per_ip[host] = count + 1
        self._open += 1
        self._next_connection_id += 1
        connection = Connection(self, self._next_connection_id, host)
        task = asyncio.get_running_loop().create_task(self._set_up(sock, connection))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _set_up(self, sock: socket.socket, connection: Connection) -> None:
        try:
            sock.setblocking(False)
            await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, sock)
        except Exception:
            sock.close()
            if not connection.made:
                self._forget(connection.host)

    def connection_closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self._forget(connection.host)

    def _forget(self, host: str) -> None:
        self._open -= 1
        left = self._per_ip[host] - 1
        if left:
            self._per_ip[host] = left
        else:
            del self._per_ip[host]
        if not self._accepting and self._open < self.limits.max_connections and self._listeners:
            self._set_accepting(True)

    def _schedule_sweep(self, interval: float) -> None:
        self._sweep_timer = asyncio.get_running_loop().call_later(interval, self._sweep, interval)

    def _sweep(self, interval: float) -> None:
        """Close connections idle too long or whose request is arriving too slowly."""
        now = time.monotonic()
        max_idle = self.limits.connections_max_idle_ms / 1000
        receive_timeout = self.limits.request_receive_timeout_ms / 1000
        for connection in list(self.connections):
            reason = connection.expired(now, max_idle, receive_timeout)
            if reason is not None:
                self._expired(reason)
                connection.abort()
        self._schedule_sweep(interval)

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Stop accepting, answer every request already received, then close all connections."""
        for listener in self._listeners:
            asyncio.get_running_loop().remove_reader(listener.fileno())
            listener.close()
        self._listeners = []
        for timer in [self._sweep_timer, *self._resume_timers.values()]:
            if timer is not None:
                timer.cancel()
        self._resume_timers.clear()
        for connection in list(self.connections):
            connection.drain_and_close()
        deadline = asyncio.get_running_loop().time() + grace_seconds
        while self.connections and asyncio.get_running_loop().time() < deadline:
            self.request_done.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.request_done.wait(), timeout=0.05)
        for connection in list(self.connections):
            connection.abort()


async def _listen(host: str, port: int) -> list[socket.socket]:
    """Non-blocking listening sockets on every address ``host`` resolves to ("" = all interfaces), all on one port
    (port 0: the one the first socket got); as asyncio's create_server, an address family the host cannot open a
    socket for (IPv6 turned off) is skipped, a failed bind is an error."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            try:
                listener = socket.socket(family, kind, proto)
            except OSError:
                continue
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listener.bind((address[0], listeners[0].getsockname()[1] if len(listeners) > 1 else port, *address[2:]))
            listener.listen(1024)
            listener.setblocking(False)
        if not listeners:
            raise OSError(f"no socket can listen on {host or '*'}:{port}")
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def _host(address: str) -> str:
    """A peer's IP address as its per-IP count is kept: an IPv4-mapped IPv6 address as the IPv4 one."""
    if address.startswith("::ffff:"):
        with contextlib.suppress(ValueError):
            mapped = ipaddress.IPv6Address(address).ipv4_mapped
            if mapped is not None:
                return str(mapped)
    return address


async def _addresses(name: str) -> set[str]:
    """The IP addresses ``name`` stands for: itself if it is one, else what it resolves to."""
    try:
        return {str(ipaddress.ip_address(name))}
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return {str(info[4][0]) for info in infos}
