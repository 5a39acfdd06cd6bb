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
from mq.protocol.framing import frame
from mq.server.network import ClientAddress, Response, SocketServer


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


async def start(handler: Echo, max_request_bytes: int = 1000) -> SocketServer:
    server = SocketServer("127.0.0.1", 0, handler, max_request_bytes=max_request_bytes)
    await server.start()
    return server


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


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
