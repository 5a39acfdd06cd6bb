"""confluent-kafka (librdkafka) producing and consuming N 100-byte messages against a fresh mq broker.

Starts ``mq server start`` on a free loopback port with a temporary log dir, creates the topic, produces with
acks=1 and librdkafka's default batching, then consumes everything back from the beginning. Prints messages/s
and MB/s for both phases.

    python scripts/bench_confluent.py [--messages 1000000] [--size 100] [--partitions 1]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data: Path, port: int) -> subprocess.Popen[bytes]:
    mq = shutil.which("mq") or str(Path(sys.executable).with_name("mq"))
    command = [
        mq,
        "server",
        "start",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={data}",
    ]
    with open(data.parent / "broker.log", "wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("broker did not start")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


@contextlib.contextmanager
def broker_unless(bootstrap: str | None) -> Iterator[str]:
    """``bootstrap`` when given, else a fresh broker on a free port with its logs in a temporary directory, stopped
    at the end; yields the bootstrap address."""
    if bootstrap is not None:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        broker = start_broker(Path(tmp) / "logs", port)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            broker.terminate()
            broker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        broker = start_broker(Path(tmp) / "logs", port)
        bootstrap = f"127.0.0.1:{port}"
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("bench", args.partitions, 1)])["bench"].result(30)
            producer = Producer({"bootstrap.servers": bootstrap, "acks": 1})
            payload = b"x" * args.size
            start = time.perf_counter()
            for _ in range(args.messages):
                while True:
                    try:
                        producer.produce("bench", payload)
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.flush(120)
            produce_s = time.perf_counter() - start
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
            consumer.assign([TopicPartition("bench", p, OFFSET_BEGINNING) for p in range(args.partitions)])
            received = 0
            start = time.perf_counter()
            while received < args.messages:
                for message in consumer.consume(10000, timeout=5):
                    if message.error() is None:
                        received += 1
            consume_s = time.perf_counter() - start
            consumer.close()
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(60)
    megabytes = args.messages * args.size / 1e6
    print(f"messages: {args.messages} x {args.size} bytes, partitions: {args.partitions}")
    print(f"produce (acks=1): {args.messages / produce_s:12,.0f} msg/s  {megabytes / produce_s:8.1f} MB/s")
    print(f"consume:          {received / consume_s:12,.0f} msg/s  {megabytes / consume_s:8.1f} MB/s")


if __name__ == "__main__":
    main()
