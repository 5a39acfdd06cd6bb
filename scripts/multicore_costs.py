"""The costs that decide how one mq broker could use several cores (docs/multicore.md), measured on this machine.

1. An asyncio request path with no broker work in it: a client process keeps ``depth`` 150 B requests in flight on
   one TCP connection; the server answers each with 40 B (every response a read produced leaves in one write).
   "in place": the connection's process answers. "forwarded": it passes each read's frames, tagged with a
   connection id, over a Unix socket to a second process that answers them back through it (a partition shard
   owned by another process). Figure: the servers' CPU µs per request (both processes), so forwarding's price is the
   difference.
2. One batch of messages and its answer between two processes: over a Unix socketpair, and through two
   shared-memory rings with an eventfd to wake the reader. CPU µs per message, both sides.
3. Passing an accepted connection to another process (SCM_RIGHTS over a Unix socket): µs per connection.
4. SO_REUSEPORT: how the kernel spreads connections over listeners sharing one port.
5. Moving a produced batch to another process: 1 MiB messages over a Unix socketpair, CPU seconds per GiB (both
   sides): what forwarding adds to a byte-heavy produce.

    python scripts/multicore_costs.py [--requests 100000] [--loop asyncio|uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import resource
import socket
import struct
import time
from multiprocessing import shared_memory
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

MB = 1024 * 1024
REQUEST = struct.pack(">i", 146) + bytes(146)
RESPONSE = struct.pack(">i", 36) + bytes(36)
TAG = struct.Struct(">ii")
"""A forwarded frame: connection id, frame length, then the frame."""


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def frames(buffer: bytearray) -> list[bytes]:
    """Cuts every complete size-prefixed frame off the front of ``buffer``."""
    found, start = [], 0
    while len(buffer) - start >= 4:
        (size,) = struct.unpack_from(">i", buffer, start)
        if len(buffer) - start - 4 < size:
            break
        found.append(bytes(buffer[start : start + 4 + size]))
        start += 4 + size
    del buffer[:start]
    return found


class Answering(asyncio.Protocol):
    """Answers each request frame; the answers to one read leave in one write."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.transport.write(RESPONSE * len(frames(self.buffer)))


class Owner(Answering):
    """The other process's end: answers tagged frames with tagged responses."""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        out, start = [], 0
        while len(self.buffer) - start >= TAG.size:
            connection, size = TAG.unpack_from(self.buffer, start)
            if len(self.buffer) - start - TAG.size < size:
                break
            start += TAG.size + size
            out.append(TAG.pack(connection, len(RESPONSE)) + RESPONSE)
        del self.buffer[:start]
        self.transport.write(b"".join(out))


class Forwarding(asyncio.Protocol):
    """A client connection whose frames another process answers."""

    def __init__(self, link: asyncio.Transport, connections: dict[int, Forwarding]) -> None:
        self.buffer = bytearray()
        self.link = link
        self.id = len(connections)
        connections[self.id] = self

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.link.write(b"".join(TAG.pack(self.id, len(f)) + f for f in frames(self.buffer)))


class Returning(asyncio.Protocol):
    """The forwarding process's end of the link: hands tagged responses to their connections."""

    def __init__(self, connections: dict[int, Forwarding]) -> None:
        self.buffer = bytearray()
        self.connections = connections

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        ready: dict[int, list[bytes]] = collections.defaultdict(list)
        start = 0
        while len(self.buffer) - start >= TAG.size:
            connection, size = TAG.unpack_from(self.buffer, start)
            if len(self.buffer) - start - TAG.size < size:
                break
            ready[connection].append(bytes(self.buffer[start + TAG.size : start + TAG.size + size]))
            start += TAG.size + size
        del self.buffer[:start]
        for connection, responses in ready.items():
            self.connections[connection].transport.write(b"".join(responses))


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def serve(kind: str, listener: socket.socket, link: socket.socket | None, stop: Event, result: Queue) -> None:
    """The connection's process: answers in place (``link`` None) or forwards over ``link``; reports its CPU."""
    loop = new_loop(kind)

    async def main() -> None:
        if link is None:
            server = await loop.create_server(Answering, sock=listener)
        else:
            connections: dict[int, Forwarding] = {}
            transport, _ = await loop.create_unix_connection(lambda: Returning(connections), sock=link)
            server = await loop.create_server(lambda: Forwarding(transport, connections), sock=listener)  # type: ignore[arg-type]
        start = cpu()
        await loop.run_in_executor(None, stop.wait)  # the client finished
        result.put(cpu() - start)
        server.close()

    loop.run_until_complete(main())


