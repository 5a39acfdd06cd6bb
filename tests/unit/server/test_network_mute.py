"""A throttled connection (``ClientAddress.mute``, KIP-219): its response leaves at once, the requests it sends next
wait unhandled until the throttle time has passed, and other connections are served meanwhile."""

from __future__ import annotations

import asyncio
import struct

import pytest

from mq.protocol.framing import frame
from mq.server.broker import new_event_loop
from mq.server.network import ClientAddress, Response, SocketServer

MUTE_MS = 1500


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_a_muted_connection_answers_at_once_then_handles_nothing_until_the_throttle_ends(loop_name: str) -> None:
    handled: list[bytes] = []

    def now(request: bytearray, client: ClientAddress) -> Response:
        handled.append(bytes(request))
        if request == b"throttle":
            client.mute(MUTE_MS)
        return frame(bytes(request))

    async def general(request: bytearray, client: ClientAddress) -> Response | None:
        raise AssertionError("every frame is answered on the immediate path")

    async def scenario() -> None:
        server = SocketServer("127.0.0.1", 0, general, now_handler=now, max_request_bytes=1000)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            other_reader, other_writer = await asyncio.open_connection("127.0.0.1", server.port)
            loop = asyncio.get_running_loop()
            started = loop.time()
            writer.write(frame(b"throttle") + frame(b"next"))
            assert await read_frame(reader) == b"throttle"
            other_writer.write(frame(b"other"))
            assert await read_frame(other_reader) == b"other"
            if loop.time() - started < MUTE_MS / 1000:
                assert handled == [b"throttle", b"other"]  # "next" waits behind the throttle
            assert await read_frame(reader) == b"next"
            assert loop.time() - started >= MUTE_MS / 1000 * 0.99
            for w in (writer, other_writer):
                w.close()
        finally:
            await server.stop()

    with asyncio.Runner(loop_factory=lambda: new_event_loop(loop_name)) as runner:
        runner.run(asyncio.wait_for(scenario(), 30))
