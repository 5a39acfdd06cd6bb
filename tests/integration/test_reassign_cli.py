"""``mq reassign-partitions`` and ``mq leader-election`` as subprocesses against three brokers on a real ZooKeeper."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow


@pytest.fixture
def brokers(zookeeper, broker_factory):  # type: ignore[no-untyped-def]
    """Three brokers (ids 1..3) under a fresh chroot; yields (connect string, bootstrap, zk client)."""
    connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
    started = [broker_factory(f"b{i}", [f"zookeeper.connect={connect}", f"broker.id={i}"]).start() for i in (1, 2, 3)]
    store = ZooKeeperStore(connect)
    yield connect, ",".join(b.bootstrap for b in started), KafkaZkClient(store)
    store.close()


def eventually(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def run(mq_command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=120)


def create_topic(bootstrap: str, zk: KafkaZkClient, name: str, assignment: dict[int, list[int]]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, -1, -1, replica_assignments=assignment)])
    admin.close()
    assert eventually(lambda: all(zk.get_partition_state(name, p) is not None for p in assignment))
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(200):
        producer.send(name, value=b"x" * 512, partition=i % len(assignment))
    producer.flush()
    producer.close()


def plan(path: Path, topic: str, moves: dict[int, list[int]]) -> str:
    partitions = [{"topic": topic, "partition": p, "replicas": r} for p, r in moves.items()]
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


def test_zookeeper_generate_execute_throttle_verify(brokers, mq_command: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    connect, bootstrap, zk = brokers
    create_topic(bootstrap, zk, "moving", {0: [1, 2], 1: [2, 1]})
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": [{"topic": "moving"}], "version": 1}')
    generated = run(
        mq_command, "reassign-partitions", "--zookeeper", connect, "--generate",
        "--topics-to-move-json-file", str(topics), "--broker-list", "2,3",
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1])["partitions"][0] == {
        "topic": "moving", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"],
    }  # fmt: skip
    proposed = json.loads(lines[4])["partitions"]
    assert [sorted(p["replicas"]) for p in proposed] == [[2, 3], [2, 3]]

    moves = plan(tmp_path / "moves.json", "moving", {0: [3, 2], 1: [2, 3]})
    executed = run(
        mq_command, "reassign-partitions", "--zookeeper", connect, "--execute",
        "--reassignment-json-file", moves, "--throttle", "10000000",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert executed.stdout.splitlines()[-2:] == [
        "The inter-broker throttle limit was set to 10000000 B/s",
        "Successfully started reassignment of partitions.",
    ]
    assert zk.get_entity_config("topics", "moving")["follower.replication.throttled.replicas"] == "0:3,1:3"
    assert zk.get_entity_config("brokers", "3")["leader.replication.throttled.rate"] == "10000000"

    def verified() -> bool:
        result = run(mq_command, "reassign-partitions", "--zookeeper", connect, "--verify",
                     "--reassignment-json-file", moves)  # fmt: skip
        return result.stdout.splitlines() == [
            "Status of partition reassignment: ",
            "Reassignment of partition moving-0 completed successfully",
            "Reassignment of partition moving-1 completed successfully",
            "Throttle was removed.",
        ]

    assert eventually(verified, timeout=90)
    assert zk.get_topic_assignment("moving").partitions == {0: [3, 2], 1: [2, 3]}  # type: ignore[union-attr]
    assert "follower.replication.throttled.replicas" not in zk.get_entity_config("topics", "moving")
    assert zk.get_entity_config("brokers", "3") == {}
    state = zk.get_partition_state("moving", 0)
    assert state is not None and set(state[0].isr) == {2, 3}

    back = plan(tmp_path / "back.json", "moving", {0: [1, 2]})
    waited = run(mq_command, "reassign-partitions", "--zookeeper", connect, "--execute",
                 "--reassignment-json-file", back, "--wait", "--wait-interval", "0.3")  # fmt: skip
    assert waited.returncode == 0, waited.stdout + waited.stderr
    out = waited.stdout.splitlines()
    assert "1/1 partitions reassigned, 1/1 new replicas in sync, " in out[-3]
    assert out[-2:] == [
        "Status of partition reassignment: ",
        "Reassignment of partition moving-0 completed successfully",
    ]


def test_bootstrap_execute_wait_list_cancel_and_leader_election(brokers, mq_command: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, bootstrap, zk = brokers
    create_topic(bootstrap, zk, "grow", {0: [1], 1: [2]})
    listed = run(mq_command, "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert (listed.returncode, listed.stdout) == (0, "No partition reassignments found.\n")
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics": [{"topic": "grow"}]}')
    generated = run(mq_command, "reassign-partitions", "--bootstrap-server", bootstrap, "--generate",
                    "--topics-to-move-json-file", str(topics), "--broker-list", "3")  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    assert generated.stdout.splitlines()[3:] == [
        "Proposed partition reassignment configuration",
        '{"version":1,"partitions":[{"topic":"grow","partition":0,"replicas":[3],"log_dirs":["any"]},'
        '{"topic":"grow","partition":1,"replicas":[3],"log_dirs":["any"]}]}',
    ]

    moves = plan(tmp_path / "moves.json", "grow", {0: [2, 1, 3], 1: [2]})
    executed = run(
        mq_command, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
        "--reassignment-json-file", moves, "--throttle", "50000000", "--wait", "--wait-interval", "0.3",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stdout + executed.stderr
    out = executed.stdout.splitlines()
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert "Successfully started partition reassignments for grow-0,grow-1" in out
    progress = [line.split("] ", 1)[1] for line in out if "partitions reassigned" in line]
    assert progress and progress[-1].startswith("2/2 partitions reassigned, 2/2 new replicas in sync, ")
    copied, total = progress[-1].split(", ")[2].removesuffix(" copied").split(" of ")
    assert copied == total and total.endswith("KB")  # two new replicas of grow-0's ~100 KB log
    assert out[-5:] == [
        "Status of partition reassignment:",
        "Reassignment of partition grow-0 is complete.",
        "Reassignment of partition grow-1 is complete.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic grow",
    ]
    assert zk.get_topic_assignment("grow").partitions == {0: [2, 1, 3], 1: [2]}  # type: ignore[union-attr]
    assert all(zk.get_entity_config("brokers", str(b)) == {} for b in (1, 2, 3))
    assert "follower.replication.throttled.replicas" not in zk.get_entity_config("topics", "grow")

    cancelled = run(mq_command, "reassign-partitions", "--bootstrap-server", bootstrap, "--cancel",
                    "--reassignment-json-file", moves, "--preserve-throttles")  # fmt: skip
    assert cancelled.stdout.splitlines() == ["None of the specified partition reassignments are active."]

    def leader() -> int:
        state = zk.get_partition_state("grow", 0)
        return -1 if state is None else state[0].leader

    assert leader() == 1  # still in the target replicas, so it kept leadership
    elect = ["leader-election", "--bootstrap-server", bootstrap, "--election-type", "Preferred"]
    single = run(mq_command, *elect, "--topic", "grow", "--partition", "0")
    assert single.returncode == 0, single.stderr
    assert single.stdout.splitlines() == ["Successfully completed leader election (PREFERRED) for partitions grow-0"]
    assert eventually(lambda: leader() == 2)
    again = run(mq_command, *elect, "--topic", "grow", "--partition", "0")
    assert again.stdout.splitlines() == ["Valid replica already elected for partitions grow-0"]
    everything = run(mq_command, *elect, "--all-topic-partitions")
    assert (everything.returncode, everything.stdout) == (0, "")  # every leader is already the preferred one
    missing = run(mq_command, *elect, "--topic", "grow", "--partition", "7")
    assert missing.returncode == 1
    assert missing.stdout.startswith("Error completing leader election (PREFERRED) for partition: grow-7: ")
    assert missing.stderr.strip() == "Error: 1 replica(s) could not be elected"
