"""The broker's network layer: its own accept loop on the listener's sockets, one ``Connection`` per client socket.

A connection receives into buffers it owns (asyncio's BufferedProtocol), so a large request is copied once, by the
kernel, into the array that becomes its frame. It cuts its byte stream into frames (refusing an oversized frame
from its size prefix alone) and handles them one at a time, in arrival order, as Kafka's brokers do: each frame goes
first to the immediate path (``now_handler``, called in the loop turn that received it), which answers at once, later
through an awaitable, or leaves the frame to the general path (``handler``, a coroutine run as a task); while a frame
is pending, the frames after it wait. Responses are ``bytes`` or a list of ``bytes`` and file slices; the responses
to the frames of one read (or of a run of frames the general path handles without waiting) leave in one write, and
slices go out with ``os.sendfile`` so record data never passes through Python (a chunk of a slice is copied to the
transport only when the socket is full, to be sent once it is writable). A malformed frame closes only its own
connection.

Hostile or broken clients are bounded: requests too large for a connection's receive buffer grow, as their bytes
arrive, into memory reserved from one ``MemoryPool`` (``queued.max.request.bytes``; a connection whose frame cannot
grow is not read until memory is released, it is never dropped for it; smaller requests are bounded per connection
by the receive buffer and ``MAX_WAITING_FRAMES``. A connection whose waiting requests and unsent responses number
``queued.max.requests`` is not read until half of them are done, so a client that pipelines without reading its responses holds
its own socket buffers, not the broker's memory; nor does a connection handle a request while its unsent responses
exceed ``WRITE_HIGH`` bytes). A client quota's throttle mutes a connection (``Connection.mute``, KIP-219): its
response goes out at once, and the connection is neither read nor are its waiting requests handled until the
throttle time has passed. As Kafka's acceptor, the accept loop stops accepting while
``max.connections`` are open (new connections wait in the listen backlog; a peer broker's liveness ping then times
out, which proves nothing, where a closed connection would look like a dead broker) and closes a connection over
``max.connections.per.ip`` at once; when accept fails for want of file descriptors or memory it stops accepting
for ``ACCEPT_BACKOFF_SECONDS``. Each of these is logged at most once per ``REPORT_INTERVAL_SECONDS``, and
established connections go on being served meanwhile. A periodic sweep closes connections
idle for ``connections.max.idle.ms`` and those whose request has been arriving for longer than
``socket.request.receive.timeout.ms``.

While metrics are on (``SocketServer.request_stats``), each request's times are taken on the loop and recorded once
its response is sent (``mq.server.metrics.RequestStats``): received (the connection's last read that completed
frames before the request was handled: for a frame that waited behind a pending one, a later read may stand in, so
its queue time is a lower bound), started, handled (the immediate handler returned; the
general path's whole time is local time), answered (the response was ready) and sent (the write that emptied the
connection's output).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import inspect
import ipaddress
import logging
import os
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from mq.errors import KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import decode_request
from mq.protocol.framing import UNBOUNDED, FrameReceiver, MemoryPool
from mq.protocol.response_writer import FileRegion
from mq.server.metrics import RequestStats
from mq.server.sasl_authenticator import MechanismFactory, Outcome, SaslAuthenticator

log = logging.getLogger(__name__)

MAX_WAITING_FRAMES = 16
"""Reading from a socket pauses while this many of its frames wait behind a pending one (their memory is bounded by
this and the receive buffer; the memory pool holds only frames too large for the buffer)."""

WRITE_HIGH = 262144
"""A connection handles no further request while more than this many bytes of its responses are unsent."""

SENDFILE_CHUNK = 65536
"""Bytes of a file region copied to the transport when the socket is full (it sends them once writable)."""


ACCEPT_BATCH = 128
"""Connections accepted per readiness event of the listener before other work gets a turn."""

ACCEPT_BACKOFF_SECONDS = 0.5
"""How long the listener is not read after accept failed for want of file descriptors or memory."""

REPORT_INTERVAL_SECONDS = 10.0
"""Refused connections and accept failures are logged at most once per interval, with a count."""

OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

Response = bytes | list[bytes | FileRegion]

_KEY_VERSION = struct.Struct(">hh")
_API_VERSIONS = int(ApiKey.API_VERSIONS)


ANONYMOUS = "User:ANONYMOUS"


def _no_mute(delay_ms: float) -> None:
    """The mute of an address with no connection behind it (tests, in-process callers)."""


@dataclass(frozen=True)
class ClientAddress:
    host: str
    port: int
    connection_id: int
    principal: str = field(default="User:ANONYMOUS", compare=False)
    """Who the connection authenticated as: its SASL user, else its client certificate's principal, else
    User:ANONYMOUS."""
    listener: str = field(default="PLAINTEXT", compare=False)
    """The name of the listener the connection came in on."""
    mute: Callable[[float], None] = field(default=_no_mute, compare=False, repr=False)
    """Stop handling this connection's requests for the given milliseconds (a client quota's throttle)."""

    @property
    def user(self) -> str:
        """The principal's name (``ANONYMOUS`` for ``User:ANONYMOUS``)."""
        return self.principal.partition(":")[2]


