"""confluent-kafka (librdkafka) against a broker process: every codec, consumer, AdminClient."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

pytestmark = pytest.mark.slow


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips(broker, codec: str) -> None:
    topic = f"codec-{codec}"
    create(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
    sent = {}
    errors = []

    def delivered(err, msg, headers) -> None:  # delivery reports carry no headers: keep what was sent
        if err is not None:
            errors.append(err)
        else:
            sent[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), headers, msg.timestamp()[1])

    for i in range(500):
        headers = [("n", str(i).encode())]
        producer.produce(
            topic,
            value=(f"value-{i}-" + "x" * (i % 300)).encode(),
            key=f"k{i % 11}".encode(),
            headers=headers,
            timestamp=1_700_000_000_000 + i,
            on_delivery=lambda err, msg, headers=headers: delivered(err, msg, headers),
        )
    assert producer.flush(30) == 0
    assert not errors
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    received = {}
    while len(received) < len(sent):
        msg = consumer.poll(10)
        assert msg is not None, f"only {len(received)} of {len(sent)} came back"
        assert msg.error() is None, msg.error()
        received[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])
    consumer.close()
    assert received == sent
    for p in range(2):
        offsets = sorted(o for q, o in sent if q == p)
        assert offsets == list(range(len(offsets)))


def test_admin_client(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("adm", 3, 1, config={"cleanup.policy": "compact"})])["adm"].result(15)
    assert "adm" in admin.list_topics(timeout=10).topics
    assert len(admin.list_topics(timeout=10).topics["adm"].partitions) == 3
    resource = ConfigResource("topic", "adm")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == "1073741824"
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic("adm", 1, 1)])["adm"].result(15)
    admin.delete_topics(["adm"])["adm"].result(15)
    assert "adm" not in admin.list_topics(timeout=10).topics
