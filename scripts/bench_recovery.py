"""Restart time after kill -9: recovery from the checkpointed recovery point versus recovery of every segment.

Starts a broker process (default config except log.dirs in a temp dir and a loopback listener), creates a topic
(``--partitions``, topic-level ``segment.bytes`` of ``--segment-mb`` so the log rolls), produces ``--megabytes`` with
confluent-kafka (acks=all), waits until the recovery-point checkpoint names every partition's active segment (the
rolls' flushes done and checkpointed: up to log.flush.offset.checkpoint.interval.ms, 60 s by default), then:

1. kill -9, restart, time until every partition's ListOffsets answers with the produced end offset;
2. kill -9 again, delete ``recovery-point-offset-checkpoint`` (every segment is then recovered, as when the
   recovery point never advanced), restart, time the same.

Prints both times, their ratio, what each start's log says it recovered, and disk usage (allocated and apparent,
``du``) before the first kill and after each recovery. The page cache is warm in both starts unless ``--cold``:
then the log dir's files are fsynced and dropped from the page cache (posix_fadvise DONTNEED, those files only)
before each restart, so recovery reads them from the disk.

    python scripts/bench_recovery.py [--megabytes 1024] [--partitions 10] [--segment-mb 16] [--cold] [--dir /path]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ClientPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mq.storage.checkpoints import RECOVERY_POINT_FILE, OffsetCheckpointFile
from mq.topic_partition import TopicPartition

TOPIC = "recovery-bench"
VALUE_BYTES = 10_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    def __init__(self, work: Path, extra: list[str]) -> None:
        self.work = work
        self.log_dir = work / "kafka-logs"
        self.port = free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr_path = work / "broker.stderr"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [sys.executable, "-m", "mq", "server", "start"]
        for item in [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.log_dir}", *self.extra]:
            args += ["--override", item]
        with open(self.stderr_path, "ab") as err:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=self.work)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(120)
            self.process = None

    def log_since(self, offset: int) -> str:
        with open(self.stderr_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")


def du(path: Path) -> str:
    allocated = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True).stdout.split()[0]
    apparent = subprocess.run(
        ["du", "-sm", "--apparent-size", str(path)], capture_output=True, text=True
    ).stdout.split()[0]
    return f"{allocated} MB allocated, {apparent} MB apparent"


def end_offsets(bootstrap: str, partitions: int, timeout: float) -> dict[int, int] | None:
    """Every partition's high watermark by ListOffsets, or None if the broker does not answer them all yet."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "recovery-bench", "log_level": 0})
    try:
        ends = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(ClientPartition(TOPIC, p), timeout=timeout)
            ends[p] = high
        return ends
    except Exception:
        return None
    finally:
        consumer.close()


def drop_from_page_cache(directory: Path) -> None:
    """fsync every file under ``directory`` and drop its pages from the page cache (only these files)."""
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def time_until_serving(broker: Broker, partitions: int, expected: dict[int, int], cold: bool) -> float:
    """Seconds from the process start until ListOffsets answers every partition with its produced end offset."""
    if cold:
        drop_from_page_cache(broker.log_dir)
    started = time.monotonic()
    broker.start()
    while True:
        assert broker.process is not None
        if broker.process.poll() is not None:
            raise SystemExit(f"the broker exited with {broker.process.returncode}; see {broker.stderr_path}")
        try:  # the client backs off after a refused connection: ask only once the broker listens
            socket.create_connection(("127.0.0.1", broker.port), timeout=0.5).close()
        except OSError:
            time.sleep(0.01)
            continue
        if end_offsets(broker.bootstrap, partitions, 2.0) == expected:
            return time.monotonic() - started
        time.sleep(0.01)


