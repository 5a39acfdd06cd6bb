"""Produce latency and broker CPU while the broker does slow work beside the traffic, against baselines measured in
the same run.

Runs from a clean clone after ``pip install -e .[bench]`` (and the Debian package zookeeper for case (c)); starts
what it needs on 127.0.0.1 in a temporary directory and stops it again. Every case runs three times; the table
shows min / median / max and the ratios use the medians.

(1) produce latency: a confluent-kafka producer (librdkafka's default linger.ms) sends 100-byte records to one
    partition at 10% of the broker's peak (``mq perf producer`` at full speed, acks=1, median of three) and takes
    each record's latency from librdkafka's delivery report (produce call to acknowledgement, timed in C). p99 and
    max per run: alone on a standalone broker (the baseline), and while
    (a) ``mq topics --create`` makes 20 topics of 100 partitions one after the other;
    (b) retention deletes 1 GiB of 1 MiB segments: a topic filled by pre-encoded produce requests gets
        ``retention.ms=1`` (``log.retention.check.interval.ms=500``, ``file.delete.delay.ms=0``) and the run lasts
        until its log holds one segment;
    (c) on a 3-broker cluster with its own ZooKeeper (sessions of 18 s), acks=all to a partition with three
        replicas at 10% of that cluster's acks=all peak: alone (its baseline), and with ZooKeeper stopped (SIGSTOP)
        for 5 s in the middle of the run.
    Every run lasts at least ``--latency-seconds`` and until its disturbance is over. Target: p99 < 20 ms in all.
(2) broker CPU (utime + stime from /proc/<pid>/stat) while ``mq perf producer`` sends 1,000 records/s to one
    partition, with no other client and with 500 idle long-poll fetchers: one connection each, each fetching its
    own empty partition of another topic with a pre-encoded Fetch (max_wait 500 ms, min_bytes 1) sent again as
    soon as the empty answer arrives. Target: with / without <= 1.10. The fetchers' own requests cost CPU whatever
    the broker does on appends, so the same runs without the producer are measured too, and the records' share of
    the CPU (busy minus idle, with and without the fetchers) shows what an append costs beside idle waiters. For
    reference, the CPU per answer of the broker's idle fetchers and of the same fetchers long-polling a minimal server
    (``MINIMAL_SERVER``: a uvloop protocol that answers every request 500 ms later, nothing else), and the ratio the
    target would measure for a broker whose answers cost that little.

``--scale`` multiplies the record counts, the topic and partition counts of (a), the GiB of (b) and the fetchers
of (2) (for a quick check; the targets are meant for scale 1).

    python scripts/bench_concurrency.py [--scale 1.0] [--latency-seconds 10] [--skip-latency] [--skip-cluster]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import (
    MB,
    RUNS,
    Table,
    cpu_seconds,
    create_topic,
    free_port,
    load_average,
    machine_line,
    mq_command,
    perf_producer,
    produce_requests,
    running,
)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mq.client.admin import AsyncAdmin
from mq.client.consumer import fetch_request_body
from mq.client.sync import SyncAdmin
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, encode_request, request_schema
from mq.protocol.configs import AlterConfigOp, ResourceType
from mq.protocol.entities import build
from mq.tools.local_cluster import LocalCluster
from mq.topic_partition import TopicPartition

P99_TARGET_MS = 20.0
CPU_TARGET = 1.10
RECORD = b"r" * 100
FREEZE_S = 5.0
WARM_UP_S = 1.0
"""The producer runs this long before a disturbance starts."""


# (1) produce latency ----------------------------------------------------------------------------------------------


def paced_latencies(bootstrap: str, topic: str, rate: float, acks: str, until: threading.Event) -> list[float]:
    """Seconds from produce call to acknowledgement (librdkafka's own timing) of records sent at ``rate`` per
    second until ``until`` is set; any failed delivery raises."""
    latencies: list[float] = []
    failures: list[str] = []

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            latencies.append(msg.latency())
        else:
            failures.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "queue.buffering.max.messages": 10_000_000})
    start, sent = time.perf_counter(), 0
    while not until.is_set():
        due = int((time.perf_counter() - start) * rate)
        while sent < due:
            try:
                producer.produce(topic, RECORD, partition=0, on_delivery=delivered)
            except BufferError:  # a broker that stalls long enough fills even this queue: wait for room
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0.001)
    if producer.flush(120) != 0 or failures:
        raise RuntimeError(f"{topic}: {len(failures)} failed deliveries, e.g. {failures[:1]}")
    return latencies


def latency_run(
    bootstrap: str, topic: str, rate: float, acks: str, seconds: float, disturb: Callable[[], None] | None
) -> tuple[list[float], float]:
    """Latencies of a paced producer that runs ``seconds`` at least, and until ``disturb`` (started after a
    warm-up, in this thread) returns plus one second; and the records/s it acknowledged (below ``rate`` when the
    load generator could not keep up)."""
    done = threading.Event()
    result: list[list[float]] = []
    sender = threading.Thread(target=lambda: result.append(paced_latencies(bootstrap, topic, rate, acks, done)))
    began = time.monotonic()
    sender.start()
    try:
        time.sleep(WARM_UP_S)
        if disturb is not None:
            disturb()
            time.sleep(1.0)
        time.sleep(max(0.0, began + seconds - time.monotonic()))
    finally:
        done.set()
        sender.join()
    if not result:
        raise RuntimeError("the paced producer failed")
    return result[0], len(result[0]) / (time.monotonic() - began)


def add_latencies(table: Table, name: str, run: tuple[list[float], float]) -> None:
    latencies, acknowledged = run
    table.add(f"{name}: acknowledged", "records/s", acknowledged)
    ordered = sorted(latencies)
    table.add(f"{name}: p99", "ms", ordered[int(0.99 * (len(ordered) - 1))] * 1000)
    table.add(f"{name}: max", "ms", ordered[-1] * 1000)


@contextlib.contextmanager
def standalone_broker(tmp: Path, name: str, overrides: list[str]) -> Iterator[tuple[str, int]]:
    """A standalone ``mq server start`` with ``overrides``; yields its bootstrap address and pid."""
    port = free_port()
    command = [*mq_command(), "server", "start"]
    for item in [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={tmp / name}", *overrides]:
        command += ["--override", item]
    with running(command, port, "mq broker", tmp / f"{name}.log") as pid:
        yield f"127.0.0.1:{port}", pid


def peak_rate(table: Table, name: str, bootstrap: str, topic: str, records: int, acks: str) -> float:
    """Median records/s of ``mq perf producer`` at full speed (100-byte records)."""
    for _ in range(RUNS):
        table.add(name, "records/s", perf_producer(bootstrap, topic, records, len(RECORD), {"acks": acks})["rps"])
    return table.median(name)


def topics_command(bootstrap: str, *args: str) -> None:
    """``mq topics --bootstrap-server bootstrap args``; a failure is printed (a stalled broker times requests out),
    not raised, so the run's latencies still count."""
    command = [*mq_command(), "topics", "--bootstrap-server", bootstrap, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        print(f"  mq topics {' '.join(args)} failed: {(done.stderr or done.stdout).strip()}", flush=True)


def create_topics(bootstrap: str, prefix: str, topics: int, partitions: int) -> Callable[[], None]:
    def disturb() -> None:
        for i in range(topics):
            topics_command(bootstrap, "--create", "--topic", f"{prefix}{i}", "--partitions", str(partitions))

    return disturb


def delete_topics(bootstrap: str, prefix: str) -> None:
    """Delete the topics named ``prefix``... and wait until they are gone (the next run starts from as many
    partitions as this one did)."""
    topics_command(bootstrap, "--delete", "--topic", f"{prefix}.*")
    deadline = time.monotonic() + 600
    with SyncAdmin(bootstrap) as admin:
        while any(t.startswith(prefix) for t in admin.list_topics()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics {prefix}* were not deleted")
            time.sleep(0.5)


def segment_files(log_dir: Path, topic: str) -> int:
    return len(list((log_dir / f"{topic}-0").glob("*.log")))


def fill_for_retention(bootstrap: str, log_dir: Path, topic: str, megabytes: int) -> Callable[[], None]:
    """Fill ``topic`` with ``megabytes`` MiB in 1 MiB segments; the returned disturbance sets retention.ms=1 and
    returns once retention left only the active segment."""
    command = [*mq_command(), "topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic]
    configs = ["segment.bytes=1048576", "file.delete.delay.ms=0", "retention.ms=-1"]
    created = subprocess.run(
        [*command, "--partitions", "1", *(a for c in configs for a in ("--config", c))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if created.returncode != 0:
        raise RuntimeError(f"creating {topic} failed: {created.stdout.strip()} {created.stderr.strip()}")
    produce_requests(bootstrap, topic, megabytes, 1000)

    def disturb() -> None:
        with SyncAdmin(bootstrap) as admin:
            admin.call(
                AsyncAdmin.incremental_alter_configs,
                ResourceType.TOPIC,
                topic,
                {"retention.ms": (AlterConfigOp.SET, "1")},
            )
        deadline = time.monotonic() + 600
        while segment_files(log_dir, topic) > 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"retention left {segment_files(log_dir, topic)} segments of {topic}")
            time.sleep(0.05)

    return disturb


def bench_standalone_latency(table: Table, tmp: Path, scale: float, seconds: float) -> None:
    topics, partitions = max(1, round(20 * scale)), max(1, round(100 * scale))
    megabytes = max(16, round(1024 * scale))
    overrides = ["log.retention.check.interval.ms=500"]
    with standalone_broker(tmp, "standalone", overrides) as (bootstrap, _):
        create_topic(bootstrap, "peak", 1)
        create_topic(bootstrap, "latency", 1)
        peak = peak_rate(table, "standalone peak, acks=1", bootstrap, "peak", max(10_000, int(500_000 * scale)), "1")
        rate = peak / 10
        print(f"(1) standalone: {rate:,.0f} records/s (10% of peak); (a) {topics} x {partitions} partitions; "
              f"(b) {megabytes} MiB of segments", flush=True)  # fmt: skip
        for run in range(RUNS):
            add_latencies(table, "alone", latency_run(bootstrap, "latency", rate, "1", seconds, None))
            disturb = create_topics(bootstrap, f"bulk-{run}-", topics, partitions)
            add_latencies(table, "(a) topic creation", latency_run(bootstrap, "latency", rate, "1", seconds, disturb))
            delete_topics(bootstrap, f"bulk-{run}-")
            os.sync()
            disturb = fill_for_retention(bootstrap, tmp / "standalone", f"expiring-{run}", megabytes)
            os.sync()  # the fill's dirty pages are written before the measured run
            add_latencies(table, "(b) retention", latency_run(bootstrap, "latency", rate, "1", seconds, disturb))


def create_replicated_topics(bootstrap: str, topics: list[str]) -> None:
    """One partition each, three replicas, min.insync.replicas 2 (the admin client is gone when this returns)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(t, 1, 3, config={"min.insync.replicas": "2"}) for t in topics])
    for future in created.values():
        future.result(60)


def bench_cluster_latency(table: Table, tmp: Path, scale: float, seconds: float) -> None:
    cluster = LocalCluster(tmp / "cluster", overrides=["zookeeper.session.timeout.ms=18000"], log=lambda _: None)
    state = cluster.start(3)
    try:
        bootstrap = cluster.bootstrap(state)
        create_replicated_topics(bootstrap, ["cluster-peak", "cluster-latency"])
        peak = peak_rate(
            table, "cluster peak, acks=all", bootstrap, "cluster-peak", max(10_000, int(200_000 * scale)), "all"
        )
        rate = peak / 10
        print(
            f"(1c) cluster: {rate:,.0f} records/s (10% of its acks=all peak); ZooKeeper stopped {FREEZE_S:g} s",
            flush=True,
        )

        def freeze() -> None:
            os.kill(state.zookeeper_pid, signal.SIGSTOP)
            try:
                time.sleep(FREEZE_S)
            finally:
                os.kill(state.zookeeper_pid, signal.SIGCONT)

        for _ in range(RUNS):
            add_latencies(table, "cluster alone", latency_run(bootstrap, "cluster-latency", rate, "all", seconds, None))
            run = latency_run(bootstrap, "cluster-latency", rate, "all", seconds, freeze)
            add_latencies(table, "(c) ZooKeeper stopped", run)
    finally:
        if state.zookeeper_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.zookeeper_pid, signal.SIGCONT)
        cluster.stop()


# (2) broker CPU ---------------------------------------------------------------------------------------------------


def fetch_request(topic: str, partition: int) -> bytes:
    """A Fetch v12 of ``partition`` from offset 0 that waits up to 500 ms for one byte."""
    body = fetch_request_body(
        {TopicPartition(topic, partition): 0}, max_wait_ms=500, min_bytes=1, max_bytes=MB, partition_max_bytes=MB
    )
    header = RequestHeader(ApiKey.FETCH, 12, 1, "bench-idle", 0)
    return encode_request(header, build(request_schema(ApiKey.FETCH, 12), body))


class IdleFetchers:
    """``count`` connections, each sending a pre-encoded long-poll Fetch of its own empty partition again as soon
    as the answer arrives, on an asyncio loop in a thread. ``answers`` counts the answers."""

    def __init__(self, bootstrap: str, topic: str, count: int) -> None:
        self.host, port = bootstrap.rsplit(":", 1)
        self.port = int(port)
        self.requests = [fetch_request(topic, p) for p in range(count)]
        self.answers = 0
        self.error: BaseException | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._run(),), daemon=True)
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()

    async def _fetcher(self, request: bytes) -> None:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        assert self._stop is not None
        try:
            while not self._stop.is_set():
                writer.write(request)
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(length)
                self.answers += 1
        finally:
            writer.close()

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        tasks = [asyncio.create_task(self._fetcher(r)) for r in self.requests]
        self._ready.set()
        try:
            await asyncio.gather(*tasks)
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> IdleFetchers:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._loop.close()
        if self.error is not None:
            raise self.error


def busy_cpu(bootstrap: str, pid: int, seconds: float) -> tuple[float, float]:
    """Broker CPU seconds while ``mq perf producer`` sends 1,000 records/s (acks=1) for ``seconds``, and the wall
    seconds that took."""
    before, began = cpu_seconds(pid), time.monotonic()
    perf_producer(bootstrap, "busy", int(1000 * seconds), len(RECORD), {"acks": "1"}, 1000)
    return cpu_seconds(pid) - before, time.monotonic() - began


def idle_cpu(pid: int, seconds: float) -> float:
    """Broker CPU seconds over ``seconds`` without the producer."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


IDLE_FETCHERS = "CPU, idle fetchers"


MINIMAL_SERVER = """
import asyncio, sys
import uvloop
ANSWER = (4).to_bytes(4, "big") + bytes(4)
class LongPoll(asyncio.Protocol):
    def __init__(self):
        self.loop, self.buffer = asyncio.get_running_loop(), bytearray()
    def connection_made(self, transport):
        self.transport = transport
    def data_received(self, data):
        self.buffer += data
        while len(self.buffer) >= 4 and len(self.buffer) >= 4 + int.from_bytes(self.buffer[:4], "big"):
            del self.buffer[: 4 + int.from_bytes(self.buffer[:4], "big")]
            self.loop.call_later(0.5, self.transport.write, ANSWER)
async def main():
    server = await asyncio.get_running_loop().create_server(LongPoll, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()
uvloop.run(main())
"""
"""The least a server can do for a long poll: a uvloop protocol that answers each framed request with 8 bytes 500 ms
later (no parsing, no state): the floor of what the idle fetchers can cost any Python server."""

IDLE_ANSWER_CPU = "CPU per idle fetch answer"
MINIMAL_ANSWER_CPU = "CPU per long-poll answer, minimal server"


def idle_fetch_cost(table: Table, name: str, bootstrap: str, pid: int, count: int, seconds: float) -> None:
    """CPU µs ``pid`` spends per answer while ``count`` idle fetchers long-poll it for ``seconds``."""
    with IdleFetchers(bootstrap, "idle", count) as fetchers:
        time.sleep(2)  # every fetcher connected and waiting
        answered, before = fetchers.answers, cpu_seconds(pid)
        time.sleep(seconds)
        spent, answers = cpu_seconds(pid) - before, fetchers.answers - answered
    table.add(name, "µs", spent / max(answers, 1) * 1e6)


def bench_idle_fetchers(table: Table, tmp: Path, scale: float, seconds: float) -> None:
    count = max(10, round(500 * scale))
    print(f"(2) broker CPU at 1,000 records/s for {seconds:g} s, without and with {count} idle fetchers", flush=True)
    with standalone_broker(tmp, "cpu", []) as (bootstrap, pid):
        create_topic(bootstrap, "busy", 1)
        create_topic(bootstrap, "idle", count)
        for _ in range(RUNS):
            busy, wall = busy_cpu(bootstrap, pid, seconds)
            table.add("CPU, no fetchers", "s", busy)
            table.add("CPU, no fetchers, wall", "s", wall)
            table.add("CPU, no fetchers, no records", "s", idle_cpu(pid, wall))
            with IdleFetchers(bootstrap, "idle", count) as fetchers:
                time.sleep(2)  # every fetcher connected and waiting
                answered = fetchers.answers
                began = time.monotonic()
                busy, wall = busy_cpu(bootstrap, pid, seconds)
                table.add(IDLE_FETCHERS, "s", busy)
                rate = (fetchers.answers - answered) / (time.monotonic() - began)
                table.add(f"{IDLE_FETCHERS}, no records", "s", idle_cpu(pid, wall))
            table.add("idle fetch answers", "answers/s", rate)
            idle_fetch_cost(table, IDLE_ANSWER_CPU, bootstrap, pid, count, seconds)
    port = free_port()
    command = [sys.executable, "-c", MINIMAL_SERVER, str(port)]
    with running(command, port, "minimal long-poll server", tmp / "minimal-server.log") as server:
        for _ in range(RUNS):
            idle_fetch_cost(table, MINIMAL_ANSWER_CPU, f"127.0.0.1:{port}", server, count, seconds)


# targets ----------------------------------------------------------------------------------------------------------


def print_targets(table: Table) -> None:
    m = table.median
    rows: list[tuple[str, float, str, float, str]] = []
    for case, baseline in [
        ("alone", "alone"),
        ("(a) topic creation", "alone"),
        ("(b) retention", "alone"),
        ("cluster alone", "cluster alone"),
        ("(c) ZooKeeper stopped", "cluster alone"),
    ]:
        if f"{case}: p99" in table.cases:
            ratio = m(f"{case}: p99") / m(f"{baseline}: p99")
            rows.append((f"{case}: p99 (ms)", m(f"{case}: p99"), "<", P99_TARGET_MS, f"x{ratio:.2f} of {baseline}"))
    if IDLE_FETCHERS in table.cases:
        ratio = m(IDLE_FETCHERS) / m("CPU, no fetchers")
        rows.append((f"{IDLE_FETCHERS} / none", ratio, "<=", CPU_TARGET, ""))
        # the same ratio for a server whose answers cost what the minimal server's do
        floor_s = m(MINIMAL_ANSWER_CPU) * 1e-6 * m("idle fetch answers") * m("CPU, no fetchers, wall")
        floor = (m("CPU, no fetchers") + floor_s) / m("CPU, no fetchers")
        rows.append(("  the same at the minimal server's cost per answer", floor, "<=", CPU_TARGET, "reference"))
        with_fetchers = m(IDLE_FETCHERS) - m(f"{IDLE_FETCHERS}, no records")
        alone = m("CPU, no fetchers") - m("CPU, no fetchers, no records")
        rows.append(("records' CPU beside idle fetchers / alone", with_fetchers / alone, "<=", CPU_TARGET, ""))
    print(f"\n{'target':<44}  {'measured':>9}  {'goal':>7}  result  ratio")
    for name, value, op, goal, note in rows:
        met = value < goal if op == "<" else value <= goal
        print(f"{name:<44}  {value:>9.2f}  {op + ' ' + format(goal, 'g'):>7}  {'met' if met else 'missed':<6}  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply counts and sizes (default 1.0)")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="least length of a latency run")
    parser.add_argument("--cpu-seconds", type=float, default=10.0, help="length of a CPU run")
    parser.add_argument("--skip-cluster", action="store_true", help="leave out case (c)")
    parser.add_argument("--skip-latency", action="store_true", help="leave out the latency cases (1)")
    args = parser.parse_args()
    table = Table()
    began = time.monotonic()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="mq-bench-concurrency-") as name:
        tmp = Path(name)
        if not args.skip_latency:
            bench_standalone_latency(table, tmp, args.scale, args.latency_seconds)
        if not args.skip_cluster and not args.skip_latency:
            bench_cluster_latency(table, tmp, args.scale, args.latency_seconds)
        bench_idle_fetchers(table, tmp, args.scale, args.cpu_seconds)
    table.print()
    print_targets(table)
    print(f"\ntotal time: {time.monotonic() - began:.0f} s; load average {load_average()}")


if __name__ == "__main__":
    main()
