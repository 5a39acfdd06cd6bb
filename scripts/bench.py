"""mq's throughput and latency against this machine's limits and against Redis Streams, with target ratios.

Runs from a clean clone after ``pip install -e .[bench]`` and ``apt-get install -y redis-server kcat`` (without kcat
its cases, the large-batch fetch and the produce targets are skipped); starts what it needs on 127.0.0.1 (a Redis
server without persistence, an mq broker on a temporary log dir) and stops it again. Every case runs three times, in
three rounds of all the cases of its group in turn (none always runs on what the same case before it left in the page
cache); the table shows min / median / max, and the ratios use the medians.

(a) the machine: sequential 1 MiB writes to a new temporary file (page cache only; rewriting that file after
    truncating it; and with one fdatasync at the end), loopback TCP (a sender thread and a receiving thread over
    127.0.0.1), sendfile of a page-cached file to a loopback socket, and loopback TCP whose receiver appends what it
    gets to a new file (the least work any broker does for a produce);
(b) Redis Streams: ``redis-benchmark -P 64 -c 1 XADD`` of 100 B and 1 KiB values (records/s = requests/s) and
    ``redis-benchmark -c 1 XRANGE s - + COUNT 1000`` (records/s = requests/s x 1000);
(c) mq, driven by librdkafka from Python (``mq perf producer/consumer --client confluent``, separate processes;
    its Python loop, not the broker, limits it to about 480k records/s of 100 B), by kcat (librdkafka in C, reading
    records from a file and writing them to /dev/null; the produce and consume targets use its figures, the same
    generator in every run) and by pre-encoded
    produce requests replayed over one connection (the broker's cost alone): produce 100 B and 1 KiB records with
    acks=1 and acks=all, consume them back, three concurrent consumers fetching large batches of a pre-filled
    3-partition topic (three kcat readers, 16 MiB fetches), and the p99 latency of acks=1 produce at 10% of the
    librdkafka produce rate of this run, with the load rate each run measured (librdkafka's default linger.ms, and
    linger.ms=0 for reference);
(d) the request rate: one 100 B record per Produce request (kcat with linger.ms=0, batch.num.messages=1, acks=1),
    one connection with 5 requests in flight and eight kcat processes with one each, against ``redis-benchmark XADD``
    at the same depth (``-c 1 -P 5``, ``-c 8 -P 1``): requests/s and the server's CPU µs per request;
(e) consumer-heavy: 200 librdkafka consumers (confluent-kafka, 50 to a process) in 20 groups on a 10-partition topic,
    each committing every 100 ms (auto-commit) and long-polling with fetch.wait.max.ms=100 while one producer adds
    5 records to every partition every 100 ms: requests/s by API (librdkafka's statistics), the broker's CPU µs per
    request, the consumers' own CPU and the machine's idle share, rebalances in the measured window, and the lag.

A megabyte is 1024 * 1024 bytes throughout (as Kafka's perf tools count). The mq figures include the load
generator's cost: librdkafka driven from Python still makes a Python call per record (the produce call and its
delivery report; a message object per consumed record), and on a 2-core machine the generator shares the CPUs with
the broker, so compare the broker's CPU time with the generator's before reading a figure as the broker's limit.
The broker's CPU is that of its process and every process under it.

    python scripts/bench.py [--scale 1.0] [--only machine,redis,produce,latency,request-rate,consumer-heavy]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import io
import itertools
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MB = 1024 * 1024
RUNS = 3
NEW_FILE_APPEND = "append 1 MiB blocks, new file, page cache"
NEW_FILE_APPEND_CPU = f"{NEW_FILE_APPEND}: CPU s/GiB"
"""The kernel's own cost of growing the page cache by a GiB: a floor under any broker's CPU per GiB produced while
its log grows into memory the machine has not used yet (on a VM that reports free pages to its host, most of it)."""
RECYCLED_APPEND = "append 1 MiB blocks, rewriting a just-truncated file"
RECEIVE_APPEND = "loopback TCP receive + append to a new file"
FETCH = "mq large-batch fetch, 3 consumers"
KCAT_START = "0"
"""kcat readers start at offset 0, which begins the bench's new topics. With ``-o beginning`` librdkafka first asks
for the offset, and when that request races the partition joining its broker thread it retries after a fixed 500 ms
(librdkafka 2.0's "no current leader for partition" offset query timer): one reader in about five took 0.5 s
longer, with no request to the broker in between."""
PRODUCER_FINAL = re.compile(
    r"^(?P<count>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbs>[\d.]+) MB/sec\), (?P<avg>[\d.]+) ms avg "
    r"latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, "
    r"(?P<p999>\d+) ms 99\.9th\.$",
    re.MULTILINE,
)


@dataclass
class Case:
    name: str
    unit: str
    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values)


class Table:
    def __init__(self) -> None:
        self.cases: dict[str, Case] = {}

    def add(self, name: str, unit: str, value: float) -> None:
        self.cases.setdefault(name, Case(name, unit)).values.append(value)
        print(f"  {name}: {value:,.1f} {unit}", flush=True)

    def median(self, name: str) -> float:
        return self.cases[name].median

    def print(self) -> None:
        width = max(len(name) for name in self.cases)
        print(f"\n{'case':<{width}}  {'min':>14}  {'median':>14}  {'max':>14}  unit")
        for case in self.cases.values():
            low, mid, high = min(case.values), case.median, max(case.values)
            print(f"{case.name:<{width}}  {low:>14,.1f}  {mid:>14,.1f}  {high:>14,.1f}  {case.unit}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


@contextlib.contextmanager
def running(
    command: list[str],
    port: int,
    what: str,
    log: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[int]:
    """Runs ``command`` (in ``cwd``, with ``env``) until the block ends; yields its pid once it listens on
    ``port``."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    try:
        wait_for_port(port, process, what)
        yield process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user plus system) of process ``pid``, of its live descendants and of the children it reaped: a
    broker's cost whether it runs as one process or several (/proc/PID/stat fields 4, 14 to 17)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        process = int(stat.parent.name)
        parents[process] = int(fields[1])
        times[process] = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    tree = {pid}
    grew = True
    while grew:
        joined = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= joined
        grew = bool(joined)
    return sum(times.get(p, 0.0) for p in tree)


