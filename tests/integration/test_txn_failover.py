"""Producer state and aborted transactions across a leader failover, on 3 brokers and real ZooKeeper: followers of an
RF-3 partition whose small segments roll keep the leader's transaction index, roll snapshots and producers as they
replicate (DescribeProducers on each follower lists what the leader lists); after the leader is killed with SIGKILL,
a read_committed consumer reads exactly the committed records from the new leader, which still knows the
producers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mq.storage.producer_snapshot import list_snapshot_offsets
from mq.storage.txn_index import iter_aborted_txns
from tests.integration.test_transactions import read_all
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.slow

TOPIC = "failover"
TRANSACTIONS = 12
RECORDS = 5


def leader_and_isr(bootstrap: str) -> tuple[int, list[int]]:
    """The partition's leader and ISR as the broker asked sees them; (-1, []) while it does not know the partition
    yet (a broker learns of a created topic from ZooKeeper, after the controller answered CreateTopics)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.get(0)
    return (-1, []) if partition is None else (partition.leader, sorted(partition.isrs))


def aborted_txns(log_dir: Path) -> list[tuple[int, int, int, int]]:
    """Every entry of the partition's transaction indexes on one broker, in offset order."""
    found = []
    for index in sorted((log_dir / f"{TOPIC}-0").glob("*.txnindex")):
        found += [
            (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in iter_aborted_txns(index.read_bytes())
        ]
    return found


def producers(mq_command: list[str], bootstrap: str, broker_id: int | None = None) -> list[dict[str, Any]]:
    """``mq transactions describe-producers`` of the partition at its leader, or at ``broker_id``'s replica."""
    where = [] if broker_id is None else ["--broker-id", str(broker_id)]
    done = subprocess.run(
        [
            *(*mq_command, "transactions", "--bootstrap-server", bootstrap, "describe-producers"),
            *("--topic", TOPIC, "--partition", "0", *where, "--format", "json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout) if done.stdout.strip() else []
    return sorted(found if isinstance(found, list) else [found], key=lambda row: int(row["ProducerId"]))


def test_a_new_leader_serves_only_committed_records_and_knows_the_producers(cluster, mq_command) -> None:
    _, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"segment.bytes": "2048", "min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=config)])[TOPIC].result(30)
    leader = -1

    def whole_isr() -> bool:
        nonlocal leader
        leader, isr = leader_and_isr(bootstrap)
        return isr == [1, 2, 3]

    assert wait_for(whole_isr)

    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-failover", "linger.ms": 5})
    transactional.init_transactions(30)
    committed: list[bytes] = []
    for t in range(TRANSACTIONS):
        values = [b"txn %02d record %d " % (t, i) + b"x" * 100 for i in range(RECORDS)]
        transactional.begin_transaction()
        for value in values:
            transactional.produce(TOPIC, value=value, partition=0)
        assert transactional.flush(30) == 0  # an abort drops records not yet sent: these were written
        if t % 3 == 1:
            transactional.abort_transaction(30)
        else:
            transactional.commit_transaction(30)
            committed += values
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(RECORDS):
        value = b"idempotent %d" % i
        idempotent.produce(TOPIC, value=value, partition=0)
        committed.append(value)
    assert idempotent.flush(30) == 0

    followers = [b for i, b in enumerate(brokers, 1) if i != leader]
    on_leader = brokers[leader - 1].log_dir
    assert len(aborted_txns(on_leader)) == TRANSACTIONS // 3
    assert wait_for(lambda: all(aborted_txns(b.log_dir) == aborted_txns(on_leader) for b in followers))
    assert len(list_snapshot_offsets(on_leader / f"{TOPIC}-0")) >= 3  # the small segments rolled
    assert wait_for(
        lambda: all(
            list_snapshot_offsets(b.log_dir / f"{TOPIC}-0") == list_snapshot_offsets(on_leader / f"{TOPIC}-0")
            for b in followers
        )
    )
    described = producers(mq_command, bootstrap)
    assert len(described) == 2  # the transactional and the idempotent producer
    for broker_id in (i for i in (1, 2, 3) if i != leader):
        assert wait_for(lambda broker_id=broker_id: producers(mq_command, bootstrap, broker_id) == described)

    brokers[leader - 1].kill()
    alive = ",".join(b.bootstrap for b in followers)
    assert wait_for(lambda: leader_and_isr(alive)[0] not in (leader, -1), timeout=60)
    assert sorted(read_all(alive, TOPIC, 1, "read_committed", len(committed))) == sorted(committed)
    survived = [(p["ProducerId"], p["ProducerEpoch"], p["LastSequence"]) for p in producers(mq_command, alive)]
    assert survived == [(p["ProducerId"], p["ProducerEpoch"], p["LastSequence"]) for p in described]
