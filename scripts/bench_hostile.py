"""The broker's memory and service under hostile connections, against its own resting state in the same run.

Starts a broker process (defaults, except log.dirs in a temp dir, a loopback listener and
``socket.request.max.bytes`` of 200 MB so a 100 MB frame is legal) and measures its RSS (``/proc/PID/status``
VmRSS) and the round-trip time of an ApiVersions request on an established connection:

1. at rest (the baseline);
2. with 20 connections that each send a 100 MB size prefix and a few bytes, then nothing;
3. while 20 connections each send a whole 100 MB request (the peak RSS over the episode);
4. with 5,000 idle connections.

Each figure is printed with its ratio to the resting RSS and the resting ApiVersions round trip.

    python scripts/bench_hostile.py [--prefixes 20] [--frame-mb 100] [--idle 5000]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import free_port, running

MB = 1 << 20
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def round_trip_ms(sock: socket.socket, times: int = 50) -> float:
    """Median ApiVersions v0 round trip on an established connection."""
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
        (size,) = struct.unpack(">i", receive(sock, 4))
        receive(sock, size)
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)[len(samples) // 2]


def receive(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)


def report(what: str, rss: float, rest_rss: float, rtt: float, rest_rtt: float) -> None:
    print(
        f"{what:<44} RSS {rss:8.1f} MB ({rss / rest_rss:5.2f}x rest)   "
        f"ApiVersions {rtt:6.2f} ms ({rtt / rest_rtt:5.2f}x rest)",
        flush=True,
    )


def send_whole_frames(port: int, count: int, frame_bytes: int) -> list[socket.socket]:
    """Starts ``count`` threads that each send one ``frame_bytes`` frame of an unknown API (the broker receives it
    whole before it reads the header, then closes the connection); returns their sockets once every frame is
    sent."""
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    header = struct.pack(">i", frame_bytes) + struct.pack(">hhih", 32767, 0, 1, -1)
    body = bytes(frame_bytes - 10)

    def send(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the broker closes the connection once it has the frame
            sock.sendall(header + body)

    threads = [threading.Thread(target=send, args=(sock,)) for sock in sockets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sockets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefixes", type=int, default=20)
    parser.add_argument("--frame-mb", type=int, default=100)
    parser.add_argument("--idle", type=int, default=5000)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.idle + 1000)), hard))
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "mq", "server", "start",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={tmp}/logs",
            "--override", f"socket.request.max.bytes={2 * args.frame_mb * MB}",
        ]  # fmt: skip
        with running(command, port, "broker", Path(tmp) / "broker.log") as pid:
            client = socket.create_connection(("127.0.0.1", port))
            rest_rtt = round_trip_ms(client)
            rest_rss = rss_mb(pid)
            report("at rest", rest_rss, rest_rss, rest_rtt, rest_rtt)

            prefixes = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.prefixes)]
            for sock in prefixes:
                sock.sendall(struct.pack(">i", args.frame_mb * MB) + bytes(10))
            time.sleep(1)
            report(
                f"{args.prefixes} x {args.frame_mb} MB size prefixes",
                rss_mb(pid),
                rest_rss,
                round_trip_ms(client),
                rest_rtt,
            )
            for sock in prefixes:
                sock.close()

            peak = [rest_rss]
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], rss_mb(pid))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample)
            sampler.start()
            senders = send_whole_frames(port, args.prefixes, args.frame_mb * MB)
            rtt = round_trip_ms(client)
            time.sleep(1)
            done.set()
            sampler.join()
            report(f"{args.prefixes} x {args.frame_mb} MB whole requests (peak)", peak[0], rest_rss, rtt, rest_rtt)
            for sock in senders:
                sock.close()

            idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.idle)]
            time.sleep(1)
            report(f"{args.idle} idle connections", rss_mb(pid), rest_rss, round_trip_ms(client), rest_rtt)
            for sock in idle:
                sock.close()
            client.close()


if __name__ == "__main__":
    main()
