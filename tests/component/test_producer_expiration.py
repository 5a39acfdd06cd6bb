"""Producer id expiration on the broker's clock: a partition forgets an idempotent producer once its last batch is
producer.id.expiration.ms old and the next check runs, keeps a producer whose transaction is open however old, and
takes the forgotten producer's next batch as an unknown producer's (Kafka 2.5+: any sequence is accepted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mq.server.clock import ManualClock

EXPIRATION_MS = 300_000
CHECK_MS = 10_000
TXN_TIMEOUT_MS = 900_000
"""The largest a producer may ask for: its transaction stays open while the clock is driven past the expiration."""


def producer_ids(bootstrap: str) -> set[int]:
    """The producer ids DescribeProducers lists for idle-0 at its leader (``mq transactions describe-producers``)."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mq", "transactions", "--bootstrap-server", bootstrap, "describe-producers"),
            *("--topic", "idle", "--partition", "0", "--format", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout) if done.stdout.strip() else []
    return {int(row["ProducerId"]) for row in (found if isinstance(found, list) else [found])}


def delivered(producer: Producer, value: bytes) -> None:
    errors: list[Any] = []
    producer.produce("idle", value=value, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [None]


def test_idle_producers_expire_and_open_transactions_keep_theirs(
    in_process_broker: Callable[..., Any], tmp_path: Path
) -> None:
    broker = in_process_broker(
        [
            f"log.dirs={tmp_path / 'logs'}",
            f"producer.id.expiration.ms={EXPIRATION_MS}",
            f"producer.id.expiration.check.interval.ms={CHECK_MS}",
        ],
        ManualClock(int(time.time() * 1000)),  # batches carry the wall clock's timestamps
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("idle", 1, 1)])["idle"].result(15)
    idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(3):
        delivered(idempotent, b"idempotent %d" % i)
    transactional = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "tx-idle",
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
        }
    )
    transactional.init_transactions(30)
    transactional.begin_transaction()
    delivered(transactional, b"open")
    both = producer_ids(broker.bootstrap)
    assert len(both) == 2

    broker.advance(EXPIRATION_MS - 60_000)  # checks run; nothing is that old yet
    assert producer_ids(broker.bootstrap) == both
    broker.advance(2 * 60_000 + 2 * CHECK_MS)
    (open_txn,) = producer_ids(broker.bootstrap)  # the idempotent producer is forgotten
    (idle,) = both - {open_txn}

    delivered(idempotent, b"after expiration")  # its next sequence (3) is an unknown producer's, accepted
    assert producer_ids(broker.bootstrap) == {idle, open_txn}
    transactional.commit_transaction(30)
