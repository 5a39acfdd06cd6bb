"""Several log dirs per broker (JBOD): placement of new partitions, DescribeLogDirs over every dir, and moving a
replica to another dir of its broker (AlterReplicaLogDirs, sent by kafka-python and by mq reassign-partitions) while
a producer keeps writing: nothing is lost and the data ends in the new dir, also after a restart, and in cluster mode
a follower's replica moves while it replicates."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition, TopicPartitionReplica
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
from waiting import wait_for

from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

RATE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"


def log_dirs_document(
    mq_command: list[str], bootstrap: str, broker_id: int = 0
) -> dict[str, dict[str, dict[str, object]]]:
    """``mq log-dirs --describe`` of one broker as {log dir: {partition (with "(future)" for future replicas):
    entry}}."""
    result = subprocess.run(
        [*mq_command, "log-dirs", "--bootstrap-server", bootstrap, "--describe", "--broker-list", str(broker_id)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    [broker] = json.loads(result.stdout.splitlines()[2])["brokers"]
    return {
        d["logDir"]: {p["partition"] + (" (future)" if p["isFuture"] else ""): p for p in d["partitions"]}
        for d in broker["logDirs"]
    }


class Writer:
    """Produces numbered records to one partition from a thread until stopped, at about 100 KB/s; remembers what
    was acknowledged."""

    def __init__(self, bootstrap: str, tp: TopicPartition) -> None:
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self.tp = tp
        self.acked: list[bytes] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"{n:08d}".encode() + b"." * 200
            future = self.producer.send(self.tp.topic, value, partition=self.tp.partition)
            future.add_callback(lambda _, v=value: self.acked.append(v))
            future.add_errback(self.errors.append)
            n += 1
            if n % 20 == 0:  # about 100 KB/s: slower than the copy, so the future replica catches up
                self.producer.flush()
                time.sleep(0.05)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush()
        self.producer.close()


def values_in(bootstrap: str, tp: TopicPartition) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = [record.value for record in consumer]
    consumer.close()
    return values


def test_jbod_placement_describe_and_moves(
    mq_command: list[str], broker_factory: Callable[..., object], tmp_path: Path
) -> None:
    dir_a, dir_b = tmp_path / "data-a", tmp_path / "data-b"
    broker = broker_factory(overrides=[f"log.dirs={dir_a},{dir_b}", "broker.id=0"]).start()
    bootstrap = broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("spread", 4, 1)])
    admin.create_topics([NewTopic("moving", 2, 1)])

    # placement: each new partition goes to the dir holding the fewest
    dirs = log_dirs_document(mq_command, bootstrap)
    assert set(dirs) == {str(dir_a), str(dir_b)}
    assert {d: len(ps) for d, ps in dirs.items()} == {str(dir_a): 3, str(dir_b): 3}
    for directory, partitions in dirs.items():
        assert {p for p in partitions} == {p.name for p in Path(directory).iterdir() if p.is_dir()}
    source = next(d for d, ps in dirs.items() if "moving-0" in ps)
    target = str(dir_b) if source == str(dir_a) else str(dir_a)

    tp = TopicPartition("moving", 0)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for n in range(3000):
        producer.send("moving", b"old-%05d" % n + b"." * 300, partition=0)
    producer.flush()
    producer.close()

    # a slow copy (the dynamic broker config) so the future replica is seen while the writer keeps appending
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={RATE_KEY: "300000"})])
    with Writer(bootstrap, tp) as writer:
        results = admin.alter_replica_log_dirs(
            {
                TopicPartitionReplica("moving", 0, 0): target,
                TopicPartitionReplica("moving", 1, 0): str(tmp_path / "not-a-log-dir"),
                TopicPartitionReplica("absent", 0, 0): target,
            }
        )
        assert results == {
            TopicPartitionReplica("moving", 0, 0): NoError,
            TopicPartitionReplica("moving", 1, 0): LogDirNotFoundError,
            TopicPartitionReplica("absent", 0, 0): ReplicaNotAvailableError,
        }
        during = log_dirs_document(mq_command, bootstrap)
        future = during[target]["moving-0 (future)"]
        assert future["isFuture"] is True and future["offsetLag"] > 0
        assert during[source]["moving-0"]["isFuture"] is False
        assert wait_for(lambda: "moving-0" in log_dirs_document(mq_command, bootstrap)[target], timeout=60)
        time.sleep(0.5)  # the writer goes on writing into the moved replica
    assert not writer.errors
    after = log_dirs_document(mq_command, bootstrap)
    assert "moving-0" not in after[source] and "moving-0 (future)" not in after[target]
    expected = [b"old-%05d" % n + b"." * 300 for n in range(3000)] + writer.acked
    assert values_in(bootstrap, tp) == expected
    left = [p.name for p in Path(source).iterdir() if p.name.startswith("moving-0")]
    assert all(name.endswith("-delete") for name in left)  # the retired copy, removed a minute later

    # mq reassign-partitions sends AlterReplicaLogDirs for log_dirs other than "any", with the copy throttle
    plan = tmp_path / "plan.json"
    moving_1_dir = next(d for d, ps in after.items() if "moving-1" in ps)
    other = str(dir_b) if moving_1_dir == str(dir_a) else str(dir_a)
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 1, "replicas": [0], "log_dirs": [other]}]}
        )
    )
    run = subprocess.run(
        [
            *mq_command,
            "reassign-partitions",
            "--bootstrap-server",
            bootstrap,
            "--execute",
            "--reassignment-json-file",
            str(plan),
            "--replica-alter-log-dirs-throttle",
            "1000000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "The replica-alter-dir throttle limit was set to 1000000 B/s" in lines
    assert lines[-1] == "Successfully started log directory move for: moving-1-0"
    entries = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])["broker"]["0"]
    assert entries[RATE_KEY]["value"] == "1000000"
    assert entries[RATE_KEY]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert wait_for(lambda: "moving-1" in log_dirs_document(mq_command, bootstrap)[other], timeout=60)
    verify = ["reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan)]
    verified = subprocess.run(
        [*mq_command, *verify],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition moving-1 is complete.",
        "Reassignment of replica moving-1-0 completed successfully.",
        "Clearing broker-level throttles on brokers 0",
        "Clearing topic-level throttles on topic moving",
    ]
    entries = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])["broker"]["0"]
    assert entries.get(RATE_KEY, {}).get("config_source") != "DYNAMIC_BROKER_CONFIG"  # cleared by the verify
    admin.close()

    # a restart loads every dir: the moved replicas serve from their new dirs
    broker.stop()
    broker.start()
    restarted = log_dirs_document(mq_command, bootstrap)
    assert "moving-0" in restarted[target] and "moving-1" in restarted[other]
    assert values_in(bootstrap, tp) == expected
    assert sum(len(ps) for ps in restarted.values()) == 6


def test_kafka_python_describe_and_alter_to_the_current_dir(broker) -> None:
    """kafka-python's own integration checks: every broker reports its log dirs without error, and moving a replica
    to the dir it is in already answers NoError."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("here", 1, 1)])
    described = admin.describe_log_dirs()
    by_broker = {entry["broker"]: entry for entry in described}
    assert set(by_broker) == {node.node_id for node in admin._manager.cluster.brokers()}
    for entry in by_broker.values():
        assert entry["log_dirs"] and all(d["error_code"] == 0 for d in entry["log_dirs"])
    target = described[0]["log_dirs"][0]["log_dir"]
    replica = TopicPartitionReplica("here", 0, described[0]["broker"])
    assert admin.alter_replica_log_dirs({replica: target}) == {replica: NoError}
    assert admin.alter_replica_log_dirs({}) == {}
    admin.close()


