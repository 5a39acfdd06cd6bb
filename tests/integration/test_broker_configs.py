"""Dynamic broker configs on a standalone broker process: DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs for BROKER resources (one broker id, or "" for the cluster default)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from waiting import wait_for

from mq.client.admin import AsyncAdmin, ConfigEntry, NewTopic
from mq.client.connection import BrokerConnection
from mq.client.sync import SyncAdmin
from mq.config import LONG_MAX, parse_properties
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.configs import AlterConfigOp, ResourceType

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5


@pytest.fixture
def admin(broker):
    client = SyncAdmin(broker.bootstrap)
    yield client
    client.close()


def broker_id(broker) -> int:
    """The id the broker generated for itself (no broker.id was given), as recorded in meta.properties."""
    meta = parse_properties((broker.log_dir / "meta.properties").read_text(encoding="utf-8"))
    return int(meta["broker.id"])


def described(admin: SyncAdmin, name: str) -> dict[str, ConfigEntry]:
    entries = admin.call(AsyncAdmin.describe_configs, ResourceType.BROKER, name, None, True)
    return {e.name: e for e in entries}


async def send_directly(port: int, api_key: int, body: dict[str, Any]) -> Any:
    """A request to this broker whatever broker a resource names (clients route BROKER resources by id)."""
    connection = BrokerConnection("127.0.0.1", port)
    try:
        return await connection.send(api_key, body)
    finally:
        await connection.close()


def describe_directly(port: int, name: str) -> dict[str, tuple[str, int]]:
    resource = {"resource_type": int(ResourceType.BROKER), "resource_name": name, "configuration_keys": None}
    response = asyncio.run(send_directly(port, ApiKey.DESCRIBE_CONFIGS, {"resources": [resource]}))
    result = response.results[0]
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, c.config_source) for c in result.configs}


def error_of(call) -> KafkaError:
    with pytest.raises(KafkaError) as caught:
        call()
    return caught.value


def test_throttle_rates_are_dynamic_per_broker_and_cluster_wide(broker, admin) -> None:
    node = str(broker_id(broker))  # a generated id (no broker.id given): the broker answers for it
    before = described(admin, node)
    assert before[LEADER_RATE].value == str(LONG_MAX)
    assert (before[LEADER_RATE].source, before[LEADER_RATE].read_only) == (DEFAULT_CONFIG, False)
    assert before["replication.quota.window.num"].value == "11"
    assert before["replication.quota.window.num"].read_only
    assert before["listeners"].source == STATIC_BROKER_CONFIG
    assert described(admin, "") == {}

    admin.call(
        AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, "", {FOLLOWER_RATE: (AlterConfigOp.SET, "2000")}
    )
    admin.call(
        AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, node, {LEADER_RATE: (AlterConfigOp.SET, "1000")}
    )
    admin.call(
        AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, "", {LEADER_RATE: (AlterConfigOp.SET, "3000")}
    )
    defaults = described(admin, "")
    assert sorted(defaults) == [FOLLOWER_RATE, LEADER_RATE]
    assert (defaults[FOLLOWER_RATE].value, defaults[FOLLOWER_RATE].source) == ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    mine = described(admin, node)
    assert (mine[LEADER_RATE].value, mine[LEADER_RATE].source) == ("1000", DYNAMIC_BROKER_CONFIG)
    assert mine[LEADER_RATE].synonyms == (
        (LEADER_RATE, "1000", DYNAMIC_BROKER_CONFIG),
        (LEADER_RATE, "3000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        (LEADER_RATE, str(LONG_MAX), DEFAULT_CONFIG),
    )
    assert (mine[FOLLOWER_RATE].value, mine[FOLLOWER_RATE].source) == ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    # Another broker id is answered from the metadata tree too: only its dynamic keys are known here.
    other = describe_directly(broker.port, "77")
    assert other == {
        FOLLOWER_RATE: ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        LEADER_RATE: ("3000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        "replica.alter.log.dirs.io.max.bytes.per.second": (str(LONG_MAX), DEFAULT_CONFIG),
    }

    # The broker applied its own rates (per-broker leader rate over the default, follower rate from the default).
    deadline = time.monotonic() + 10
    while "leader 1000 B/s, follower 2000 B/s" not in broker.stderr() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "leader 1000 B/s, follower 2000 B/s" in broker.stderr()

    admin.call(
        AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, node, {LEADER_RATE: (AlterConfigOp.DELETE, None)}
    )
    assert described(admin, node)[LEADER_RATE].value == "3000"


def test_alter_configs_replaces_the_whole_entry_and_validate_only_writes_nothing(broker, admin) -> None:
    node = str(broker_id(broker))
    admin.call(AsyncAdmin.alter_configs, ResourceType.BROKER, node, {LEADER_RATE: "10", FOLLOWER_RATE: "20"})
    admin.call(AsyncAdmin.alter_configs, ResourceType.BROKER, node, {FOLLOWER_RATE: "30"})
    entries = described(admin, node)
    assert (entries[LEADER_RATE].source, entries[FOLLOWER_RATE].value) == (DEFAULT_CONFIG, "30")
    admin.call(AsyncAdmin.alter_configs, ResourceType.BROKER, node, {FOLLOWER_RATE: "40"}, True)
    admin.call(
        AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, node, {LEADER_RATE: (AlterConfigOp.SET, "5")}, True
    )
    entries = described(admin, node)
    assert (entries[LEADER_RATE].source, entries[FOLLOWER_RATE].value) == (DEFAULT_CONFIG, "30")


@pytest.mark.parametrize(
    ("name", "changes", "code"),
    [
        ("", {LEADER_RATE: (AlterConfigOp.SET, "-1")}, ErrorCode.INVALID_CONFIG),
        ("", {LEADER_RATE: (AlterConfigOp.SET, "fast")}, ErrorCode.INVALID_CONFIG),
        ("", {FOLLOWER_RATE: (AlterConfigOp.SET, str(LONG_MAX + 1))}, ErrorCode.INVALID_CONFIG),
        ("", {LEADER_RATE: (AlterConfigOp.APPEND, "5")}, ErrorCode.INVALID_CONFIG),
        ("", {"log.retention.hours": (AlterConfigOp.SET, "5")}, ErrorCode.INVALID_REQUEST),
        ("", {"log.dirs": (AlterConfigOp.SET, "/elsewhere")}, ErrorCode.INVALID_REQUEST),
        ("", {"no.such.key": (AlterConfigOp.SET, "5")}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_invalid_broker_config_changes_are_refused(admin, name: str, changes, code: ErrorCode) -> None:
    error = error_of(lambda: admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, name, changes))
    assert error.code == code
    assert described(admin, "") == {}


def advertised_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """The brokers' addresses in the Metadata a new kafka-python client gets through ``bootstrap``."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return [(b["host"], b["port"]) for b in client.describe_cluster()["brokers"]]
    finally:
        client.close()


