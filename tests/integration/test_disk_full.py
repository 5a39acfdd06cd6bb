"""A log dir on a small tmpfs filled up while producers write: the broker answers KAFKA_STORAGE_ERROR for the
partitions there, keeps serving the other log dir, never dies of a signal, and after space is freed and it restarts
(from a clean stop or from kill -9) every acknowledged record is read back by a real consumer."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, ZooKeeperProcess, start_cluster
from kafka.admin import KafkaAdminClient
from waiting import wait_for

from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

FS_SIZE = 16 << 20
FREE_BYTES = 3 << 20
"""Free space left on the tmpfs by a filler file written before the broker starts; removing it frees the space."""
VALUE_SIZE = 1000
MESSAGES = 5000
"""MESSAGES x VALUE_SIZE is well above FREE_BYTES: the file system fills up during every run."""


@pytest.fixture
def small_filesystem() -> Iterator[Callable[[Path], Path]]:
    """Mounts a 16 MB tmpfs at a directory (made if missing) with a filler file in it that leaves about 3 MB free;
    returns the filler. Unmounted after the test; the test is skipped when mounting is not permitted."""
    mounted: list[Path] = []

    def mount(target: Path) -> Path:
        target.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(target)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"a tmpfs cannot be mounted here (root or CAP_SYS_ADMIN needed): {done.stderr.strip()}")
        mounted.append(target)
        filler = target / "filler"  # a plain file in a log dir is left alone by the broker
        with open(filler, "wb") as out:
            out.write(bytes(FS_SIZE - FREE_BYTES))
        return filler

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def produce(
    bootstrap: str, topic: str, partitions: list[int], count: int, *, acks: int = 1, retries: int = 0
) -> tuple[dict[int, set[bytes]], list[int]]:
    """``count`` values to each partition (by default acks=1 without retries). Returns the acknowledged values per
    partition and the error codes of the failed ones."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "retries": retries,
            "linger.ms": 5,
            "message.timeout.ms": 5000 if retries == 0 else 60000,
        }
    )
    acked: dict[int, set[bytes]] = {p: set() for p in partitions}
    errors: list[int] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked[msg.partition()].add(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(err.code())

    for i in range(count):
        for partition in partitions:
            value = f"{partition}-{i}-".encode().ljust(VALUE_SIZE, b"x")
            while True:
                try:
                    producer.produce(topic, value, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0
    return acked, errors


def read_all(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every value of the partition from its start to its high watermark, with a real consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full-check", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=15)
        consumer.assign([KafkaTopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        position = 0
        misses = 0
        while position < high and misses < 50:
            msg = consumer.poll(0.5)
            if msg is None:
                misses += 1
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
            position = msg.offset() + 1
        assert position >= high, f"read {position} of {high} records"
        return values
    finally:
        consumer.close()


def fill_until_failure(broker: BrokerProcess, topic: str) -> set[bytes]:
    """Produce to partition 0 of ``topic`` (on the small file system) until it fails; the acknowledged values."""
    acked, errors = produce(broker.bootstrap, topic, [0], MESSAGES)
    assert acked[0], "nothing was acknowledged before the file system filled up"
    assert errors, "the file system never filled up"
    assert KafkaError.KAFKA_STORAGE_ERROR in errors, errors
    assert set(errors) <= {KafkaError.KAFKA_STORAGE_ERROR, KafkaError._MSG_TIMED_OUT}, set(errors)
    assert broker.process is not None and broker.process.poll() is None, "the broker died during the disk-full episode"
    return acked[0]


def test_full_log_dir_goes_offline_and_the_other_keeps_serving(
    small_filesystem: Callable[[Path], Path], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    small_dir = tmp_path / "small-logs"
    small_filesystem(small_dir)
    big_dir = tmp_path / "big-logs"
    broker = broker_factory(overrides=[f"log.dirs={big_dir},{small_dir}"]).start()
    create_topic(broker.bootstrap, "t", 2)  # a new partition goes to the dir with the fewest: 0 -> big, 1 -> small
    assert (big_dir / "t-0").is_dir() and (small_dir / "t-1").is_dir()

    acked, errors = produce(broker.bootstrap, "t", [0, 1], MESSAGES)
    assert KafkaError.KAFKA_STORAGE_ERROR in errors, errors
    assert len(acked[0]) == MESSAGES  # the healthy dir accepted everything
    assert acked[1] and len(acked[1]) < MESSAGES
    assert broker.process is not None and broker.process.poll() is None

    more, more_errors = produce(broker.bootstrap, "t", [0], 100)
    assert not more_errors and len(more[0]) == 100
    assert set(read_all(broker.bootstrap, "t", 0)) == acked[0] | more[0]

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (response,) = admin.describe_log_dirs()
        by_dir = {entry["log_dir"]: entry["error_code"] for entry in response["log_dirs"]}
        assert by_dir == {str(big_dir.resolve()): 0, str(small_dir.resolve()): KafkaError.KAFKA_STORAGE_ERROR}
    finally:
        admin.close()
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("t", timeout=15).topics["t"]
    assert metadata.partitions[0].error is None and metadata.partitions[0].leader >= 0
    assert metadata.partitions[1].leader == -1  # its only replica is offline
    assert metadata.partitions[1].error.code() == KafkaError.LEADER_NOT_AVAILABLE
    assert "Stopping serving logs in dir" in broker.stderr()
    assert broker.stderr().count("Stopping serving logs in dir") == 1  # logged once, not per request or task


def fill_single_dir_broker(
    small_filesystem: Callable[[Path], Path], broker_factory: Callable[..., BrokerProcess], log_dir: Path
) -> tuple[BrokerProcess, Path, set[bytes]]:
    """A broker whose only log dir is the small file system (1 MB segments: rolls happen while it fills), filled
    through partition 0 of ``t``; the broker, the filler file and the acknowledged values."""
    filler = small_filesystem(log_dir)
    broker = broker_factory(overrides=[f"log.dirs={log_dir}", "log.segment.bytes=1048576"]).start()
    create_topic(broker.bootstrap, "t", 1)
    return broker, filler, fill_until_failure(broker, "t")


def test_clean_stop_after_disk_full_keeps_every_acknowledged_record(
    small_filesystem: Callable[[Path], Path], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker, filler, acked = fill_single_dir_broker(small_filesystem, broker_factory, tmp_path / "small-logs")
    assert broker.stop() == 0
    filler.unlink()
    broker.start()
    values = read_all(broker.bootstrap, "t", 0)
    assert acked <= set(values), f"{len(acked - set(values))} acknowledged records lost"
    more, more_errors = produce(broker.bootstrap, "t", [0], 10)
    assert not more_errors and len(more[0]) == 10


def test_kill_during_disk_full_keeps_every_acknowledged_record(
    small_filesystem: Callable[[Path], Path], broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker, filler, acked = fill_single_dir_broker(small_filesystem, broker_factory, tmp_path / "small-logs")
    broker.kill()
    filler.unlink()
    broker.start()
    values = read_all(broker.bootstrap, "t", 0)
    assert acked <= set(values), f"{len(acked - set(values))} acknowledged records lost"


def test_cluster_moves_leadership_off_a_broker_whose_log_dir_failed(
    small_filesystem: Callable[[Path], Path],
    zookeeper: ZooKeeperProcess,
    broker_factory: Callable[..., BrokerProcess],
    tmp_path: Path,
) -> None:
    """Broker 1 leads t-0 (replicas 1, 2, 3) from a log dir that fills up: it writes a log dir event, the controller
    elects another leader and drops broker 1 from the ISR, and the producer (acks=all, retrying) carries on there.
    Every acknowledged record is on the new leader; broker 1 stays up and keeps its other duties."""
    small_filesystem(tmp_path / "broker1" / "kafka-logs")
    connect, brokers = start_cluster(zookeeper, broker_factory, [])
    store = ZooKeeperStore(connect)
    try:
        zk = KafkaZkClient(store)
        assert wait_for(lambda: sorted(zk.get_all_brokers()) == [1, 2, 3])
        bootstrap = ",".join(b.bootstrap for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("t", 1, replica_assignment=[[1, 2, 3]])])["t"].result(30)

        def state() -> tuple[int, list[int]] | None:
            found = zk.get_partition_state("t", 0)
            return None if found is None else (found[0].leader, list(found[0].isr))

        assert wait_for(lambda: state() == (1, [1, 2, 3]))

        acked, errors = produce(bootstrap, "t", [0], MESSAGES, acks=-1, retries=1000)
        assert not errors, set(errors)
        assert len(acked[0]) == MESSAGES
        found = state()
        assert found is not None and found[0] in (2, 3) and 1 not in found[1]
        assert brokers[0].process is not None and brokers[0].process.poll() is None
        assert store.get_children("/log_dir_event_notification") == []  # the controller consumed the event
        assert acked[0] <= set(read_all(bootstrap, "t", 0))
    finally:
        store.close()
