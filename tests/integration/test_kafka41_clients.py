"""Kafka 4.1's API versions against the broker process: kafka-python infers a 4.1 broker and round-trips, librdkafka
picks the newest versions both sides have (Fetch v16 by topic id, Produce v10), Produce v13 / Fetch v18 by topic id
over a raw socket, and KIP-951's current leader from a broker without the partition in a cluster. The versions each
client really used are read from the broker's request metrics."""

from __future__ import annotations

import datetime
import re
import socket
import struct
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from waiting import wait_for

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from tests.integration.conftest import BrokerProcess, free_port
from tests.integration.test_admin_tools_cli import advertised_versions
from tests.integration.test_metrics_endpoint import get
from tests.integration.wire import recv_exactly
from tests.produce_frames import produce_frame
from tests.unit.storage.storage_batches import v2_batch

pytestmark = pytest.mark.slow


def with_metrics(broker_factory: Callable[..., BrokerProcess]) -> tuple[BrokerProcess, int]:
    port = free_port()
    return broker_factory(overrides=[f"metrics.listener=http://127.0.0.1:{port}"]).start(), port


def versions_used(port: int, request: str) -> set[int]:
    """The versions of ``request`` the broker has answered, from its request metrics."""
    _, text = get(port, "/metrics")
    pattern = r'^kafka_network_requestmetrics_requests_total\{request="' + request + r'",version="(\d+)"\} (\S+)$'
    return {int(v) for v, count in re.findall(pattern, text, re.MULTILINE) if float(count) > 0}


TRANSACTION_VERSION_1 = {ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4}
"""Kafka 4.1's EndTxn and TxnOffsetCommit v5 are transaction.version 2 (KIP-890: an epoch bump at every commit,
offsets added implicitly); mq's transactions are transaction.version 1 (it finalizes no features)."""


def test_kafka_python_infers_a_kafka_4_1_broker_and_round_trips(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Every API both mq and Kafka 4.1 serve is advertised up to Kafka 4.1's newest version (kafka-python's record of
    a 4.1 broker's ApiVersions), and from an oldest version no newer than 4.1's."""
    broker, port = with_metrics(broker_factory)
    kafka_41 = BROKER_API_VERSIONS[(4, 1)]
    advertised = advertised_versions(broker.bootstrap)
    shared = sorted(set(advertised) & set(kafka_41))
    assert len(shared) >= 40
    expected = {key: kafka_41[key][1] for key in shared} | TRANSACTION_VERSION_1
    assert {key: advertised[key][1] for key in shared} == expected
    assert all(advertised[key][0] <= kafka_41[key][0] for key in shared)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin._client.check_version() == (4, 1)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # idempotent, versions inferred from the broker
    for i in range(3):
        producer.send("k41", b"m%d" % i)
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        "k41", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=15000
    )
    try:
        values = [m.value for _, m in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"m0", b"m1", b"m2"]
    assert versions_used(port, "Metadata") == {13}
    assert 10 in versions_used(port, "ListOffsets")  # kafka-python's newest, Kafka 4.1's newest


def test_librdkafka_fetches_by_topic_id_and_produces_at_its_newest_versions(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker, port = with_metrics(broker_factory)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce("ck41", b"c%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "ck41", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["ck41"])
    values: list[bytes] = []
    try:

        def three() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) == 3

        wait_for(three, timeout=60)
    finally:
        consumer.close()
    assert values == [b"c0", b"c1", b"c2"]
    assert versions_used(port, "Fetch") == {16}  # librdkafka 2.16's newest: topic ids
    assert versions_used(port, "Produce") == {10}
    assert versions_used(port, "Metadata") == {13}


def exchange(bootstrap: str, frame: bytes | bytearray) -> bytes:
    """Send one request frame (no size prefix) and return the response frame (no size prefix)."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + bytes(frame))
        (size,) = struct.unpack(">i", recv_exactly(sock, 4))
        return recv_exactly(sock, size)


def request(key: ApiKey, version: int, values: dict[str, Any]) -> bytes:
    header = RequestHeader(key, version, 5, "raw", 0)
    return encode_request(header, build(request_schema(key, version), values))[4:]


def answer(bootstrap: str, key: ApiKey, version: int, frame: bytes | bytearray) -> Any:
    return decode_response(exchange(bootstrap, frame), response_schema(key, version))[1]


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    """The id of ``topic`` (created by Metadata v13) once it has a leader."""
    values = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": True,
              "include_topic_authorized_operations": False}  # fmt: skip

    found: list[uuid.UUID] = []

    def known() -> bool:
        (topic,) = answer(bootstrap, ApiKey.METADATA, 13, request(ApiKey.METADATA, 13, values)).topics
        if topic.error_code == ErrorCode.NONE and topic.partitions[0].leader_id >= 0:
            found.append(topic.topic_id)
        return bool(found)

    wait_for(known, timeout=30)
    return found[0]