def own(kind: str, link: socket.socket, stop: Event, result: Queue) -> None:
    """The owning process: answers what is forwarded over ``link`` until told to stop; reports its CPU."""
    loop = new_loop(kind)

    async def main() -> None:
        await loop.create_unix_connection(Owner, sock=link)
        start = cpu()
        await loop.run_in_executor(None, stop.wait)
        result.put(cpu() - start)

    loop.run_until_complete(main())


def client(port: int, requests: int, depth: int) -> None:
    """Keeps ``depth`` requests in flight until ``requests`` were answered."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        expected = len(RESPONSE) * depth
        for _ in range(requests // depth):
            sock.sendall(REQUEST * depth)
            received = 0
            while received < expected:
                chunk = sock.recv(expected - received)
                if not chunk:
                    raise RuntimeError("server closed")
                received += len(chunk)


def request_path(kind: str, requests: int, depth: int, forwarded: bool) -> float:
    """Servers' CPU µs per request for one client keeping ``depth`` requests in flight."""
    context = multiprocessing.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop, results = context.Event(), context.Queue()
    workers = []
    if forwarded:
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        workers.append(context.Process(target=own, args=(kind, far, stop, results)))
        workers.append(context.Process(target=serve, args=(kind, listener, near, stop, results)))
    else:
        workers.append(context.Process(target=serve, args=(kind, listener, None, stop, results)))
    for worker in workers:
        worker.start()
    time.sleep(0.5)  # the loops are up
    client(port, requests, depth)
    stop.set()
    used = sum(results.get(timeout=30) for _ in workers)
    for worker in workers:
        worker.join(30)
    listener.close()
    return used * 1e6 / requests


RING = 1 << 20
HEAD = struct.Struct("<QQ")
"""A ring: bytes written and bytes read so far (8 bytes each), then RING bytes of data."""


class Ring:
    """One direction of a shared-memory channel: length-prefixed messages and an eventfd that wakes the reader."""

    def __init__(self, memory: shared_memory.SharedMemory, wake: int) -> None:
        self.buffer = memory.buf
        self.wake = wake

    def put(self, messages: list[bytes]) -> None:
        written, read = HEAD.unpack_from(self.buffer, 0)
        for message in messages:
            record = struct.pack("<I", len(message)) + message
            if written + len(record) - read > RING:
                raise RuntimeError("ring full")
            at = HEAD.size + written % RING
            if at + len(record) <= HEAD.size + RING:
                self.buffer[at : at + len(record)] = record
            else:
                split = HEAD.size + RING - at
                self.buffer[at:] = record[:split]
                self.buffer[HEAD.size : HEAD.size + len(record) - split] = record[split:]
            written += len(record)
        struct.pack_into("<Q", self.buffer, 0, written)
        os.eventfd_write(self.wake, 1)

    def take(self) -> list[bytes]:
        os.eventfd_read(self.wake)
        written, read = HEAD.unpack_from(self.buffer, 0)
        at, end = HEAD.size + read % RING, HEAD.size + read % RING + written - read
        if end <= HEAD.size + RING:
            data = bytes(self.buffer[at:end])
        else:
            data = bytes(self.buffer[at:]) + bytes(self.buffer[HEAD.size : end - RING])
        messages, at = [], 0
        while at < written - read:
            (size,) = struct.unpack_from("<I", data, at)
            messages.append(data[at + 4 : at + 4 + size])
            at += 4 + size
        struct.pack_into("<Q", self.buffer, 8, written)
        return messages


