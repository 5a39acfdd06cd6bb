"""Poison batches (a valid CRC around records that do not parse, or a compressed payload that does not decompress)
sent from a raw socket are refused with INVALID_RECORD and the failing record's index; nothing of them is stored,
and real clients go on reading the partition's good records."""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import struct
import subprocess
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.records.batch_header import Codec
from mq.records.default_batch import RecordBatchBuilder, assemble_batch
from mq.records.varint import encode_varint

pytestmark = pytest.mark.slow

TOPIC = "poison"
GOOD = [b"good-%d" % i for i in range(5)]


def produce(bootstrap: str, records: bytes, version: int) -> Any:
    """The partition response to one Produce request of ``version`` carrying ``records``, sent from a raw socket."""
    values = {
        "acks": 1,
        "timeout": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    request = encode_request(
        RequestHeader(ApiKey.PRODUCE, version, 7, "raw", 0), build(request_schema(ApiKey.PRODUCE, version), values)
    )
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        _, response = decode_response(stream.read(size), response_schema(ApiKey.PRODUCE, version))
    return response.responses[0].partition_responses[0]


def garbage_records() -> bytes:
    """Three records' worth of random bytes behind a correct header and CRC."""
    return assemble_batch(0, -1, 0, 2, 1, 1, -1, -1, -1, 3, random.Random(7).randbytes(300))


def garbage_gzip() -> bytes:
    return assemble_batch(0, -1, int(Codec.GZIP), 2, 1, 1, -1, -1, -1, 3, b"\x1f\x8b" + b"not a gzip stream" * 5)


def bad_third_record() -> bytes:
    """Five well-formed records but the third claims an offset delta of 7."""
    builder = RecordBatchBuilder()
    for _ in range(5):
        builder.append(1, None, b"x" * 10)
    good = builder.build()
    area = bytearray(good[61:])
    position = 0
    for _ in range(2):
        position += 1 + area[position] // 2  # every record here has a 1-byte length varint
    offset_delta_at = position + 3  # length, attributes, timestamp delta
    assert area[offset_delta_at] == encode_varint(2)[0]
    area[offset_delta_at] = encode_varint(7)[0]
    return assemble_batch(0, -1, 0, 4, 1, 1, -1, -1, -1, 5, bytes(area))


def end_offset(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return int(consumer.end_offsets([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)])
    finally:
        consumer.close()


def test_poison_batches_are_refused_and_clients_read_the_good_records(broker) -> None:
    KafkaAdminClient(bootstrap_servers=broker.bootstrap).create_topics([NewTopic(TOPIC, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for value in GOOD:
        producer.send(TOPIC, value, partition=0)
    producer.flush()
    producer.close()
    assert end_offset(broker.bootstrap) == len(GOOD)

    for poison, record_errors in ((garbage_records(), [0]), (garbage_gzip(), [])):
        answer = produce(broker.bootstrap, poison, 9)
        assert answer.error_code == ErrorCode.INVALID_RECORD
        assert answer.error_message
        assert [e.batch_index for e in answer.record_errors] == record_errors
        assert produce(broker.bootstrap, poison, 7).error_code == ErrorCode.INVALID_RECORD
    answer = produce(broker.bootstrap, bad_third_record(), 8)
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in answer.record_errors] == [2]
    assert "offset delta 7" in answer.record_errors[0].batch_index_error_message
    assert end_offset(broker.bootstrap) == len(GOOD)

    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: scripts/test.sh installs it"
    read = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "0", "-e", "-q"],
        capture_output=True,
        timeout=60,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == GOOD

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    values: list[bytes] = []
    for _ in range(20):
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
        if len(values) >= len(GOOD):
            break
    consumer.close()
    assert values == GOOD

    async def aiokafka_reads() -> list[bytes]:
        reader = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await reader.start()
        try:
            got: list[bytes] = []
            while len(got) < len(GOOD):
                batches = await asyncio.wait_for(reader.getmany(timeout_ms=500), 30)
                got += [r.value for records in batches.values() for r in records if r.value is not None]
            return got
        finally:
            await reader.stop()

    assert asyncio.run(aiokafka_reads()) == GOOD

    after = RecordBatchBuilder()
    after.append(1, None, b"after")
    answer = produce(broker.bootstrap, after.build(), 9)
    assert answer.error_code == 0 and answer.base_offset == len(GOOD)