@contextlib.contextmanager
def broker_cpu(table: Table, name: str, pid: int, megabytes: float) -> Iterator[None]:
    """Adds the CPU seconds the broker spent per GiB the block moved, as the row "<name>: broker CPU s/GiB": on 2
    shared cores, what is left over is the load generator's."""
    before = cpu_seconds(pid)
    yield
    table.add(f"{name}: broker CPU s/GiB", "s", (cpu_seconds(pid) - before) * 1024 / megabytes)


@dataclass(frozen=True)
class Rates:
    """One throughput case: each ``measure`` adds a run's records/s, MB/s and the broker's CPU per GiB to ``table``."""

    table: Table
    broker: int
    size: int
    """Bytes per record."""
    megabytes: float
    """MiB one run moves."""
    name: str
    run: Callable[[], float]
    """One run; returns records/s."""
    records_row: bool = True
    """False leaves only the MB/s row (as for pre-encoded requests)."""

    def measure(self) -> None:
        with broker_cpu(self.table, self.name, self.broker, self.megabytes):
            rate = self.run()
            if self.records_row:
                self.table.add(self.name, "records/s", rate)
            self.table.add(f"{self.name} MB/s", "MB/s", rate * self.size / MB)


def interleaved(cases: list[Rates]) -> None:
    """RUNS rounds of every case in turn, so that no case always runs right after the same one or on a page cache
    and log the runs before it warmed."""
    for _ in range(RUNS):
        for case in cases:
            case.measure()


# (a) the machine -------------------------------------------------------------------------------------------------


