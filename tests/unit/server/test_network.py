"""The socket server in-process, on each event loop: ordering on the immediate and general paths, responses of one
loop turn coalesced into one write, framing errors, sendfile regions, graceful stop, request memory and
``queued.max.requests``, connection limits."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mq.protocol.codec import InvalidRequestError
from mq.protocol.framing import MIN_GROWTH, frame
from mq.server.broker import new_event_loop
from mq.server.network import (
    MAX_WAITING_FRAMES,
    ClientAddress,
    Connection,
    ConnectionLimits,
    NowHandler,
    RequestHandler,
    Response,
    SocketServer,
)


@dataclass(frozen=True)
class Region:
    fd: int
    position: int
    length: int


class Echo:
    """Answers b"sleep:<ms>" after a delay, b"bad" by failing the frame, b"file" with a file region, else echoes."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen: list[bytes] = []

    async def __call__(self, request: bytes, client: ClientAddress) -> Response | None:
        self.seen.append(request)
        if request.startswith(b"sleep:"):
            await asyncio.sleep(int(request[6:]) / 1000)
        if request == b"bad":
            raise InvalidRequestError("bad request")
        if request == b"silent":
            return None
        if request == b"file":
            return [struct.pack(">i", 10), Region(self.fd, 5, 10)]
        return frame(request)


@pytest.fixture
def file_fd(tmp_path: Path) -> Iterator[Callable[[bytes], int]]:
    """Writes the given bytes to a new file and returns a read-only descriptor of it; all are closed after the test."""
    fds: list[int] = []

    def open_file(content: bytes) -> int:
        path = tmp_path / f"file{len(fds)}"
        path.write_bytes(content)
        fds.append(os.open(path, os.O_RDONLY))
        return fds[-1]

    yield open_file
    for fd in fds:
        os.close(fd)


@pytest.fixture
def data_fd(file_fd: Callable[[bytes], int]) -> int:
    return file_fd(bytes(range(256)) * 4)


client_writers: dict[SocketServer, list[asyncio.StreamWriter]] = {}
"""The connections ``connect`` opened to each server ``serving`` runs; closed before it stops."""


@asynccontextmanager
async def serving(
    handler: RequestHandler | Echo,
    *,
    now_handler: NowHandler | None = None,
    max_request_bytes: int = 1000,
    limits: ConnectionLimits | None = None,
) -> AsyncIterator[SocketServer]:
    """A server started on a free port of 127.0.0.1; on the way out, also when the scenario fails, the connections
    ``connect`` opened to it are closed and it is stopped (again, if the scenario stopped it: stopping twice is
    harmless)."""
    server = SocketServer(
        "127.0.0.1", 0, handler, now_handler=now_handler, max_request_bytes=max_request_bytes, limits=limits
    )
    await server.start()
    client_writers[server] = []
    try:
        yield server
    finally:
        for writer in client_writers.pop(server):
            writer.close()
        await server.stop()