def test_a_follower_replica_moves_dirs_while_it_replicates(
    mq_command: list[str], zookeeper, broker_factory: Callable[..., object], tmp_path: Path
) -> None:
    """Cluster mode: broker 2 follows partition 0 and moves its replica to its other log dir while the leader takes
    writes; it stays in the ISR, and once the leader stops, broker 2 leads with every acknowledged record."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    dirs = {i: (tmp_path / f"b{i}-x", tmp_path / f"b{i}-y") for i in (1, 2)}
    brokers = {
        i: broker_factory(
            f"broker{i}",
            [
                f"zookeeper.connect={connect}",
                f"broker.id={i}",
                "zookeeper.session.timeout.ms=4000",
                f"log.dirs={dirs[i][0]},{dirs[i][1]}",
            ],
        ).start()
        for i in (1, 2)
    }
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("followed", -1, -1, replica_assignments={0: [1, 2]})])
    assert wait_for(lambda: (state := zk.get_partition_state("followed", 0)) is not None and len(state[0].isr) == 2)
    tp = TopicPartition("followed", 0)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for n in range(2000):
        producer.send("followed", b"old-%05d" % n, partition=0)
    producer.flush()
    producer.close()
    source = next(d for d, ps in log_dirs_document(mq_command, bootstrap, 2).items() if "followed-0" in ps)
    target = str(dirs[2][1]) if source == str(dirs[2][0]) else str(dirs[2][0])

    with Writer(bootstrap, tp) as writer:
        moved = admin.alter_replica_log_dirs({TopicPartitionReplica("followed", 0, 2): target})
        assert moved == {TopicPartitionReplica("followed", 0, 2): NoError}
        assert wait_for(lambda: "followed-0" in log_dirs_document(mq_command, bootstrap, 2)[target], timeout=60)
        time.sleep(0.5)  # the follower goes on replicating into the moved replica
    assert not writer.errors
    expected = [b"old-%05d" % n for n in range(2000)] + writer.acked
    admin.close()
    assert wait_for(lambda: (state := zk.get_partition_state("followed", 0)) is not None and len(state[0].isr) == 2)

    brokers[1].stop()
    assert wait_for(lambda: (state := zk.get_partition_state("followed", 0)) is not None and state[0].leader == 2)
    assert values_in(brokers[2].bootstrap, tp) == expected
    assert (Path(target) / "followed-0").is_dir()
    store.close()
