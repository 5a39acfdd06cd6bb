"""Kafka client properties mapped onto mq's client options."""

from __future__ import annotations

import pytest

from mq.tools.client_properties import consumer_settings, producer_settings


def test_producer_keys_map_to_producer_options() -> None:
    warnings: list[str] = []
    settings = producer_settings(
        {
            "bootstrap.servers": "h:9092 ",
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": "7",
            "retries": str(2**40),
            "enable.idempotence": "true",
            "client.id": "me",
        },
        warnings.append,
    )
    assert settings == {
        "bootstrap_servers": "h:9092",
        "acks": -1,
        "compression": "lz4",
        "linger_ms": 7,
        "retries": 2**31 - 1,
        "enable_idempotence": True,
        "client_id": "me",
    }
    assert warnings == []


def test_unknown_keys_warn_and_keys_without_effect_do_not() -> None:
    warnings: list[str] = []
    settings = producer_settings(
        {"value.serializer": "x", "interceptor.classes": "I", "mine": "1"}, warnings.append, frozenset({"mine"})
    )
    assert settings == {}
    assert warnings == ["Warning: ignoring producer property interceptor.classes (mq's client does not use it)"]


def test_security_keys_become_one_client_security() -> None:
    warnings: list[str] = []
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    settings = consumer_settings(
        {
            "group.id": "g",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
        },
        warnings.append,
    )
    assert settings["group_id"] == "g"
    security = settings["security"]
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "u",
        "p",
    )
    assert warnings == []
    assert "security" not in producer_settings({"acks": "1"}, warnings.append)


def test_bad_security_value_names_the_key() -> None:
    with pytest.raises(ValueError, match="security.protocol in the producer properties"):
        producer_settings({"security.protocol": "TLS"}, print)


def test_consumer_keys_map_to_group_consumer_options() -> None:
    warnings: list[str] = []
    settings = consumer_settings(
        {"group.id": "g", "auto.offset.reset": "earliest", "key.deserializer": "x", "fancy": "y"}, warnings.append
    )
    assert settings == {"group_id": "g", "auto_offset_reset": "earliest"}
    assert warnings == ["Warning: ignoring consumer property fancy (mq's client does not use it)"]


@pytest.mark.parametrize(("key", "value"), [("acks", "2"), ("linger.ms", "soon"), ("enable.idempotence", "maybe")])
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key):
        producer_settings({key: value}, print)
