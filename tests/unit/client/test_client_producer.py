"""AsyncProducer against fake brokers: partitioner, batching, linger, sticky partitions, sequences, retries."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from client_fakes import FakeBroker, run, start_cluster, stop_all
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from mq.client.producer import AsyncProducer, codec_named, murmur2, partition_for_key
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.records import iter_records
from mq.records.batch_header import BatchHeader, Codec, iter_headers
from mq.records.default_batch import RecordBatchBuilder
from mq.topic_partition import TopicPartition


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) == kafka_murmur2(bytearray(key))


@given(st.binary(max_size=32), st.integers(min_value=1, max_value=500))
def test_partition_for_key_matches_kafka_python(key: bytes, partitions: int) -> None:
    assert partition_for_key(key, partitions) == (kafka_murmur2(bytearray(key)) & 0x7FFFFFFF) % partitions


def test_codec_names() -> None:
    assert codec_named("lz4") == Codec.LZ4
    assert codec_named(Codec.ZSTD) == Codec.ZSTD
    with pytest.raises(ValueError):
        codec_named("brotli")


class ProduceLog:
    """A Produce handler that records every batch and answers with per-partition offsets."""

    def __init__(self, errors: list[int] | None = None) -> None:
        self.errors = list(errors or [])
        self.batches: list[tuple[TopicPartition, BatchHeader, list[Any]]] = []
        self.requests: list[list[TopicPartition]] = []
        self.next_offset: dict[TopicPartition, int] = defaultdict(int)

    def __call__(self, header: RequestHeader, body: Any) -> dict[str, Any] | None:
        code = self.errors.pop(0) if self.errors else 0
        responses = []
        request = []
        for topic in body.topic_data:
            parts = []
            for part in topic.partition_data:
                tp = TopicPartition(topic.name, int(part.index))
                request.append(tp)
                base = self.next_offset[tp]
                if code == 0:
                    for batch in iter_headers(part.records):
                        self.batches.append((tp, batch, list(iter_records(part.records, batch))))
                        self.next_offset[tp] += batch.records_count
                parts.append(
                    {"index": tp.partition, "error_code": code, "base_offset": base, "error_message": "scripted"}
                )
            responses.append({"name": topic.name, "partition_responses": parts})
        self.requests.append(request)
        return None if body.acks == 0 else {"responses": responses}


def with_producer(
    test: Callable[[AsyncProducer, ProduceLog, list[FakeBroker]], Awaitable[None]],
    *,
    partitions: int = 1,
    errors: list[int] | None = None,
    **config: Any,
) -> None:
    async def main() -> None:
        brokers = await start_cluster({"t": [0] * partitions})
        log = ProduceLog(errors)
        brokers[0].handlers[ApiKey.PRODUCE] = log
        brokers[0].handlers[ApiKey.INIT_PRODUCER_ID] = lambda h, b: {"producer_id": 42, "producer_epoch": 3}
        producer = AsyncProducer(f"127.0.0.1:{brokers[0].port}", retry_backoff_ms=10, **config)
        try:
            await test(producer, log, brokers)
        finally:
            await producer.close()
            await stop_all(brokers)

    run(main())


def test_linger_collects_records_into_one_batch() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        futures = [await producer.send("t", f"v{i}".encode(), key=b"k", timestamp_ms=1000 + i) for i in range(3)]
        await asyncio.sleep(0.05)
        assert log.requests == []
        results = await asyncio.gather(*futures)
        assert [(r.partition, r.offset, r.timestamp) for r in results] == [(0, 0, 1000), (0, 1, 1001), (0, 2, 1002)]
        assert len(log.requests) == 1
        (tp, batch, records) = log.batches[0]
        assert (tp, batch.records_count, batch.producer_id) == (TopicPartition("t", 0), 3, -1)
        assert [(r.key, r.value) for r in records] == [(b"k", b"v0"), (b"k", b"v1"), (b"k", b"v2")]

    with_producer(test, linger_ms=300)


def test_full_batches_are_sent_without_waiting_for_linger() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        futures = [await producer.send("t", bytes(100), headers=[("h", b"x")]) for _ in range(5)]
        results = await asyncio.wait_for(asyncio.gather(*futures[:4]), 5)
        assert [r.offset for r in results] == list(range(4))
        assert not futures[4].done()
        await producer.flush()
        assert futures[4].result().offset == 4
        sizes = [batch.records_count for _, batch, _ in log.batches]
        assert sum(sizes) == 5 and len(sizes) >= 2 and max(sizes) <= 2
        assert log.batches[0][2][0].headers == (("h", b"x"),)

    with_producer(test, linger_ms=60_000, batch_size=300)


def test_keys_use_the_default_partitioner_and_null_keys_stick_until_a_batch_is_sent() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        keyed = await producer.send("t", b"v", key=b"some-key")
        first = [await producer.send("t", b"a") for _ in range(4)]
        await producer.flush()
        second = [await producer.send("t", b"b") for _ in range(4)]
        await producer.flush()
        assert (await keyed).partition == partition_for_key(b"some-key", 8)
        first_partitions = {f.result().partition for f in first}
        second_partitions = {f.result().partition for f in second}
        assert len(first_partitions) == 1 and len(second_partitions) == 1
        assert first_partitions != second_partitions

    with_producer(test, partitions=8, linger_ms=60_000)


def test_idempotent_producer_numbers_sequences_per_partition() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        for count in (3, 2):
            futures = [await producer.send("t", b"v", partition=p) for p in (0, 1) for _ in range(count)]
            await producer.flush()
            assert all(f.exception() is None for f in futures)
        assert len(brokers[0].of(ApiKey.INIT_PRODUCER_ID)) == 1
        seen = [
            (tp.partition, b.producer_id, b.producer_epoch, b.base_sequence, b.records_count)
            for tp, b, _ in log.batches
        ]
        assert sorted(seen) == [(0, 42, 3, 0, 3), (0, 42, 3, 3, 2), (1, 42, 3, 0, 3), (1, 42, 3, 3, 2)]
        assert [r.sequence for r in log.batches[-1][2]] == [3, 4]

    with_producer(test, partitions=2, acks=-1, enable_idempotence=True, compression="gzip", linger_ms=1000)


def test_retriable_errors_resend_the_same_batch_after_a_metadata_refresh() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        future = await producer.send("t", b"v")
        metadata = await asyncio.wait_for(future, 5)
        assert metadata.offset == 0
        assert len(log.requests) == 3
        produce = [b for _, b in brokers[0].of(ApiKey.PRODUCE)]
        records = [p.topic_data[0].partition_data[0].records for p in produce]
        assert records[0] == records[1] == records[2]
        assert len(brokers[0].of(ApiKey.METADATA)) >= 2

    errors = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS]
    with_producer(test, errors=errors, acks=-1, enable_idempotence=True, linger_ms=0)


def test_fatal_errors_fail_the_records_with_the_broker_message() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        future = await producer.send("t", b"v")
        with pytest.raises(KafkaError, match="scripted") as info:
            await asyncio.wait_for(future, 5)
        assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert len(log.requests) == 1

    with_producer(test, errors=[ErrorCode.MESSAGE_TOO_LARGE], linger_ms=0)


def test_acks_0_completes_without_offsets() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        future = await producer.send("t", b"v", timestamp_ms=5)
        assert (await asyncio.wait_for(future, 5)).offset == -1
        while not log.batches:
            await asyncio.sleep(0.01)
        assert log.batches[0][1].records_count == 1

    with_producer(test, acks=0, linger_ms=0)


def test_unknown_partition_and_bad_settings_are_rejected() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        with pytest.raises(KafkaError) as info:
            await producer.send("t", b"v", partition=3)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    with_producer(test)
    with pytest.raises(ValueError):
        AsyncProducer("h:1", acks=1, enable_idempotence=True)
    with pytest.raises(ValueError):
        AsyncProducer("h:1", acks=2)


def test_send_many_joins_the_batches_of_send_and_completes_once_for_all_records() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        single = await producer.send("t", b"first", partition=1)
        rows = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1000 + i) for i in range(6)]
        to_one = await producer.send_many("t", rows, partition=1)
        keyed = await producer.send_many("t", [(b"a", b"x", (), None), (b"b", b"y", (), None)])
        empty = await producer.send_many("t", [])
        assert empty.done() and empty.result() == 0
        assert (await asyncio.wait_for(to_one, 5), await asyncio.wait_for(keyed, 5)) == (6, 2)
        assert (await single).offset == 0
        by_partition: dict[int, list[Any]] = defaultdict(list)
        for tp, _, records in log.batches:
            by_partition[tp.partition].extend(records)
        first, *mirrored = by_partition[1]
        assert first.value == b"first"
        assert [(r.key, r.value, r.headers, r.timestamp) for r in mirrored] == [
            (b"k%d" % i, b"v%d" % i, (("h", b"%d" % i),), 1000 + i) for i in range(6)
        ]
        assert sum(b.records_count for _, b, _ in log.batches) == 9
        assert len([tp for tp, _, _ in log.batches if tp.partition == 1]) >= 3  # one future spanned several batches
        for key in (b"a", b"b"):
            assert [r.key for r in by_partition[partition_for_key(key, 4)]].count(key) == 1

    with_producer(test, partitions=4, batch_size=120, linger_ms=20)


def test_bulk_sends_keep_each_partitions_order_across_batches() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        keys = [None if i % 7 == 0 else b"key-%d" % (i % 10) for i in range(300)]
        rows = [(key, b"value-%d" % i, (), 5000 + i) for i, key in enumerate(keys)]
        keyed = await producer.send_many("t", rows)
        columns = await producer.send_columns("t", [None, b"c"] * 50, [b"col-%d" % i for i in range(100)], 2)
        assert (await asyncio.wait_for(keyed, 5), await asyncio.wait_for(columns, 5)) == (300, 100)
        by_partition: dict[int, list[Any]] = defaultdict(list)
        for tp, _, records in log.batches:
            by_partition[tp.partition].extend(records)
        assert len([tp for tp, _, _ in log.batches if tp.partition == 2]) >= 3  # runs span several batches
        sent = {r.value: (p, r) for p, records in by_partition.items() for r in records}
        assert len(sent) == 400
        for i, key in enumerate(keys):
            partition, record = sent[b"value-%d" % i]
            assert (record.key, record.timestamp) == (key, 5000 + i)
            if key is not None:
                assert partition == partition_for_key(key, 4)
        for records in by_partition.values():  # each partition in the order sent
            keyed_values = [int(r.value.split(b"-")[1]) for r in records if r.value.startswith(b"value-")]
            assert keyed_values == sorted(keyed_values)
        column_records = [r for r in by_partition[2] if r.value.startswith(b"col-")]
        assert [r.value for r in column_records] == [b"col-%d" % i for i in range(100)]
        assert [r.key for r in column_records] == [None, b"c"] * 50

    with_producer(test, partitions=4, batch_size=600, linger_ms=20)


def test_send_many_fails_with_the_first_batch_error() -> None:
    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        future = await producer.send_many("t", [(None, b"v", (), None)] * 3)
        with pytest.raises(KafkaError, match="scripted"):
            await asyncio.wait_for(future, 5)
        with pytest.raises(KafkaError) as info:
            await producer.send_many("t", [], partition=7)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    with_producer(test, errors=[ErrorCode.MESSAGE_TOO_LARGE], linger_ms=0)


def test_send_batches_takes_fetched_batches_whole_between_other_records_with_this_producers_sequences() -> None:
    fetched = RecordBatchBuilder(Codec.LZ4, producer_id=4711, producer_epoch=1, base_sequence=900)
    for i in range(30):
        fetched.append(2000 + i, b"k%d" % i, b"fetched-%d" % i, [("h", b"%d" % i)])
    data = b"\0" * 10 + fetched.build()  # a batch inside fetched data
    (header,) = iter_headers(data, 10)

    async def test(producer: AsyncProducer, log: ProduceLog, brokers: list[FakeBroker]) -> None:
        assert producer.reuses(header) and not producer.reuses(dataclasses.replace(header, size=100))
        before = await producer.send_many("t", [(b"a", b"before-%d" % i, (), 1000 + i) for i in range(3)], 1)
        whole = await producer.send_batches("t", 1, [(data, header), (data, header)])
        after = await producer.send_many("t", [(b"b", b"after-%d" % i, (), 3000 + i) for i in range(2)], 1)
        assert await asyncio.wait_for(asyncio.gather(before, whole, after), 5) == [3, 60, 2]
        shapes = [(b.records_count, b.base_sequence, b.producer_id, b.codec) for _, b, _ in log.batches]
        assert shapes == [
            (3, 0, 42, Codec.GZIP),
            (30, 3, 42, Codec.GZIP),
            (30, 33, 42, Codec.GZIP),
            (2, 63, 42, Codec.GZIP),
        ]
        values = [r.value for _, _, records in log.batches for r in records]
        fetched_values = [b"fetched-%d" % i for i in range(30)]
        assert values == [
            b"before-0",
            b"before-1",
            b"before-2",
            *fetched_values,
            *fetched_values,
            b"after-0",
            b"after-1",
        ]
        copied = log.batches[1][2]
        assert [(r.key, r.timestamp, r.headers) for r in copied] == [
            (b"k%d" % i, 2000 + i, (("h", b"%d" % i),)) for i in range(30)
        ]

    with_producer(test, partitions=2, acks=-1, enable_idempotence=True, compression="gzip", batch_size=1000)
