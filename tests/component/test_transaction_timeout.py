"""Transaction timeouts on the broker's clock: an open transaction is aborted (its producer fenced) once the clock
passes its transaction.timeout.ms and the next abort check runs, never by the wall clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mq.server.clock import ManualClock

TIMEOUT_MS = 60_000
CHECK_MS = 10_000


def last_stable_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition("slow", 0), timeout=10)[1])
    finally:
        consumer.close()


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    in_process_broker: Callable[..., Any], tmp_path: Path
) -> None:
    broker = in_process_broker(
        [
            f"log.dirs={tmp_path / 'logs'}",
            f"transaction.abort.timed.out.transaction.cleanup.interval.ms={CHECK_MS}",
        ],
        ManualClock(),
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("slow", 1, 1)])["slow"].result(15)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "tx-slow",
            "transaction.timeout.ms": TIMEOUT_MS,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("slow", value=b"never committed")
    producer.flush(10)
    assert last_stable_offset(broker.bootstrap) == 0

    broker.advance(TIMEOUT_MS - CHECK_MS)  # checks run, the transaction is not old enough yet
    assert last_stable_offset(broker.bootstrap) == 0
    broker.advance(2 * CHECK_MS)
    deadline = time.monotonic() + 20
    while last_stable_offset(broker.bootstrap) != 2 and time.monotonic() < deadline:  # the record and the marker
        time.sleep(0.1)
    assert last_stable_offset(broker.bootstrap) == 2
    try:
        producer.commit_transaction(10)
    except KafkaException as exc:
        assert exc.args[0].fatal() or exc.args[0].txn_requires_abort()
    else:
        raise AssertionError("the fenced producer committed")