@dataclass(frozen=True)
class ConnectionLimits:
    """What clients may hold of the broker; the defaults are Kafka's, except that these leave the memory pool and the
    timeouts off (the broker passes its configured values).

    ``queued_max_request_bytes`` < 0 = no limit; a timeout < 0 = none; ``max_connections_per_ip_overrides`` maps an
    IP address or host name to its own limit.
    """

    queued_max_request_bytes: int = -1
    queued_max_requests: int = 500
    max_connections: int = 2147483647
    max_connections_per_ip: int = 2147483647
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = -1
    request_receive_timeout_ms: int = -1


@dataclass(frozen=True)
class ListenerSecurity:
    """How a listener's connections are secured: its name and security protocol (Kafka's PLAINTEXT, SSL,
    SASL_PLAINTEXT, SASL_SSL), the TLS context of an SSL/SASL_SSL listener, the SASL mechanisms of a SASL one (their
    servers, by name) and its session lifetime (``connections.max.reauth.ms``; 0 = unlimited), and how a verified
    client certificate (DER) names its principal."""

    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    sasl: Mapping[str, MechanismFactory] | None = None
    session_lifetime_ms: int = 0
    certificate_principal: Callable[[bytes], str | None] | None = None
    handshake_timeout_s: float = 10.0
    tls_files: tuple[tuple[str, int], ...] = ()
    """The store files ``tls`` was loaded from, with their modification times (ns) then."""


PLAINTEXT = ListenerSecurity()


@dataclass(frozen=True)
class Endpoint:
    """One listener to bind: ``host`` ("" = every interface), ``port`` (0 = a free one) and its security."""

    host: str
    port: int
    security: ListenerSecurity = PLAINTEXT


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
"""The general path: handles one request frame, which it owns and may modify; None means no response (acks=0).
Raising KafkaError closes the connection."""

NowHandler = Callable[[bytearray, ClientAddress], object]
"""The immediate path, called in the loop turn that received the frame: a Response, None (no response), an awaitable
of either, or any other value (the dispatcher's ``LATER``): the frame takes the general path. Raising KafkaError
closes the connection."""

Piece = bytes | memoryview | FileRegion


_GENERAL = object()
"""Stands for the immediate path's answer when the server has none: every frame takes the general path."""


