"""``mq mirror`` throughput between two fresh mq brokers on loopback, at least once and exactly once.

Starts a source and a target broker (``mq server start`` on free ports, temporary log dirs), fills a source topic
with N keyed records of the given value size (confluent-kafka), then runs ``mq mirror`` as a subprocess until the
target holds N records (``--exactly-once``: until the positions its committed transactions recorded reach the source's
end, i.e. N records are visible to read_committed consumers), stops it with SIGTERM and prints records/s and MB/s
(key + value bytes) of the copy. Each size is copied by both modes in the same run, from the same source topic to
two targets' topics, and the exactly-once figure is printed as a ratio of the at-least-once one; before them a
``kcat -C | kcat -P`` pipe copies the same topic between the same brokers, the baseline of the at-least-once figure.

    python scripts/bench_mirror.py [--messages 200000] [--size 100 1024] [--partitions 4]
"""

from __future__ import annotations

import argparse
import json
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


def committed_positions(bootstrap: str, topic: str) -> int:
    """The sum of the source positions the exactly-once mirror's committed transactions recorded for ``topic``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-positions",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    positions: dict[bytes, int] = {}
    try:
        consumer.assign([TopicPartition("mq-copy-positions", 0, 0)])
        while True:
            message = consumer.poll(2)
            if message is None or message.error() is not None:
                break
            if json.loads(message.key())[1] == topic:
                positions[message.key()] = int(message.value())
    finally:
        consumer.close()
    return sum(positions.values())


def mirror_run(
    tmp: Path, source: str, target: str, topic: str, partitions: int, messages: int, size: int, exactly_once: bool
) -> float:
    """Mirror ``topic`` until the target shows all ``messages``; returns records/s."""
    group = f"{topic}-mirror{'-eos' if exactly_once else ''}"
    consumer_config = tmp / f"{group}-consumer.properties"
    consumer_config.write_text(f"bootstrap.servers={source}\ngroup.id={group}\nauto.offset.reset=earliest\n")
    producer_config = tmp / f"{group}-producer.properties"
    producer_config.write_text(f"bootstrap.servers={target}\nlinger.ms=5\nbatch.size=262144\n")
    command = [mq_command(), "mirror", "--consumer.config", str(consumer_config)]
    command += ["--producer.config", str(producer_config), "--whitelist", topic]
    if exactly_once:
        command.append("--exactly-once")
    arrived = (
        (lambda: committed_positions(target, topic))
        if exactly_once
        else (lambda: end_offsets(target, topic, partitions))
    )
    start = time.perf_counter()
    mirror = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while arrived() < messages:
        if mirror.poll() is not None:
            raise RuntimeError(f"mirror exited: {mirror.stderr.read().decode() if mirror.stderr else ''}")
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    mirror.send_signal(signal.SIGTERM)
    _, err = mirror.communicate(timeout=60)
    volume = messages * (size + len(b"key-000")) / 1e6
    mode = "exactly once " if exactly_once else "at least once"
    print(
        f"{size:>5}-byte values, {partitions} partitions, {mode}: {messages} records in {seconds:.2f} s = "
        f"{messages / seconds:,.0f} records/s, {volume / seconds:.1f} MB/s (including process start and group join)"
    )
    print("   ", err.decode().strip().splitlines()[-1])
    return messages / seconds


def kcat_pipe_run(source: str, target: str, topic: str, partitions: int, messages: int, size: int) -> float:
    """``kcat -C ... | kcat -P ...`` copying ``topic`` (keys and values, tab-separated lines) into ``<topic>-kcat`` on
    the target: records/s from the start of both processes to the producer's exit (all acknowledged)."""
    copy = f"{topic}-kcat"
    admin = AdminClient({"bootstrap.servers": target})
    admin.create_topics([NewTopic(copy, partitions, 1)])[copy].result(30)
    start = time.perf_counter()
    reader = subprocess.Popen(
        ["kcat", "-C", "-b", source, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k\t%s\n"],
        stdout=subprocess.PIPE,
    )
    writer = subprocess.Popen(["kcat", "-P", "-b", target, "-t", copy, "-K", "\t"], stdin=reader.stdout)
    assert reader.stdout is not None
    reader.stdout.close()  # the writer holds the pipe: it sees the end when the reader exits
    if writer.wait(600) != 0 or reader.wait(60) != 0:
        raise RuntimeError("the kcat pipe failed")
    seconds = time.perf_counter() - start
    copied = end_offsets(target, copy, partitions)
    if copied != messages:
        raise RuntimeError(f"the kcat pipe copied {copied} of {messages} records")
    print(f"{size:>5}-byte values, {partitions} partitions, kcat pipe    : {messages / seconds:,.0f} records/s")
    return messages / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        source, source_bootstrap = start_broker(tmp / "source")
        target, target_bootstrap = start_broker(tmp / "target")
        eos_target, eos_bootstrap = start_broker(tmp / "eos-target")
        try:
            for size in args.size:
                topic = f"bench-{size}"
                fill(source_bootstrap, topic, args.partitions, args.messages, size)
                pipe = kcat_pipe_run(source_bootstrap, target_bootstrap, topic, args.partitions, args.messages, size)
                rates = [
                    mirror_run(tmp, source_bootstrap, bootstrap, topic, args.partitions, args.messages, size, eos)
                    for bootstrap, eos in ((target_bootstrap, False), (eos_bootstrap, True))
                ]
                print(f"    at least once / kcat pipe = {rates[0] / pipe:.2f} (target >= 1.0)")
                print(f"    exactly once / at least once = {rates[1] / rates[0]:.2f}")
        finally:
            for broker in (source, target, eos_target):
                broker.send_signal(signal.SIGTERM)
                broker.wait(30)


if __name__ == "__main__":
    main()