def fetch(bootstrap: str, version: int, topic: uuid.UUID, offset: int) -> Any:
    partition = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
    values = {
        "max_wait": datetime.timedelta(milliseconds=100),
        "min_bytes": 1,
        "topics": [{"topic_id": topic, "partitions": [partition]}],
        "forgotten_topics_data": [],
    }
    return answer(bootstrap, ApiKey.FETCH, version, request(ApiKey.FETCH, version, values))


def test_produce_v13_and_fetch_v18_name_topics_by_id(broker: BrokerProcess) -> None:
    ids = topic_id(broker.bootstrap, "by-id")
    batch = v2_batch(count=4)
    produced = answer(broker.bootstrap, ApiKey.PRODUCE, 13, produce_frame(13, [(ids, [(0, batch)])]))
    (topic,) = produced.responses
    assert topic.topic_id == ids
    assert [(p.error_code, p.base_offset) for p in topic.partition_responses] == [(ErrorCode.NONE, 0)]
    unknown = uuid.uuid4()
    refused = answer(broker.bootstrap, ApiKey.PRODUCE, 13, produce_frame(13, [(unknown, [(0, batch)])]))
    assert refused.responses[0].topic_id == unknown
    assert refused.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    for version in (13, 16, 17, 18):
        fetched = fetch(broker.bootstrap, version, ids, 0)
        (partition,) = fetched.responses[0].partitions
        assert (fetched.responses[0].topic_id, partition.error_code, partition.high_watermark) == (ids, 0, 4)
        assert bytes(partition.records)[8:] == batch[8:] and len(partition.records) == len(batch)
        missing = fetch(broker.bootstrap, version, unknown, 0).responses[0]
        assert (missing.topic_id, missing.partitions[0].error_code) == (unknown, ErrorCode.UNKNOWN_TOPIC_ID)


@pytest.mark.timeout(180)
def test_a_broker_without_the_partition_names_its_leader(cluster: tuple[str, list[BrokerProcess]]) -> None:
    """KIP-951 in a ZooKeeper cluster: Produce v10 and Fetch v16 sent to brokers that host no replica of the
    partition answer NOT_LEADER_OR_FOLLOWER with the leader (id, epoch) and its endpoint."""
    _, brokers = cluster
    admin = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap)
    try:
        admin.create_topics([NewTopic("on-one", replica_assignments={0: [1]})])
    finally:
        admin.close()
    others = [b.bootstrap for b in brokers[1:]]
    ids = [topic_id(bootstrap, "on-one") for bootstrap in others]  # each has had the partition's metadata
    assert ids[0] == ids[1]
    produced = answer(others[0], ApiKey.PRODUCE, 10, produce_frame(10, [("on-one", [(0, v2_batch())])]))
    (partition,) = produced.responses[0].partition_responses
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 0)
    leader = [(e.node_id, f"{e.host}:{e.port}") for e in produced.node_endpoints]
    assert leader == [(1, brokers[0].bootstrap)]
    fetched = fetch(others[1], 16, ids[0], 0)
    (partition,) = fetched.responses[0].partitions
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 0)
    assert [(e.node_id, f"{e.host}:{e.port}") for e in fetched.node_endpoints] == [(1, brokers[0].bootstrap)]
