"""Clients that speak the pre-0.11 wire versions against a broker process: kafka-python pinned to 0.8.2 (Produce v0,
Fetch v0: magic 0), 0.9 (v1, v1) and 0.10.1 (v2, v3: magic 1, timestamps), and kcat without ApiVersions (librdkafka
falling back to 0.8.2). What they produce is stored as v2 batches and read back down-converted. And a modern client's
ListOffsets for the max-timestamp spec (KIP-734), which Kafka 2.8 does not have either."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from mq.records import iter_headers
from tests.integration.test_kcat import kcat

pytestmark = pytest.mark.slow

OLD = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2.1"]


@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 9), (0, 10, 1)], ids=["0.8.2", "0.9", "0.10.1"])
def test_kafka_python_pinned_to_an_old_version_produces_and_consumes(broker, api_version) -> None:
    topic = "old-" + "-".join(map(str, api_version))
    KafkaAdminClient(bootstrap_servers=broker.bootstrap).create_topics([NewTopic(topic, 1, 1)])
    compression = None if api_version == (0, 8, 2) else "gzip"
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, api_version=api_version, compression_type=compression, linger_ms=20
    )
    futures = [
        producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode() * 20, timestamp_ms=1_700_000_000_000 + i)
        for i in range(50)
    ]
    offsets = [f.get(10).offset for f in futures]
    producer.close()
    assert offsets == list(range(50))

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        enable_auto_commit=False,
        max_partition_fetch_bytes=700,  # a few messages per fetch, each set cut to the fetch size
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 3)
    received = []
    while len(received) < 47:
        batch = consumer.poll(timeout_ms=5000)
        assert batch, f"only {len(received)} of 47 messages came back"
        received += [(r.offset, r.key, r.value, r.timestamp) for r in batch[tp]]
    consumer.close()
    timestamps = [1_700_000_000_000 + i if api_version >= (0, 10) else -1 for i in range(3, 50)]
    assert [r[:3] for r in received] == [(i, f"k{i}".encode(), f"v{i}".encode() * 20) for i in range(3, 50)]
    if api_version >= (0, 10):
        assert [r[3] for r in received] == timestamps

    segment = next((broker.log_dir / f"{topic}-0").glob("*.log")).read_bytes()
    assert {h.magic for h in iter_headers(segment)} == {2}, "stored as v2 batches"


@pytest.mark.parametrize(
    "api_version", [(0, 8, 1), (0, 8, 2), (0, 9), (0, 10, 1)], ids=["0.8.1", "0.8.2", "0.9", "0.10.1"]
)
def test_kafka_python_pinned_to_an_old_version_commits_and_fetches_offsets(broker, api_version) -> None:
    """0.8.1 commits to ZooKeeper (OffsetCommit/OffsetFetch v0), 0.8.2 to the coordinator it finds with
    FindCoordinator v0 (OffsetCommit v1), 0.9+ through the group APIs' versions; each reads its own back, and a
    commit in ZooKeeper is not one in the coordinator."""
    topic = "committed-" + "-".join(map(str, api_version))
    KafkaAdminClient(bootstrap_servers=broker.bootstrap).create_topics([NewTopic(topic, 2, 1)])
    group = f"group-{topic}"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=api_version, group_id=group)
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer.assign([first, second])
    consumer.commit({first: OffsetAndMetadata(3, "meta", -1), second: OffsetAndMetadata(8, "", -1)})
    assert (consumer.committed(first), consumer.committed(second)) == (3, 8)
    consumer.close()
    modern = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    expected = None if api_version == (0, 8, 1) else 3
    assert modern.committed(first) == expected
    modern.close()


def test_kcat_without_api_versions_produces_and_consumes(broker) -> None:
    lines = b"".join(f"k{i}:v{i}\n".encode() for i in range(20))
    assert kcat("-b", broker.bootstrap, *OLD, "-P", "-t", "oldkc", "-K", ":", data=lines).returncode == 0
    consumed = kcat("-b", broker.bootstrap, *OLD, "-C", "-t", "oldkc", "-e", "-o", "beginning", "-f", "%k|%s|%o\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.decode().splitlines() == [f"k{i}|v{i}|{i}" for i in range(20)]


def test_kcat_without_api_versions_commits_and_resumes_from_the_stored_offset(broker) -> None:
    """librdkafka's 0.8.2 fallback keeps offsets with the coordinator (OffsetFetch and OffsetCommit v1): a first
    run finds none and starts at the beginning, commits where it stopped, and a second run resumes there."""
    group = [
        "-X",
        "group.id=resume",
        "-X",
        "topic.offset.store.method=broker",
        "-X",
        "topic.auto.offset.reset=smallest",
    ]
    lines = b"".join(f"v{i}\n".encode() for i in range(5))
    assert kcat("-b", broker.bootstrap, *OLD, "-P", "-t", "resume", data=lines).returncode == 0
    read = kcat("-b", broker.bootstrap, *OLD, *group, "-C", "-t", "resume", "-o", "stored", "-e", "-f", "%o\n")
    assert read.stdout.decode().split() == ["0", "1", "2", "3", "4"], read.stderr
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="resume")
    assert consumer.committed(TopicPartition("resume", 0)) == 5
    consumer.close()
    more = b"".join(f"w{i}\n".encode() for i in range(3))
    assert kcat("-b", broker.bootstrap, *OLD, "-P", "-t", "resume", data=more).returncode == 0
    read = kcat("-b", broker.bootstrap, *OLD, *group, "-C", "-t", "resume", "-o", "stored", "-e", "-f", "%o:%s\n")
    assert read.stdout.decode().split() == ["5:w0", "6:w1", "7:w2"], read.stderr


def test_confluent_kafka_lists_the_offset_of_the_largest_timestamp(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([ConfluentNewTopic("maxts", 1, 1)])["maxts"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i, ts in enumerate([1_000, 9_000, 3_000, 2_000]):
        producer.produce("maxts", value=b"v%d" % i, timestamp=1_700_000_000_000 + ts)
        producer.flush(10)  # one batch per record
    tp = ConfluentTopicPartition("maxts", 0)
    listed = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(15)
    assert (listed.offset, listed.timestamp) == (1, 1_700_000_009_000)
