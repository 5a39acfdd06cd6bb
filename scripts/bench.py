"""mq's throughput and latency against this machine's limits and against Redis Streams, with target ratios.

Runs from a clean clone after ``pip install -e .[bench]`` and ``apt-get install -y redis-server kcat`` (without kcat
its cases and the large-batch fetch are skipped and the targets use librdkafka driven from Python); starts what it
needs on 127.0.0.1 (a Redis server without persistence, an mq broker on a temporary log dir) and stops it again.
Every case runs three times; the table shows min / median / max, and the ratios use the medians.

(a) the machine: sequential 1 MiB writes to a new temporary file (page cache only; rewriting that file after
    truncating it; and with one fdatasync at the end), loopback TCP (a sender thread and a receiving thread over
    127.0.0.1), sendfile of a page-cached file to a loopback socket, and loopback TCP whose receiver appends what it
    gets to a new file (the least work any broker does for a produce);
(b) Redis Streams: ``redis-benchmark -P 64 -c 1 XADD`` of 100 B and 1 KiB values (records/s = requests/s) and
    ``redis-benchmark -c 1 XRANGE s - + COUNT 1000`` (records/s = requests/s x 1000);
(c) mq, driven by kcat (librdkafka in C, reading records from a file and writing them to /dev/null: the
    throughput targets use these figures), by librdkafka from Python (``mq perf producer/consumer --client
    confluent``, separate processes) and by pre-encoded produce requests replayed over one connection (the
    broker's cost alone): produce 100 B and 1 KiB records with acks=1 and acks=all, consume them back, three
    concurrent consumers fetching large batches of a pre-filled 3-partition topic (three kcat readers, 16 MiB
    fetches), and the p99 latency of acks=1 produce at 10% of the maximum rate either generator reached
    (librdkafka's default linger.ms, and linger.ms=0 for reference). The produce targets use whichever C-client
    generator got more out of the broker.

A megabyte is 1024 * 1024 bytes throughout (as Kafka's perf tools count). The mq figures include the load
generator's cost: librdkafka driven from Python still makes a Python call per record (the produce call and its
delivery report; a message object per consumed record), and on a 2-core machine the generator shares the CPUs with
the broker, so compare the broker's CPU time with the generator's before reading a figure as the broker's limit.

    python scripts/bench.py [--scale 1.0]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
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

MB = 1024 * 1024
RUNS = 3
NEW_FILE_APPEND = "append 1 MiB blocks, new file, page cache"
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
    """User plus system CPU time of process ``pid`` so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def broker_cpu(table: Table, name: str, pid: int, megabytes: float) -> Iterator[None]:
    """Adds the CPU seconds the broker spent per GiB the block moved, as the row "<name>: broker CPU s/GiB": on 2
    shared cores, what is left over is the load generator's."""
    before = cpu_seconds(pid)
    yield
    table.add(f"{name}: broker CPU s/GiB", "s", (cpu_seconds(pid) - before) * 1024 / megabytes)


@dataclass(frozen=True)
class Rates:
    """Runs a throughput case RUNS times into ``table``: its records/s, MB/s and the broker's CPU per GiB."""

    table: Table
    broker: int
    size: int
    """Bytes per record."""
    megabytes: float
    """MiB one run moves."""

    def measure(self, name: str, run: Callable[[], float], *, records_row: bool = True) -> None:
        """``run`` returns records/s; ``records_row`` False leaves only the MB/s row (as for pre-encoded requests)."""
        for _ in range(RUNS):
            with broker_cpu(self.table, name, self.broker, self.megabytes):
                rate = run()
                if records_row:
                    self.table.add(name, "records/s", rate)
                self.table.add(f"{name} MB/s", "MB/s", rate * self.size / MB)


# (a) the machine -------------------------------------------------------------------------------------------------


