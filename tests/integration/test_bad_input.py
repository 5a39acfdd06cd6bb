"""Bad input gets Kafka's error for that partition or closes only that connection; the broker keeps serving."""

from __future__ import annotations

import socket
import struct
import threading

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

pytestmark = pytest.mark.slow


class Wire:
    """A raw client connection speaking framed requests encoded by kafka-python."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, request, response_class, version: int):
        request.with_header(correlation_id=1, client_id="raw")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", self.recv_exactly(4))[0]
        return response_class.decode(self.recv_exactly(size), version=version, header=True)

    def recv_exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True

    def close(self) -> None:
        self.sock.close()


def batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for i, v in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=v, headers=[])
    return bytes(builder.build())


def produce(wire: Wire, topic: str, partition: int, records: bytes):
    cls = ProduceRequest[7]
    request = cls(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            cls.TopicProduceData(
                name=topic, partition_data=[cls.TopicProduceData.PartitionProduceData(index=partition, records=records)]
            )
        ],
    )
    return wire.request(request, ProduceResponse, 7).responses[0].partition_responses[0]


def still_serves(bootstrap: str) -> None:
    wire = Wire(bootstrap)
    response = wire.request(
        ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), ApiVersionsResponse, 3
    )
    assert response.error_code == 0
    wire.close()


def topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics(
        [NewTopic(name, partitions, 1, topic_configs=config or {})]
    )


def test_malformed_frame_closes_only_that_connection(broker) -> None:
    bystander = Wire(broker.bootstrap)
    bad = Wire(broker.bootstrap)
    bad.send_raw(struct.pack(">i", 6) + b"\x00\x03\x00")  # truncated header inside a complete frame
    bad.send_raw(b"\x00\x00\x00")
    assert bad.closed_by_peer()
    response = bystander.request(MetadataRequest[4](topics=None, allow_auto_topic_creation=False), MetadataResponse, 4)
    assert response.brokers[0].port == broker.port


def test_oversized_request_is_refused_before_buffering(broker_factory) -> None:
    broker = broker_factory(overrides=["socket.request.max.bytes=1024"]).start()
    bad = Wire(broker.bootstrap)
    bad.send_raw(struct.pack(">i", 50_000_000))
    assert bad.closed_by_peer()
    still_serves(broker.bootstrap)


def test_unsupported_version_closes_the_connection_and_api_versions_answers_35(broker) -> None:
    wire = Wire(broker.bootstrap)
    wire.send_raw(struct.pack(">ihhih", 10, 3, 99, 5, -1))
    assert wire.closed_by_peer()
    wire = Wire(broker.bootstrap)
    wire.send_raw(struct.pack(">ihhih", 10, 18, 99, 5, -1))
    size = struct.unpack(">i", wire.recv_exactly(4))[0]
    response = ApiVersionsResponse.decode(wire.recv_exactly(size), version=0, header=True)
    assert response.error_code == 35
    still_serves(broker.bootstrap)


def test_corrupt_batch_gets_corrupt_message_and_nothing_is_appended(broker) -> None:
    topic(broker.bootstrap, "crc")
    wire = Wire(broker.bootstrap)
    good = batch([b"a", b"b"])
    corrupt = bytearray(good)
    corrupt[-2] ^= 0xFF
    assert produce(wire, "crc", 0, bytes(corrupt)).error_code == 2
    answer = produce(wire, "crc", 0, good)
    assert answer.error_code == 0 and answer.base_offset == 0


def test_batch_over_max_message_bytes(broker) -> None:
    topic(broker.bootstrap, "small", config={"max.message.bytes": "1000"})
    wire = Wire(broker.bootstrap)
    assert produce(wire, "small", 0, batch([b"x" * 5000])).error_code == 10
    assert produce(wire, "small", 0, batch([b"y" * 10])).error_code == 0


def test_invalid_topic_and_unknown_partition(broker) -> None:
    wire = Wire(broker.bootstrap)
    response = wire.request(
        MetadataRequest[4](
            topics=[MetadataRequest[4].MetadataRequestTopic(name="bad name!")], allow_auto_topic_creation=True
        ),
        MetadataResponse,
        4,
    )
    assert response.topics[0].error_code == 17
    topic(broker.bootstrap, "one")
    assert produce(wire, "one", 7, batch([b"v"])).error_code == 3
    still_serves(broker.bootstrap)


def test_out_of_range_offset(broker) -> None:
    topic(broker.bootstrap, "range")
    wire = Wire(broker.bootstrap)
    produce(wire, "range", 0, batch([b"1", b"2"]))
    cls = FetchRequest[11]
    request = cls(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            cls.FetchTopic(
                topic="range",
                partitions=[
                    cls.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=99,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    response = wire.request(request, FetchResponse, 11)
    assert response.responses[0].partitions[0].error_code == 1
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    tp = TopicPartition("range", 0)
    consumer.assign([tp])
    consumer.seek(tp, 99)
    values = []
    while len(values) < 2:
        for records in consumer.poll(timeout_ms=5000).values():
            values += [r.value for r in records]
    assert values == [b"1", b"2"]


def test_acknowledged_writes_survive_a_clean_restart_and_a_kill(broker) -> None:
    topic(broker.bootstrap, "durable", 2, {"retention.ms": "86400000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    acked = [producer.send("durable", f"m{i}".encode()).get(10) for i in range(200)]
    producer.close()
    broker.stop()
    broker.start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    acked += [producer.send("durable", f"n{i}".encode()).get(10) for i in range(200)]
    producer.close()
    broker.kill()
    broker.start()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition("durable", p) for p in range(2)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen = set()
    while len(seen) < len(acked):
        batchset = consumer.poll(timeout_ms=5000)
        assert batchset, f"{len(seen)} of {len(acked)} acknowledged messages came back"
        for records in batchset.values():
            seen.update((r.partition, r.offset) for r in records)
    assert {(m.partition, m.offset) for m in acked} <= seen
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "durable")])
    assert described["topic"]["durable"]["retention.ms"]["value"] == "86400000"


def test_idempotent_retry_is_not_appended_twice(broker) -> None:
    topic(broker.bootstrap, "idem")
    wire = Wire(broker.bootstrap)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=77,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for i in range(3):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=b"x%d" % i, headers=[])
    first = bytes(builder.build())
    assert produce(wire, "idem", 0, first).base_offset == 0
    retried = produce(wire, "idem", 0, first)
    assert (retried.error_code, retried.base_offset) == (0, 0)
    gap = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=77,
        producer_epoch=0,
        base_sequence=9,
        batch_size=1 << 20,
    )
    gap.append(0, timestamp=1_700_000_000_000, key=None, value=b"late", headers=[])
    assert produce(wire, "idem", 0, bytes(gap.build())).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    broker.kill()
    broker.start()
    wire = Wire(broker.bootstrap)
    after_restart = produce(wire, "idem", 0, first)
    assert (after_restart.error_code, after_restart.base_offset) == (0, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition("idem", 0)
    consumer.assign([tp])
    assert consumer.end_offsets([tp]) == {tp: 3}


def test_kill_during_a_produce_loop_loses_no_acknowledged_write(broker) -> None:
    topic(broker.bootstrap, "loop", 2)
    acked: list[tuple[int, int]] = []
    stop = threading.Event()

    def produce_forever() -> None:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, acks=1, linger_ms=1, retries=0, enable_idempotence=False
        )
        i = 0
        while not stop.is_set():
            try:
                metadata = producer.send("loop", b"m%d" % i).get(5)
                acked.append((metadata.partition, metadata.offset))
            except Exception:
                break
            i += 1
        producer.close(timeout=1)

    worker = threading.Thread(target=produce_forever)
    worker.start()
    deadline = 0
    while len(acked) < 300 and deadline < 300:
        deadline += 1
        threading.Event().wait(0.05)
    broker.kill()
    stop.set()
    worker.join(30)
    assert len(acked) >= 300
    broker.start()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition("loop", p) for p in range(2)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    seen: set[tuple[int, int]] = set()
    wanted = set(acked)
    for _ in range(50):
        for records in consumer.poll(timeout_ms=1000).values():
            seen.update((r.partition, r.offset) for r in records)
        if wanted <= seen:
            break
    assert wanted <= seen, f"{len(wanted - seen)} acknowledged messages were lost"
