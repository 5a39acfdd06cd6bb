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
        {"value.serializer": "x", "sasl.mechanism": "PLAIN", "mine": "1"}, warnings.append, frozenset({"mine"})
    )
    assert settings == {}
    assert warnings == ["Warning: ignoring producer property sasl.mechanism (mq's client does not use it)"]


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
