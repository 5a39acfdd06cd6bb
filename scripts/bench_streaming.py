"""End-to-end latency of a Spark micro-batch stream reading mq: produce -> row visible to the query's sink.

Starts a fresh mq broker (or uses ``--bootstrap-server``), creates a topic of ``--partitions`` partitions and runs
``spark.readStream.format("mq")`` on a local session with a ``foreachBatch`` sink (the driver sees each micro-batch's
rows once the batch ran) and the default trigger (the next micro-batch as soon as the last one finished). A
confluent-kafka producer sends ``--rate`` records/s for ``--seconds`` (acks=1, linger.ms 5), each value holding its
send time; the sink records, for every row, the time it saw it minus that send time. Printed: p50, p90, p99 and max
of those latencies over the rows after the first ``--warmup`` seconds (the stream's start-up), the records per
micro-batch, and the rate the producer reached. Target: p50 < 1 s at 10,000 records/s.

    python scripts/bench_streaming.py [--rate 10000] [--seconds 30] [--warmup 5] [--partitions 4]
        [--master local[2]] [--bootstrap-server HOST:PORT]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import threading
import time
from typing import Any

from bench_confluent import broker_unless, create_topic
from confluent_kafka import Producer

import mq.spark

STAMP = struct.Struct(">d")
"""The send time (seconds since the epoch) at the start of each value."""


def produce(bootstrap: str, topic: str, rate: float, seconds: float, stop: threading.Event) -> float:
    """Send ``rate`` records/s for ``seconds`` (100-byte values: the send time, padded); the rate reached."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
    start, sent = time.time(), 0
    while not stop.is_set() and time.time() - start < seconds:
        due = int((time.time() - start) * rate)
        while sent < due:
            producer.produce(topic, STAMP.pack(time.time()) + b"x" * 92)
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(30)
    return sent / (time.time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap-server", help="use this broker instead of starting one")
    args = parser.parse_args()
    with broker_unless(args.bootstrap_server) as bootstrap:
        topic = f"bench-streaming-{int(time.time())}"
        create_topic(bootstrap, topic, args.partitions)
        spark = mq.spark.session(args.master, "mq-bench-streaming")
        latencies: list[tuple[float, float]] = []  # (send time, latency)
        batch_rows: list[int] = []

        def sink(df: Any, batch_id: int) -> None:
            values = [row.value for row in df.select("value").collect()]
            now = time.time()
            batch_rows.append(len(values))
            latencies.extend((sent, now - sent) for (sent,) in (STAMP.unpack_from(v) for v in values))

        stream = (
            spark.readStream.format("mq")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        query = stream.writeStream.foreachBatch(sink).start()
        time.sleep(5)  # the query's first (empty) batches ran: its start-up is not the records' latency
        stop = threading.Event()
        began = time.time()
        reached = produce(bootstrap, topic, args.rate, args.seconds, stop)
        deadline = time.time() + 60
        expected = int(reached * (time.time() - began))
        while len(latencies) < expected * 0.99 and time.time() < deadline:
            time.sleep(0.2)
        query.processAllAvailable()  # stopped between micro-batches: a batch cut short fails noisily in the JVM
        query.stop()
        spark.stop()
        measured = sorted(latency for sent, latency in latencies if sent >= began + args.warmup)
        if not measured:
            raise SystemExit("no row arrived after the warm-up")

        def quantile(q: float) -> float:
            return measured[min(len(measured) - 1, int(q * len(measured)))]

        busy = [n for n in batch_rows if n]
        print(f"producer: {reached:,.0f} records/s for {args.seconds:g} s; {len(latencies):,} rows seen")
        print(
            f"micro-batches with rows: {len(busy)}, rows per batch median {statistics.median(busy):,.0f}"
            if busy
            else "no micro-batch had rows"
        )
        print(
            f"latency produce -> sink over {len(measured):,} rows after {args.warmup:g} s: "
            f"p50 {quantile(0.5) * 1000:.0f} ms, p90 {quantile(0.9) * 1000:.0f} ms, "
            f"p99 {quantile(0.99) * 1000:.0f} ms, max {measured[-1] * 1000:.0f} ms (target p50 < 1000 ms)"
        )


if __name__ == "__main__":
    main()
