"""``mq mirror`` throughput between two fresh mq brokers on loopback.

Starts a source and a target broker (``mq server start`` on free ports, temporary log dirs), fills a source topic
with N keyed records of the given value size (confluent-kafka), then runs ``mq mirror`` as a subprocess until the
target holds N records, stops it with SIGTERM and prints records/s and MB/s (key + value bytes) of the copy.

    python scripts/bench_mirror.py [--messages 200000] [--size 100 1024] [--partitions 4]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mq_command() -> str:
    return shutil.which("mq") or str(Path(sys.executable).with_name("mq"))


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    data.mkdir(parents=True)
    command = [mq_command(), "server", "start"]
    for item in (
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={data / 'logs'}",
        "offsets.topic.replication.factor=1",
    ):
        command += ["--override", item]
    with open(data / "broker.log", "wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("broker did not start")


def fill(bootstrap: str, topic: str, partitions: int, messages: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20})
    value = b"v" * size
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value, key=b"key-%d" % (i % 1000))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-reader"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions))
    except Exception:  # the topic does not exist yet
        return 0
    finally:
        consumer.close()


def mirror_run(tmp: Path, source: str, target: str, topic: str, partitions: int, messages: int, size: int) -> None:
    fill(source, topic, partitions, messages, size)
    consumer_config = tmp / f"{topic}-consumer.properties"
    consumer_config.write_text(f"bootstrap.servers={source}\ngroup.id={topic}-mirror\nauto.offset.reset=earliest\n")
    producer_config = tmp / f"{topic}-producer.properties"
    producer_config.write_text(f"bootstrap.servers={target}\nlinger.ms=5\nbatch.size=262144\n")
    command = [mq_command(), "mirror", "--consumer.config", str(consumer_config)]
    command += ["--producer.config", str(producer_config), "--whitelist", topic]
    start = time.perf_counter()
    mirror = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while end_offsets(target, topic, partitions) < messages:
        if mirror.poll() is not None:
            raise RuntimeError(f"mirror exited: {mirror.stderr.read().decode() if mirror.stderr else ''}")
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    mirror.send_signal(signal.SIGTERM)
    _, err = mirror.communicate(timeout=60)
    volume = messages * (size + len(b"key-000")) / 1e6
    print(
        f"{size:>5}-byte values, {partitions} partitions: {messages} records in {seconds:.2f} s = "
        f"{messages / seconds:,.0f} records/s, {volume / seconds:.1f} MB/s (including process start and group join)"
    )
    print("   ", err.decode().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        source, source_bootstrap = start_broker(tmp / "source")
        target, target_bootstrap = start_broker(tmp / "target")
        try:
            for size in args.size:
                mirror_run(
                    tmp, source_bootstrap, target_bootstrap, f"bench-{size}", args.partitions, args.messages, size
                )
        finally:
            for broker in (source, target):
                broker.send_signal(signal.SIGTERM)
                broker.wait(30)


if __name__ == "__main__":
    main()
