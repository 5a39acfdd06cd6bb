"""Brokers in cluster mode on a real ZooKeeper: registration, one controller, partitions led across brokers."""

from __future__ import annotations

import contextlib
import subprocess
import threading

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaConnectionError
from waiting import wait_for

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.protocol.configs import AlterConfigOp, ResourceType
from mq.zk.codecs import ControllerInfo
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow


def test_three_brokers_share_partition_leadership(cluster, mq_command: list[str]) -> None:
    connect, brokers = cluster
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assert wait_for(lambda: sorted(zk.get_all_brokers()) == [1, 2, 3])
    controller = ControllerInfo.decode(store.get("/controller")[0]).broker_id
    assert controller in (1, 2, 3)
    bootstrap = ",".join(b.bootstrap for b in brokers)
    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics([NewTopic("spread", 3, 1)])
    assert wait_for(lambda: all(zk.get_partition_state("spread", p) is not None for p in range(3)))
    leaders = {zk.get_partition_state("spread", p)[0].leader for p in range(3)}  # type: ignore[index]
    assert leaders == {1, 2, 3}
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    sent = [producer.send("spread", f"v{i}".encode(), key=f"k{i}".encode()).get(10) for i in range(60)]
    producer.close()
    assert {m.partition for m in sent} == {0, 1, 2}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition("spread", p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got = set()
    while len(got) < 60:
        records = consumer.poll(timeout_ms=5000)
        assert records, f"{len(got)} of 60"
        for batch in records.values():
            got.update((r.partition, r.offset) for r in batch)
    assert got == {(m.partition, m.offset) for m in sent}
    described = subprocess.run(
        [*mq_command, "topics", "--zookeeper", connect, "--describe", "--topic", "spread"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sorted(line.split("\t")[3] for line in described.stdout.splitlines()[1:]) == [
        "Leader: 1",
        "Leader: 2",
        "Leader: 3",
    ]
    store.close()


def test_duplicate_broker_id_fails_to_start(cluster, broker_factory) -> None:
    connect, _ = cluster
    twin = broker_factory("twin", [f"zookeeper.connect={connect}", "broker.id=2"])
    # The listener binds before the broker registers, so start() may see the port open before the process exits.
    with contextlib.suppress(RuntimeError):
        twin.start()
    assert twin.process is not None
    assert twin.process.wait(30) == 1
    twin.process = None
    last = twin.stderr().strip().splitlines()[-1]
    assert last.startswith("Error: A broker is already registered on the path /brokers/ids/2.")


def test_followers_replicate_and_acks_all_waits_for_them(cluster) -> None:
    _, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics(
        [NewTopic("replicated", 1, 3, topic_configs={"min.insync.replicas": "2"})]
    )
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    sent = [producer.send("replicated", f"m{i}".encode()).get(15) for i in range(200)]
    producer.close()
    assert [m.offset for m in sent] == list(range(200))

    def segment(broker) -> bytes:
        path = broker.log_dir / "replicated-0" / "00000000000000000000.log"
        return path.read_bytes() if path.exists() else b""

    assert wait_for(lambda: len({segment(b) for b in brokers}) == 1 and segment(brokers[0]))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition("replicated", 0)
    consumer.assign([tp])
    assert consumer.end_offsets([tp]) == {tp: 200}


def test_leader_killed_during_an_acks_all_loop_loses_nothing(cluster) -> None:
    connect, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics(
        [NewTopic("durable", 1, 3, topic_configs={"min.insync.replicas": "2"})]
    )
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assert wait_for(lambda: zk.get_partition_state("durable", 0) is not None)
    acked: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200, request_timeout_ms=10000
        )
        i = 0
        while not stop.is_set() and i < 3000:
            try:
                acked.append(producer.send("durable", f"m{i}".encode()).get(30).offset)
            except Exception:
                break
            i += 1
        producer.close(timeout=5)

    worker = threading.Thread(target=produce)
    worker.start()
    assert wait_for(lambda: len(acked) >= 200)
    leader_id = zk.get_partition_state("durable", 0)[0].leader  # type: ignore[index]
    leader = brokers[leader_id - 1]
    leader.kill()
    assert wait_for(lambda: zk.get_partition_state("durable", 0)[0].leader not in (leader_id, -1))  # type: ignore[index]
    count = len(acked)
    assert wait_for(lambda: len(acked) >= count + 200, timeout=60), "the producer did not continue after failover"
    leader.start()
    assert wait_for(lambda: sorted(zk.get_partition_state("durable", 0)[0].isr) == [1, 2, 3], timeout=60)  # type: ignore[index]
    stop.set()
    worker.join(60)
    assert acked == list(range(len(acked))), "acknowledged offsets must be contiguous"

    def segment(broker) -> bytes:
        return (broker.log_dir / "durable-0" / "00000000000000000000.log").read_bytes()

    assert wait_for(lambda: len({segment(b) for b in brokers}) == 1, timeout=30)
    values = [r.value for r in read_all(bootstrap, "durable")]
    assert values[: len(acked)] == [f"m{i}".encode() for i in range(len(acked))]
    store.close()


def read_all(bootstrap: str, topic: str) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    records: list = []
    while len(records) < end:
        for batch in consumer.poll(timeout_ms=5000).values():
            records.extend(batch)
    consumer.close()
    return records


def test_controller_failover_picks_up_work(cluster) -> None:
    connect, brokers = cluster
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assert wait_for(lambda: store.exists("/controller") is not None)
    first = ControllerInfo.decode(store.get("/controller")[0]).broker_id
    epoch = int(store.get("/controller_epoch")[0])
    brokers[first - 1].kill()

    def new_controller() -> bool:
        data = store.get_or_none("/controller")
        return data is not None and ControllerInfo.decode(data).broker_id != first

    assert wait_for(new_controller, timeout=30)
    assert wait_for(lambda: int(store.get("/controller_epoch")[0]) == epoch + 1)  # bumped just after /controller
    survivors = [b for b in brokers if b.process is not None]
    bootstrap = ",".join(b.bootstrap for b in survivors)
    successor = ControllerInfo.decode(store.get("/controller")[0]).broker_id

    def brokers_know_the_successor() -> bool:
        admins = [KafkaAdminClient(bootstrap_servers=b.bootstrap) for b in survivors]
        try:
            return all(a.describe_cluster()["controller_id"] == successor for a in admins)
        except KafkaConnectionError:  # sent to the killed broker, still in a survivor's metadata: ask again
            return False
        finally:
            for admin in admins:
                admin.close()

    assert wait_for(brokers_know_the_successor, timeout=30)
    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics([NewTopic("after", 2, 2)])
    assert wait_for(lambda: all(zk.get_partition_state("after", p) is not None for p in range(2)))
    for p in range(2):
        state = zk.get_partition_state("after", p)[0]  # type: ignore[index]
        assert state.leader in {b for b in (1, 2, 3) if b != first}
    store.close()


def test_preferred_election_restores_leadership(cluster, mq_command: list[str], tmp_path) -> None:
    connect, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics(
        [NewTopic("pref", -1, -1, replica_assignments={0: [1, 2, 3]})]
    )
    assert wait_for(lambda: (zk.get_partition_state("pref", 0) or [None])[0] is not None)
    assert zk.get_partition_state("pref", 0)[0].leader == 1  # type: ignore[index]
    brokers[0].kill()
    assert wait_for(lambda: zk.get_partition_state("pref", 0)[0].leader in (2, 3))  # type: ignore[index]
    brokers[0].start()
    assert wait_for(lambda: 1 in zk.get_partition_state("pref", 0)[0].isr, timeout=60)  # type: ignore[index]
    plan = tmp_path / "election.json"
    plan.write_text('{"partitions": [{"topic": "pref", "partition": 0}, {"topic": "pref", "partition": 9}]}')
    result = subprocess.run(
        [*mq_command, "preferred-replica-election", "--zookeeper", connect, "--path-to-json-file", str(plan)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Skipping preferred replica leader election for partition [pref,9] since it doesn't exist.",
        'Created preferred replica election path with {"version":1,"partitions":[{"topic":"pref","partition":0}]}',
        "Successfully started preferred replica election for partitions Set([pref,0])",
    ]
    assert wait_for(lambda: zk.get_partition_state("pref", 0)[0].leader == 1)  # type: ignore[index]
    assert wait_for(lambda: store.exists("/admin/preferred_replica_election") is None)
    store.close()


def test_a_brokers_new_advertised_listeners_reach_every_brokers_metadata(cluster) -> None:
    """A dynamic ``advertised.listeners`` of a broker that is not the controller: it rewrites its registration, the
    controller's watch sees it, and every broker's Metadata names the new address."""
    connect, brokers = cluster
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assert wait_for(lambda: sorted(zk.get_all_brokers()) == [1, 2, 3])
    controller = ControllerInfo.decode(store.get("/controller")[0]).broker_id
    changed = next(b for b in (1, 2, 3) if b != controller)
    port = brokers[changed - 1].port
    admin = SyncAdmin(",".join(b.bootstrap for b in brokers))
    try:
        value = f"PLAINTEXT://localhost:{port}"
        change = {"advertised.listeners": (AlterConfigOp.SET, value)}
        admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, str(changed), change)
    finally:
        admin.close()
    assert wait_for(lambda: zk.get_all_brokers()[changed].endpoints == [value])
    store.close()

    def addresses(bootstrap: str) -> dict[int, tuple[str, int]]:
        client = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            return {b["broker_id"]: (b["host"], b["port"]) for b in client.describe_cluster()["brokers"]}
        finally:
            client.close()

    for broker in brokers:
        assert wait_for(lambda broker=broker: addresses(broker.bootstrap).get(changed) == ("localhost", port))
