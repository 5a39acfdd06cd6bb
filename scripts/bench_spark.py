"""Reading a topic through the PySpark data source mq, against librdkafka reading it into pyarrow: rows/s and ratios.

Starts a fresh mq broker on a free loopback port (or uses ``--bootstrap-server``), fills a topic with N records of
``--size``-byte values with confluent-kafka, then for ``--rounds`` rounds, in this order each round:

- the baseline: confluent-kafka (librdkafka) consuming the whole topic into pyarrow arrays (offset, timestamp, key,
  value) in two Python processes, each with half the partitions, and summing the value lengths; the clock runs from
  both processes being connected to both having every record;
- ``count()`` and ``sum(length(value))`` of ``spark.read.format("mq")`` on a local session (``--master``);
- ``mq export`` of the topic to Parquet (a new output each round, one chunk), compared with that round's ``count()``;
- the sink: ``df.write.format("mq")`` of as many ``--size``-byte values from ``spark.range`` into a new topic.

Each round prints the rates and Spark's ratio to the baseline of the same round; the closing lines give the medians.
With ``--topic`` an existing topic (holding ``--messages`` records of ``--size`` bytes) is read instead of a new one
filled: runs of two ``mq`` versions (``PYTHONPATH``) can then read the same data from the same broker.

    python scripts/bench_spark.py [--messages 2000000] [--size 100] [--partitions 4] [--master local[2]]
        [--rounds 3] [--bootstrap-server HOST:PORT [--topic NAME]]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from bench_confluent import broker_unless, create_topic
from confluent_kafka import Consumer, Producer, TopicPartition

import mq.spark
from mq.spark.export import ExportOptions, export

BASELINE_PROCESSES = 2
BASELINE_CONSUMER = {
    "group.id": "bench-baseline",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 1,
}
"""librdkafka tuned for a reader that keeps up: with its defaults a fetcher whose queue holds 100,000 messages waits
``fetch.queue.backoff.ms`` (1 s) before it fetches again, although the reader drains the queue in a fraction of that
(one process counting records: 160k records/s with the defaults, 1.2-1.5M with these)."""
CONSUME_BATCH = 1_000
"""Messages per ``consume`` call (the fastest of 500, 1,000 and 10,000 tried)."""
ARROW_BATCH = 20_000
"""Rows per pyarrow record batch (as the mq source's batches)."""


def fill(bootstrap: str, topic: str, partitions: int, messages: int, size: int) -> float:
    create_topic(bootstrap, topic, partitions)
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


def report(label: str, seconds: float, rows: int, value_bytes: int) -> float:
    rate = rows / seconds
    print(f"{label}: {rows} rows in {seconds:.2f} s = {rate:,.0f} rows/s, {value_bytes / seconds / 1e6:.1f} MB/s")
    return rate


def consume_into_arrow(
    bootstrap: str, topic: str, partitions: list[int], ends: dict[int, int], barrier: Barrier, results: Queue
) -> None:
    """One baseline process: ``partitions`` of ``topic`` from offset 0 to ``ends`` into pyarrow record batches, as
    a Python program would read a topic with librdkafka; puts (rows, sum of value lengths) on ``results``."""
    consumer = Consumer(BASELINE_CONSUMER | {"bootstrap.servers": bootstrap})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    consumer.consume(1, 0.1)  # connected before the clock starts (this record is read again below)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    barrier.wait()
    rows = value_bytes = 0
    left = {p for p in partitions if ends[p] > 0}
    while left:
        offsets, timestamps, keys, values = [], [], [], []
        while left and len(offsets) < ARROW_BATCH:
            for message in consumer.consume(CONSUME_BATCH, 1.0):
                if message.error() is not None:
                    continue  # the end of a partition: its last offset decides below
                offsets.append(message.offset())
                timestamps.append(message.timestamp()[1])
                keys.append(message.key())
                values.append(message.value())
                if message.offset() + 1 >= ends[message.partition()]:
                    left.discard(message.partition())
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(offsets, pa.int64()),
                pa.array(timestamps, pa.int64()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
            ],
            names=["offset", "timestamp", "key", "value"],
        )
        rows += batch.num_rows
        value_bytes += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
    consumer.close()
    results.put((rows, value_bytes))