async def connect(
    server: SocketServer, local_addr: tuple[str, int] | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client connection to ``server``, closed when ``serving`` ends."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, local_addr=local_addr)
    client_writers[server].append(writer)
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    """Runs a scenario on each event loop the broker can run on."""

    def run(coro: Coroutine[Any, Any, None]) -> None:
        with asyncio.Runner(loop_factory=lambda: new_event_loop(request.param)) as runner:
            runner.run(asyncio.wait_for(coro, 30))

    return run


def test_responses_come_back_in_request_order(run: Runner, data_fd: int) -> None:
    async def scenario() -> None:
        async with serving(Echo(data_fd)) as server:
            reader, writer = await connect(server)
            writer.write(frame(b"sleep:50") + frame(b"silent") + frame(b"quick") + frame(b"file"))
            assert await read_frame(reader) == b"sleep:50"
            assert await read_frame(reader) == b"quick"
            assert await read_frame(reader) == (bytes(range(256)) * 4)[5:15]

    run(scenario())


def test_oversized_frame_closes_only_that_connection(run: Runner, data_fd: int) -> None:
    async def scenario() -> None:
        handler = Echo(data_fd)
        async with serving(handler, max_request_bytes=100) as server:
            good_reader, good_writer = await connect(server)
            bad_reader, bad_writer = await connect(server)
            bad_writer.write(struct.pack(">i", 10_000_000))
            assert await bad_reader.read() == b""  # closed without reading the body
            good_writer.write(frame(b"still here"))
            assert await read_frame(good_reader) == b"still here"
            assert handler.seen == [b"still here"]

    run(scenario())


def test_malformed_request_closes_only_that_connection(run: Runner, data_fd: int) -> None:
    async def scenario() -> None:
        async with serving(Echo(data_fd)) as server:
            good_reader, good_writer = await connect(server)
            bad_reader, bad_writer = await connect(server)
            bad_writer.write(frame(b"bad") + frame(b"never answered"))
            assert await bad_reader.read() == b""
            good_writer.write(frame(b"ok"))
            assert await read_frame(good_reader) == b"ok"

    run(scenario())


def test_stop_answers_requests_already_received(run: Runner, data_fd: int) -> None:
    async def scenario() -> None:
        async with serving(Echo(data_fd)) as server:
            reader, writer = await connect(server)
            writer.write(frame(b"sleep:100") + frame(b"second"))
            await asyncio.sleep(0.03)
            stopping = asyncio.create_task(server.stop())
            assert await read_frame(reader) == b"sleep:100"
            assert await read_frame(reader) == b"second"
            await stopping
            assert await reader.read() == b""
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", server.port), timeout=1)

    run(scenario())


def test_large_region_is_sent_whole(run: Runner, file_fd: Callable[[bytes], int]) -> None:
    payload = os.urandom(8 * 1024 * 1024)
    fd = file_fd(payload)

    class Big(Echo):
        async def __call__(self, request: bytes, client: ClientAddress) -> Response | None:
            return [struct.pack(">i", len(payload) - 1), Region(self.fd, 1, len(payload) - 1)]

    async def scenario() -> None:
        async with serving(Big(fd)) as server:
            reader, writer = await connect(server)
            writer.write(frame(b"go"))
            assert await read_frame(reader) == payload[1:]

    run(scenario())


class Holding(Echo):
    """Keeps every request starting with b"hold" (and its memory) until ``let_go`` is set."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.let_go = asyncio.Event()

    async def __call__(self, request: bytes, client: ClientAddress) -> Response | None:
        if request.startswith(b"hold"):
            self.seen.append(request[:4])
            await self.let_go.wait()
            return frame(b"held %d" % len(request))
        return await super().__call__(request, client)


def test_a_frame_waits_unread_for_pool_memory_and_is_answered_once_it_is_released(run: Runner, data_fd: int) -> None:
    async def scenario() -> None:
        handler = Holding(data_fd)
        size = 3 * MIN_GROWTH
        async with serving(
            handler, max_request_bytes=size, limits=ConnectionLimits(queued_max_request_bytes=size)
        ) as server:
            first_reader, first_writer = await connect(server)
            first_writer.write(frame(b"hold" + bytes(size - 4)))
            while handler.seen != [b"hold"]:
                await asyncio.sleep(0.01)
            assert server.pool.available == 0
            second_reader, second_writer = await connect(server)
            second_writer.write(frame(b"hold" + bytes(size - 4)))
            small_reader, small_writer = await connect(server)
            small_writer.write(frame(b"small requests are still read"))
            assert await read_frame(small_reader) == b"small requests are still read"
            while server.pool.waiting == 0:
                await asyncio.sleep(0.01)
            assert handler.seen == [b"hold", b"small requests are still read"]  # the second frame is not whole
            handler.let_go.set()
            assert await read_frame(first_reader) == b"held %d" % size
            assert await read_frame(second_reader) == b"held %d" % size  # resumed, not dropped
            assert server.pool.available == size

    run(scenario())


async def is_closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.5) == b""
    except TimeoutError:
        return False


def test_accept_waits_at_max_connections_and_closes_connections_over_the_per_ip_limit(
    run: Runner, data_fd: int
) -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(
            max_connections=4, max_connections_per_ip=2, max_connections_per_ip_overrides={"127.0.0.1": 3}
        )
        async with serving(Echo(data_fd), limits=limits) as server:
            clients = [await connect(server) for _ in range(4)]
            assert [await is_closed_by_server(reader) for reader, _ in clients] == [False, False, False, True]
            other = [await connect(server, local_addr=("127.0.0.2", 0)) for _ in range(2)]
            assert not await is_closed_by_server(other[0][0])
            other[1][1].write(frame(b"waits in the backlog"))  # four are open: it is not accepted yet
            assert not await is_closed_by_server(other[1][0]) and len(server.connections) == 4
            reader, writer = clients[0]
            writer.write(frame(b"served"))
            assert await read_frame(reader) == b"served"
            writer.close()
            assert await read_frame(other[1][0]) == b"waits in the backlog"  # accepted once a place was free

    run(scenario())


def test_idle_connections_and_slow_requests_are_closed(run: Runner, data_fd: int) -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(connections_max_idle_ms=300, request_receive_timeout_ms=300)
        async with serving(Echo(data_fd), limits=limits) as server:
            idle_reader, _ = await connect(server)
            slow_reader, slow_writer = await connect(server)
            busy_reader, busy_writer = await connect(server)
            slow_writer.write(frame(b"never finished")[:-1])
            busy_writer.write(frame(b"sleep:700"))  # a request being handled is not idle
            assert await asyncio.wait_for(idle_reader.read(), 5) == b""
            assert await asyncio.wait_for(slow_reader.read(), 5) == b""
            assert await read_frame(busy_reader) == b"sleep:700"

    run(scenario())


LATER = object()
"""What the test's immediate path answers for a frame it leaves to the general path."""


class Handlers:
    """The immediate path answers b"now:<x>" with <x>, b"none" with nothing, b"wait:<x>" with a future the test
    resolves (``futures[x]``), b"file:<p>" with 10 bytes of the data file at <p>, b"whole" with all of it,
    b"big:<n>" with <n> zero bytes; anything
    else goes to the general path, which answers with the request after a loop turn. ``calls`` is the order in
    which requests were handed to either path."""

    def __init__(self, fd: int = -1) -> None:
        self.fd = fd
        self.calls: list[bytes] = []
        self.futures: dict[bytes, asyncio.Future[Response | None]] = {}

    def now(self, request: bytearray, client: ClientAddress) -> object:
        self.calls.append(bytes(request))
        kind, _, arg = bytes(request).partition(b":")
        if kind == b"now":
            return frame(arg)
        if kind == b"none":
            return None
        if kind == b"wait":
            future = self.futures[arg] = asyncio.get_running_loop().create_future()
            return future
        if kind == b"file":
            return [struct.pack(">i", 10), Region(self.fd, int(arg), 10)]
        if kind == b"whole":
            return [struct.pack(">i", os.fstat(self.fd).st_size), Region(self.fd, 0, os.fstat(self.fd).st_size)]
        if kind == b"big":
            return frame(bytes(int(arg)))
        return LATER

    async def general(self, request: bytearray, client: ClientAddress) -> Response | None:
        self.calls.append(b"general " + bytes(request))
        await asyncio.sleep(0)
        return frame(bytes(request))


def serving_paths(
    handlers: Handlers, limits: ConnectionLimits | None = None
) -> AbstractAsyncContextManager[SocketServer]:
    """``serving`` with ``handlers`` on the immediate and the general path."""
    return serving(handlers.general, now_handler=handlers.now, max_request_bytes=1 << 20, limits=limits)


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)


