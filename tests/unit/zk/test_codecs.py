from __future__ import annotations

import json

import pytest

from mq.zk.codecs import (
    BrokerRegistration,
    ControllerInfo,
    PartitionState,
    TopicAssignment,
    decode_cluster_id,
    decode_config_change,
    decode_entity_config,
    decode_partition_list,
    decode_reassignment,
    encode_cluster_id,
    encode_config_change,
    encode_entity_config,
    encode_partition_list,
    encode_reassignment,
    new_topic_id,
)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}',
        b'{"version":2,"partitions":{"1":[2,3],"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}',
        b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"q9VbNPbiRcWKHgG8QVq8Pw","version":3,"extra":1}',
    ],
)
def test_topic_assignment_every_version(data: bytes) -> None:
    assignment = TopicAssignment.decode(data)
    assert assignment.partitions == {0: [1, 2], 1: [2, 3]}


def test_topic_assignment_written_as_2_8() -> None:
    data = TopicAssignment({1: [2, 3], 0: [1, 2]}, "q9VbNPbiRcWKHgG8QVq8Pw", adding_replicas={0: [3]}).encode()
    assert json.loads(data) == {
        "version": 3,
        "topic_id": "q9VbNPbiRcWKHgG8QVq8Pw",
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {},
    }
    assert b" " not in data
    assert TopicAssignment.decode(data).adding_replicas == {0: [3]}


def test_partition_state() -> None:
    data = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}'
    state = PartitionState.decode(data)
    assert state == PartitionState(leader=1, leader_epoch=7, isr=[1, 2], controller_epoch=3)
    assert state.encode() == data


def test_broker_registration_versions() -> None:
    v1 = BrokerRegistration.decode(
        1, b'{"jmx_port":-1,"timestamp":"1500000000000","host":"kafka1","version":1,"port":9092}'
    )
    assert v1.endpoints == ["PLAINTEXT://kafka1:9092"] and v1.host_port() == ("kafka1", 9092)
    v4 = BrokerRegistration.decode(
        2,
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka1:9092"],'
        b'"jmx_port":-1,"host":"kafka1","timestamp":"1500000000000","port":9092,"version":4}',
    )
    assert v4.host_port() == ("kafka1", 9092) and v4.timestamp_ms == 1500000000000
    written = json.loads(BrokerRegistration(3, ["PLAINTEXT://127.0.0.1:9093"], rack="r1", timestamp_ms=5).encode())
    assert written["version"] == 5 and written["host"] == "127.0.0.1" and written["port"] == 9093
    assert written["timestamp"] == "5" and written["rack"] == "r1" and written["jmx_port"] == -1
    with pytest.raises(ValueError, match="unsupported broker registration version 0"):
        BrokerRegistration.decode(1, b'{"version":0}')


def test_controller() -> None:
    data = ControllerInfo(1, 1500000000000).encode()
    assert json.loads(data) == {"version": 1, "brokerid": 1, "timestamp": "1500000000000"}
    assert ControllerInfo.decode(data) == ControllerInfo(1, 1500000000000)


def test_entity_config_values_are_strings() -> None:
    data = encode_entity_config({"retention.ms": "86400000", "cleanup.policy": "compact"})
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "compact"}}
    assert decode_entity_config(b'{"version":1,"config":{}}') == {}


def test_config_change_every_version() -> None:
    assert decode_config_change(encode_config_change("topics/orders")) == "topics/orders"
    assert decode_config_change(b'"my-topic"') == "topics/my-topic"
    assert decode_config_change(b'{"version":1,"entity_type":"clients","entity_name":"c1"}') == "clients/c1"
    with pytest.raises(ValueError):
        decode_config_change(b"[]")


def test_admin_documents() -> None:
    moves = [("foo", 0, [5, 6])]
    assert encode_reassignment(moves) == b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[5,6]}]}'
    assert decode_reassignment(encode_reassignment(moves)) == moves
    assert decode_partition_list(encode_partition_list([("foo", 1)])) == [("foo", 1)]


def test_cluster_id() -> None:
    cluster_id = new_topic_id()
    assert len(cluster_id) == 22 and "=" not in cluster_id
    assert encode_cluster_id(cluster_id) == b'{"version":"1","id":"' + cluster_id.encode() + b'"}'
    assert decode_cluster_id(encode_cluster_id(cluster_id)) == cluster_id


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        PartitionState.decode(b"\xff{")


def test_a_named_plaintext_listener_is_the_registrations_address() -> None:
    registration = BrokerRegistration(1, ["INTERNAL://h1:9092"], None, 0, {"INTERNAL": "PLAINTEXT"})
    decoded = BrokerRegistration.decode(1, registration.encode())
    assert decoded.host_port() == ("h1", 9092)
    assert json.loads(registration.encode())["host"] == "h1"
    assert BrokerRegistration(2, ["SSL://h2:9093"], None, 0, {"SSL": "SSL"}).host_port() is None