class Connection(asyncio.BufferedProtocol):
    """One client socket: frames in, responses out, strictly in request order.

    Frames are handled one at a time: while a frame is pending (an awaitable answer, or the general path), the
    frames after it wait, unhandled, in ``_frames``, and are handed to the immediate path again once it is done.
    Responses go to ``_out`` and are written once the frames at hand are handled (``_handle_frames``): bytes
    together in one transport write, file regions with ``os.sendfile`` on the socket (over TLS, read and written through
    the transport, which encrypts them). The transport's high-water mark is 0 (1 over TLS), so ``pause_writing`` means
    it holds bytes the socket has not taken: ``_out`` then waits for ``resume_writing``.
    Invariants: ``_out`` holds, in order, the unsent pieces of the last ``_unsent`` responses; no frame is handled
    while ``_out_bytes`` > ``WRITE_HIGH``; reading is paused while the frames waiting, the one pending and the
    responses unsent number ``queued.max.requests``, or the frames waiting ``MAX_WAITING_FRAMES`` (until both fall to
    half), while the receiver waits for pool memory, while a throttle mutes it (no frame is handled then either), and
    once the connection is closing.
    """

    def __init__(
        self, server: SocketServer, connection_id: int, host: str, security: ListenerSecurity = PLAINTEXT
    ) -> None:
        self._server = server
        self._connection_id = connection_id
        self.host = host  # the address its per-IP count is kept under
        self.security = security
        self._sasl: SaslAuthenticator | None = None  # on a SASL listener: the exchange, then the session
        self._tls = False  # record data is encrypted by the transport: file regions are read, not sent with sendfile
        self._receiver = FrameReceiver(server.max_request_bytes, server.pool)
        self._frames: deque[bytearray] = deque()
        self._pending = False  # a frame's answer is awaited or it is on the general path
        self._later: tuple[bytearray, int] | None = None  # the frame handed to the general path, and its size
        self._worker: asyncio.Task[None] | None = None  # the general path, started with the first frame for it
        self._wake: asyncio.Future[None] | None = None  # set to hand the waiting general path a frame
        self._out: deque[Piece] = deque()
        self._out_bytes = 0
        self._unsent = 0
        self._dirty = False  # in the server's list of connections to flush
        self._write_paused = False  # the transport holds unsent bytes
        self.last_active = time.monotonic()  # when a request last arrived or was answered
        self.frame_started = 0.0  # when the partial frame in the receiver started arriving; 0 = none
        self._memory_paused = False
        self._muted = False
        self._throttled = False  # a client quota's throttle holds its next requests back
        self._throttle_timer: asyncio.TimerHandle | None = None
        self._throttled_until = 0.0
        self._reading_paused = False
        self._transport: asyncio.Transport | None = None
        self._fd = -1  # the socket's descriptor, for os.sendfile; -1 once closed
        self._closing = False
        self.made = False
        self.address = ClientAddress("", 0, connection_id)
        self._received = 0.0  # when the last read that completed frames arrived
        self._timing: list[float] | None = None  # the pending request's timestamps (see ``_timed``)
        self._sending: list[list[float]] = []  # timestamps of the answered requests whose responses are unsent
        self.software: tuple[str, str] | None = None
        """The client's software name and version from its ApiVersions (v3+), while metrics are on."""

    # --- asyncio.BufferedProtocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's subclass
        peer = transport.get_extra_info("peername") or ("", 0)
        principal = self._certificate_principal()
        self.address = ClientAddress(
            str(peer[0]),
            int(peer[1]),
            self._connection_id,
            principal=principal or ANONYMOUS,
            listener=self.security.name,
            mute=self.mute,
        )
        security = self.security
        self._tls = security.tls is not None
        if security.sasl is not None:
            where = f"{self.address.host}:{self.address.port} on {security.name}"
            self._sasl = SaslAuthenticator(security.sasl, where, security.session_lifetime_ms)
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno()
        self._server.tune_socket(sock)
        # pause_writing as soon as the socket does not take everything; a TLS transport counts what it holds after
        # encrypting, and would pause at 0 bytes held with a mark of 0
        transport.set_write_buffer_limits(high=1 if self._tls else 0)
        self._server.connections.add(self)
        self.made = True
        if principal is None:
            log.info(
                "closing connection from %s on %s: ssl.principal.mapping.rules map no principal from its certificate",
                self.address.host,
                security.name,
            )
            self.abort()

    def _certificate_principal(self) -> str | None:
        """The principal of the client's verified certificate on an SSL listener, else User:ANONYMOUS; None when the
        mapping rules name none."""
        mapping = self.security.certificate_principal
        ssl_object = self._transport.get_extra_info("ssl_object") if self._transport is not None else None
        if mapping is None or ssl_object is None:
            return ANONYMOUS
        certificate = ssl_object.getpeercert(binary_form=True)
        return mapping(certificate) if certificate else ANONYMOUS

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
            self.last_active = self._received = now = time.monotonic()
            self.frame_started = now if receiver.buffered_bytes else 0.0
            self._handle_frames()
        elif not self.frame_started:
            self.frame_started = time.monotonic()
        if receiver.waiting_for_memory and self._transport is not None:
            self._memory_paused = True
            self._update_reading()
            self._server.pool.wait(self._memory_released)

    def _memory_released(self) -> bool:
        """The pool's retry: grow the frame being received and read again; False while the pool still refuses."""
        if self._transport is None:
            return True
        if not self._receiver.grow():
            return False
        self._memory_paused = False
        self._update_reading()
        return True

    def eof_received(self) -> bool | None:
        self._closing = True
        self._close_when_done()
        # keep the write side open until queued requests are answered (a TLS transport closes it regardless)
        return None if self._tls else True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._transport = None
        self._forget_output()
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)  # the general path ends
        self._server.pool.cancel(self._memory_released)
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        self._receiver.discard()
        self._discard_frames()
        self._server.connection_closed(self)

    def _discard_frames(self) -> None:
        """Drop the frames received and not handled, returning their pool memory."""
        pool, pooled = self._server.pool, self._receiver.min_pooled_frame
        while self._frames:
            size = len(self._frames.popleft())
            if size >= pooled:
                pool.release(size)

    # --- handling requests -------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._transport is None

    def drain_and_close(self) -> None:
        """Read no more requests; answer those already received (a throttle no longer holds them), then close."""
        self._closing = True
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
            self._unmute()
        self._update_reading()
        self._close_when_done()

    def _handle_frames(self, from_general: bool = False) -> None:
        """Hand waiting frames, in order, to the immediate path until one is pending or writes back up, then write
        the responses: now, or at the end of the loop turn when the general path (``from_general``) goes on with the
        next frame at once (so that the answers of a run of frames it handles without waiting leave together)."""
        frames, server = self._frames, self._server
        now, pooled = server.now_handler, self._receiver.min_pooled_frame
        while True:
            while (
                frames
                and not self._pending
                and not self._throttled
                and self._out_bytes <= WRITE_HIGH
                and self._transport is not None
            ):
                if not self._handle(frames.popleft(), now, pooled):
                    return
            if not self._out or self._write_paused:
                break
            if from_general and self._later is not None:
                if not self._dirty:
                    self._dirty = True
                    server.flush_soon(self)
                break
            self._write()
            if not frames or self._pending or self._write_paused or self._fd < 0:
                break
        self._update_reading()
        self._close_when_done()

    def _handle(self, frame: bytearray, now: NowHandler | None, pooled: int) -> bool:
        """Hand one frame to the immediate path; False if that failed and the connection is closing."""
        server = self._server
        size = len(frame)  # the handler owns the frame and may resize it
        if self._sasl is not None:
            outcome = self._sasl.handle(frame)
            if outcome is not None:
                return self._authenticating(outcome, size, pooled)
        timing = None
        if server.request_stats is not None and size >= 4:
            timing = self._timed(frame, server.request_stats)
        try:
            result = now(frame, self.address) if now is not None else _GENERAL
            if result is None or type(result) is bytes or type(result) is list:
                if size >= pooled:
                    server.pool.release(size)
                if timing is not None:
                    timing[3] = time.monotonic()  # handled and answered at once: no remote time
                    self._timing = timing
                    self._answered_at(result)
                if result is not None:
                    self._respond(result)
                return True
            self._pending = True
            if timing is not None:
                timing[3] = time.monotonic()
                self._timing = timing
            if type(result) is asyncio.Future or inspect.isawaitable(result):  # a parked fetch's future, or a coroutine
                future: asyncio.Future[Response | None] = asyncio.ensure_future(result)
                future.add_done_callback(functools.partial(self._answered, frame, size))
            else:
                self._later = (frame, size)
                if self._wake is not None:
                    self._wake.set_result(None)
                elif self._worker is None:
                    self._worker = server.loop.create_task(self._general())
                    server.tasks.add(self._worker)
                    self._worker.add_done_callback(server.tasks.discard)
        except Exception as exc:
            self._pending = False
            if size >= pooled:
                server.pool.release(size)
            self._failed(exc)
            return False
        return True

    def _authenticating(self, outcome: Outcome, size: int, pooled: int) -> bool:
        """A frame of the SASL exchange was answered by ``outcome``; False when the connection closes after it."""
        if size >= pooled:
            self._server.pool.release(size)
        sasl = self._sasl
        assert sasl is not None
        if sasl.principal is not None and sasl.principal != self.address.principal:
            self.address = replace(self.address, principal=sasl.principal)
        if outcome.response is not None:
            self._respond(outcome.response)
        if outcome.close:
            self.close()
            return False
        return True

    async def _general(self) -> None:
        """The connection's general path: handles ``_later``, then the frames after it, until the connection is
        lost; it waits on ``_wake`` while no frame is handed to it (a frame handed to it while it runs, by its own
        ``_handle_frames``, is taken without waking it)."""
        handler = self._server.handler
        while True:
            if self._later is None:
                if self._transport is None:
                    return
                self._wake = self._server.loop.create_future()
                await self._wake
                self._wake = None
                continue
            frame, size = self._later
            self._later = None
            try:
                response = await handler(frame, self.address)
            except Exception as exc:
                self._done(size)
                self._failed(exc)
                continue
            del frame
            self._done(size)
            if self._timing is not None:
                self._timing[3] = time.monotonic()  # the general path's time counts as local time
                self._answered_at(response)
            if response is not None:
                self._respond(response)
            self._handle_frames(from_general=True)

    def _answered(self, frame: bytearray, size: int, future: asyncio.Future[Response | None]) -> None:
        del frame  # held until the answer is complete
        self._done(size)
        if future.cancelled():
            self.close()
            return
        exc = future.exception()
        if exc is not None:
            self._failed(exc)
            return
        response = future.result()
        if self._timing is not None:
            self._answered_at(response)
        if response is not None:
            self._respond(response)
        self._handle_frames()

    def _timed(self, frame: bytearray, stats: RequestStats) -> list[float] | None:
        """Count a request (metrics on) and start timing it if ``stats`` samples it: [api key, received, started,
        handled, answered], times of ``time.monotonic``. Notes the client's software from an ApiVersions v3+."""
        api_key, version = _KEY_VERSION.unpack_from(frame, 0)
        if api_key == _API_VERSIONS and version >= 3 and self.software is None:
            with contextlib.suppress(Exception):  # a malformed frame is the handlers' to refuse
                body = decode_request(frame)[1]
                self.software = (str(body.client_software_name), str(body.client_software_version))
        if not stats.count(api_key, version):
            return None
        now = time.monotonic()
        return [api_key, self._received, now, now, now]

    def _answered_at(self, response: Response | None) -> None:
        """The pending request is answered: its times are recorded once its response is sent (at once without
        one)."""
        timing, self._timing = self._timing, None
        assert timing is not None
        timing[4] = now = time.monotonic()
        if response is None:
            self._record(timing, now)
        elif self._fd >= 0:
            self._sending.append(timing)

    def _record(self, timing: list[float], sent: float) -> None:
        stats = self._server.request_stats
        if stats is not None:
            api_key, received, started, handled, answered = timing
            stats.record(int(api_key), received, started, handled, answered, sent)

    def _done(self, size: int) -> None:
        """The pending frame is done with (a produce request's records are appended by now)."""
        self._pending = False
        if size >= self._receiver.min_pooled_frame:
            self._server.pool.release(size)
        self.last_active = time.monotonic()
        self._server.request_done.set()

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, KafkaError):
            log.warning("closing connection from %s:%s: %s", self.address.host, self.address.port, exc)
        elif not isinstance(exc, OSError):
            log.error("unexpected error answering %s:%s", self.address.host, self.address.port, exc_info=exc)
        self.close()

    def _update_reading(self) -> None:
        """Pause or resume reading for pool memory, ``queued.max.requests``, ``MAX_WAITING_FRAMES`` and closing."""
        transport = self._transport
        if transport is None:
            return
        waiting = len(self._frames)
        queued = waiting + self._pending + self._unsent
        limit = self._server.queued_max_requests
        if queued >= limit or waiting >= MAX_WAITING_FRAMES:
            self._muted = True
        elif self._muted and queued <= limit // 2 and waiting <= MAX_WAITING_FRAMES // 2:
            self._muted = False
        pause = self._memory_paused or self._muted or self._throttled or self._closing
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                if self.frame_started:  # a frame left half-read while reading was paused was not slow to arrive
                    self.frame_started = time.monotonic()
                transport.resume_reading()

    def mute(self, delay_ms: float) -> None:
        """Read and handle no request of this connection for ``delay_ms`` (KIP-219: the throttled response goes out
        at once, the client's next requests wait); a mute in progress is extended, never shortened."""
        if self._transport is None or delay_ms <= 0:
            return
        loop = self._server.loop
        until = loop.time() + delay_ms / 1000
        if self._throttle_timer is not None:
            if until <= self._throttled_until:
                return
            self._throttle_timer.cancel()
        self._throttled = True
        self._throttled_until = until
        self._throttle_timer = loop.call_at(until, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self._throttle_timer = None
        self._throttled = False
        self._handle_frames()

    def _close_when_done(self) -> None:
        if self._closing and not self._frames and not self._pending and not self._out and self._fd >= 0:
            if self._transport is not None:
                self._transport.close()  # after what it holds is sent
            self._forget_output()

    def expired(self, now: float, max_idle: float, receive_timeout: float) -> str | None:
        """Why the sweep should close this connection now, if it should (a timeout <= 0 is off)."""
        if self._pending or self._frames or self._out:
            return None
        if self.frame_started:
            if receive_timeout > 0 and now - self.frame_started > receive_timeout:
                return "its request did not arrive in time"
            return None
        if max_idle > 0 and now - self.last_active > max_idle:
            return "it was idle"
        return None

    # --- writing -----------------------------------------------------------------------------------------------

    def _respond(self, response: Response) -> None:
        """Queue a response; ``_handle_frames`` writes it."""
        if self._fd < 0:
            return
        if isinstance(response, bytes):
            self._out.append(response)
            self._out_bytes += len(response)
        else:
            for piece in response:
                self._out.append(piece)
                self._out_bytes += len(piece) if isinstance(piece, bytes) else piece.length
        self._unsent += 1

    def flush(self) -> None:
        """Write what the general path answered in this loop turn (the server's flush at its end)."""
        self._dirty = False
        self._handle_frames()

    def _write(self) -> None:
        """Hand ``_out`` to the socket in order until the transport holds unsent bytes (``pause_writing``)."""
        out, transport = self._out, self._transport
        if transport is None or self._fd < 0:
            return
        try:
            while out and not self._write_paused:
                head = out[0]
                if isinstance(head, bytes | memoryview):
                    pieces: list[bytes | memoryview] = []
                    while out:
                        piece = out[0]
                        if not isinstance(piece, bytes | memoryview):
                            break
                        out.popleft()
                        self._out_bytes -= len(piece)
                        pieces.append(piece)
                    self._send(transport, pieces)
                else:
                    self._send_region(transport, head)
        except (ConnectionError, BrokenPipeError):
            self.abort()
            return
        except (OSError, EOFError) as exc:
            log.warning("closing connection from %s:%s: %s", self.address.host, self.address.port, exc)
            self.abort()
            return
        if not out and not self._write_paused:
            self._unsent = 0
            self.last_active = now = time.monotonic()
            if self._sending:
                for timing in self._sending:
                    self._record(timing, now)
                self._sending.clear()
            self._server.request_done.set()

    def _send(self, transport: asyncio.Transport, pieces: list[bytes | memoryview]) -> None:
        """One write for the pieces (the transport sends what the socket takes at once and keeps the rest)."""
        if len(pieces) == 1:
            transport.write(pieces[0])
        else:
            transport.writelines(pieces)

    def _send_region(self, transport: asyncio.Transport, region: FileRegion) -> None:
        """Send the file region at the head of ``_out`` with ``os.sendfile`` while the socket takes it; when it is
        full, hand the transport a chunk of the region's bytes instead: it sends them once the socket is writable,
        and ``resume_writing`` goes on with the rest (a loop-independent way to wait for writability)."""
        fd, position, length = region.fd, region.position, region.length
        if self._tls:  # the transport encrypts: the region's bytes pass through it
            transport.write(os.pread(fd, length, position))
            self._out_bytes -= length
            self._out.popleft()
            return
        while length:
            try:
                sent = os.sendfile(self._fd, fd, position, length)
            except BlockingIOError:
                chunk = os.pread(fd, min(length, SENDFILE_CHUNK), position)
                transport.write(chunk)
                sent = len(chunk)
            if sent == 0:
                raise EOFError("a file region ends past the end of its file")
            position += sent
            length -= sent
            self._out_bytes -= sent
            if self._write_paused:
                break
        if length:
            self._out[0] = _Region(fd, position, length)
        else:
            self._out.popleft()

    def pause_writing(self) -> None:
        """The transport holds bytes the socket has not taken (its high-water mark is 0)."""
        self._write_paused = True

    def resume_writing(self) -> None:
        """The transport's buffer is empty again."""
        self._write_paused = False
        self._handle_frames()

    def _forget_output(self) -> None:
        self._fd = -1
        self._out.clear()
        self._out_bytes = self._unsent = 0

    def abort(self) -> None:
        """Drop the socket now, without flushing what the peer has not read."""
        self._closing = True
        self._discard_frames()
        if self._transport is not None:
            self._transport.abort()
        self._forget_output()

    def close(self) -> None:
        """Handle no more requests; close once the responses already queued are sent."""
        self._closing = True
        self._discard_frames()
        if self._out and not self._write_paused:
            self._write()
        self._update_reading()
        self._close_when_done()


@dataclass(frozen=True)
class _Region:
    """The unsent rest of a file region."""

    fd: int
    position: int
    length: int


class SocketServer:
    """Accepts connections on its listeners (``host``:``port`` in plaintext, or ``endpoints``) and runs a Connection
    for each, within ``limits``, which count the connections of all listeners together."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: RequestHandler,
        *,
        endpoints: Sequence[Endpoint] = (),
        now_handler: NowHandler | None = None,
        max_request_bytes: int,
        limits: ConnectionLimits | None = None,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
    ) -> None:
        self.host = host
        self.port = port
        self.endpoints = list(endpoints) or [Endpoint(host, port)]
        self.bound_ports: list[int] = []
        """The port of each of ``endpoints``, once started."""
        self.handler = handler
        self.now_handler = now_handler
        self.max_request_bytes = max_request_bytes
        self.limits = limits = limits if limits is not None else ConnectionLimits()
        queued = limits.queued_max_request_bytes
        # a largest request is kept in reserve, so that one frame at a time can always be completed
        self.pool = MemoryPool(queued, min(queued, max_request_bytes)) if queued >= 0 else MemoryPool(UNBOUNDED)
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connections: set[Connection] = set()
        self.request_done = asyncio.Event()
        self.request_stats: RequestStats | None = None
        """Set while metrics are on: every request's times are recorded there."""
        self._listeners: list[socket.socket] = []
        self._security: dict[socket.socket, ListenerSecurity] = {}
        self._per_ip: dict[str, int] = {}
        self._per_ip_limits: dict[str, int] = {}
        self._open = 0  # accepted and not yet closed, including those still being set up
        self._next_connection_id = 0
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._resume_timers: dict[socket.socket, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task[None]] = set()  # connections being set up and requests on the general path
        self.loop: asyncio.AbstractEventLoop  # the running loop, from ``start``
        self.queued_max_requests = limits.queued_max_requests
        self._dirty: list[Connection] = []  # connections with responses to flush at the end of this loop turn
        self._serving = False  # from ``serve`` until ``stop``
        self._accepting = False  # the listeners are read: from ``serve`` on, while fewer than max.connections are open
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

    async def start(self, serve: bool = True) -> tuple[str, int]:
        """Bind and listen on every endpoint; returns the first one's bound (host, port) — port 0 picks a free one
        (``bound_ports`` has them all). A failed bind closes the listeners already bound. With ``serve`` False the
        kernel queues new connections (up to the backlog) until ``serve``: their requests wait for the broker to be
        ready instead of meeting a broker that does not lead its partitions yet."""
        self.loop = asyncio.get_running_loop()
        limits = self.limits
        for name, limit in limits.max_connections_per_ip_overrides.items():
            for address in await _addresses(name):
                self._per_ip_limits[address] = limit
        try:
            for endpoint in self.endpoints:
                sockets = await _listen(endpoint.host, endpoint.port)
                self._listeners += sockets
                self._security.update(dict.fromkeys(sockets, endpoint.security))
                self.bound_ports.append(int(sockets[0].getsockname()[1]))
        except OSError:
            for listener in self._listeners:
                listener.close()
            self._listeners = []
            raise
        timeouts = [t for t in (limits.connections_max_idle_ms, limits.request_receive_timeout_ms) if t > 0]
        if timeouts:
            self._schedule_sweep(min(1.0, max(0.01, min(timeouts) / 10000)))
        bound = self._listeners[0].getsockname()
        self.port = self.bound_ports[0]
        if serve:
            self.serve()
        return str(bound[0]), self.port

    def serve(self) -> None:
        """Accept connections on every listener from now on."""
        self._serving = True
        self._set_accepting(True)

    def update_security(self, security: ListenerSecurity) -> None:
        """The listener named as ``security`` is secured so from its next connection on (established ones keep
        theirs)."""
        for listener, current in self._security.items():
            if current.name == security.name:
                self._security[listener] = security

    def tls_files_changed(self, name: str) -> bool:
        """Whether a store file of listener ``name`` was rewritten (or removed) since it was loaded."""
        for current in self._security.values():
            if current.name == name:
                return any(_modified_ns(path) != stamp for path, stamp in current.tls_files)
        return False

    def flush_soon(self, connection: Connection) -> None:
        """Send ``connection``'s responses at the end of this loop turn, with those that follow in the same turn."""
        if not self._dirty:
            self.loop.call_soon(self._flush)
        self._dirty.append(connection)

    def _flush(self) -> None:
        dirty, self._dirty = self._dirty, []
        for connection in dirty:
            connection.flush()

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
            self._admit(sock, _host(peer[0]), self._security[listener])

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

    def _admit(self, sock: socket.socket, host: str, security: ListenerSecurity) -> None:
        limits = self.limits
        count = self._per_ip.get(host, 0)
        if count >= self._per_ip_limits.get(host, limits.max_connections_per_ip):
            sock.close()
            self._refused(host)
            return
        self._per_ip[host] = count + 1
        self._open += 1
        self._next_connection_id += 1
        connection = Connection(self, self._next_connection_id, host, security)
        task = asyncio.get_running_loop().create_task(self._set_up(sock, connection))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _set_up(self, sock: socket.socket, connection: Connection) -> None:
        try:
            sock.setblocking(False)
            security = connection.security
            if security.tls is None:
                await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, sock)
            else:
                await asyncio.get_running_loop().connect_accepted_socket(
                    lambda: connection, sock, ssl=security.tls, ssl_handshake_timeout=security.handshake_timeout_s
                )
        except Exception as exc:
            if connection.security.tls is not None:
                log.info(
                    "closing connection from %s on %s: TLS handshake failed: %s",
                    connection.host,
                    connection.security.name,
                    exc or type(exc).__name__,
                )
            sock.close()
            if not connection.made:
                self._forget(connection.host)

    def connection_closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self._forget(connection.host)

    def update_limits(self, limits: ConnectionLimits) -> None:
        """New limits from the dynamic broker config (on the loop): max.connections and max.connections.per.ip apply to
        the next accepts (connections already open stay), and a raised max.connections resumes accepting at once."""
        self.limits = limits
        if not self._accepting and self._open < limits.max_connections and self._serving:
            self._set_accepting(True)

    def _forget(self, host: str) -> None:
        self._open -= 1
        left = self._per_ip[host] - 1
        if left:
            self._per_ip[host] = left
        else:
            del self._per_ip[host]
        if not self._accepting and self._open < self.limits.max_connections and self._serving:
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
        self._serving = self._accepting = False
        self._security.clear()
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
            bound_port = listeners[0].getsockname()[1] if len(listeners) > 1 else port
            try:
                listener.bind((address[0], bound_port, *address[2:]))
            except OSError as exc:
                where = f"[{address[0]}]" if family == socket.AF_INET6 else address[0]
                raise OSError(f"cannot listen on {where}:{bound_port}: {exc.strerror}") from exc
            listener.listen(1024)
            listener.setblocking(False)
        if not listeners:
            raise OSError(f"no socket can listen on {host or '*'}:{port}")
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def _modified_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


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
