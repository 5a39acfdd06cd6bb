"""The ZooKeeper-coordinated consumer (Kafka 0.8's design) against a ZooKeeper-mode broker: partitions split over a
group's members, and taken over when a member closes or dies (its session expires); wildcard (whitelist/blacklist)
members following new topics, in the console consumer and as the source of a mirror."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import BrokerProcess, ZooKeeperProcess
from waiting import wait_for

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.sync import SyncAdmin, SyncProducer
from mq.client.zk_consumer import ConsumerTimeoutError, ZkConsumerConfig, ZookeeperConsumer
from mq.topic_partition import TopicFilter, TopicPartition
from mq.zk import paths
from mq.zk.codecs import ConsumerRegistration
from mq.zk.consumer_groups import ConsumerIdTakenError, ZkConsumerGroups
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

SESSION_MS = 2000
BACKOFF_MS = 200
RETRIES = 10


def consumer_properties(connect: str, group: str, **extra: str) -> dict[str, str]:
    return {
        "zookeeper.connect": connect,
        "group.id": group,
        "auto.offset.reset": "smallest",
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "rebalance.backoff.ms": str(BACKOFF_MS),
        "rebalance.max.retries": str(RETRIES),
        "auto.commit.interval.ms": "200",
        **extra,
    }


@pytest.fixture
def zk_broker(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> Iterator[tuple[str, BrokerProcess, ZooKeeperStore]]:
    """A broker on a fresh chroot with topic ``t`` (4 partitions, 40 records), and a store on the same chroot."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    broker = broker_factory("zk", [f"zookeeper.connect={connect}", "broker.id=1"]).start()
    with SyncAdmin(broker.bootstrap) as admin:
        admin.call(AsyncAdmin.create_topics, [NewTopic("t", 4, 1)])
    with SyncProducer(broker.bootstrap) as producer:
        for i in range(40):
            producer.send("t", f"v{i}".encode(), partition=i % 4)
        producer.flush()
    store = ZooKeeperStore(connect)
    yield connect, broker, store
    store.close()


def owners(store: ZooKeeperStore, group: str) -> dict[TopicPartition, str]:
    return ZkConsumerGroups(store).owners(group)


def owned_only_by(store: ZooKeeperStore, group: str, consumer: ZookeeperConsumer) -> bool:
    found = owners(store, group)
    return len(found) == 4 and set(found.values()) == {f"{consumer.consumer_id}-0"}


def test_two_consumers_split_partitions_and_one_takes_over_at_close(zk_broker) -> None:
    connect, broker, store = zk_broker
    config = ZkConsumerConfig.from_properties(consumer_properties(connect, "g1"))
    first = ZookeeperConsumer(config, ["t"])
    try:
        assert wait_for(lambda: owned_only_by(store, "g1", first), timeout=10)
        second = ZookeeperConsumer(config, ["t"])
        assert wait_for(lambda: len(set(owners(store, "g1").values())) == 2, timeout=10)
        ids = sorted([first.consumer_id, second.consumer_id])
        assert wait_for(
            lambda: (
                owners(store, "g1")
                == {
                    TopicPartition("t", 0): f"{ids[0]}-0",
                    TopicPartition("t", 1): f"{ids[0]}-0",
                    TopicPartition("t", 2): f"{ids[1]}-0",
                    TopicPartition("t", 3): f"{ids[1]}-0",
                }
            ),
            timeout=10,
        )
        records = []
        for consumer in (first, second):
            assert wait_for(lambda c=consumer: records.extend(c.poll(200)) or len(records) >= 20, timeout=10)
        second.close()
        assert wait_for(lambda: owned_only_by(store, "g1", first), timeout=(SESSION_MS + BACKOFF_MS) / 1000)
        assert wait_for(lambda: records.extend(first.poll(200)) or len(records) >= 40, timeout=10)
        assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(40))
        first.commit_offsets()
        assert ZkConsumerGroups(store).offsets("g1") == {TopicPartition("t", p): 10 for p in range(4)}
        with SyncAdmin(broker.bootstrap) as admin:
            admin.call(AsyncAdmin.create_partitions, {"t": 5})
        assert wait_for(lambda: first.owned() == [TopicPartition("t", p) for p in range(5)], timeout=10)
        assert set(owners(store, "g1").values()) == {f"{first.consumer_id}-0"}
    finally:
        first.close()
    assert ZkConsumerGroups(store).consumer_ids("g1") == []


