"""mq transactions against a broker process and confluent-kafka's transactional producer: list and describe an open
transaction, describe the producers of its partitions, abort it on one partition by its start offset (a
read_committed consumer then reads past it), and the coordinator's view after the producer commits."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.slow


ABORT_PARTITION_0 = ("--topic", "txcli", "--partition", "0", "--start-offset", "0")


def transactions(mq_command: list[str], bootstrap: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*mq_command, "transactions", "--bootstrap-server", bootstrap, *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()] if done.stdout.strip() else []


def rows(found: Any) -> list[dict[str, Any]]:
    return found if isinstance(found, list) else [found]


def test_an_open_transaction_is_listed_described_and_aborted_on_a_partition(broker, mq_command) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("txcli", 2, 1)])["txcli"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-cli"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce("txcli", value=b"open", partition=partition)
    assert producer.flush(15) == 0

    def only(*args: str) -> list[dict[str, Any]]:
        return [row for found in transactions(mq_command, broker.bootstrap, *args) for row in rows(found)]

    listed = only("list")
    assert [(r["TransactionalId"], r["TransactionState"]) for r in listed] == [("tx-cli", "Ongoing")]
    producer_id = listed[0]["ProducerId"]
    (described,) = only("describe", "--transactional-id", "tx-cli")
    assert described["TransactionState"] == "Ongoing" and str(described["ProducerId"]) == str(producer_id)
    assert sorted(described["TopicPartitions"].split(",")) == ["txcli-0", "txcli-1"]
    (state,) = only("describe-producers", "--topic", "txcli", "--partition", "0")
    assert str(state["ProducerId"]) == str(producer_id) and str(state["CurrentTransactionStartOffset"]) == "0"

    aborted = subprocess.run(
        [*mq_command, "transactions", "--bootstrap-server", broker.bootstrap, "abort", *ABORT_PARTITION_0],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert aborted.returncode == 0, aborted.stderr
    (state,) = only("describe-producers", "--topic", "txcli", "--partition", "0")
    assert str(state["CurrentTransactionStartOffset"]) == "None"
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "txcli-reader", "isolation.level": "read_committed"}
    )
    _, high = consumer.get_watermark_offsets(TopicPartition("txcli", 0), timeout=15)
    assert high == 2  # the aborted record and its marker: nothing open below the end any more
    still_open = consumer.get_watermark_offsets(TopicPartition("txcli", 1), timeout=15)
    assert still_open[1] == 0  # partition 1 is still in the open transaction
    consumer.close()

    producer.commit_transaction(15)
    (described,) = only("describe", "--transactional-id", "tx-cli")
    assert described["TransactionState"] == "CompleteCommit" and described["TopicPartitions"] == ""


def test_end_offsets_of_the_offset_tools_honour_read_committed(broker, mq_command, tmp_path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("iso", 1, 1)])["iso"].result(15)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(2):
        plain.produce("iso", value=b"plain %d" % i)
    assert plain.flush(15) == 0
    open_txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "iso-tx"})
    open_txn.init_transactions(15)
    open_txn.begin_transaction()
    for i in range(3):
        open_txn.produce("iso", value=b"pending %d" % i)
    assert open_txn.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "iso-g", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("iso", 0, 1)], asynchronous=False)
    consumer.close()
    committed = tmp_path / "read-committed.properties"
    committed.write_text("isolation.level=read_committed\n")

    def run(*args: str) -> list[str]:
        done = subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    offsets = ["get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "iso"]
    assert run(*offsets) == ["iso:0:5"]
    assert run(*offsets, "--command-config", str(committed)) == ["iso:0:2"]  # the last stable offset
    describe = ["consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "iso-g"]
    rows = [line.split() for line in run(*describe, "--format", "text") if line.startswith("iso-g")]
    assert [row[2:6] for row in rows] == [["0", "1", "5", "4"]]
    rows = [
        line.split()
        for line in run(*describe, "--command-config", str(committed), "--format", "text")
        if line.startswith("iso-g")
    ]
    assert [row[2:6] for row in rows] == [["0", "1", "2", "1"]]
    open_txn.abort_transaction(15)