def test_later_frames_wait_behind_a_pending_answer_and_everything_is_answered_in_order(
    run: Runner,
) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        async with serving_paths(handlers) as server:
            reader, writer = await connect(server)
            requests = [b"now:1", b"wait:a", b"now:2", b"wait:b", b"none", b"general", b"now:3"]
            writer.write(b"".join(frame(r) for r in requests))
            assert await read_frame(reader) == b"1"
            await until(lambda: b"a" in handlers.futures)
            await asyncio.sleep(0.05)
            assert handlers.calls == [b"now:1", b"wait:a"]  # nothing after a pending answer is handled
            handlers.futures[b"a"].set_result(frame(b"answer a"))
            await until(lambda: b"b" in handlers.futures)
            assert handlers.calls == [b"now:1", b"wait:a", b"now:2", b"wait:b"]
            handlers.futures[b"b"].set_result(frame(b"answer b"))
            assert [await read_frame(reader) for _ in range(5)] == [b"answer a", b"2", b"answer b", b"general", b"3"]
            # the general path ran before the frame after it was handed to the immediate path
            assert handlers.calls[4:] == [b"none", b"general", b"general general", b"now:3"]

    run(scenario())


def test_a_failed_answer_closes_the_connection_after_the_earlier_answers(
    run: Runner,
) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        async with serving_paths(handlers) as server:
            reader, writer = await connect(server)
            writer.write(frame(b"now:first") + frame(b"wait:x") + frame(b"now:never"))
            await until(lambda: b"x" in handlers.futures)
            handlers.futures[b"x"].set_exception(ConnectionResetError())
            assert await read_frame(reader) == b"first"
            assert await reader.read() == b""
            assert b"now:never" not in handlers.calls

    run(scenario())