def test_offsets_in_the_broker_with_and_without_dual_commit(zk_broker) -> None:
    connect, broker, store = zk_broker
    groups = ZkConsumerGroups(store)
    every = {TopicPartition("t", p): 10 for p in range(4)}
    for group, dual in (("kafka-only", "false"), ("dual", "true")):
        properties = consumer_properties(
            connect, group, **{"offsets.storage": "kafka", "dual.commit.enabled": dual, "consumer.timeout.ms": "500"}
        )
        with ZookeeperConsumer(ZkConsumerConfig.from_properties(properties), ["t"]) as consumer:
            records = []
            with pytest.raises(ConsumerTimeoutError):
                for record in consumer:
                    records.append(record)
            assert len(records) == 40
        with SyncAdmin(broker.bootstrap) as admin:
            assert admin.call(AsyncAdmin.list_group_offsets, group) == every
        assert groups.offsets(group) == ({} if dual == "false" else every)
        with ZookeeperConsumer(ZkConsumerConfig.from_properties(properties), ["t"]) as again:
            assert again.poll(500) == []


def test_a_killed_consumer_loses_its_partitions_when_its_session_expires(zk_broker) -> None:
    connect, _, store = zk_broker
    properties = consumer_properties(connect, "g2", **{"consumer.id": "killed"})
    script = textwrap.dedent(
        f"""
        import time
        from mq.client.zk_consumer import ConsumerTimeoutError, ZkConsumerConfig, ZookeeperConsumer
        consumer = ZookeeperConsumer(ZkConsumerConfig.from_properties({properties!r}), ["t"])
        print("started", flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "started\n"
        survivor = ZookeeperConsumer(ZkConsumerConfig.from_properties(consumer_properties(connect, "g2")), ["t"])
        try:
            assert wait_for(lambda: len(set(owners(store, "g2").values())) == 2, timeout=10)
            assert "g2_killed-0" in owners(store, "g2").values()
            duplicate = ZkConsumerConfig.from_properties(properties)
            with pytest.raises(ConsumerIdTakenError, match="g2_killed is already registered"):
                ZookeeperConsumer(duplicate, ["t"])
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            assert wait_for(lambda: owned_only_by(store, "g2", survivor), timeout=(2 * SESSION_MS + BACKOFF_MS) / 1000)
        finally:
            survivor.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


def mq(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)


def test_console_consumer_and_the_offset_tools(zk_broker, mq_command: list[str], tmp_path) -> None:
    connect, broker, store = zk_broker
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: scripts/test.sh installs it"
    with SyncAdmin(broker.bootstrap) as admin:
        admin.call(AsyncAdmin.create_topics, [NewTopic("kc", 2, 1)])
    lines = [f"line-{i}" for i in range(6)]
    produced = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-P", "-t", "kc"], input="\n".join(lines) + "\n", text=True, timeout=30
    )
    assert produced.returncode == 0
    groups = ZkConsumerGroups(store)

    read = ["console-consumer", "--zookeeper", connect, "--topic", "kc", "--max-messages", "6"]
    anonymous = mq(mq_command, *read, "--from-beginning")
    assert anonymous.returncode == 0, anonymous.stderr
    assert sorted(anonymous.stdout.splitlines()) == lines
    assert "Processed a total of 6 messages" in anonymous.stderr
    assert not [g for g in groups.groups() if g.startswith("console-consumer-")]

    properties = tmp_path / "consumer.properties"
    seed = (Path(__file__).parents[1] / "data" / "seed_era_consumer.properties").read_text(encoding="utf-8")
    properties.write_text(
        seed.replace("zookeeper.connect=127.0.0.1:2181", f"zookeeper.connect={connect}").replace("=mygid", "=cg")
    )
    named = mq(
        mq_command, "console-consumer", "--consumer.config", str(properties), "--topic", "kc", "--max-messages", "6"
    )
    assert named.returncode == 0, named.stderr
    assert sorted(named.stdout.splitlines()) == lines
    committed = groups.offsets("cg")
    assert sum(committed.values()) == 6 and set(committed) == {TopicPartition("kc", 0), TopicPartition("kc", 1)}
    refused = mq(mq_command, *read, "--group", "cg", "--from-beginning")
    assert refused.returncode == 1
    assert "Found previous offset information for this group cg. Please use --delete-consumer-offsets" in refused.stderr
    resumed = mq(
        mq_command,
        "console-consumer",
        "--consumer.config",
        str(properties),
        "--topic",
        "kc",
        "--consumer-property",
        "consumer.timeout.ms=300",
    )
    assert resumed.returncode == 0 and resumed.stdout == ""
    assert "Processed a total of 0 messages" in resumed.stderr
    restarted = mq(mq_command, *read, "--group", "cg", "--from-beginning", "--delete-consumer-offsets")
    assert restarted.returncode == 0 and sorted(restarted.stdout.splitlines()) == lines
    assert groups.offsets("cg") == committed

    checked = mq(mq_command, "consumer-offset-checker", "--zkconnect", connect, "--group", "cg").stdout.splitlines()
    assert checked[0].split() == ["Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"]
    assert [row.split() for row in checked[1:]] == [
        [
            "cg",
            "kc",
            str(p),
            str(committed[TopicPartition("kc", p)]),
            str(committed[TopicPartition("kc", p)]),
            "0",
            "none",
        ]
        for p in (0, 1)
    ]

    exported = tmp_path / "offsets.txt"
    result = mq(
        mq_command, "export-zk-offsets", "--zkconnect", connect, "--group", "cg", "--output-file", str(exported)
    )
    assert result.returncode == 0, result.stderr
    assert exported.read_text().splitlines() == [
        f"/consumers/cg/offsets/kc/{p}:{committed[TopicPartition('kc', p)]}" for p in (0, 1)
    ]
    copied = tmp_path / "copied.txt"
    copied.write_text(exported.read_text().replace("/consumers/cg/", "/consumers/cg2/"))
    result = mq(mq_command, "import-zk-offsets", "--zkconnect", connect, "--inputfile", str(copied))
    assert result.returncode == 0, result.stderr
    assert groups.offsets("cg2") == committed
    bad = tmp_path / "bad.txt"
    bad.write_text("/consumers/cg3/offsets/kc/0:1\n/consumers/cg3/offsets/kc/9:1\n")
    result = mq(mq_command, "import-zk-offsets", "--zkconnect", connect, "--input-file", str(bad))
    assert result.returncode == 1 and "partition kc-9 does not exist" in result.stderr
    bad.write_text("/consumers/cg3/offsets/kc/0:1\nkc 1 5\n")
    result = mq(mq_command, "import-zk-offsets", "--zkconnect", connect, "--input-file", str(bad))
    assert result.returncode == 1 and "line 2 is not" in result.stderr
    assert not groups.exists("cg3")

    updated = mq(mq_command, "update-offsets-in-zk", "earliest", str(properties), "kc")
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.splitlines() == [
        "updating partition 0 with new offset: 0",
        "updating partition 1 with new offset: 0",
        "updated the offset for 2 partitions",
    ]
    assert groups.offsets("cg") == {TopicPartition("kc", 0): 0, TopicPartition("kc", 1): 0}

    verify = ["verify-consumer-rebalance", "--zookeeper.connect", connect, "--group", "cg"]
    with ZookeeperConsumer(ZkConsumerConfig.from_properties(consumer_properties(connect, "cg")), ["kc"]) as member:
        assert wait_for(lambda: len(groups.owners("cg")) == 2, timeout=10)
        listed = mq(mq_command, "consumer-groups", "--zookeeper", connect, "--list")
        assert listed.returncode == 0 and listed.stdout.splitlines() == ["cg", "cg2"]
        described = mq(mq_command, "consumer-groups", "--zookeeper", connect, "--describe", "--group", "cg")
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith("cg ")]
        assert [row[:3] + row[6:7] for row in rows] == [["cg", "kc", str(p), f"{member.consumer_id}-0"] for p in (0, 1)]
        result = mq(mq_command, *verify)
        assert result.returncode == 0 and result.stdout == "Rebalance operation successful !\n"
        groups.release("cg", TopicPartition("kc", 1))
        result = mq(mq_command, *verify)
        assert result.returncode == 1 and result.stdout == "Rebalance operation failed !\n"
        assert "No owner for partition [kc,1]" in result.stderr
        assert member.owned() == [TopicPartition("kc", 0), TopicPartition("kc", 1)]


def create_with_records(bootstrap: str, topics: dict[str, int], per_partition: int = 3) -> list[bytes]:
    """Create ``topics`` (name: partitions) and write ``per_partition`` records to each partition; their values."""
    with SyncAdmin(bootstrap) as admin:
        admin.call(AsyncAdmin.create_topics, [NewTopic(t, n, 1) for t, n in topics.items()])
    values = []
    with SyncProducer(bootstrap) as producer:
        for topic, partitions in topics.items():
            for p in range(partitions):
                for i in range(per_partition):
                    values.append(f"{topic}-{p}-{i}".encode())
                    producer.send(topic, values[-1], partition=p)
        producer.flush()
    return values


def test_wildcard_members_split_the_matching_topics_and_pick_up_a_new_one(zk_broker, mq_command) -> None:
    connect, broker, store = zk_broker
    expected = create_with_records(broker.bootstrap, {"wa": 2, "wb": 2})
    config = ZkConsumerConfig.from_properties(consumer_properties(connect, "wild"))
    first = ZookeeperConsumer(config, TopicFilter("w.*"))
    second = ZookeeperConsumer(config, TopicFilter("w.*"))
    try:
        low, high = sorted([first.consumer_id, second.consumer_id])
        split = {TopicPartition(t, p): f"{low if p == 0 else high}-0" for t in ("wa", "wb") for p in (0, 1)}
        assert wait_for(lambda: owners(store, "wild") == split, timeout=10)
        registration = ConsumerRegistration.decode(store.get(paths.consumer_registration("wild", low))[0])
        assert (registration.subscription, registration.pattern) == ({"w.*": 1}, "white_list")

        expected += create_with_records(broker.bootstrap, {"wc": 2})
        create_with_records(broker.bootstrap, {"other": 1})
        split.update({TopicPartition("wc", 0): f"{low}-0", TopicPartition("wc", 1): f"{high}-0"})
        assert wait_for(lambda: owners(store, "wild") == split, timeout=10)
        verified = mq(mq_command, "verify-consumer-rebalance", "--zookeeper.connect", connect, "--group", "wild")
        assert verified.returncode == 0 and verified.stdout == "Rebalance operation successful !\n", verified.stderr
        described = mq(mq_command, "consumer-groups", "--zookeeper", connect, "--describe", "--group", "wild")
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith("wild ")]
        assert {(row[1], int(row[2])): row[6] for row in rows} == {tuple(tp): owner for tp, owner in split.items()}

        values: list[bytes] = []
        assert wait_for(
            lambda: values.extend(r.value for c in (first, second) for r in c.poll(100)) or len(values) >= 18,
            timeout=20,
        )
        assert sorted(values) == sorted(expected)
    finally:
        first.close()
        second.close()


def test_console_consumer_with_a_whitelist_or_blacklist(zk_broker, mq_command) -> None:
    connect, broker, _ = zk_broker
    expected = create_with_records(broker.bootstrap, {"wa": 2, "wb": 1}, per_partition=2)
    read = ["console-consumer", "--zookeeper", connect, "--from-beginning", "--max-messages", "6"]
    for flags in (["--whitelist", "wa, wb"], ["--blacklist", "t"]):
        result = mq(mq_command, *read, *flags)
        assert result.returncode == 0, result.stderr
        assert sorted(result.stdout.encode().splitlines()) == sorted(expected)
        assert "Processed a total of 6 messages" in result.stderr
    refused = mq(mq_command, *read, "--whitelist", "wa", "--topic", "wa")
    assert refused.returncode == 2 and "Exactly one of whitelist/blacklist/topic is required." in refused.stderr


def test_mirror_from_a_zookeeper_source_keeps_the_group_offsets_in_zookeeper(
    zk_broker, broker_factory, mq_command, tmp_path
) -> None:
    connect, source, store = zk_broker
    create_with_records(source.bootstrap, {"wa": 2, "wb": 1}, per_partition=4)
    target = broker_factory("target").start()
    consumer_file = tmp_path / "consumer.properties"
    consumer_file.write_text(
        "".join(f"{k}={v}\n" for k, v in consumer_properties(connect, "mm", **{"auto.commit.enable": "false"}).items())
    )
    producer_file = tmp_path / "producer.properties"
    producer_file.write_text(f"bootstrap.servers={target.bootstrap}\n")
    mirror = subprocess.Popen(
        [
            *mq_command,
            *("mirror", "--consumer.config", str(consumer_file), "--producer.config", str(producer_file)),
            *("--whitelist", "w.*", "--num.streams", "2", "--offset.commit.interval.ms", "300"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    groups = ZkConsumerGroups(store)
    done = {TopicPartition("wa", 0): 4, TopicPartition("wa", 1): 4, TopicPartition("wb", 0): 4}
    try:
        assert wait_for(lambda: len(groups.owners("mm")) == 3, timeout=20)
        [member] = groups.consumer_ids("mm")
        registration = groups.registrations("mm")[member]
        assert (registration.subscription, registration.pattern) == ({"w.*": 2}, "white_list")
        assert set(groups.owners("mm").values()) == {f"{member}-0", f"{member}-1"}
        assert wait_for(lambda: groups.offsets("mm") == done, timeout=30)
        copied = {}
        with SyncAdmin(target.bootstrap) as admin:
            for t in ("wa", "wb"):
                [described] = admin.call(AsyncAdmin.describe_topics, [t])
                copied[t] = len(described.partitions)
        assert copied == {"wa": 2, "wb": 1}
    finally:
        mirror.send_signal(signal.SIGTERM)
        _, err = mirror.communicate(timeout=60)
    assert mirror.returncode == 0, err
    assert "Mirrored 12 records" in err
    assert groups.consumer_ids("mm") == []
    checked = mq(mq_command, "consumer-offset-checker", "--zookeeper", connect, "--group", "mm")
    assert checked.returncode == 0, checked.stderr
    rows = [line.split() for line in checked.stdout.splitlines()[1:]]
    assert rows == [["mm", tp.topic, str(tp.partition), "4", "4", "0", "none"] for tp in sorted(done)]