def append_file(path: Path, megabytes: int, sync: bool) -> tuple[float, float]:
    """(MB/s, CPU seconds per GiB) of sequential 1 MiB writes to a new file; with ``sync`` the time includes one
    fdatasync at the end. The CPU time is this thread's, user and system: what the kernel charges for the writes."""
    block = os.urandom(MB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(megabytes):
            os.write(fd, block)
        if sync:
            os.fdatasync(fd)
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    finally:
        os.close(fd)
    return megabytes / elapsed, cpu * 1024 / megabytes


def _drain(connection: socket.socket, total: int, sink: int | None) -> None:
    """Receive ``total`` bytes into one 1 MiB buffer; with ``sink`` (a file descriptor) append each chunk to it."""
    view = memoryview(bytearray(MB))
    received = 0
    while received < total:
        n = connection.recv_into(view)
        if n == 0:
            raise RuntimeError("loopback peer closed early")
        if sink is not None:
            os.write(sink, view[:n])
        received += n


def loopback(total: int, send: Callable[[socket.socket], None], sink: int | None = None) -> float:
    """MB/s of ``total`` bytes that ``send`` writes to a 127.0.0.1 connection a receiving thread drains (and
    appends to ``sink`` when given)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
    done = threading.Thread(target=_drain, args=(receiver, total, sink))
    with sender, receiver:
        start = time.perf_counter()
        done.start()
        send(sender)
        done.join()
        elapsed = time.perf_counter() - start
    return total / MB / elapsed


def tcp_bandwidth(megabytes: int, sink: Path | None = None) -> float:
    """Loopback TCP MB/s of 1 MiB sends; with ``sink`` the receiver appends what it gets to that new file (the
    least any broker does with a produce: receive it and write it to the page cache)."""
    block = os.urandom(MB)

    def send(sock: socket.socket) -> None:
        for _ in range(megabytes):
            sock.sendall(block)

    if sink is None:
        return loopback(megabytes * MB, send)
    fd = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        return loopback(megabytes * MB, send, fd)
    finally:
        os.close(fd)


def sendfile_bandwidth(path: Path) -> float:
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.read()  # in the page cache

        def send(sock: socket.socket) -> None:
            offset = 0
            while offset < size:
                offset += os.sendfile(sock.fileno(), f.fileno(), offset, size - offset)

        return loopback(size, send)


def bench_machine(table: Table, tmp: Path, megabytes: int) -> None:
    """Appends go to new files that stay until every run is done, so their pages are new memory as a growing log's
    are. On a VM whose balloon driver reports freed pages to the host (virtio free page reporting), writing into new
    memory is many times slower than rewriting pages freed moments before; the rewrite of a just-truncated file
    shows that second figure, so it runs after the new-file cases."""
    print(f"(a) machine: {megabytes} MiB per run", flush=True)
    for run in range(RUNS):
        target = tmp / f"append-{run}.bin"
        os.sync()
        rate, cpu = append_file(target, megabytes, sync=False)
        table.add(NEW_FILE_APPEND, "MB/s", rate)
        table.add(NEW_FILE_APPEND_CPU, "s", cpu)
        table.add(RECEIVE_APPEND, "MB/s", tcp_bandwidth(megabytes, tmp / f"received-{run}.bin"))
        rate, cpu = append_file(target, megabytes, sync=False)
        table.add(RECYCLED_APPEND, "MB/s", rate)
        table.add(f"{RECYCLED_APPEND}: CPU s/GiB", "s", cpu)
        os.sync()
        rate, _ = append_file(tmp / f"synced-{run}.bin", megabytes, True)
        table.add("append 1 MiB blocks + fdatasync", "MB/s", rate)
        table.add("loopback TCP", "MB/s", tcp_bandwidth(megabytes * 2))
        table.add("loopback sendfile (page cache)", "MB/s", sendfile_bandwidth(target))
    for leftover in tmp.glob("*.bin"):
        leftover.unlink()


# (b) Redis Streams -----------------------------------------------------------------------------------------------


def redis_benchmark(port: int, *args: str) -> float:
    """Requests/s from ``redis-benchmark --csv``."""
    command = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "--csv", *args]
    output = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout
    rows = [row for row in csv.reader(io.StringIO(output)) if row]
    return float(rows[-1][1])


def redis_cli(port: int, *args: str) -> None:
    subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True, check=True)


@contextlib.contextmanager
def redis_server(tmp: Path) -> Iterator[tuple[int, int]]:
    """A Redis server without persistence on a free port until the block ends: yields (port, pid)."""
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with running(command, port, "redis-server", tmp / "redis.log") as pid:
        yield port, pid


def bench_redis(table: Table, port: int, writes: dict[int, int], reads: int) -> None:
    print(f"(b) Redis Streams ({redis_version()}): XADD {writes} records per run, {reads} XRANGE reads", flush=True)
    for _ in range(RUNS):  # every case in turn, as mq's
        for size, count in writes.items():
            redis_cli(port, "DEL", "s")
            rate = redis_benchmark(port, "-P", "64", "-c", "1", "-n", str(count), "XADD", "s", "*", "f", "x" * size)
            table.add(f"redis XADD {label(size)}", "records/s", rate)
            rate = redis_benchmark(port, "-c", "1", "-n", str(reads), "XRANGE", "s", "-", "+", "COUNT", "1000")
            table.add(f"redis XRANGE COUNT 1000 {label(size)}", "records/s", rate * 1000)
    redis_cli(port, "DEL", "s")


def redis_version() -> str:
    output = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"v=(\S+)", output)
    return f"redis {match.group(1)}" if match else output.strip()


# (c) mq ----------------------------------------------------------------------------------------------------------


def label(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def mq_command() -> list[str]:
    found = shutil.which("mq") or str(Path(sys.executable).with_name("mq"))
    return [found]


def perf_producer(bootstrap: str, topic: str, records: int, size: int, props: dict[str, str], rate: float = -1) -> dict:
    command = [*mq_command(), "perf", "producer", "--client", "confluent", "--topic", topic]
    command += ["--num-records", str(records), "--record-size", str(size), "--throughput", str(rate)]
    command += ["--producer-props", f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in props.items())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    match = PRODUCER_FINAL.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"mq perf producer failed: {done.stderr.strip() or done.stdout}")
    return {key: float(value) for key, value in match.groupdict().items()}


def perf_producer_rate(bootstrap: str, topic: str, records: int, size: int, acks: str) -> float:
    """Records/s of one ``perf_producer`` run without a throughput limit."""
    return float(perf_producer(bootstrap, topic, records, size, {"acks": acks})["rps"])


def perf_consumer_rate(bootstrap: str, topic: str, messages: int, groups: Iterator[int]) -> float:
    """Records/s of one ``perf_consumer`` run, in a group of its own (the next of ``groups``)."""
    return perf_consumer(bootstrap, topic, messages, f"bench-consume-{topic}-{next(groups)}")[0]


def perf_consumer(bootstrap: str, topic: str, messages: int, group: str) -> tuple[float, float]:
    """(fetch.nMsg.sec, fetch.MB.sec): rates over the time after the group join."""
    command = [*mq_command(), "perf", "consumer", "--client", "confluent", "--bootstrap-server", bootstrap]
    command += ["--topic", topic, "--messages", str(messages), "--group", group, "--hide-header"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    fields = [f.strip() for f in line.split(",")]
    if done.returncode != 0 or len(fields) != 10 or int(fields[4]) < messages:
        raise RuntimeError(f"mq perf consumer failed: {done.stderr.strip() or done.stdout}")
    return float(fields[9]), float(fields[8])


def end_offsets(bootstrap: str, topic: str, partitions: list[int]) -> list[int]:
    """The end offset of each of ``partitions``, in that order."""
    command = [*mq_command(), "get-offsets", "--bootstrap-server", bootstrap, "--topic", topic]
    command += ["--partitions", ",".join(map(str, partitions))]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    found = {int(p): int(o) for p, o in (line.rsplit(":", 2)[1:] for line in done.stdout.split())}
    return [found[p] for p in partitions]


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    return end_offsets(bootstrap, topic, [partition])[0]


def kcat_produce(bootstrap: str, topic: str, payload: Path, records: int, acks: str) -> float:
    """Records/s of kcat producing the ``records`` lines of ``payload`` to partition 0 (librdkafka in C: no
    per-record work in the load generator); the topic's end offset must grow by exactly ``records``."""
    before = end_offset(bootstrap, topic)
    command = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", f"acks={acks}", "-l", str(payload)]
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, timeout=600)
    elapsed = time.perf_counter() - start
    if end_offset(bootstrap, topic) - before != records:
        raise RuntimeError(f"kcat produced {end_offset(bootstrap, topic) - before} of {records} records")
    return records / elapsed


