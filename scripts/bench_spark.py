"""Reading a topic into Parquet through the PySpark data source mq: records/s and MB/s.

Starts a fresh mq broker on a free loopback port (or uses ``--bootstrap-server``), fills a topic with N records of
``--size``-byte values with confluent-kafka, then runs ``spark.read.format("mq") ... .write.parquet(...)`` on a
local session ``--runs`` times (the first run carries the session's one-time Python worker start-up) and a plain
``count()`` of the same read. MB/s counts value bytes. With ``--topic`` an existing topic (holding ``--messages``
records of ``--size`` bytes) is read instead of a new one filled: runs of two ``mq`` versions (``PYTHONPATH``) can
then read the same data from the same broker.

    python scripts/bench_spark.py [--messages 1000000] [--size 100] [--partitions 2] [--master local[2]]
        [--bootstrap-server HOST:PORT [--topic NAME]]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench_confluent import free_port, start_broker
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import mq.spark


def fill(bootstrap: str, topic: str, partitions: int, messages: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20})
    payload = b"x" * size
    start = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, payload, str(i).encode())
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return time.perf_counter() - start


def report(label: str, seconds: float, rows: int, value_bytes: int) -> None:
    print(
        f"{label}: {rows} rows in {seconds:.2f} s = {rows / seconds:,.0f} rows/s, {value_bytes / seconds / 1e6:.1f} MB/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--bootstrap-server", help="use this broker instead of starting one")
    parser.add_argument("--topic", help="read this topic of --bootstrap-server, already filled, instead of a new one")
    args = parser.parse_args()
    if args.topic is not None and args.bootstrap_server is None:
        parser.error("--topic needs --bootstrap-server")
    with tempfile.TemporaryDirectory() as tmp:
        broker = None
        bootstrap = args.bootstrap_server
        if bootstrap is None:
            port = free_port()
            broker = start_broker(Path(tmp) / "logs", port)
            bootstrap = f"127.0.0.1:{port}"
        try:
            value_bytes = args.messages * args.size
            topic = args.topic
            if topic is None:
                topic = f"bench-spark-{int(time.time())}"
                produce_s = fill(bootstrap, topic, args.partitions, args.messages, args.size)
                report(f"produce (confluent-kafka) into {topic}", produce_s, args.messages, value_bytes)
            spark = mq.spark.session(args.master, "mq-bench")
            df = spark.read.format("mq").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
            for run in range(args.runs):
                out = Path(tmp) / f"parquet-{run}"
                start = time.perf_counter()
                df.write.mode("overwrite").parquet(str(out))
                seconds = time.perf_counter() - start
                written = sum(f.stat().st_size for f in out.glob("*.parquet"))
                report(
                    f"read -> Parquet, run {run + 1} ({written / 1e6:.0f} MB of Parquet)",
                    seconds,
                    args.messages,
                    value_bytes,
                )
            start = time.perf_counter()
            counted = df.count()
            report("read -> count()", time.perf_counter() - start, counted, value_bytes)
            spark.stop()
        finally:
            if broker is not None:
                broker.terminate()
                broker.wait(30)


if __name__ == "__main__":
    main()