def echo_socket(sock: socket.socket, rounds: int, batch: int) -> None:
    for _ in range(rounds):
        received = sock.recv(len(REQUEST) * batch, socket.MSG_WAITALL)
        sock.sendall(RESPONSE * (len(received) // len(REQUEST)))


def echo_ring(names: tuple[str, str], wakes: tuple[int, int], rounds: int) -> None:
    inbound, outbound = (shared_memory.SharedMemory(name) for name in names)
    requests, responses = Ring(inbound, wakes[0]), Ring(outbound, wakes[1])
    for _ in range(rounds):
        responses.put([RESPONSE] * len(requests.take()))
    inbound.close()
    outbound.close()


def channel(rounds: int, batch: int, ring: bool) -> float:
    """CPU µs per message (both processes) of ``rounds`` batches of ``batch`` 150 B messages and 40 B answers."""
    context = multiprocessing.get_context("fork")
    start_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = cpu()
    if ring:
        memories = [shared_memory.SharedMemory(create=True, size=HEAD.size + RING) for _ in range(2)]
        for memory in memories:
            memory.buf[: HEAD.size] = bytes(HEAD.size)
        wakes = (os.eventfd(0), os.eventfd(0))
        peer = context.Process(target=echo_ring, args=(tuple(m.name for m in memories), wakes, rounds))
        peer.start()
        requests, responses = Ring(memories[0], wakes[0]), Ring(memories[1], wakes[1])
        for _ in range(rounds):
            requests.put([REQUEST] * batch)
            if len(responses.take()) != batch:
                raise RuntimeError("lost answers")
        peer.join()
        for memory in memories:
            memory.close()
            memory.unlink()
    else:
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        peer = context.Process(target=echo_socket, args=(far, rounds, batch))
        peer.start()
        for _ in range(rounds):
            near.sendall(REQUEST * batch)
            near.recv(len(RESPONSE) * batch, socket.MSG_WAITALL)
        peer.join()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = children.ru_utime + children.ru_stime - start_children.ru_utime - start_children.ru_stime
    return (cpu() - start + child) * 1e6 / (rounds * batch)


def pass_connections(count: int) -> tuple[float, float]:
    """(µs per accepted connection, µs of it spent passing the descriptor to another process and wrapping it)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=count)
    near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    clients, received, passing = [], [], 0.0
    start = time.perf_counter()
    for _ in range(count):
        clients.append(socket.create_connection(listener.getsockname()))
        accepted, _ = listener.accept()
        began = time.perf_counter()
        socket.send_fds(near, [b"c"], [accepted.fileno()])
        accepted.close()
        _, fds, _, _ = socket.recv_fds(far, 1, 1)
        received.append(socket.socket(fileno=fds[0]))
        passing += time.perf_counter() - began
    total = time.perf_counter() - start
    for sock in clients + received + [listener, near, far]:
        sock.close()
    return total * 1e6 / count, passing * 1e6 / count


def reuseport_spread(listeners: int, connections: int) -> list[int]:
    """Connections each of ``listeners`` SO_REUSEPORT sockets on one port accepted, of ``connections``."""
    sockets = []
    port = 0
    for _ in range(listeners):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        port = sock.getsockname()[1]
        sock.listen(connections)
        sock.setblocking(False)
        sockets.append(sock)
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    counts = []
    for sock in sockets:
        accepted = 0
        while True:
            try:
                sock.accept()[0].close()
            except BlockingIOError:
                break
            accepted += 1
        counts.append(accepted)
    for sock in clients + sockets:
        sock.close()
    return counts


def drain(sock: socket.socket, total: int) -> None:
    view = memoryview(bytearray(MB))
    while total > 0:
        total -= sock.recv_into(view)


def bulk(megabytes: int) -> float:
    """CPU seconds per GiB, both processes, of ``megabytes`` 1 MiB sends over a Unix socketpair."""
    context = multiprocessing.get_context("fork")
    near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = cpu()
    peer = context.Process(target=drain, args=(far, megabytes * MB))
    peer.start()
    block = os.urandom(MB)
    for _ in range(megabytes):
        near.sendall(block)
    peer.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return (cpu() - start + child) * 1024 / megabytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {args.loop} loop")
    print("1. request path, servers' CPU µs per request (median of 3)")
    for depth in (1, 5, 64):
        place = sorted(request_path(args.loop, args.requests, depth, False) for _ in range(3))[1]
        moved = sorted(request_path(args.loop, args.requests, depth, True) for _ in range(3))[1]
        print(
            f"   depth {depth:>2}: in place {place:6.1f}, forwarded {moved:6.1f}, forwarding adds {moved - place:6.1f}"
        )
    print("2. between two processes, CPU µs per 150 B message and its 40 B answer, both sides")
    for batch in (1, 5, 64):
        rounds = max(1, args.requests // batch)
        sock = sorted(channel(rounds, batch, False) for _ in range(3))[1]
        ring = sorted(channel(rounds, batch, True) for _ in range(3))[1]
        print(f"   batch {batch:>2}: Unix socket {sock:6.2f}, shared-memory ring + eventfd {ring:6.2f}")
    total, passing = pass_connections(2000)
    print(f"3. accept + connect {total:.1f} µs per connection, of which passing the fd (SCM_RIGHTS) {passing:.1f} µs")
    print("4. SO_REUSEPORT, connections per listener:")
    for listeners, connections in ((2, 8), (2, 8), (2, 8), (4, 400), (8, 64)):
        print(f"   {connections} connections over {listeners} listeners: {reuseport_spread(listeners, connections)}")
    print(f"5. 1 MiB messages over a Unix socketpair: {sorted(bulk(2048) for _ in range(3))[1]:.2f} CPU s/GiB")


if __name__ == "__main__":
    main()
