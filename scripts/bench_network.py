"""The network layer alone, on each event loop: requests/s and server CPU per request.

A ``SocketServer`` in a subprocess answers every frame with the same 20 bytes, either from the immediate path (a
``now_handler``) or from the general path (an async handler); one client connection sends ApiVersions-sized frames in
bursts of 1, 5 and 16 and reads every answer before the next burst. CPU is the server process's utime + stime from
/proc. Usage: ``python scripts/bench_network.py [requests]``; ``--serve PATH LOOP`` is the server side.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import time

ANSWER = struct.pack(">i", 16) + bytes(16)
REQUEST = struct.pack(">hhih", 18, 2, 7, 5) + b"bench"
DEPTHS = (1, 5, 16)


def serve(path: str, loop: str) -> None:
    from mq.server.broker import new_event_loop
    from mq.server.network import ClientAddress, SocketServer

    async def general(frame: bytearray, client: ClientAddress) -> bytes:
        return ANSWER

    def now(frame: bytearray, client: ClientAddress) -> bytes:
        return ANSWER

    async def main() -> None:
        server = SocketServer(
            "127.0.0.1", 0, general, now_handler=now if path == "now" else None, max_request_bytes=1 << 20
        )
        await server.start()
        print(server.port, flush=True)
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=lambda: new_event_loop(loop)) as runner:
        runner.run(main())


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pipeline(port: int, count: int, depth: int) -> int:
    """Send ``count`` frames in bursts of ``depth``, reading all answers of a burst before the next."""
    burst = (struct.pack(">i", len(REQUEST)) + REQUEST) * depth
    buffer = bytearray()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count // depth):
            sock.sendall(burst)
            answered = 0
            while answered < depth:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("the server closed the connection")
                buffer += chunk
                while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
                    del buffer[: 4 + struct.unpack_from(">i", buffer)[0]]
                    answered += 1
    return count // depth * depth


def main(requests: int) -> None:
    print(f"{'path':8} {'loop':8} {'depth':>5} {'requests/s':>11} {'CPU us/request':>15}")
    for path in ("general", "now"):
        for loop in ("asyncio", "uvloop"):
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve", path, loop], stdout=subprocess.PIPE, text=True
            )
            try:
                assert server.stdout is not None
                port = int(server.stdout.readline())
                for depth in DEPTHS:
                    pipeline(port, 1000, depth)  # warm up
                    count = requests if depth > 1 else requests // 4
                    cpu, start = cpu_seconds(server.pid), time.perf_counter()
                    done = pipeline(port, count, depth)
                    elapsed, used = time.perf_counter() - start, cpu_seconds(server.pid) - cpu
                    print(f"{path:8} {loop:8} {depth:5d} {done / elapsed:11.0f} {used / done * 1e6:15.2f}", flush=True)
            finally:
                server.kill()
                server.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], sys.argv[3])
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
