"""mq's Python client producing 100 B records against confluent-kafka (librdkafka) from the same Python process.

Starts a fresh mq broker (or uses ``--bootstrap-server``) and, for ``--rounds`` rounds, alternating which goes
first, produces ``--records`` records of ``--size`` bytes (no key, acks=1) to a new topic of ``--partitions``
partitions with:

- mq: ``AsyncProducer.send_many`` in chunks of ``--chunk`` records (how mirror, replay and the Spark sink hand it
  records), ``batch_size`` 1 MiB and ``linger_ms`` 5;
- confluent-kafka: ``Producer.produce`` per record with ``poll(0)`` as its buffer asks, ``batch.size`` 1 MiB and
  ``linger.ms`` 5, then ``flush``.

Each run is timed from the first record handed over to the last acknowledged; each round prints both rates and
their ratio, the closing line the median ratio (target >= 0.5).

    python scripts/bench_client_produce.py [--records 1000000] [--size 100] [--partitions 1] [--rounds 3]
        [--chunk 10000] [--bootstrap-server HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench_confluent import broker_unless, create_topic
from confluent_kafka import Producer

from mq.client.producer import AsyncProducer

BATCH_BYTES = 1024 * 1024
LINGER_MS = 5


def produce_mq(bootstrap: str, topic: str, records: int, size: int, chunk: int) -> float:
    """Seconds for mq's producer to have ``records`` records acknowledged."""
    payload = b"x" * size

    async def run() -> float:
        async with AsyncProducer(bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES) as producer:
            await producer.partitions_for(topic)  # metadata before the clock starts, as confluent's warm-up
            start = time.perf_counter()
            futures = []
            for first in range(0, records, chunk):
                rows = [(None, payload, (), None)] * min(chunk, records - first)
                futures.append(await producer.send_many(topic, rows))
                if len(futures) > 4:  # a bounded backlog, as a mirror's
                    await futures.pop(0)
            for future in futures:
                await future
            return time.perf_counter() - start

    return asyncio.run(run())


def produce_confluent(bootstrap: str, topic: str, records: int, size: int) -> float:
    """Seconds for confluent-kafka to have ``records`` records acknowledged."""
    payload = b"x" * size
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": LINGER_MS, "batch.size": BATCH_BYTES})
    producer.list_topics(topic, 10)  # metadata before the clock starts
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("confluent-kafka did not deliver every record")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--bootstrap-server", help="use this broker instead of starting one")
    args = parser.parse_args()
    with broker_unless(args.bootstrap_server) as bootstrap:
        ratios = []
        for run in range(args.rounds):
            rates = {}
            order = ["mq", "confluent"] if run % 2 == 0 else ["confluent", "mq"]
            for client in order:
                topic = f"bench-client-{client}-{run}-{int(time.time())}"
                create_topic(bootstrap, topic, args.partitions)
                if client == "mq":
                    seconds = produce_mq(bootstrap, topic, args.records, args.size, args.chunk)
                else:
                    seconds = produce_confluent(bootstrap, topic, args.records, args.size)
                rates[client] = args.records / seconds
            ratios.append(rates["mq"] / rates["confluent"])
            print(
                f"round {run + 1}: mq {rates['mq']:,.0f} records/s, confluent-kafka {rates['confluent']:,.0f} "
                f"records/s, ratio {ratios[-1]:.2f}",
                flush=True,
            )
        print(
            f"median ratio mq / confluent-kafka over {args.rounds} rounds ({args.records:,} records of "
            f"{args.size} B, {args.partitions} partition(s)): {statistics.median(ratios):.2f} (target >= 0.5)"
        )


if __name__ == "__main__":
    main()
