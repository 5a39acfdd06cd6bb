"""Brokers secured from each other as Kafka's are: a 3-broker cluster on a real ZooKeeper whose only listeners are
SASL_SSL, the brokers authenticating to each other with SCRAM-SHA-512 as the user ``broker`` (its credentials made
with ``mq configs --zookeeper`` before any broker starts, as Kafka's documentation does) and verifying each other's
certificates: a topic with replication factor 3 made with ``mq topics --command-config``, written by confluent-kafka
with acks=all, replicated to every broker, and still readable once its leader is killed. A 2-broker cluster whose
only listeners are SSL with client certificates required replicates too (the brokers present their keystore)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from conftest import BrokerProcess, ZooKeeperProcess
from waiting import wait_for

from mq.tools.certs import Certificates, make_certs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "secured"
RECORDS = 200
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return make_certs(tmp_path / "certs", clients=["alice"])


def start_brokers(
    zookeeper: ZooKeeperProcess,
    broker_factory: Callable[..., BrokerProcess],
    count: int,
    listener: str,
    overrides: list[str],
    before_start: Callable[[str], None] = lambda connect: None,
) -> list[BrokerProcess]:
    """Brokers 1..count started together under a fresh chroot, each with one listener of protocol ``listener`` on its
    port (4 s ZooKeeper sessions, a one-partition __consumer_offsets); ``before_start(connect)`` runs first."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    before_start(connect)
    brokers = []
    for i in range(1, count + 1):
        broker = broker_factory(f"broker{i}")
        broker.overrides += [
            f"listeners={listener}://127.0.0.1:{broker.port}",
            f"security.inter.broker.protocol={listener}",
            f"zookeeper.connect={connect}",
            f"broker.id={i}",
            "zookeeper.session.timeout.ms=4000",
            "offsets.topic.num.partitions=1",
            *overrides,
        ]
        brokers.append(broker)
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(BrokerProcess.start, brokers))


def tls_keys(certs: Certificates) -> list[str]:
    return [
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={certs.broker.pkcs12}",
        f"ssl.keystore.password={certs.password}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={certs.ca}",
    ]


def topics(mq_command: list[str], bootstrap: str, command_config: Path, *args: str) -> str:
    """``mq topics`` over the secured listeners: its output."""
    tool = [*mq_command, "topics", "--bootstrap-server", bootstrap, "--command-config", str(command_config)]
    result = subprocess.run([*tool, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def describe(mq_command: list[str], bootstrap: str, command_config: Path) -> dict[str, str]:
    """The fields of the partition's ``mq topics --describe`` line (Leader, Replicas, Isr)."""
    output = topics(mq_command, bootstrap, command_config, "--describe", "--topic", TOPIC)
    [line] = [line for line in output.splitlines() if "Partition: 0" in line]
    return dict(field.strip().split(": ", 1) for field in line.split("\t") if ": " in field)


def produce(config: dict[str, Any]) -> None:
    errors: list[str] = []
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"m{i}".encode(), on_delivery=lambda err, _: err and errors.append(str(err)))
    assert producer.flush(20) == 0
    assert errors == []


def consume(config: dict[str, Any]) -> list[bytes]:
    """The partition's records from its beginning (without a group's offsets), as many as arrive within 60 s."""
    consumer = Consumer({**config, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < RECORDS and time.monotonic() < deadline:
        values += [bytes(m.value()) for m in consumer.consume(RECORDS, 0.5) if m.error() is None]
    consumer.close()
    return values


def replicate(
    mq_command: list[str], brokers: list[BrokerProcess], command_config: Path, client: dict[str, Any]
) -> dict[str, str]:
    """Create the topic with a replica on every broker (``mq topics``), produce to it with acks=all, and wait until
    every replica holds the same bytes; returns the partition's describe fields."""
    bootstrap = client["bootstrap.servers"]
    replicas = str(len(brokers))
    topics(mq_command, bootstrap, command_config, "--create", "--topic", TOPIC, "--replication-factor", replicas)
    produce(client)
    segment = Path(f"{TOPIC}-0") / "00000000000000000000.log"
    assert wait_for(lambda: len({(b.log_dir / segment).read_bytes() for b in brokers}) == 1, timeout=30)
    return describe(mq_command, bootstrap, command_config)


def test_a_three_broker_cluster_replicates_over_sasl_ssl(
    zookeeper: ZooKeeperProcess,
    broker_factory: Callable[..., BrokerProcess],
    mq_command: list[str],
    certs: Certificates,
    tmp_path: Path,
) -> None:
    def scram_users(connect: str) -> None:
        """The brokers' user and a client's, as Kafka's documentation makes them: in ZooKeeper, before the brokers."""
        users = [*mq_command, "configs", "--zookeeper", connect, "--entity-type", "users", "--entity-name"]
        runs = [
            subprocess.Popen(
                [*users, user, "--alter", "--add-config", f"SCRAM-SHA-512=[password={user}-secret]"],
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
            )
            for user in ("broker", "alice")
        ]
        for run in runs:
            _, stderr = run.communicate(timeout=60)
            assert run.returncode == 0, stderr

    brokers = start_brokers(
        zookeeper,
        broker_factory,
        3,
        "SASL_SSL",
        [
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            f'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM} username="broker" password="broker-secret";',
            *tls_keys(certs),
        ],
        scram_users,
    )
    bootstrap = ",".join(b.bootstrap for b in brokers)
    command_config = tmp_path / "admin.properties"
    command_config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM} username="alice" password="alice-secret";\n'
        f"ssl.truststore.location={certs.ca}\n"
    )
    client = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(certs.ca),
    }
    described = replicate(mq_command, brokers, command_config, client)
    assert sorted(described["Isr"].split(",")) == sorted(described["Replicas"].split(",")) == ["1", "2", "3"]

    leader = brokers[int(described["Leader"]) - 1]
    leader.kill()
    survivors = [b for b in brokers if b is not leader]
    others = ",".join(b.bootstrap for b in survivors)
    assert consume({**client, "bootstrap.servers": others}) == [f"m{i}".encode() for i in range(RECORDS)]
    for broker in survivors:
        assert "Failed authentication" not in broker.stderr()


def test_a_two_broker_cluster_replicates_over_ssl_with_client_certificates(
    zookeeper: ZooKeeperProcess,
    broker_factory: Callable[..., BrokerProcess],
    mq_command: list[str],
    certs: Certificates,
    tmp_path: Path,
) -> None:
    brokers = start_brokers(zookeeper, broker_factory, 2, "SSL", [*tls_keys(certs), "ssl.client.auth=required"])
    bootstrap = ",".join(b.bootstrap for b in brokers)
    alice = certs.clients["alice"]
    command_config = tmp_path / "admin.properties"
    command_config.write_text(
        "security.protocol=SSL\n"
        f"ssl.ca.location={certs.ca}\n"
        f"ssl.certificate.location={alice.certificate}\n"
        f"ssl.key.location={alice.key}\n"
    )
    client = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(alice.certificate),
        "ssl.key.location": str(alice.key),
    }
    described = replicate(mq_command, brokers, command_config, client)
    assert sorted(described["Isr"].split(",")) == ["1", "2"]