def baseline(bootstrap: str, topic: str, partitions: int, ends: dict[int, int]) -> tuple[float, int, int]:
    """confluent-kafka into pyarrow in ``BASELINE_PROCESSES`` processes: (seconds, rows, value bytes)."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(BASELINE_PROCESSES + 1), context.Queue()
    shares = [list(range(partitions))[i::BASELINE_PROCESSES] for i in range(BASELINE_PROCESSES)]
    processes = [
        context.Process(target=consume_into_arrow, args=(bootstrap, topic, share, ends, barrier, results))
        for share in shares
    ]
    for process in processes:
        process.start()
    barrier.wait(60)
    start = time.perf_counter()
    done = [results.get(timeout=600) for _ in processes]
    seconds = time.perf_counter() - start
    for process in processes:
        process.join(30)
    return seconds, sum(rows for rows, _ in done), sum(size for _, size in done)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(partitions)}
    consumer.close()
    return ends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap-server", help="use this broker instead of starting one")
    parser.add_argument("--topic", help="read this topic of --bootstrap-server, already filled, instead of a new one")
    args = parser.parse_args()
    if args.topic is not None and args.bootstrap_server is None:
        parser.error("--topic needs --bootstrap-server")
    with tempfile.TemporaryDirectory() as tmp, broker_unless(args.bootstrap_server) as bootstrap:
        value_bytes = args.messages * args.size
        topic = args.topic
        if topic is None:
            topic = f"bench-spark-{int(time.time())}"
            produce_s = fill(bootstrap, topic, args.partitions, args.messages, args.size)
            report(f"produce (confluent-kafka) into {topic}", produce_s, args.messages, value_bytes)
        ends = end_offsets(bootstrap, topic, args.partitions)
        spark = mq.spark.session(args.master, "mq-bench")
        df = spark.read.format("mq").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
        df.limit(1).collect()  # the session's Python workers started before the first round
        ratios: dict[str, list[float]] = {"count()": [], "sum(length(value))": []}
        rates: dict[str, list[float]] = {
            "baseline": [],
            **{name: [] for name in ratios},
            "mq export": [],
            "mq sink": [],
        }
        sink_rows = spark.range(args.messages, numPartitions=args.partitions).selectExpr(
            f"CAST(repeat('x', {args.size}) AS BINARY) AS value"
        )
        export_ratios: list[float] = []
        for run in range(args.rounds):
            print(f"round {run + 1}", flush=True)
            seconds, rows, size = baseline(bootstrap, topic, args.partitions, ends)
            assert (rows, size) == (args.messages, value_bytes), (rows, size)
            base = report(f"  confluent-kafka into pyarrow, {BASELINE_PROCESSES} processes", seconds, rows, size)
            rates["baseline"].append(base)
            start = time.perf_counter()
            counted = df.count()
            rate = report("  mq source count()", time.perf_counter() - start, counted, value_bytes)
            rates["count()"].append(rate)
            ratios["count()"].append(rate / base)
            start = time.perf_counter()
            total = df.selectExpr("sum(length(value)) AS total").collect()[0]["total"]
            assert total == value_bytes, total
            rate = report("  mq source sum(length(value))", time.perf_counter() - start, args.messages, value_bytes)
            rates["sum(length(value))"].append(rate)
            ratios["sum(length(value))"].append(rate / base)
            print(
                f"  ratios to the baseline: count() {ratios['count()'][-1]:.2f}, sum {ratios['sum(length(value))'][-1]:.2f}"
            )
            sink = f"{topic}-sink-{run}"
            create_topic(bootstrap, sink, args.partitions)
            start = time.perf_counter()
            sink_rows.write.format("mq").option("kafka.bootstrap.servers", bootstrap).option("topic", sink).mode(
                "append"
            ).save()
            rate = report("  mq sink (df.write)", time.perf_counter() - start, args.messages, value_bytes)
            rates["mq sink"].append(rate)
            assert sum(end_offsets(bootstrap, sink, args.partitions).values()) == args.messages
            start = time.perf_counter()
            result = export(spark, ExportOptions(bootstrap, (topic,), str(Path(tmp) / f"export-{run}")))
            assert result.offsets == args.messages, result.offsets
            rate = report("  mq export to Parquet", time.perf_counter() - start, args.messages, value_bytes)
            rates["mq export"].append(rate)
            export_ratios.append(rate / rates["count()"][-1])
            print(f"  mq export / count() {export_ratios[-1]:.2f}", flush=True)
        print(
            f"\nmedians over {args.rounds} rounds ({args.messages:,} records of {args.size} B, "
            f"{args.partitions} partitions, {args.master}):"
        )
        for name, values in rates.items():
            line = f"  {name:<20} {statistics.median(values):>12,.0f} rows/s"
            if name in ratios:
                line += (
                    f"   x{statistics.median(ratios[name]):.2f} of the baseline (target >= 1.0, >= 1,000,000 rows/s)"
                )
            if name == "mq export":
                line += f"   x{statistics.median(export_ratios):.2f} of count() (target >= 0.8)"
            if name == "mq sink":
                line += "   (target >= 1,000,000 rows/s)"
            print(line)
        spark.stop()


if __name__ == "__main__":
    main()