def test_responses_ready_in_one_loop_turn_leave_in_one_send(
    run: Runner, data_fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    sends: list[int] = []
    send = Connection._send

    def counting(self: Connection, transport: asyncio.Transport, pieces: list[bytes | memoryview]) -> None:
        sends.append(len(pieces))
        send(self, transport, pieces)

    monkeypatch.setattr(Connection, "_send", counting)

    async def scenario() -> None:
        handlers = Handlers(data_fd)
        async with serving_paths(handlers) as server:
            reader, writer = await connect(server)
            writer.write(b"".join(frame(b"now:%d" % i) for i in range(5)))
            assert [await read_frame(reader) for _ in range(5)] == [b"%d" % i for i in range(5)]
            assert sends == [5]
            sends.clear()
            writer.write(frame(b"now:a") + frame(b"file:5") + frame(b"now:b") + frame(b"file:300") + frame(b"now:c"))
            data = bytes(range(256)) * 4
            expected = [b"a", data[5:15], b"b", data[300:310], b"c"]
            assert [await read_frame(reader) for _ in range(5)] == expected
            assert sends == [2, 2, 1]  # the bytes before each region go together, then the region, in order

    run(scenario())


def test_a_client_that_does_not_read_is_muted_at_queued_max_requests_and_resumed(
    run: Runner,
) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        async with serving_paths(handlers, ConnectionLimits(queued_max_requests=8)) as server:
            client = socket.create_connection(("127.0.0.1", server.port))
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            client.setblocking(False)
            count, size = 200, 100_000
            request = frame(b"big:%d" % size)
            loop = asyncio.get_running_loop()
            await loop.sock_sendall(client, request * count)  # 200 requests pipelined, no response read
            await asyncio.sleep(0.3)
            (connection,) = server.connections
            assert connection._reading_paused
            assert len(handlers.calls) < count  # the rest wait in the client's socket, not in the broker
            received = 0
            while received < count * (size + 4):
                received += len(await loop.sock_recv(client, 1 << 20))
            assert received == count * (size + 4)
            assert len(handlers.calls) == count
            await until(lambda: not connection._reading_paused)
            client.close()

    run(scenario())


def test_a_region_larger_than_the_socket_takes_is_sent_whole_between_bytes_to_a_slow_reader(
    run: Runner, file_fd: Callable[[bytes], int]
) -> None:
    payload = os.urandom(16 * 1024 * 1024)
    fd = file_fd(payload)

    async def scenario() -> None:
        async with serving_paths(Handlers(fd)) as server:
            reader, writer = await connect(server)
            writer.write(frame(b"now:before") + frame(b"whole") + frame(b"now:after") + frame(b"whole"))
            await asyncio.sleep(0.2)  # the socket fills up before anything is read
            assert [await read_frame(reader) for _ in range(4)] == [b"before", payload, b"after", payload]

    run(scenario())


def test_frames_waiting_behind_a_pending_one_stop_the_reading_until_it_is_answered(run: Runner) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        async with serving_paths(handlers) as server:
            reader, writer = await connect(server)
            writer.write(frame(b"wait:x") + b"".join(frame(b"now:%d" % i) for i in range(MAX_WAITING_FRAMES)))
            await until(lambda: b"x" in handlers.futures)
            (connection,) = server.connections
            await until(lambda: connection._reading_paused)
            handlers.futures[b"x"].set_result(frame(b"x"))
            expected = [b"x", *(b"%d" % i for i in range(MAX_WAITING_FRAMES))]
            assert [await read_frame(reader) for _ in expected] == expected
            await until(lambda: not connection._reading_paused)

    run(scenario())
