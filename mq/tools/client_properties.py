"""Kafka client properties files (``--producer.config``, ``--consumer.config``) mapped onto mq's client options.

``producer_settings`` and ``consumer_settings`` return keyword arguments of ``AsyncProducer`` and
``AsyncGroupConsumer``. ``bootstrap.servers`` is returned under ``bootstrap_servers``, the security keys
(``security.protocol``, ``sasl.*``, ``ssl.*``: ``mq.client.security``) as one ``security``. Keys mq's clients act on
are parsed (a bad value raises ``ValueError`` naming the key); keys whose Kafka meaning mq's clients already have
(byte-array serializers, one batch in flight per partition, ...) are accepted silently; any other key is reported
through ``warn`` and ignored, never fatal. Kafka 0.8's keys (``metadata.broker.list``, ``request.required.acks``,
``fetch.message.max.bytes``, ...) are first rewritten to the current ones (``mq.tools.old_client_keys``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mq.client.producer import codec_named
from mq.client.security import SECURITY_KEYS, client_security
from mq.errors import ConfigError
from mq.tools.console import CONSUMER_KEYS
from mq.tools.old_client_keys import current_consumer_keys, current_producer_keys

Warn = Callable[[str], None]


def _flag(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, not {value!r}")
    return value.lower() == "true"


def _acks(value: str) -> int:
    if value == "all":
        return -1
    acks = int(value)
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be all, -1, 0 or 1, not {value!r}")
    return acks


def _compression(value: str) -> str:
    codec_named(value)
    return value


def _retries(value: str) -> int:
    return min(int(value), 2**31 - 1)


PRODUCER_KEYS: Mapping[str, tuple[str, Callable[[str], Any]]] = {
    "client.id": ("client_id", str),
    "acks": ("acks", _acks),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_size", int),
    "compression.type": ("compression", _compression),
    "enable.idempotence": ("enable_idempotence", _flag),
    "retries": ("retries", _retries),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
}
"""Kafka producer keys ``AsyncProducer`` acts on: its keyword argument and value parser."""

PRODUCER_KEYS_WITHOUT_EFFECT = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "max.in.flight.requests.per.connection",
        "delivery.timeout.ms",
        "max.block.ms",
        "buffer.memory",
        "max.request.size",
        "metadata.max.age.ms",
        "send.buffer.bytes",
        "receive.buffer.bytes",
        "producer.type",
    }
)
"""Producer keys accepted silently: mq's producer always sends byte arrays, keeps one batch per partition in flight
(so retries never reorder) and blocks ``send`` only on metadata."""

CONSUMER_KEYS_WITHOUT_EFFECT = frozenset(
    {"key.deserializer", "value.deserializer", "receive.buffer.bytes", "send.buffer.bytes", "check.crcs"}
)
"""Consumer keys accepted silently: mq's consumer hands out byte arrays, and the tools' consumers always check fetched
batches' CRCs (``check.crcs=true``, Kafka's default; ``AsyncConsumer(check_crcs=False)`` turns it off)."""


def _settings(
    properties: Mapping[str, str],
    keys: Mapping[str, tuple[str, Callable[[str], Any]]],
    without_effect: frozenset[str],
    handled: frozenset[str],
    what: str,
    warn: Warn,
) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for key, raw in properties.items():
        value = raw.strip()
        if key == "bootstrap.servers":
            settings["bootstrap_servers"] = value
        elif key in keys:
            name, parse = keys[key]
            try:
                settings[name] = parse(value)
            except ValueError as exc:
                raise ValueError(f"invalid value {value!r} for {what} property {key}: {exc}") from None
        elif key not in without_effect and key not in handled and key not in SECURITY_KEYS:
            warn(f"Warning: ignoring {what} property {key} (mq's client does not use it)")
    if SECURITY_KEYS.intersection(properties):
        try:
            settings["security"] = client_security(properties, f"the {what} properties")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return settings


def producer_settings(
    properties: Mapping[str, str], warn: Warn, handled: frozenset[str] = frozenset(), topic: str | None = None
) -> dict[str, Any]:
    """``AsyncProducer`` keyword arguments (plus ``bootstrap_servers``) from Kafka producer properties; ``handled``
    names keys the calling tool interprets itself (no warning for them); ``topic`` is the one topic a tool produces
    to, if any (0.8's ``compressed.topics``)."""
    properties = current_producer_keys(properties, warn, topic)
    return _settings(properties, PRODUCER_KEYS, PRODUCER_KEYS_WITHOUT_EFFECT, handled, "producer", warn)


def consumer_settings(
    properties: Mapping[str, str], warn: Warn, handled: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """``AsyncGroupConsumer`` keyword arguments (plus ``bootstrap_servers``) from Kafka consumer properties;
    ``handled`` names keys the calling tool interprets itself (no warning for them)."""
    properties = current_consumer_keys(properties, warn)
    return _settings(properties, CONSUMER_KEYS, CONSUMER_KEYS_WITHOUT_EFFECT, handled, "consumer", warn)