def test_advertised_listeners_change_per_broker_and_clients_are_given_the_new_address(broker, admin) -> None:
    """As in Kafka 2.8 (a per-broker dynamic key): the broker registers the new endpoints, every broker's metadata
    follows, and the stored value is in force after a restart."""
    node, key = str(broker_id(broker)), "advertised.listeners"
    entry = described(admin, node)[key]
    assert (entry.value, entry.source, entry.read_only) == (None, DEFAULT_CONFIG, False)  # unset: the listeners
    assert advertised_addresses(broker.bootstrap) == [("127.0.0.1", broker.port)]

    renamed = f"PLAINTEXT://localhost:{broker.port}"
    refused = {
        "": (renamed, ErrorCode.INVALID_REQUEST),  # per broker only, not a cluster default
        node: (f"SSL://localhost:{broker.port}", ErrorCode.INVALID_CONFIG),  # no such listener
    }
    for name, (value, code) in refused.items():
        change = {key: (AlterConfigOp.SET, value)}
        error = error_of(
            lambda n=name, c=change: admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, n, c)
        )
        assert error.code == code
    assert described(admin, node)[key].source == DEFAULT_CONFIG

    admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, node, {key: (AlterConfigOp.SET, renamed)})
    entry = described(admin, node)[key]
    assert (entry.value, entry.source) == (renamed, DYNAMIC_BROKER_CONFIG)
    assert wait_for(lambda: advertised_addresses(broker.bootstrap) == [("localhost", broker.port)])

    broker.stop()
    broker.start()
    assert advertised_addresses(broker.bootstrap) == [("localhost", broker.port)]


def test_kafka_python_alters_a_broker_throttle(broker) -> None:
    node = str(broker_id(broker))
    kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        resource = ConfigResource(ConfigResourceType.BROKER, node, configs={LEADER_RATE: "4096"})
        kafka_admin.alter_configs([resource])
        result = kafka_admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)], config_filter="All")
        flat = str(result)
        assert LEADER_RATE in flat and "4096" in flat
    finally:
        kafka_admin.close()


def test_a_broker_resource_name_must_be_an_id_or_empty(broker) -> None:
    resource = {"resource_type": int(ResourceType.BROKER), "resource_name": "not-a-broker"}
    alter = {**resource, "configs": [{"name": LEADER_RATE, "config_operation": 0, "value": "5"}]}
    response = asyncio.run(
        send_directly(broker.port, ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [alter], "validate_only": False})
    )
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST
    assert response.responses[0].error_message == "Broker id must be an integer, but it is: not-a-broker"
    describe = {**resource, "configuration_keys": None}
    response = asyncio.run(send_directly(broker.port, ApiKey.DESCRIBE_CONFIGS, {"resources": [describe]}))
    assert response.results[0].error_code == ErrorCode.INVALID_REQUEST


def test_throttled_replica_lists_are_list_configs_of_topics(admin) -> None:
    admin.call(AsyncAdmin.create_topics, [NewTopic("moving", 2, 1)])
    key = "leader.replication.throttled.replicas"
    admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.TOPIC, "moving", {key: (AlterConfigOp.APPEND, "0:1")})
    admin.call(
        AsyncAdmin.incremental_alter_configs, ResourceType.TOPIC, "moving", {key: (AlterConfigOp.APPEND, "1:1,0:1")}
    )
    entries = {e.name: e for e in admin.call(AsyncAdmin.describe_configs, ResourceType.TOPIC, "moving", [key])}
    assert entries[key].value == "0:1,1:1"
    error = error_of(
        lambda: admin.call(
            AsyncAdmin.incremental_alter_configs, ResourceType.TOPIC, "moving", {key: (AlterConfigOp.SET, "0-1")}
        )
    )
    assert error.code == ErrorCode.INVALID_CONFIG
