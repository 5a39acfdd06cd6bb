"""compression.type against a broker process: librdkafka's batches stored in the topic's codec (the segment files and
``mq dump-segments`` show it), consumers reading every record unchanged; ``producer`` keeps the producer's codec;
a topic config change applies to the next batch; the broker's compression.type applies to topics without one."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from conftest import BrokerProcess
from waiting import wait_for

from mq.records import Codec, iter_headers

pytestmark = pytest.mark.slow

Row = tuple[bytes | None, bytes | None, list[tuple[str, bytes]] | None, int]


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(15)


def produce(bootstrap: str, topic: str, codec: str, start: int, count: int) -> list[Row]:
    """``count`` records in batches of ``codec``, acknowledged; what was sent. Every value compresses well: librdkafka
    sends a batch uncompressed when its codec would not make it smaller."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    sent: list[Row] = []
    for i in range(start, start + count):
        row: Row = (
            None if i % 5 == 0 else f"k{i}".encode(),
            (f"value-{i}-" + "x" * (100 + i % 200)).encode(),
            [("n", str(i).encode())] if i % 3 else None,
            1_700_000_000_000 + i,
        )
        producer.produce(topic, key=row[0], value=row[1], headers=row[2], timestamp=row[3])
        sent.append(row)
    assert producer.flush(30) == 0
    return sent


def consume(bootstrap: str, topic: str, count: int) -> list[Row]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    rows: list[Row] = []
    try:
        for _ in range(200):
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None
                assert message.offset() == len(rows)
                rows.append((message.key(), message.value(), message.headers(), message.timestamp()[1]))
            if len(rows) >= count:
                break
    finally:
        consumer.close()
    return rows


def stored_codecs(broker: BrokerProcess, topic: str) -> list[Codec]:
    """The codec of every batch in the partition's segment file, in order."""
    data = (broker.log_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    return [h.codec for h in iter_headers(data)]


def test_topics_store_batches_in_their_compression_type(broker: BrokerProcess, mq_command: list[str]) -> None:
    bootstrap = broker.bootstrap
    cases = {"to-gzip": ("gzip", "lz4"), "as-sent": ("producer", "lz4"), "to-plain": ("uncompressed", "snappy")}
    for topic, (compression_type, codec) in cases.items():
        create(bootstrap, topic, {"compression.type": compression_type})
        sent = produce(bootstrap, topic, codec, 0, 400)
        assert consume(bootstrap, topic, 400) == sent
    assert set(stored_codecs(broker, "to-gzip")) == {Codec.GZIP}
    assert set(stored_codecs(broker, "as-sent")) == {Codec.LZ4}
    assert set(stored_codecs(broker, "to-plain")) == {Codec.NONE}
    dump = subprocess.run(
        [*mq_command, "dump-segments", "--files", str(broker.log_dir / "to-gzip-0" / "00000000000000000000.log")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    codecs = [line.split("compresscodec: ")[1].split()[0] for line in dump.splitlines() if "compresscodec:" in line]
    assert codecs and set(codecs) == {"GZIP"}

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "as-sent", set_config={"compression.type": "zstd"})
    admin.alter_configs([resource])[resource].result(15)
    probes: list[Row] = []

    def applied() -> bool:  # the broker applies a config change when its watch fires, after AlterConfigs answered
        probes.extend(produce(bootstrap, "as-sent", "lz4", 400 + len(probes), 1))
        return stored_codecs(broker, "as-sent")[-1] == Codec.ZSTD

    assert wait_for(applied, timeout=15)
    before = len(stored_codecs(broker, "as-sent"))
    sent = produce(bootstrap, "as-sent", "lz4", 400 + len(probes), 50)
    assert set(stored_codecs(broker, "as-sent")[before:]) == {Codec.ZSTD}
    assert consume(bootstrap, "as-sent", 450 + len(probes))[400:] == probes + sent


def test_the_brokers_compression_type_applies_to_topics_without_one(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(overrides=["compression.type=zstd"]).start()
    create(broker.bootstrap, "plain", {})
    create(broker.bootstrap, "own", {"compression.type": "producer"})
    for topic in ("plain", "own"):
        sent = produce(broker.bootstrap, topic, "gzip", 0, 300)
        assert consume(broker.bootstrap, topic, 300) == sent
    assert set(stored_codecs(broker, "plain")) == {Codec.ZSTD}
    assert set(stored_codecs(broker, "own")) == {Codec.GZIP}


def test_a_batch_too_large_once_decompressed_is_refused(broker: BrokerProcess) -> None:
    """A gzip batch under max.message.bytes whose records exceed it uncompressed: MESSAGE_TOO_LARGE, nothing stored."""
    create(broker.bootstrap, "small", {"compression.type": "uncompressed", "max.message.bytes": "3000"})
    # every record is queued long before the linger ends, and flush sends them at once, as one batch: with a short
    # linger a starved test process could see a first batch leave with part of them, and a small rest be accepted
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "gzip", "linger.ms": 10_000, "retries": 0}
    )
    errors: list[KafkaError | None] = []
    for _ in range(100):
        producer.produce("small", value=b"a" * 100, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 100
    assert {None if e is None else e.code() for e in errors} == {KafkaError.MSG_SIZE_TOO_LARGE}
    assert stored_codecs(broker, "small") == []
