"""Kafka 0.8 producer and consumer property keys rewritten to the keys of Kafka's current clients.

``current_producer_keys`` and ``current_consumer_keys`` take a properties mapping as read from a
``--producer.config`` / ``--consumer.config`` file and return a new mapping in which every 0.8 key the current
clients have an equivalent for is replaced by that equivalent (``metadata.broker.list`` -> ``bootstrap.servers``,
``request.required.acks`` -> ``acks``, ``compression.codec=2`` -> ``compression.type=snappy``, ...), each reported by
one ``Warning:`` line through ``warn``. A key given in both spellings keeps the current one. 0.8 keys without an
equivalent are dropped with a line saying why; any other key passes through untouched. Applying either function
to its own result changes nothing and reports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Warn = Callable[[str], None]

CODECS_0_8 = {"0": "none", "1": "gzip", "2": "snappy", "3": "lz4"} | {c: c for c in ("none", "gzip", "snappy", "lz4")}
"""0.8's ``compression.codec`` values (names or ``CompressionCodec`` ids; lz4 from 0.8.2) -> ``compression.type``."""

ENCODERS = {"kafka.serializer.DefaultEncoder": "bytes", "kafka.serializer.StringEncoder": "UTF-8 strings"}
"""0.8's encoder classes: what they put on the wire (mq's tools produce the bytes they read, so both are exact)."""

DEFAULT_PARTITIONER = "kafka.producer.DefaultPartitioner"

RENAMED_PRODUCER_KEYS = {
    "metadata.broker.list": "bootstrap.servers",
    "request.required.acks": "acks",
    "message.send.max.retries": "retries",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
}
"""0.8 producer keys whose value means the same under the current key."""

RENAMED_CONSUMER_KEYS = {
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
    "socket.receive.buffer.bytes": "receive.buffer.bytes",
    "auto.commit.enable": "enable.auto.commit",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
}
"""0.8 consumer keys whose value means the same under the current key."""

OFFSET_RESETS_0_8 = {"smallest": "earliest", "largest": "latest"}


def _note(warn: Warn, what: str, key: str, text: str) -> None:
    warn(f"Warning: {what} property {key} is deprecated (Kafka 0.8); {text}")


def _rename(result: dict[str, str], renamed: Mapping[str, str], what: str, warn: Warn) -> None:
    for old, new in renamed.items():
        if old not in result:
            continue
        value = result.pop(old)
        if new in result:
            _note(warn, what, old, f"{new}={result[new]} given too, so {old} is ignored")
        else:
            result[new] = value
            _note(warn, what, old, f"use {new} (set to {value.strip()})")


def current_producer_keys(properties: Mapping[str, str], warn: Warn, topic: str | None = None) -> dict[str, str]:
    """The producer ``properties`` with 0.8 keys rewritten. ``producer.type=async`` lingers
    ``queue.buffering.max.ms`` (0.8's default 5000) as ``linger.ms``; ``sync`` (0.8's default) sends at once
    (``linger.ms=0``) and keeps ``producer.type=sync`` for tools that then wait for each send. A non-empty
    ``compressed.topics`` compresses only the listed topics: a tool producing to one ``topic`` gets
    ``compression.type=none`` when that topic is not listed."""
    what = "producer"
    result = dict(properties)
    _rename(result, RENAMED_PRODUCER_KEYS, what, warn)
    if "compression.codec" in result:
        raw = result.pop("compression.codec").strip()
        codec = CODECS_0_8.get(raw.lower())
        if codec is None:
            raise ValueError(f"invalid value {raw!r} for producer property compression.codec")
        if "compression.type" in result:
            _note(warn, what, "compression.codec", "compression.type given too, so compression.codec is ignored")
        else:
            result["compression.type"] = codec
            _note(warn, what, "compression.codec", f"use compression.type (set to {codec})")
    if "compressed.topics" in result:
        listed = [t.strip() for t in result.pop("compressed.topics").split(",") if t.strip()]
        if not listed:
            _note(warn, what, "compressed.topics", "empty, so compression.type applies to every topic")
        elif topic is not None:
            if topic not in listed:
                result["compression.type"] = "none"
            _note(warn, what, "compressed.topics", f"topic {topic} is {'' if topic in listed else 'not '}compressed")
        else:
            _note(warn, what, "compressed.topics", "mq applies compression.type to every topic")
    producer_type = result.get("producer.type", "").strip()
    buffering = result.pop("queue.buffering.max.ms", None)
    if producer_type not in ("", "sync", "async"):
        raise ValueError(f"invalid value {producer_type!r} for producer property producer.type: sync or async")
    if producer_type == "async":
        result.pop("producer.type")
        result.setdefault("linger.ms", (buffering or "5000").strip())
        _note(warn, what, "producer.type", f"async batches for linger.ms={result['linger.ms']}")
    elif (producer_type == "sync" or buffering is not None) and "linger.ms" not in result:
        result["linger.ms"] = "0"
        _note(warn, what, "producer.type", "sync (0.8's default) sends each message at once: linger.ms=0")
    if buffering is not None:
        used = "use linger.ms" if producer_type == "async" else "only producer.type=async buffers, so it is unused"
        _note(warn, what, "queue.buffering.max.ms", used)
    if "queue.enqueue.timeout.ms" in result:
        result.pop("queue.enqueue.timeout.ms")
        _note(warn, what, "queue.enqueue.timeout.ms", "mq's producer never refuses a message for a full queue")
    if "batch.num.messages" in result:
        result.pop("batch.num.messages")
        _note(warn, what, "batch.num.messages", "mq batches by bytes (batch.size), not by message count")
    if "queue.buffering.max.messages" in result:
        result.pop("queue.buffering.max.messages")
        _note(warn, what, "queue.buffering.max.messages", "mq bounds the queue by its batches, use batch.size")
    for old, new in (("serializer.class", "value.serializer"), ("key.serializer.class", "key.serializer")):
        if old in result:
            encoder = result.pop(old).strip()
            sent = ENCODERS.get(encoder)
            text = f"mq sends {sent} as {encoder} did" if sent else f"mq cannot load {encoder} and sends bytes"
            _note(warn, what, old, f"use {new}; {text}")
    if "partitioner.class" in result:
        partitioner = result.pop("partitioner.class").strip()
        if partitioner == DEFAULT_PARTITIONER:
            _note(warn, what, "partitioner.class", "mq's default partitioner spreads keys by murmur2 hash")
        else:
            _note(warn, what, "partitioner.class", f"mq cannot load {partitioner} and uses its default partitioner")
    return result


def current_consumer_keys(properties: Mapping[str, str], warn: Warn) -> dict[str, str]:
    """The consumer ``properties`` with 0.8 keys rewritten; ``auto.offset.reset`` smallest/largest become
    earliest/latest. ``consumer.timeout.ms``, ``zookeeper.connect`` and the other ZooKeeper consumer keys pass
    through: the tools that read them act on them."""
    what = "consumer"
    result = dict(properties)
    _rename(result, RENAMED_CONSUMER_KEYS, what, warn)
    reset = result.get("auto.offset.reset", "").strip()
    if reset in OFFSET_RESETS_0_8:
        result["auto.offset.reset"] = OFFSET_RESETS_0_8[reset]
        _note(warn, what, f"auto.offset.reset={reset}", f"use auto.offset.reset={OFFSET_RESETS_0_8[reset]}")
    return result
