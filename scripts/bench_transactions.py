"""Transactional produce against the idempotent producer, in one run on one fresh mq broker (confluent-kafka).

Each round produces ``--records`` 100-byte records to a one-partition topic twice, alternating which goes first:
with an idempotent producer (acks=all, one flush at the end), and with a transactional one committing every
``--per-transaction`` records (begin, produce, commit). Prints each round's records/s and the transactional rate as a
ratio of the idempotent rate measured in the same round, then the median ratio and the broker's CPU seconds per
million records for each mode.

    python scripts/bench_transactions.py [--records 500000] [--per-transaction 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench import cpu_seconds, create_topic, mq_broker
from confluent_kafka import Producer

PAYLOAD = b"x" * 100


def produce(producer: Producer, topic: str) -> None:
    """Queue one record, waiting for room in the producer's queue when it is full."""
    while True:
        try:
            producer.produce(topic, PAYLOAD)
            return
        except BufferError:
            producer.poll(0.01)


def idempotent(bootstrap: str, topic: str, records: int) -> float:
    """Records/s of an idempotent producer sending ``records`` records and flushing once (timed once it has its
    producer id, as the transactional one is timed after ``init_transactions``)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    producer.produce(topic, PAYLOAD)  # connected, with its producer id, before the clock starts
    if producer.flush(30) != 0:
        raise RuntimeError("idempotent producer: the first record was not delivered")
    start = time.perf_counter()
    for _ in range(records):
        produce(producer, topic)
    if producer.flush(120) != 0:
        raise RuntimeError("idempotent producer: records left undelivered")
    return records / (time.perf_counter() - start)


def transactional(bootstrap: str, topic: str, records: int, per_transaction: int, transactional_id: str) -> float:
    """Records/s of a transactional producer committing every ``per_transaction`` records."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(30)
    start = time.perf_counter()
    sent = 0
    while sent < records:
        producer.begin_transaction()
        for _ in range(min(per_transaction, records - sent)):
            produce(producer, topic)
            sent += 1
        producer.commit_transaction(60)
    return records / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--per-transaction", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory, mq_broker(Path(directory)) as (bootstrap, pid):
        ratios: list[float] = []
        cpu = {"idempotent": 0.0, "transactional": 0.0}
        for round_ in range(args.rounds):
            rates: dict[str, float] = {}
            order = ["idempotent", "transactional"] if round_ % 2 == 0 else ["transactional", "idempotent"]
            for mode in order:
                topic = f"{mode}-{round_}"
                create_topic(bootstrap, topic, 1)
                before = cpu_seconds(pid)
                if mode == "idempotent":
                    rates[mode] = idempotent(bootstrap, topic, args.records)
                else:
                    rates[mode] = transactional(bootstrap, topic, args.records, args.per_transaction, f"tx-{round_}")
                cpu[mode] += cpu_seconds(pid) - before
            ratio = rates["transactional"] / rates["idempotent"]
            ratios.append(ratio)
            print(
                f"round {round_ + 1}: idempotent {rates['idempotent']:,.0f} records/s, transactional "
                f"({args.per_transaction} per transaction) {rates['transactional']:,.0f} records/s, ratio {ratio:.3f}",
                flush=True,
            )
        total = args.records * args.rounds / 1e6
        print(f"median ratio transactional/idempotent: {statistics.median(ratios):.3f}")
        print(
            f"broker CPU s per million records: idempotent {cpu['idempotent'] / total:.2f}, "
            f"transactional {cpu['transactional'] / total:.2f}"
        )


if __name__ == "__main__":
    main()