def append_file(path: Path, megabytes: int, sync: bool) -> float:
    """MB/s of sequential 1 MiB writes to a new file; with ``sync`` the time includes one fdatasync at the end."""
    block = os.urandom(MB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(megabytes):
            os.write(fd, block)
        if sync:
            os.fdatasync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    return megabytes / elapsed


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
        table.add(NEW_FILE_APPEND, "MB/s", append_file(target, megabytes, sync=False))
        table.add(RECEIVE_APPEND, "MB/s", tcp_bandwidth(megabytes, tmp / f"received-{run}.bin"))
        table.add(RECYCLED_APPEND, "MB/s", append_file(target, megabytes, sync=False))
        os.sync()
        table.add("append 1 MiB blocks + fdatasync", "MB/s", append_file(tmp / f"synced-{run}.bin", megabytes, True))
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


def bench_redis(table: Table, tmp: Path, writes: dict[int, int], reads: int) -> None:
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    print(f"(b) Redis Streams ({redis_version()}): XADD {writes} records per run, {reads} XRANGE reads", flush=True)
    with running(command, port, "redis-server", tmp / "redis.log"):
        for size, count in writes.items():
            value = "x" * size
            for _ in range(RUNS):
                redis_cli(port, "DEL", "s")
                rate = redis_benchmark(port, "-P", "64", "-c", "1", "-n", str(count), "XADD", "s", "*", "f", value)
                table.add(f"redis XADD {label(size)}", "records/s", rate)
            for _ in range(RUNS):
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


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    done = subprocess.run(
        [
            *mq_command(),
            "get-offsets",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(partition),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(done.stdout.strip().rsplit(":", 1)[1])


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
    latency_seconds: float


def bench_mq(table: Table, tmp: Path, counts: MqCounts) -> None:
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    command = [*mq_command(), "server", "start", "--override", f"listeners=PLAINTEXT://{bootstrap}"]
    command += ["--override", f"log.dirs={tmp / 'mq-logs'}"]
    print(f"(c) mq: produce {counts.records} records per run; {counts.fetch_megabytes} MiB fetch", flush=True)
    have_kcat = shutil.which("kcat") is not None
    with running(command, port, "mq broker", tmp / "mq-broker.log") as broker:
        for size, records in counts.records.items():
            megabytes = records * size / MB
            for acks in ("1", "all"):
                topic = f"produce-{size}-{acks}"
                create_topic(bootstrap, topic, 1)
                rates = Rates(table, broker, size, megabytes)
                rates.measure(
                    f"mq produce {label(size)} acks={acks}",
                    lambda: perf_producer(bootstrap, topic, records, size, {"acks": acks})["rps"],  # noqa: B023
                )
            for run in range(RUNS):
                rate, mbs = perf_consumer(bootstrap, f"produce-{size}-1", records, f"bench-consume-{size}-{run}")
                table.add(f"mq consume {label(size)}", "records/s", rate)
                table.add(f"mq consume {label(size)} MB/s", "MB/s", mbs)
        for size, records in counts.records.items() if have_kcat else ():
            megabytes = records * size / MB
            payload = tmp / f"payload-{size}.txt"
            payload.write_bytes((b"k" * size + b"\n") * records)  # kcat -l: one record per line
            rates = Rates(table, broker, size, megabytes)
            for acks in ("1", "all"):
                topic = f"kcat-{size}-{acks}"
                create_topic(bootstrap, topic, 1)
                rates.measure(
                    f"mq produce {label(size)} acks={acks} (kcat)",
                    lambda: kcat_produce(bootstrap, topic, payload, records, acks),  # noqa: B023
                )
            Rates(table, broker, size, RUNS * megabytes).measure(
                f"mq consume {label(size)} (kcat)",
                lambda: kcat_consume(bootstrap, f"kcat-{size}-1", RUNS * records),  # noqa: B023
            )
        for size, records in counts.records.items():
            megabytes = records * size / MB
            topic = f"requests-{size}"
            create_topic(bootstrap, topic, 1)
            Rates(table, broker, size, megabytes).measure(
                f"mq produce {label(size)} acks=1 (pre-encoded requests)",
                lambda: produce_requests(bootstrap, topic, records * size // MB, size),  # noqa: B023
                records_row=False,
            )
        if have_kcat:
            create_topic(bootstrap, "fetch", 3)
            for partition in range(3):  # equal shares, so each reader has as much to fetch
                produce_requests(bootstrap, "fetch", counts.fetch_megabytes // 3, 1024, partition)
            for _ in range(RUNS):
                with broker_cpu(table, "mq large-batch fetch", broker, counts.fetch_megabytes):
                    fetched = concurrent_fetch(bootstrap, "fetch", 3, 1024, 16 * MB)
                    table.add(FETCH, "MB/s", fetched)
        rate = max(1.0, round(fastest_produce(table, 100)[1] / 10))
        records = int(rate * counts.latency_seconds)
        print(f"  latency at 10% of max: {rate:.0f} records/s, {records} records per run", flush=True)
        create_topic(bootstrap, "latency", 1)
        for linger, suffix in (({}, ""), ({"linger.ms": "0"}, ", linger.ms=0")):
            for _ in range(RUNS):
                os.sync()  # no dirty-page backlog from the cases before
                result = perf_producer(bootstrap, "latency", records, 100, {"acks": "1", **linger}, rate)
                table.add(f"mq produce 100 B acks=1 p99 at 10% of max{suffix}", "ms", result["p99"])
                table.add(f"mq produce 100 B acks=1 p50 at 10% of max{suffix}", "ms", result["p50"])


# targets ---------------------------------------------------------------------------------------------------------


def fastest_produce(table: Table, size: int) -> tuple[str, float]:
    """The C-client load generator (kcat, or librdkafka driven from Python) that produced more acks=1 records/s of
    ``size`` bytes, and that median: the broker's maximum is what the faster generator gets out of it."""
    generators = {"kcat": f"mq produce {label(size)} acks=1 (kcat)", "librdkafka": f"mq produce {label(size)} acks=1"}
    measured = [(name, table.median(case)) for name, case in generators.items() if case in table.cases]
    return max(measured, key=lambda pair: pair[1])


def print_targets(table: Table) -> None:
    m = table.median
    small, small_rate = fastest_produce(table, 100)
    large, large_rate = fastest_produce(table, 1024)
    reader, consume = (
        ("kcat", "mq consume 100 B (kcat)")
        if "mq consume 100 B (kcat)" in table.cases
        else ("librdkafka", "mq consume 100 B")
    )
    targets: list[tuple[str, float | None, str, float]] = [
        (
            f"produce 100 B acks=1 ({small}) / Redis XADD 100 B",
            small_rate / m("redis XADD 100 B"),
            ">=",
            2.0,
        ),
        (
            f"consume 100 B ({reader}) / Redis XRANGE 100 B",
            m(consume) / m("redis XRANGE COUNT 1000 100 B"),
            ">=",
            1.0,
        ),
        (
            f"produce 1 KiB MB/s ({large}) / page-cache append",
            large_rate * 1024 / MB / m(NEW_FILE_APPEND),
            ">=",
            0.5,
        ),
        (
            "large-batch fetch / loopback sendfile",
            m(FETCH) / m("loopback sendfile (page cache)") if FETCH in table.cases else None,
            ">=",
            0.6,
        ),
        ("p99 latency at 10% of max (ms)", m("mq produce 100 B acks=1 p99 at 10% of max"), "<", 10.0),
    ]
    print(f"\n{'target':<48}  {'measured':>9}  {'goal':>7}  result")
    for name, value, op, goal in targets:
        if value is None:
            print(f"{name:<48}  {'-':>9}  {op + ' ' + format(goal, 'g'):>7}  not measured: needs kcat")
            continue
        met = value >= goal if op == ">=" else value < goal
        print(f"{name:<48}  {value:>9.2f}  {op + ' ' + format(goal, 'g'):>7}  {'met' if met else 'missed'}")
    requests = m("mq produce 1 KiB acks=1 (pre-encoded requests) MB/s")
    references = [
        (f"produce 1 KiB ({large}) / rewriting a just-truncated file", large_rate * 1024 / MB / m(RECYCLED_APPEND)),
        ("produce 1 KiB (pre-encoded requests) / page-cache append", requests / m(NEW_FILE_APPEND)),
        ("produce 1 KiB (pre-encoded requests) / receive + append", requests / m(RECEIVE_APPEND)),
        ("loopback TCP receive + append / page-cache append", m(RECEIVE_APPEND) / m(NEW_FILE_APPEND)),
    ]
    print("\nfor reference")
    for name, value in references:
        print(f"{name:<60}  {value:>9.2f}")


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews every figure."""
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def machine_line() -> str:
    """CPUs, load and Python version, the first line a benchmark prints."""
    return (
        f"{os.cpu_count()} CPUs, load average {load_average()}, Python {sys.version.split()[0]}, {RUNS} runs per case"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every record count (default 1.0)")
    args = parser.parse_args()

    def scaled(n: int) -> int:
        return max(1, int(n * args.scale))

    for tool in ("redis-server", "redis-benchmark", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing: apt-get install -y redis-server")
    if shutil.which("kcat") is None:
        print("kcat is missing (apt-get install -y kcat): its cases and the large-batch fetch are skipped, and the")
        print("targets use librdkafka driven from Python, which makes a Python call per record")
    table = Table()
    began = time.monotonic()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="mq-bench-") as name:
        tmp = Path(name)
        bench_machine(table, tmp, scaled(1024))
        bench_redis(table, tmp, {100: scaled(1_000_000), 1024: scaled(300_000)}, scaled(2_000))
        bench_mq(table, tmp, MqCounts({100: scaled(1_000_000), 1024: scaled(300_000)}, scaled(1024), 10 * args.scale))
    table.print()
    print_targets(table)
    print(f"\ntotal time: {time.monotonic() - began:.0f} s; load average {load_average()}")


if __name__ == "__main__":
    main()
