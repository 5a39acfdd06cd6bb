"""Authorization on a broker started as users start it: a SASL_PLAINTEXT listener with PLAIN users (``admin``, a super
user, and ``alice``, who starts without ACLs) and Kafka's AclAuthorizer, driven by confluent-kafka and kafka-python.
Alice is refused at each step of producing and consuming with Kafka's errors; ACLs the admin adds with ``mq acls``
(through ``--command-config`` with SASL settings) take effect on her running clients; Metadata shows her only what
she may describe; the super user administers topics and configs while alice gets CLUSTER_AUTHORIZATION_FAILED for
cluster actions. Last, kafka-python's own ACL integration test, done the same way against mq."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from conftest import BrokerProcess
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
from kafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    NoError,
    TopicAuthorizationFailedError,
)
from kafka.structs import TopicPartition as KpTopicPartition
from test_sasl import librdkafka, sasl_broker
from waiting import wait_for

from mq.client.security import client_security
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow

AUTHORIZER = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=User:admin"]


def kafka_python(bootstrap: str, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": f"{user}-secret",
    }


def command_config(tmp_path: Path, user: str) -> Path:
    """Java client properties with the user's SASL settings, as Kafka's tools read them."""
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{user}-secret";\n',
        encoding="utf-8",
    )
    return path


def mq_acls(mq_command: list[str], bootstrap: str, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mq_command, "acls", "--bootstrap-server", bootstrap, "--command-config", str(config), *args],
        capture_output=True, text=True, timeout=60, env={**os.environ},
    )  # fmt: skip


def grant(mq_command: list[str], bootstrap: str, admin: Path, *args: str) -> None:
    added = mq_acls(mq_command, bootstrap, admin, "--add", "--allow-principal", "User:alice", *args)
    assert added.returncode == 0, added.stderr


def delivery(producer: Producer, value: bytes) -> KafkaError | None:
    """The delivery report's error of one record (None: delivered), or the error produce() raised at once (the
    client knows the topic refused)."""
    reports: list[KafkaError | None] = []
    try:
        producer.produce("t", value, on_delivery=lambda error, _: reports.append(error))
    except KafkaException as refused:
        return refused.args[0]  # type: ignore[no-any-return]
    producer.flush(15)
    assert len(reports) == 1
    return reports[0]


def consumer_errors(consumer: Consumer, seconds: float) -> set[int]:
    """The error codes the consumer reports within ``seconds`` (it must receive no record)."""
    codes: set[int] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not codes:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is not None, message.value()
            codes.add(message.error().code())
    return codes


def first_value(consumer: Consumer, seconds: float) -> bytes | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            return bytes(message.value())
    return None


def polled_values(consumer: KafkaConsumer, seconds: float) -> list[bytes]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records = consumer.poll(200)
        if records:
            return [r.value for batch in records.values() for r in batch]
    return []


def test_alice_is_refused_until_acls_are_added_and_her_running_clients_then_succeed(
    broker_factory: Callable[..., BrokerProcess], mq_command: list[str], tmp_path: Path
) -> None:
    broker, bootstrap = sasl_broker(broker_factory, *AUTHORIZER)
    admin_config = command_config(tmp_path, "admin")
    admin = AdminClient(librdkafka(bootstrap, "PLAIN", "admin", "admin-secret"))
    for future in admin.create_topics([NewTopic("t", 1, 1), NewTopic("hidden", 1, 1)]).values():
        future.result(30)
    alice = librdkafka(bootstrap, "PLAIN", "alice", "alice-secret")

    # no ACL: Metadata refuses the topic, FindCoordinator the group
    producer = Producer(alice)
    error = delivery(producer, b"refused")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer = Consumer({**alice, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in consumer_errors(consumer, 10)
    kp_producer = KafkaProducer(**kafka_python(bootstrap, "alice"), enable_idempotence=False, max_block_ms=10_000)
    with pytest.raises(TopicAuthorizationFailedError):
        kp_producer.send("t", b"refused").get(10)
    kp_consumer = KafkaConsumer("t", group_id="kp", auto_offset_reset="earliest", **kafka_python(bootstrap, "alice"))
    with pytest.raises(GroupAuthorizationFailedError):
        kp_consumer.poll(5000)

    # DESCRIBE only: the Produce and JoinGroup requests themselves are refused
    grant(
        mq_command, bootstrap, admin_config, "--operation", "Describe", "--topic", "t", "--group", "g", "--group", "kp"
    )
    produce_refused = (
        "Denied Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:t for request = Produce"
    )
    assert wait_for(
        lambda: delivery(producer, b"refused") is not None and produce_refused in broker.stderr(), timeout=10
    )
    error = delivery(producer, b"refused")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    join_refused = "Denied Operation = Read from host = 127.0.0.1 on resource = Group:LITERAL:g for request = JoinGroup"
    assert wait_for(lambda: join_refused in broker.stderr(), timeout=10, interval=0.2)
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in consumer_errors(consumer, 10)
    assigned = KafkaConsumer(auto_offset_reset="earliest", **kafka_python(bootstrap, "alice"))  # no group: Fetch
    assigned.assign([KpTopicPartition("t", 0)])
    with pytest.raises(TopicAuthorizationFailedError):
        assigned.poll(5000)
    assigned.close()
    assert "Denied Operation = Read from host = 127.0.0.1 on resource = Topic:LITERAL:t for request = Fetch" in (
        broker.stderr()
    )

    # the roles: every running client goes on within a second or two
    grant(mq_command, bootstrap, admin_config, "--producer", "--topic", "t")
    grant(mq_command, bootstrap, admin_config, "--consumer", "--topic", "t", "--group", "g", "--group", "kp")
    assert wait_for(lambda: delivery(producer, b"librdkafka") is None, timeout=10, interval=0.1)
    kp_producer.send("t", b"kafka-python").get(10)
    assert first_value(consumer, 15) == b"librdkafka"
    assert polled_values(kp_consumer, 15)[:2] == [b"librdkafka", b"kafka-python"]
    idempotent = KafkaProducer(**kafka_python(bootstrap, "alice"))  # InitProducerId: WRITE on a topic suffices
    idempotent.send("t", b"idempotent").get(10)
    consumer.close()
    for kp_client in (kp_producer, kp_consumer, idempotent):
        kp_client.close()

    # Metadata for every topic lists only what alice may describe
    assert sorted(AdminClient(alice).list_topics(timeout=15).topics) == ["t"]
    assert {"t", "hidden"} <= set(admin.list_topics(timeout=15).topics)


def test_the_super_user_administers_and_alice_is_refused_cluster_actions(
    broker_factory: Callable[..., BrokerProcess], mq_command: list[str], tmp_path: Path
) -> None:
    _, bootstrap = sasl_broker(broker_factory, *AUTHORIZER)
    admin = AdminClient(librdkafka(bootstrap, "PLAIN", "admin", "admin-secret"))
    alice = AdminClient(librdkafka(bootstrap, "PLAIN", "alice", "alice-secret"))

    def retention(ms: str) -> ConfigEntry:
        return ConfigEntry("retention.ms", ms, incremental_operation=AlterConfigOpType.SET)

    def code_of(future: Any) -> int:
        with pytest.raises(KafkaException) as refused:
            future.result(30)
        return int(refused.value.args[0].code())

    for future in admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "60000"})]).values():
        future.result(30)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    described = admin.describe_configs([topic])[topic].result(30)
    assert described["retention.ms"].value == "60000"
    admin.incremental_alter_configs([ConfigResource("TOPIC", "orders", incremental_configs=[retention("120000")])])[
        topic
    ].result(30)  # fmt: skip
    assert admin.describe_configs([topic])[topic].result(30)["retention.ms"].value == "120000"
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert len(cluster.authorized_operations) == 7  # every operation on the cluster

    assert code_of(alice.create_topics([NewTopic("mine", 1, 1)])["mine"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(alice.describe_configs([topic])[topic]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(alice.delete_topics(["orders"])["orders"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker_id = str(next(iter(admin.list_topics(timeout=15).brokers)))
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, broker_id)
    assert code_of(alice.describe_configs([broker_resource])[broker_resource]) == (
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    )
    threads = ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET)
    altered = alice.incremental_alter_configs([ConfigResource("BROKER", broker_id, incremental_configs=[threads])])
    assert code_of(altered[broker_resource]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert not alice.describe_cluster(include_authorized_operations=True).result(30).authorized_operations

    kp_alice = KafkaAdminClient(**kafka_python(bootstrap, "alice"))
    try:
        topics = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePattern(ResourceType.TOPIC, "t")
        )
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_alice.describe_acls(topics)
    finally:
        kp_alice.close()
    with SyncAdmin(bootstrap, security=client_security(librdkafka(bootstrap, "PLAIN", "alice", "alice-secret"))) as mq:
        log_dirs = mq.call(lambda a: a.cluster.send(None, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, version=3))
        assert (log_dirs.error_code, log_dirs.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ())
        body = {"broker_id": int(broker_id), "broker_epoch": -1}
        shutdown = mq.call(lambda a: a.cluster.send(None, ApiKey.CONTROLLED_SHUTDOWN, body, version=3))
        assert shutdown.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # only brokers may
    listed = mq_acls(mq_command, bootstrap, command_config(tmp_path, "alice"), "--list")
    assert listed.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in listed.stderr

    for future in admin.delete_topics(["orders"]).values():
        future.result(30)
    assert wait_for(lambda: "orders" not in admin.list_topics(timeout=15).topics, timeout=15)


def test_kafka_pythons_acl_integration_test(broker_factory: Callable[..., BrokerProcess]) -> None:
    """kafka-python's test_create_describe_delete_acls, against a broker configured as its fixture configures
    Kafka: the AclAuthorizer with allow.everyone.if.no.acl.found=true."""
    broker = broker_factory(
        "broker",
        ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found=true"],
    ).start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topic = ResourcePattern(ResourceType.TOPIC, "topic")
    try:
        acls, error = admin.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY, topic))
        assert error is NoError and len(acls) == 0
        result = admin.create_acls([ACL("User:test", "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic)])
        assert len(result["failed"]) == 0 and len(result["succeeded"]) == 1
        acls, error = admin.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY, topic))
        assert error is NoError and len(acls) == 1
        deleted = admin.delete_acls([ACLFilter("User:test", "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic)])
        assert len(deleted) == 1 and len(deleted[0][1]) == 1
        acls, error = admin.describe_acls(ACLFilter("*", "*", ACLOperation.ANY, ACLPermissionType.ANY, topic))
        assert error is NoError and len(acls) == 0
    finally:
        admin.close()