def produce_requests(bootstrap: str, topic: str, megabytes: int, size: int, partition: int = 0) -> float:
    """Records/s of one connection sending pre-encoded Produce v9 requests (acks=1, one uncompressed batch of about
    1 MB of ``size``-byte records each, as librdkafka's default batch.size, five in flight): the broker's cost with no client work at all. Every
    response must be error-free and the end offset must grow by exactly the records sent."""
    from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
    from mq.protocol.entities import build
    from mq.records.default_batch import RecordBatchBuilder

    batch = RecordBatchBuilder()
    now = int(time.time() * 1000)
    per_request = max(1, 1_000_000 // (size + 16))  # 16: a record's framing with no key and no headers
    for _ in range(per_request):
        batch.append(now, None, b"k" * size)
    data = {"index": partition, "records": batch.build()}
    values = {"acks": 1, "timeout": 30_000, "topic_data": [{"name": topic, "partition_data": [data]}]}
    request = encode_request(RequestHeader(0, 9, 0, "bench", 0), build(request_schema(0, 9), values))
    requests = max(1, megabytes * MB // len(request))
    before = end_offset(bootstrap, topic, partition)
    host, port = bootstrap.rsplit(":", 1)
    in_flight = threading.Semaphore(5)
    errors: list[int] = []

    def read_responses(sock: socket.socket) -> None:
        stream = sock.makefile("rb")
        for _ in range(requests):
            (length,) = struct.unpack(">i", stream.read(4))
            _, response = decode_response(stream.read(length), response_schema(0, 9))
            errors.extend(p.error_code for t in response.responses for p in t.partition_responses if p.error_code)
            in_flight.release()

    with socket.create_connection((host, int(port))) as sock:
        reader = threading.Thread(target=read_responses, args=(sock,))
        start = time.perf_counter()
        reader.start()
        for _ in range(requests):
            in_flight.acquire()
            sock.sendall(request)
        reader.join()
        elapsed = time.perf_counter() - start
    records = requests * per_request
    if errors or end_offset(bootstrap, topic, partition) - before != records:
        raise RuntimeError(f"pre-encoded produce failed: errors {sorted(set(errors))}")
    return records / elapsed


def kcat_consume(bootstrap: str, topic: str, records: int) -> float:
    """Records/s of kcat reading the first ``records`` records of partition 0 to /dev/null."""
    command = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", KCAT_START, "-c", str(records)]
    command += ["-e", "-q"]
    command += ["-X", "queued.min.messages=1000000", "-X", "fetch.message.max.bytes=8388608"]
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, timeout=600)
    return records / (time.perf_counter() - start)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    command = [*mq_command(), "topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic]
    subprocess.run([*command, "--partitions", str(partitions)], capture_output=True, check=True, timeout=60)


def concurrent_fetch(bootstrap: str, topic: str, partitions: int, size: int, fetch_bytes: int) -> float:
    """MB/s of ``partitions`` kcat processes each reading all of its partition (records of ``size`` bytes) from the
    beginning with ``fetch_bytes`` fetches, from the first start to the last end. Each reads exactly its partition's
    record count and stops: waiting for end-of-partition would add a long-polled empty fetch to the time."""
    counts = [end_offset(bootstrap, topic, p) for p in range(partitions)]
    command = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", KCAT_START, "-q"]
    command += ["-X", "queued.min.messages=1000000", "-X", f"fetch.message.max.bytes={fetch_bytes}"]
    command += ["-X", "fetch.wait.max.ms=10"]  # closing waits for the fetch in flight, long-polled at the log end
    command += ["-X", f"fetch.max.bytes={fetch_bytes * partitions}"]
    command += ["-X", f"receive.message.max.bytes={fetch_bytes * partitions + 512}"]
    start = time.perf_counter()
    readers = [
        subprocess.Popen([*command, "-p", str(p), "-c", str(n)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for p, n in enumerate(counts)
    ]
    for reader in readers:
        _, err = reader.communicate(timeout=600)
        if reader.returncode != 0:
            raise RuntimeError(f"kcat failed: {err.decode(errors='replace').strip()}")
    return sum(counts) * size / MB / (time.perf_counter() - start)


@dataclass(frozen=True)
class MqCounts:
    records: dict[int, int]
    """Records per produce run by record size."""
    fetch_megabytes: int
    """MiB of 1 KiB records the large-batch fetch reads, in three equal partitions: as much as the sendfile case
    sends, so both carry the same fixed costs (for the fetch, three kcat processes starting, about 15 ms)."""


@contextlib.contextmanager
def mq_broker(tmp: Path) -> Iterator[tuple[str, int]]:
    """An mq broker on a free port and a new log dir until the block ends: yields (bootstrap, pid)."""
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    command = [*mq_command(), "server", "start", "--override", f"listeners=PLAINTEXT://{bootstrap}"]
    command += ["--override", f"log.dirs={tmp / 'mq-logs'}"]
    with running(command, port, "mq broker", tmp / "mq-broker.log") as pid:
        yield bootstrap, pid


def bench_mq(table: Table, tmp: Path, bootstrap: str, broker: int, counts: MqCounts) -> None:
    print(f"(c) mq: produce {counts.records} records per run; {counts.fetch_megabytes} MiB fetch", flush=True)
    have_kcat = shutil.which("kcat") is not None
    cases: list[Rates] = []
    consumers = itertools.count()

    def case(size: int, records: int, name: str, run: Callable[[], float], records_row: bool = True) -> None:
        cases.append(Rates(table, broker, size, records * size / MB, name, run, records_row))

    for size, records in counts.records.items():
        for acks in ("1", "all"):
            topic = f"produce-{size}-{acks}"
            create_topic(bootstrap, topic, 1)
            run = functools.partial(perf_producer_rate, bootstrap, topic, records, size, acks)
            case(size, records, f"mq produce {label(size)} acks={acks}", run)
        run = functools.partial(perf_consumer_rate, bootstrap, f"produce-{size}-1", records, consumers)
        case(size, records, f"mq consume {label(size)}", run)
    for size, records in counts.records.items() if have_kcat else ():
        payload = write_payload(tmp, size, records)
        for acks in ("1", "all"):
            topic = f"kcat-{size}-{acks}"
            create_topic(bootstrap, topic, 1)
            run = functools.partial(kcat_produce, bootstrap, topic, payload, records, acks)
            case(size, records, f"mq produce {label(size)} acks={acks} (kcat)", run)
        run = functools.partial(kcat_consume, bootstrap, f"kcat-{size}-1", records)
        case(size, records, f"mq consume {label(size)} (kcat)", run)
    for size, records in counts.records.items():
        topic = f"requests-{size}"
        create_topic(bootstrap, topic, 1)
        run = functools.partial(produce_requests, bootstrap, topic, records * size // MB, size)
        case(size, records, f"mq produce {label(size)} acks=1 (pre-encoded requests)", run, records_row=False)
    interleaved(cases)
    if have_kcat:
        create_topic(bootstrap, "fetch", 3)
        for partition in range(3):  # equal shares, so each reader has as much to fetch
            produce_requests(bootstrap, "fetch", counts.fetch_megabytes // 3, 1024, partition)
        for _ in range(RUNS):
            with broker_cpu(table, "mq large-batch fetch", broker, counts.fetch_megabytes):
                fetched = concurrent_fetch(bootstrap, "fetch", 3, 1024, 16 * MB)
                table.add(FETCH, "MB/s", fetched)


def bench_latency(table: Table, bootstrap: str, seconds: float) -> None:
    """The p99 and p50 of acks=1 produce at 10% of this run's 100 B produce rate from the generator that drives it
    (librdkafka driven from Python), and the load rate each run achieved."""
    peak = produce_rate(table, 100, "librdkafka")
    if peak is None:
        raise RuntimeError("the latency case needs the produce case's rates")
    rate = max(1.0, round(peak / 10))
    records = int(rate * seconds)
    print(f"  latency at 10% of max: {rate:.0f} records/s, {records} records per run", flush=True)
    create_topic(bootstrap, "latency", 1)
    for linger, suffix in (({}, ""), ({"linger.ms": "0"}, ", linger.ms=0")):
        for _ in range(RUNS):
            os.sync()  # no dirty-page backlog from the cases before
            result = perf_producer(bootstrap, "latency", records, 100, {"acks": "1", **linger}, rate)
            table.add(f"mq produce 100 B acks=1 p99 at 10% of max{suffix}", "ms", result["p99"])
            table.add(f"mq produce 100 B acks=1 p50 at 10% of max{suffix}", "ms", result["p50"])
            table.add(f"mq produce 100 B acks=1 load at 10% of max{suffix}", "records/s", result["rps"])


def write_payload(tmp: Path, size: int, records: int) -> Path:
    """A kcat ``-l`` input file: ``records`` lines of ``size`` bytes each."""
    payload = tmp / f"payload-{size}-{records}.txt"
    if not payload.exists():
        payload.write_bytes((b"k" * size + b"\n") * records)
    return payload


# (d) the request path: small requests -----------------------------------------------------------------------------

ONE_PER_REQUEST = ("-X", "acks=1", "-X", "linger.ms=0", "-X", "batch.num.messages=1")
"""librdkafka settings that put each record in a Produce request of its own (kafka-python's and the Java client's
linger.ms was 0 for a decade): a request-rate load, not a byte-rate one."""
PIPELINED = "mq produce 1 record/request, 1 connection, 5 in flight (kcat)"
PIPELINED_REDIS = "redis XADD 100 B -c 1 -P 5"
CONNECTIONS = "mq produce 1 record/request, 8 connections, 1 in flight each (kcat)"
CONNECTIONS_REDIS = "redis XADD 100 B -c 8 -P 1"
CONSUMERS = "mq 200 consumers in 20 groups"
LAG_GROWTH = f"{CONSUMERS}: lag growth over the window (least-squares trend of the per-second lag)"


def kcat_per_request(
    bootstrap: str, topic: str, payload: Path, records: int, processes: int, in_flight: int, broker: int
) -> tuple[float, float]:
    """(requests/s, broker CPU seconds) of ``processes`` kcat producers, each its own connection sending the
    ``records`` 100 B lines of ``payload`` one per Produce request with ``in_flight`` requests outstanding; process
    i writes partition i, from the first start to the last end. Every partition's end offset must grow by exactly
    ``records``."""
    partitions = list(range(processes))
    before = end_offsets(bootstrap, topic, partitions)
    command = ["kcat", "-P", "-b", bootstrap, "-t", topic, *ONE_PER_REQUEST, "-l", str(payload)]
    command += ["-X", f"max.in.flight.requests.per.connection={in_flight}"]
    cpu = cpu_seconds(broker)
    start = time.perf_counter()
    producers = [
        subprocess.Popen([*command, "-p", str(p)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for p in partitions
    ]
    for producer in producers:
        _, err = producer.communicate(timeout=600)
        if producer.returncode != 0:
            raise RuntimeError(f"kcat failed: {err.decode(errors='replace').strip()}")
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(broker) - cpu
    grown = [after - b for after, b in zip(end_offsets(bootstrap, topic, partitions), before, strict=True)]
    if grown != [records] * processes:
        raise RuntimeError(f"kcat produced {grown} records, not {records} per partition")
    return processes * records / elapsed, cpu


def bench_request_rate(
    table: Table, tmp: Path, bootstrap: str, broker: int, redis: tuple[int, int], records: int, requests: int
) -> None:
    """One record per Produce request (acks=1, 100 B) against Redis XADD at the same depth: one connection with 5
    requests in flight (``redis-benchmark -c 1 -P 5``) and eight connections with one each (``-c 8 -P 1``). Rows:
    requests/s and the server's CPU µs per request, for both."""
    port, redis_pid = redis
    print(f"(d) request rate: {records} records per mq run, {requests} XADD per Redis run", flush=True)
    value = "x" * 100
    for name, clients, depth in ((PIPELINED_REDIS, 1, 5), (CONNECTIONS_REDIS, 8, 1)):
        for _ in range(RUNS):
            redis_cli(port, "DEL", "s")
            cpu = cpu_seconds(redis_pid)
            args = ["-c", str(clients), "-P", str(depth), "-n", str(requests)]
            table.add(name, "requests/s", redis_benchmark(port, *args, "XADD", "s", "*", "f", value))
            table.add(f"{name}: server CPU µs/request", "µs", (cpu_seconds(redis_pid) - cpu) * 1e6 / requests)
    redis_cli(port, "DEL", "s")
    for name, processes, in_flight in ((PIPELINED, 1, 5), (CONNECTIONS, 8, 1)):
        topic = f"per-request-{processes}"
        create_topic(bootstrap, topic, processes)
        payload = write_payload(tmp, 100, records // processes)
        for _ in range(RUNS):
            rate, cpu = kcat_per_request(bootstrap, topic, payload, records // processes, processes, in_flight, broker)
            table.add(name, "requests/s", rate)
            table.add(f"{name}: broker CPU µs/request", "µs", cpu * 1e6 / (records // processes * processes))


@dataclass(frozen=True)
class ConsumerLoad:
    """The consumer-heavy case: ``groups`` groups of ``members`` consumers each subscribe to one topic of
    ``members`` partitions (one partition per consumer), commit every 100 ms and long-poll with
    fetch.wait.max.ms=100, while one producer adds ``records_per_partition`` 100 B records to every partition every
    100 ms. The consumers are librdkafka's (confluent-kafka), ``per_process`` to a process: they send exactly what
    a service's consumers send (the group protocol, heartbeats from librdkafka's own thread, the commit timer, long
    polls) and count it in their statistics, for about half a core for all 200 (measured, and printed with every
    run), which leaves the broker a core of this 2-core machine. A generator replaying raw requests would cost less
    but would have to reimplement the group protocol's joins and rebalances, which this case exists to watch."""

    groups: int = 20
    members: int = 10
    per_process: int = 50
    records_per_partition: int = 5
    seconds: float = 20.0
    """The measured window, after every group is stable."""


CONSUMER_CONFIG = {
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 100,
    "fetch.wait.max.ms": 100,
    "auto.offset.reset": "latest",
    "queued.max.messages.kbytes": 1024,
    "statistics.interval.ms": 1000,
}
"""As a service configures a consumer that commits often; statistics carry the request counts by API (per broker
connection, "req") and the group's rebalance count ("cgrp"."rebalance_cnt")."""


def client_counts(stats: str) -> tuple[dict[str, int], int]:
    """(requests sent by API over every broker connection, rebalances) from one librdkafka statistics document."""
    import json

    document = json.loads(stats)
    requests: dict[str, int] = {}
    for broker in document["brokers"].values():
        for api, count in broker.get("req", {}).items():
            requests[api] = requests.get(api, 0) + count
    return requests, document.get("cgrp", {}).get("rebalance_cnt", 0)


def consumer_process(
    bootstrap: str, topic: str, groups: list[str], load: ConsumerLoad, control: argparse.Namespace
) -> None:
    """Runs ``load.members`` consumers in each of ``groups``, handing every message to the application (so its
    offset is stored and auto-committed). Puts "ready" on ``control.results`` once each consumer holds one partition
    and no assignment changed for 3 s; between ``control.start`` and ``control.stop`` it samples the summed lag
    (high watermark minus position) every second; puts its counts and CPU seconds over that window."""
    import resource

    from confluent_kafka import Consumer

    latest: dict[int, str] = {}
    consumers: list[Any] = []
    for group in groups:
        for _ in range(load.members):
            index = len(consumers)
            settings = {"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_CONFIG}
            consumer = Consumer({**settings, "stats_cb": lambda s, i=index: latest.__setitem__(i, s)})
            consumer.subscribe([topic])
            consumers.append(consumer)

    def poll() -> None:
        for consumer in consumers:
            consumer.consume(1000, 0)
        time.sleep(0.05)  # the application takes records every 50 ms, half the commit interval

    def totals() -> tuple[dict[str, int], int]:
        requests: dict[str, int] = {}
        rebalances = 0
        for stats in latest.values():
            counted, rebalanced = client_counts(stats)
            rebalances += rebalanced
            for api, count in counted.items():
                requests[api] = requests.get(api, 0) + count
        return requests, rebalances

    def lag() -> int:
        behind = 0
        for consumer in consumers:
            for position in consumer.position(consumer.assignment()):
                high = consumer.get_watermark_offsets(position, cached=True)[1]
                if position.offset >= 0 and high >= 0:
                    behind += high - position.offset
        return behind

    stable_since, last = time.monotonic(), None
    while True:
        poll()
        assignment = [tuple(sorted(p.partition for p in c.assignment())) for c in consumers]
        if assignment != last:
            stable_since, last = time.monotonic(), assignment
        if (
            all(len(a) == 1 for a in assignment)
            and time.monotonic() - stable_since > 3
            and len(latest) == len(consumers)
        ):
            break
    control.results.put("ready")
    while not control.start.is_set():
        poll()
    requests_before, rebalances_before = totals()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    lags, sampled = [lag()], time.monotonic()
    while not control.stop.is_set():
        poll()
        if time.monotonic() - sampled >= 1:
            lags.append(lag())
            sampled = time.monotonic()
    used = resource.getrusage(resource.RUSAGE_SELF)
    requests_after, rebalances_after = totals()
    requests = {api: n - requests_before.get(api, 0) for api, n in requests_after.items()}
    control.results.put(
        {
            "requests": requests,
            "rebalances": rebalances_after - rebalances_before,
            "lags": lags,
            "cpu": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
        }
    )
    for consumer in consumers:
        consumer.close()


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat's first line (idle and iowait count as idle)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def feed(producer: Any, topic: str, partitions: int, records: int, stop: threading.Event) -> None:
    """Until ``stop`` is set, adds ``records`` 100 B records to each of ``partitions`` every 100 ms."""
    while not stop.is_set():
        for partition in range(partitions):
            for _ in range(records):
                producer.produce(topic, b"v" * 100, partition=partition)
        producer.poll(0)
        time.sleep(0.1)


def bench_consumer_heavy(table: Table, bootstrap: str, broker: int, load: ConsumerLoad) -> None:
    """The consumer-heavy case (see ConsumerLoad). Rows: requests/s by API as librdkafka's statistics count them
    (the broker keeps no request counters), the broker's CPU µs per request (its CPU over the window divided by every
    request the consumers and the producer sent in it), the load generator's CPU and the machine's idle share (the
    generator must not be the bottleneck), rebalances within the window (a missed heartbeat shows as one) and the
    lag's growth over the window: the least-squares trend of the summed lag sampled every second, since one sample
    swings by up to a feed round with the phase of the 100 ms cycle."""
    import multiprocessing

    from confluent_kafka import Producer

    members = load.members
    consumers = load.groups * members
    print(
        f"(e) consumer-heavy: {consumers} consumers in {load.groups} groups, {load.seconds:.0f} s windows", flush=True
    )
    context = multiprocessing.get_context("spawn")
    for run in range(RUNS):
        topic = f"consumers-{run}"
        create_topic(bootstrap, topic, members)
        latest: list[str] = []
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": 1,
                "linger.ms": 5,
                "statistics.interval.ms": 1000,
                "stats_cb": latest.append,
            }
        )
        feeding = threading.Event()
        feeder = threading.Thread(target=feed, args=(producer, topic, members, load.records_per_partition, feeding))
        feeder.start()
        control = argparse.Namespace(results=context.Queue(), start=context.Event(), stop=context.Event())
        groups = [f"heavy-{run}-{g}" for g in range(load.groups)]
        per = load.per_process // members
        processes = [
            context.Process(target=consumer_process, args=(bootstrap, topic, groups[i : i + per], load, control))
            for i in range(0, len(groups), per)
        ]
        for process in processes:
            process.start()
        for _ in processes:
            if control.results.get(timeout=300) != "ready":
                raise RuntimeError("a consumer process failed to settle")
        time.sleep(1)
        produced_before = client_counts(latest[-1])[0].get("Produce", 0)
        cpu, (busy, ticks) = cpu_seconds(broker), machine_busy()
        control.start.set()
        time.sleep(load.seconds)
        control.stop.set()
        busy_after, ticks_after = machine_busy()
        cpu, busy, ticks = cpu_seconds(broker) - cpu, busy_after - busy, ticks_after - ticks
        results = [control.results.get(timeout=120) for _ in processes]
        produced = client_counts(latest[-1])[0].get("Produce", 0) - produced_before
        for process in processes:
            process.join(120)
        feeding.set()
        feeder.join()
        producer.flush(30)
        requests: dict[str, int] = {"Produce": produced}
        for result in results:
            for api, count in result["requests"].items():
                requests[api] = requests.get(api, 0) + count
        total = sum(requests.values())
        for api in ("Fetch", "OffsetCommit", "Heartbeat", "Produce"):
            table.add(f"{CONSUMERS}: {api} requests/s", "requests/s", requests.get(api, 0) / load.seconds)
        table.add(f"{CONSUMERS}: all requests/s", "requests/s", total / load.seconds)
        table.add(f"{CONSUMERS}: broker CPU µs/request", "µs", cpu * 1e6 / total)
        table.add(f"{CONSUMERS}: broker CPU % of a core", "%", cpu * 100 / load.seconds)
        generator = sum(r["cpu"] for r in results)
        table.add(f"{CONSUMERS}: consumer processes CPU % of a core", "%", generator * 100 / load.seconds)
        table.add(f"{CONSUMERS}: machine idle", "%", 100 - busy * 100 / ticks)
        table.add(f"{CONSUMERS}: rebalances in the window", "count", sum(r["rebalances"] for r in results))
        lags = [sum(samples) for samples in zip(*(r["lags"] for r in results), strict=False)]
        trend = statistics.linear_regression(range(len(lags)), lags).slope * (len(lags) - 1)
        table.add(LAG_GROWTH, "records", trend)
        table.add(f"{CONSUMERS}: max lag", "records", max(lags))


# targets ---------------------------------------------------------------------------------------------------------


PRODUCE_GENERATOR = "kcat"
"""The produce targets' load generator, the same in every run: kcat, which produces 100 B records about four times
as fast as librdkafka driven from Python (``mq perf producer --client confluent``, whose Python loop is the limit at
about 480k records/s); the rows of the latter are printed beside it, and it drives the latency case."""


def produce_rate(table: Table, size: int, generator: str = PRODUCE_GENERATOR) -> float | None:
    """The median acks=1 records/s of ``size``-byte records from ``generator`` (kcat, or librdkafka driven from
    Python); None when it did not run."""
    case = f"mq produce {label(size)} acks=1" + (" (kcat)" if generator == "kcat" else "")
    return table.median(case) if case in table.cases else None


def print_targets(table: Table, load: ConsumerLoad) -> None:
    """One line per target: its figure (medians of this run), the goal, met or missed; "not measured" when the
    cases it needs did not run (``--only``, or no kcat)."""

    def m(*names: str) -> list[float] | None:
        return [table.median(n) for n in names] if all(n in table.cases for n in names) else None

    def ratio(numerator: str, denominator: str) -> float | None:
        found = m(numerator, denominator)
        return found[0] / found[1] if found else None

    def one(name: str) -> float | None:
        found = m(name)
        return found[0] if found else None

    small, large = produce_rate(table, 100), produce_rate(table, 1024)
    latency_load = one("mq produce 100 B acks=1 load at 10% of max")
    reader, consume = (
        ("kcat", "mq consume 100 B (kcat)")
        if "mq consume 100 B (kcat)" in table.cases
        else ("librdkafka", "mq consume 100 B")
    )
    xadd, append = m("redis XADD 100 B"), m(NEW_FILE_APPEND)
    round_of_feed = load.groups * load.members * load.records_per_partition
    lag_growth = one(LAG_GROWTH)
    targets: list[tuple[str, float | None, str, float]] = [
        (PIPELINED + " / Redis -c 1 -P 5", ratio(PIPELINED, PIPELINED_REDIS), ">=", 1.0),
        ("  broker CPU µs per request", one(f"{PIPELINED}: broker CPU µs/request"), "<=", 30.0),
        (CONNECTIONS + " / Redis -c 8 -P 1", ratio(CONNECTIONS, CONNECTIONS_REDIS), ">=", 1.0),
        ("  broker CPU µs per request", one(f"{CONNECTIONS}: broker CPU µs/request"), "<=", 30.0),
        (f"{CONSUMERS}: broker CPU µs per request", one(f"{CONSUMERS}: broker CPU µs/request"), "<=", 40.0),
        ("  rebalances in the window (missed heartbeats)", one(f"{CONSUMERS}: rebalances in the window"), "<=", 0),
        (
            f"  lag growth / one feed round ({round_of_feed} records)",
            None if lag_growth is None else lag_growth / round_of_feed,
            "<",
            1.0,
        ),
        (
            f"produce 100 B acks=1 ({PRODUCE_GENERATOR}) / Redis XADD 100 B -P 64",
            small / xadd[0] if small and xadd else None,
            ">=",
            2.0,
        ),
        (f"consume 100 B ({reader}) / Redis XRANGE 100 B", ratio(consume, "redis XRANGE COUNT 1000 100 B"), ">=", 1.0),
        (
            f"produce 1 KiB MB/s ({PRODUCE_GENERATOR}) / page-cache append",
            large * 1024 / MB / append[0] if large and append else None,
            ">=",
            0.5,
        ),
        (
            "produce 1 KiB acks=1 (kcat): broker CPU s/GiB",
            one("mq produce 1 KiB acks=1 (kcat): broker CPU s/GiB"),
            "<=",
            1.5,
        ),
        ("large-batch fetch / loopback sendfile", ratio(FETCH, "loopback sendfile (page cache)"), ">=", 0.6),
        (
            f"p99 latency at 10% of max (ms; {'-' if latency_load is None else format(latency_load, ',.0f')} records/s "
            "measured)",
            one("mq produce 100 B acks=1 p99 at 10% of max"),
            "<",
            10.0,
        ),
    ]
    width = max(len(name) for name, *_ in targets)
    print(f"\n{'target':<{width}}  {'measured':>9}  {'goal':>7}  result")
    for name, value, op, goal in targets:
        if value is None:
            print(f"{name:<{width}}  {'-':>9}  {op + ' ' + format(goal, 'g'):>7}  not measured in this run")
            continue
        met = {">=": value >= goal, "<=": value <= goal, "<": value < goal}[op]
        print(f"{name:<{width}}  {value:>9.2f}  {op + ' ' + format(goal, 'g'):>7}  {'met' if met else 'missed'}")
    requests = one("mq produce 1 KiB acks=1 (pre-encoded requests) MB/s")
    broker_gib, append_gib = one("mq produce 1 KiB acks=1 (kcat): broker CPU s/GiB"), one(NEW_FILE_APPEND_CPU)
    recycled, received = one(RECYCLED_APPEND), one(RECEIVE_APPEND)
    references = [
        (
            f"produce 1 KiB ({PRODUCE_GENERATOR}) / rewriting a just-truncated file",
            large * 1024 / MB / recycled if large and recycled else None,
        ),
        (
            "produce 1 KiB (pre-encoded requests) / page-cache append",
            requests / append[0] if requests and append else None,
        ),
        (
            "produce 1 KiB (pre-encoded requests) / receive + append",
            requests / received if requests and received else None,
        ),
        ("loopback TCP receive + append / page-cache append", received / append[0] if received and append else None),
        ("page-cache append to a new file: CPU s/GiB", append_gib),
        (
            "produce 1 KiB acks=1 (kcat): broker CPU s/GiB beyond that append's",
            broker_gib - append_gib if broker_gib is not None and append_gib is not None else None,
        ),
    ]
    print("\nfor reference")
    for name, value in references:
        print(f"{name:<60}  {'-' if value is None else format(value, '9.2f'):>9}")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews every figure."""
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def machine_line() -> str:
    """CPUs, load and Python version, the first line a benchmark prints."""
    return (
        f"{os.cpu_count()} CPUs, load average {load_average()}, Python {sys.version.split()[0]}, {RUNS} runs per case"
    )


CASES = ("machine", "redis", "produce", "latency", "request-rate", "consumer-heavy")
"""What ``--only`` selects: (a) the machine, (b) Redis XADD -P 64 / XRANGE, (c) mq's produce, consume and fetch
throughput, the latency at 10% of the produce rate (needs "produce"), (d) one record per request against Redis at
the same depth, (e) 200 consumers in 20 groups."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every record count (default 1.0)")
    parser.add_argument("--only", default=",".join(CASES), help=f"comma-separated cases (default: all of {CASES})")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(CASES) or ("latency" in only and "produce" not in only):
        parser.error(f"--only takes some of {', '.join(CASES)}; latency needs produce")

    def scaled(n: int) -> int:
        return max(1, int(n * args.scale))

    for tool in ("redis-server", "redis-benchmark", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing: apt-get install -y redis-server")
    if shutil.which("kcat") is None:
        print("kcat is missing (apt-get install -y kcat): its cases, the large-batch fetch and the request-rate cases")
        print("are skipped, and the targets use librdkafka driven from Python, which makes a Python call per record")
        only.discard("request-rate")
    table = Table()
    load = ConsumerLoad(seconds=20 * args.scale)
    began = time.monotonic()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="mq-bench-") as name, contextlib.ExitStack() as servers:
        tmp = Path(name)
        if "machine" in only:
            bench_machine(table, tmp, scaled(1024))
        if only & {"redis", "request-rate"}:
            redis = servers.enter_context(redis_server(tmp))
            if "redis" in only:
                bench_redis(table, redis[0], {100: scaled(1_000_000), 1024: scaled(300_000)}, scaled(2_000))
        if only & {"produce", "request-rate", "consumer-heavy"}:
            bootstrap, broker = servers.enter_context(mq_broker(tmp))
            if "produce" in only:
                counts = MqCounts({100: scaled(1_000_000), 1024: scaled(300_000)}, scaled(1024))
                bench_mq(table, tmp, bootstrap, broker, counts)
            if "latency" in only:
                bench_latency(table, bootstrap, 10 * args.scale)
            if "request-rate" in only:
                bench_request_rate(table, tmp, bootstrap, broker, redis, scaled(40_000), scaled(200_000))
            if "consumer-heavy" in only:
                bench_consumer_heavy(table, bootstrap, broker, load)
    table.print()
    print_targets(table, load)
    print(f"\ntotal time: {time.monotonic() - began:.0f} s; load average {load_average()}")


if __name__ == "__main__":
    main()
