"""The socket server in-process: ordering, framing errors, sendfile regions, graceful stop."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mq.protocol.codec import InvalidRequestError
from mq.protocol.framing import MIN_GROWTH, frame
from mq.server.network import ClientAddress, ConnectionLimits, Response, SocketServer


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
def data_fd(tmp_path: Path) -> AsyncIterator[int]:
    path = tmp_path / "data"
    path.write_bytes(bytes(range(256)) * 4)
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


async def start(handler: Echo, max_request_bytes: int = 1000, limits: ConnectionLimits | None = None) -> SocketServer:
    server = SocketServer("127.0.0.1", 0, handler, max_request_bytes=max_request_bytes, limits=limits)
    await server.start()
    return server


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


def test_responses_come_back_in_request_order(data_fd: int) -> None:
    async def scenario() -> None:
        server = await start(Echo(data_fd))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(frame(b"sleep:50") + frame(b"silent") + frame(b"quick") + frame(b"file"))
        assert await read_frame(reader) == b"sleep:50"
        assert await read_frame(reader) == b"quick"
        assert await read_frame(reader) == (bytes(range(256)) * 4)[5:15]
        writer.close()
        await server.stop()

    run(scenario())


def test_oversized_frame_closes_only_that_connection(data_fd: int) -> None:
    async def scenario() -> None:
        handler = Echo(data_fd)
        server = await start(handler, max_request_bytes=100)
        good_reader, good_writer = await asyncio.open_connection("127.0.0.1", server.port)
        bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", server.port)
        bad_writer.write(struct.pack(">i", 10_000_000))
        assert await bad_reader.read() == b""  # closed without reading the body
        good_writer.write(frame(b"still here"))
        assert await read_frame(good_reader) == b"still here"
        assert handler.seen == [b"still here"]
        good_writer.close()
        await server.stop()

    run(scenario())


def test_malformed_request_closes_only_that_connection(data_fd: int) -> None:
    async def scenario() -> None:
        server = await start(Echo(data_fd))
        good_reader, good_writer = await asyncio.open_connection("127.0.0.1", server.port)
        bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", server.port)
        bad_writer.write(frame(b"bad") + frame(b"never answered"))
        assert await bad_reader.read() == b""
        good_writer.write(frame(b"ok"))
        assert await read_frame(good_reader) == b"ok"
        good_writer.close()
        await server.stop()

    run(scenario())


def test_stop_answers_requests_already_received(data_fd: int) -> None:
    async def scenario() -> None:
        server = await start(Echo(data_fd))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
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


def test_large_region_is_sent_whole(tmp_path: Path) -> None:
    path = tmp_path / "big"
    payload = os.urandom(8 * 1024 * 1024)
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDONLY)

    class Big(Echo):
        async def __call__(self, request: bytes, client: ClientAddress) -> Response | None:
            return [struct.pack(">i", len(payload) - 1), Region(self.fd, 1, len(payload) - 1)]

    async def scenario() -> None:
        server = await start(Big(fd))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(frame(b"go"))
        assert await read_frame(reader) == payload[1:]
        writer.close()
        await server.stop()

    try:
        run(scenario())
    finally:
        os.close(fd)


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


def test_a_frame_waits_unread_for_pool_memory_and_is_answered_once_it_is_released(data_fd: int) -> None:
    async def scenario() -> None:
        handler = Holding(data_fd)
        size = 3 * MIN_GROWTH
        server = await start(handler, max_request_bytes=size, limits=ConnectionLimits(queued_max_request_bytes=size))
        first_reader, first_writer = await asyncio.open_connection("127.0.0.1", server.port)
        first_writer.write(frame(b"hold" + bytes(size - 4)))
        while handler.seen != [b"hold"]:
            await asyncio.sleep(0.01)
        assert server.pool.available == 0
        second_reader, second_writer = await asyncio.open_connection("127.0.0.1", server.port)
        second_writer.write(frame(b"hold" + bytes(size - 4)))
        small_reader, small_writer = await asyncio.open_connection("127.0.0.1", server.port)
        small_writer.write(frame(b"small requests are still read"))
        assert await read_frame(small_reader) == b"small requests are still read"
        while server.pool.waiting == 0:
            await asyncio.sleep(0.01)
        assert handler.seen == [b"hold", b"small requests are still read"]  # the second frame is not whole
        handler.let_go.set()
        assert await read_frame(first_reader) == b"held %d" % size
        assert await read_frame(second_reader) == b"held %d" % size  # resumed, not dropped
        assert server.pool.available == size
        for writer in (first_writer, second_writer, small_writer):
            writer.close()
        await server.stop()

    run(scenario())


async def is_closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 0.5) == b""
    except TimeoutError:
        return False


def test_accept_waits_at_max_connections_and_closes_connections_over_the_per_ip_limit(data_fd: int) -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(
            max_connections=4, max_connections_per_ip=2, max_connections_per_ip_overrides={"127.0.0.1": 3}
        )
        server = await start(Echo(data_fd), limits=limits)
        clients = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(4)]
        assert [await is_closed_by_server(reader) for reader, _ in clients] == [False, False, False, True]
        other = [await asyncio.open_connection("127.0.0.1", server.port, local_addr=("127.0.0.2", 0)) for _ in range(2)]
        assert not await is_closed_by_server(other[0][0])
        other[1][1].write(frame(b"waits in the backlog"))  # four are open: it is not accepted yet
        assert not await is_closed_by_server(other[1][0]) and len(server.connections) == 4
        reader, writer = clients[0]
        writer.write(frame(b"served"))
        assert await read_frame(reader) == b"served"
        writer.close()
        assert await read_frame(other[1][0]) == b"waits in the backlog"  # accepted once a place was free
        await server.stop()

    run(scenario())


def test_idle_connections_and_slow_requests_are_closed(data_fd: int) -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(connections_max_idle_ms=300, request_receive_timeout_ms=300)
        server = await start(Echo(data_fd), limits=limits)
        idle_reader, _ = await asyncio.open_connection("127.0.0.1", server.port)
        slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", server.port)
        busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", server.port)
        slow_writer.write(frame(b"never finished")[:-1])
        busy_writer.write(frame(b"sleep:700"))  # a request being handled is not idle
        assert await asyncio.wait_for(idle_reader.read(), 5) == b""
        assert await asyncio.wait_for(slow_reader.read(), 5) == b""
        assert await read_frame(busy_reader) == b"sleep:700"
        await server.stop()

    run(scenario())
