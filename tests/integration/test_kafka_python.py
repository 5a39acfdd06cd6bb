"""kafka-python 3 against a broker process: idempotent producer, consumer with assign/seek, admin operations."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

pytestmark = pytest.mark.slow


def admin_client(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def test_produce_and_consume_every_message_back(broker) -> None:
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("orders", 3, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # idempotent, acks=all by default
    sent = []
    for i in range(300):
        key = f"key-{i % 17}".encode()
        value = f"value-{i}".encode() * (i % 5 + 1)
        headers = [("h", str(i).encode()), ("empty", b"")]
        timestamp = 1_700_000_000_000 + i
        metadata = producer.send("orders", value=value, key=key, headers=headers, timestamp_ms=timestamp).get(10)
        sent.append((metadata.partition, metadata.offset, key, value, headers, timestamp))
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    partitions = [TopicPartition("orders", p) for p in range(3)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    received = []
    while len(received) < len(sent):
        batch = consumer.poll(timeout_ms=5000, max_records=1000)
        assert batch, f"only {len(received)} of {len(sent)} messages came back"
        for records in batch.values():
            received += [(r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in records]
    consumer.close()
    assert sorted(received) == sorted(sent)
    for p in range(3):
        offsets = [r[1] for r in received if r[0] == p]
        assert offsets == list(range(len(offsets))), "offsets must be contiguous per partition"


def test_seek_to_an_offset(broker) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    admin_client(broker.bootstrap).create_topics([NewTopic("seek", 1, 1)])
    for i in range(20):
        producer.send("seek", f"m{i}".encode())
    producer.flush()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition("seek", 0)
    consumer.assign([tp])
    consumer.seek(tp, 15)
    values = []
    while len(values) < 5:
        for records in consumer.poll(timeout_ms=5000).values():
            values += [r.value for r in records]
    assert values == [f"m{i}".encode() for i in range(15, 20)]
    assert consumer.end_offsets([tp]) == {tp: 20}
    assert consumer.beginning_offsets([tp]) == {tp: 0}


def test_admin_create_delete_describe_and_partitions(broker) -> None:
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("configured", 2, 1, topic_configs={"retention.ms": "3600000"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("configured", 2, 1)])
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "configured")], config_filter="All")
    configs = described["topic"]["configured"]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["cleanup.policy"]["value"] == "delete"
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "configured")])
    assert set(modified["topic"]["configured"]) == {"retention.ms"}
    admin.create_partitions({"configured": NewPartitions(5)})
    [described_topic] = admin.describe_topics(["configured"])
    assert len(described_topic["partitions"]) == 5
    admin.delete_topics(["configured"])
    assert "configured" not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["configured"])


def test_describe_configs_of_broker_topic_and_both(broker) -> None:
    """What kafka-python's own admin integration tests assert of describe_configs (broker resource, topic resource,
    both in one call, a broker id that is not an integer), with the filter that returns every key."""
    admin = admin_client(broker.bootstrap)
    admin.create_topics([NewTopic("described", 1, 1)])
    node = admin._client.least_loaded_node()

    brokers = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)], config_filter="All")
    assert list(brokers) == ["broker"] and list(brokers["broker"]) == [str(node)]
    advertised = brokers["broker"][str(node)]["advertised.listeners"]
    assert advertised["config_source"] == "DEFAULT_CONFIG"  # not set: the broker advertises its listener
    assert advertised["config_type"] in ("LIST", "STRING")
    assert advertised["read_only"] is False and advertised["is_sensitive"] is False  # per-broker dynamic in 2.8
    assert advertised["synonyms"] == [] and "value" in advertised

    topics = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "described")], config_filter="All")
    assert list(topics) == ["topic"] and list(topics["topic"]) == ["described"]
    retention = topics["topic"]["described"]["retention.bytes"]
    assert retention["config_source"] == "DEFAULT_CONFIG" and retention["config_type"] == "LONG"
    assert retention["read_only"] is False and retention["is_sensitive"] is False
    assert retention["synonyms"] == [] and retention["value"] == "-1"

    both = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "described"), ConfigResource(ConfigResourceType.BROKER, node)],
        config_filter="All",
    )
    assert sorted(both) == ["broker", "topic"]
    assert len(both["topic"]["described"]) > 1 and len(both["broker"][str(node)]) > 1

    with pytest.raises(ValueError):
        admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "str")])
    admin.close()
