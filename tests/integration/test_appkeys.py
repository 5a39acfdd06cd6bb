"""Mafka's appkeys on mq (README, "Appkeys"): an appkey is a SCRAM user the admin creates with ``mq configs``, its
topics a prefixed ``--producer`` grant and its consumer group a ``--consumer`` grant of ``mq acls``; with
``allow.everyone.if.no.acl.found=false`` it reaches nothing else, and ``mq acls --list --principal`` shows its
grants."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess
from test_authorization import AUTHORIZER, command_config, consumer_errors, delivery, first_value, mq_acls
from test_sasl import librdkafka, sasl_broker

pytestmark = pytest.mark.slow

APPKEY, SECRET = "app-orders", "app-orders-secret"


def test_an_appkey_reaches_its_topics_and_group_and_nothing_else(
    broker_factory: Callable[..., BrokerProcess], mq_command: list[str], tmp_path: Path
) -> None:
    broker, bootstrap = sasl_broker(broker_factory, *AUTHORIZER, "allow.everyone.if.no.acl.found=false")
    admin_config = command_config(tmp_path, "admin")
    made = subprocess.run(
        [*mq_command, "configs", "--bootstrap-server", bootstrap, "--command-config", str(admin_config),
         "--entity-type", "users", "--entity-name", APPKEY, "--alter", "--add-config",
         f"SCRAM-SHA-512=[password={SECRET}]"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    admin = AdminClient(librdkafka(bootstrap, "PLAIN", "admin", "admin-secret"))
    for future in admin.create_topics([NewTopic("orders.created", 1, 1), NewTopic("payments", 1, 1)]).values():
        future.result(30)
    for role in (
        ["--producer", "--topic", "orders.", "--resource-pattern-type", "prefixed"],
        ["--consumer", "--topic", "orders.", "--resource-pattern-type", "prefixed", "--group", "orders-billing"],
    ):
        added = mq_acls(mq_command, bootstrap, admin_config, "--add", "--allow-principal", f"User:{APPKEY}", *role)
        assert added.returncode == 0, added.stderr

    appkey = librdkafka(bootstrap, "SCRAM-SHA-512", APPKEY, SECRET)
    producer = Producer(appkey)
    producer.produce("orders.created", b"order-1")
    assert producer.flush(20) == 0
    refused = delivery(Producer(appkey), b"not mine")  # delivery() writes to topic "t": no grant either
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    payments: list[KafkaError | None] = []
    other = Producer(appkey)
    other.produce("payments", b"x", on_delivery=lambda error, _: payments.append(error))
    other.flush(15)
    assert payments and payments[0] is not None and payments[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer({**appkey, "group.id": "orders-billing", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders.created"])
    assert first_value(consumer, 20) == b"order-1"
    consumer.close()
    stranger = Consumer({**appkey, "group.id": "someone-elses", "auto.offset.reset": "earliest"})
    stranger.subscribe(["orders.created"])
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in consumer_errors(stranger, 10)
    stranger.close()

    listed = mq_acls(mq_command, bootstrap, admin_config, "--list", "--principal", f"User:{APPKEY}")
    assert listed.returncode == 0, listed.stderr
    assert "ResourcePattern(resourceType=TOPIC, name=orders., patternType=PREFIXED)" in listed.stdout
    # the pattern type applies to every resource of the command, as in kafka-acls
    assert "ResourcePattern(resourceType=GROUP, name=orders-billing, patternType=PREFIXED)" in listed.stdout
    assert SECRET not in broker.stderr()