def produce(bootstrap: str, megabytes: int, partitions: int) -> dict[int, int]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20, "log_level": 0}
    )
    value = os.urandom(VALUE_BYTES)
    count = megabytes * 1024 * 1024 // VALUE_BYTES
    failed: list[object] = []
    for i in range(count):
        while True:
            try:
                producer.produce(
                    TOPIC, value=value, partition=i % partitions, on_delivery=lambda e, _: e and failed.append(e)
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) or failed:
        raise SystemExit(f"produce failed: {failed[:3]}")
    return {p: count // partitions + (1 if p < count % partitions else 0) for p in range(partitions)}


def wait_for_checkpoint(broker: Broker, partitions: int, timeout_s: float) -> dict[TopicPartition, int]:
    """The recovery-point checkpoint once it names each partition's active segment (rolls flushed, checkpointed),
    else as it is after ``timeout_s`` (a build that never advances the recovery point)."""
    checkpoint = OffsetCheckpointFile(broker.log_dir / RECOVERY_POINT_FILE)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        points = checkpoint.read()
        if all(points.get(tp) == max(int(f.stem) for f in (broker.log_dir / str(tp)).glob("*.log")) for tp in tps):
            return points
        time.sleep(0.5)
    print(f"the recovery-point checkpoint did not reach the active segments within {timeout_s:.0f} s")
    return checkpoint.read()


def recovered_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "Recovering unflushed" in line or "corrupt" in line.lower()]


def loading_seconds(text: str) -> float:
    """What the log manager's ``loaded N logs from DIRS in M ms`` line says."""
    line = next(line for line in text.splitlines() if " loaded " in line and " logs from " in line)
    return int(line.split(" in ")[-1].split(" ms")[0]) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--segment-mb", type=int, default=16, help="the topic's segment.bytes, in MB")
    parser.add_argument("--cold", action="store_true", help="restart with the log files out of the page cache")
    parser.add_argument("--checkpoint-wait-s", type=float, default=90.0)
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to measure (default: temp)")
    parser.add_argument("--override", action="append", default=[], help="extra broker KEY=VALUE (repeatable)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-recovery-", dir=args.dir))
    broker = Broker(work, args.override)
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        deadline = time.monotonic() + 30
        while True:
            try:
                topic = NewTopic(TOPIC, args.partitions, 1, config={"segment.bytes": str(args.segment_mb << 20)})
                admin.create_topics([topic])[TOPIC].result(10)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        del admin
        started = time.monotonic()
        expected = produce(broker.bootstrap, args.megabytes, args.partitions)
        produced_s = time.monotonic() - started
        print(f"produced {args.megabytes} MB into {args.partitions} partitions in {produced_s:.1f} s")
        # the ListOffsets client's group creates __consumer_offsets: before the kill, so both starts load it
        if end_offsets(broker.bootstrap, args.partitions, 10.0) != expected:
            raise SystemExit("the produced end offsets are not what ListOffsets says")
        points = wait_for_checkpoint(broker, args.partitions, args.checkpoint_wait_s)
        segments = len(list(broker.log_dir.glob(f"{TOPIC}-*/*.log")))
        print(f"{segments} segments; checkpointed recovery points: {sorted(points.values())}")
        print(f"disk before kill -9:                  {du(broker.log_dir)}")

        broker.kill()
        offset = broker.stderr_path.stat().st_size
        with_checkpoint = time_until_serving(broker, args.partitions, expected, args.cold)
        lines = recovered_lines(broker.log_since(offset))
        loading = loading_seconds(broker.log_since(offset))
        print(f"disk after recovery (checkpoint):     {du(broker.log_dir)}")

        broker.kill()
        (broker.log_dir / RECOVERY_POINT_FILE).unlink()
        offset = broker.stderr_path.stat().st_size
        without = time_until_serving(broker, args.partitions, expected, args.cold)
        baseline_lines = recovered_lines(broker.log_since(offset))
        baseline_loading = loading_seconds(broker.log_since(offset))
        print(f"disk after recovery (no checkpoint):  {du(broker.log_dir)}")

        print(f"with the recovery checkpoint: serving after {with_checkpoint:.2f} s (logs loaded in {loading:.2f} s)")
        print("".join(f"    {line}\n" for line in lines), end="")
        print(f"without it (every segment):   serving after {without:.2f} s (logs loaded in {baseline_loading:.2f} s)")
        print("".join(f"    {line}\n" for line in baseline_lines), end="")
        print(
            f"ratio (without / with): {without / with_checkpoint:.1f}x serving, {baseline_loading / loading:.1f}x loading"
        )
    finally:
        if broker.process is not None:
            broker.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
