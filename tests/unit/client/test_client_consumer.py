"""Consumer: parsing fetched data, positions, offset resets and polling against a fake broker."""

from __future__ import annotations

from typing import Any

import pytest
from client_fakes import FakeBroker, run, start_cluster, stop_all

from mq.client.consumer import AsyncConsumer, entry_records, parse_records
from mq.errors import CorruptFetchedBatchError, ErrorCode, OffsetOutOfRangeError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.records.batch_header import Codec, TimestampType
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.records.record import ABORT, COMMIT
from mq.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def batch(base_offset: int, count: int, codec: Codec = Codec.NONE, producer_id: int = -1, **kw: Any) -> bytes:
    builder = RecordBatchBuilder(codec=codec, base_offset=base_offset, producer_id=producer_id, **kw)
    for i in range(count):
        builder.append(1000 + base_offset + i, None, f"v{base_offset + i}".encode(), [("h", b"1")])
    return builder.build()


def test_parses_batches_skipping_records_below_the_position_control_batches_and_a_partial_tail() -> None:
    data = (
        batch(0, 3)
        + batch(3, 3, Codec.GZIP)
        + build_control_batch(COMMIT, 7, 0, 0, base_offset=6)
        + batch(7, 2, timestamp_type=TimestampType.LOG_APPEND_TIME)
    )
    tail = batch(9, 5)
    records, next_position = parse_records(TP, data + tail[:-7], 4)
    assert [r.offset for r in records] == [4, 5, 7, 8]
    assert [r.value for r in records] == [b"v4", b"v5", b"v7", b"v8"]
    assert [r.timestamp_type for r in records] == [0, 0, 1, 1]
    assert records[0].headers == (("h", b"1"),)
    assert (records[0].topic, records[0].partition, records[0].timestamp, records[0].key) == ("t", 0, 1004, None)
    assert next_position == 9
    assert parse_records(TP, data, 9) == ([], 9)
    assert parse_records(TP, tail[:30], 9) == ([], 9)


def test_a_trailing_control_batch_still_advances_the_position() -> None:
    records, next_position = parse_records(TP, batch(0, 2) + build_control_batch(COMMIT, 7, 0, 0, base_offset=2), 0)
    assert [r.offset for r in records] == [0, 1]
    assert next_position == 3


def test_read_committed_drops_aborted_transactions() -> None:
    data = (
        batch(0, 2, producer_id=5, is_transactional=True)
        + batch(2, 2, producer_id=6, is_transactional=True)
        + build_control_batch(ABORT, 5, 0, 0, base_offset=4)
        + build_control_batch(COMMIT, 6, 0, 0, base_offset=5)
        + batch(6, 1, producer_id=5, is_transactional=True)
    )
    committed, position = parse_records(TP, data, 0, [(5, 0)], read_committed=True)
    assert [r.offset for r in committed] == [2, 3, 6]
    assert position == 7
    uncommitted, _ = parse_records(TP, data, 0, [(5, 0)], read_committed=False)
    assert [r.offset for r in uncommitted] == [0, 1, 2, 3, 6]


class PartitionLog:
    """Fetch and ListOffsets for one partition holding ``batches``, starting at ``log_start``."""

    def __init__(self, log_start: int, data: bytes, end: int) -> None:
        self.log_start = log_start
        self.data = data
        self.end = end

    def fetch(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        part = body.topics[0].partitions[0]
        offset = int(part.fetch_offset)
        in_range = self.log_start <= offset <= self.end
        records = self.data if in_range and offset < self.end else b""
        return {
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0 if in_range else ErrorCode.OFFSET_OUT_OF_RANGE,
                            "high_watermark": self.end,
                            "last_stable_offset": self.end,
                            "log_start_offset": self.log_start,
                            "preferred_read_replica": -1,
                            "records": records[: len(records) - 5] if records else b"",
                        }
                    ],
                }
            ]
        }

    def list_offsets(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        timestamp = body.topics[0].partitions[0].timestamp
        offset = self.log_start if timestamp == -2 else self.end
        part = {"partition_index": 0, "error_code": 0, "offset": offset, "timestamp": -1}
        return {"topics": [{"name": "t", "partitions": [part]}]}


def with_consumer(test: Any, log: PartitionLog, **config: Any) -> None:
    async def main() -> None:
        brokers = await start_cluster({"t": [0]})
        brokers[0].handlers[ApiKey.FETCH] = log.fetch
        brokers[0].handlers[ApiKey.LIST_OFFSETS] = log.list_offsets
        consumer = AsyncConsumer(f"127.0.0.1:{brokers[0].port}", fetch_max_wait_ms=50, **config)
        consumer.assign([TP])
        try:
            await test(consumer, brokers[0])
        finally:
            await consumer.close()
            await stop_all(brokers)

    run(main())


def test_poll_from_the_beginning_with_max_records_and_positions() -> None:
    log = PartitionLog(10, batch(10, 3) + batch(13, 3) + batch(16, 1), 17)

    async def test(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        consumer.seek_to_beginning()
        assert await consumer.position(TP) == 10
        first = await consumer.poll(timeout_ms=1000, max_records=4)
        assert [r.offset for r in first] == [10, 11, 12, 13]
        assert await consumer.position(TP) == 14
        second = await consumer.poll(timeout_ms=1000)
        assert [r.offset for r in second] == [14, 15]
        assert await consumer.poll(timeout_ms=1000) == []  # offset 16 is the truncated tail on every fetch
        assert consumer.highwater(TP) == 17
        fetch_offsets = [int(b.topics[0].partitions[0].fetch_offset) for _, b in broker.of(ApiKey.FETCH)]
        assert fetch_offsets[:2] == [10, 16]
        consumer.seek(TP, 11)
        assert [r.offset for r in await consumer.poll(timeout_ms=1000, max_records=1)] == [11]

    with_consumer(test, log, auto_offset_reset="earliest")


def test_poll_raises_at_a_corrupt_batch_after_the_records_before_it() -> None:
    corrupt = batch(3, 4)  # its last byte: the value b"1" of the last record's header
    corrupt = corrupt[:-1] + bytes([corrupt[-1] ^ 0x01])
    log = PartitionLog(0, batch(0, 3) + corrupt + batch(7, 2) + batch(9, 1), 10)

    async def test(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        assert [r.offset for r in await consumer.poll(timeout_ms=1000)] == [0, 1, 2]
        for _ in range(2):  # the position stays at the corrupt batch
            with pytest.raises(CorruptFetchedBatchError, match="t-0: the record batch at offsets 3-6 is corrupt"):
                await consumer.poll(timeout_ms=1000)
            assert await consumer.position(TP) == 3
        consumer.seek(TP, 7)  # past it, as an application that skips it would
        assert [r.offset for r in await consumer.poll(timeout_ms=1000)] == [7, 8]

    with_consumer(test, log, auto_offset_reset="earliest")
    unchecked = PartitionLog(0, batch(0, 3) + corrupt + batch(7, 1), 8)

    async def read_anyway(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        records = await consumer.poll(timeout_ms=1000)
        assert [r.offset for r in records] == [0, 1, 2, 3, 4, 5, 6]
        assert list(records[-1].headers) == [("h", b"0")]  # the flipped bit, unnoticed

    with_consumer(read_anyway, unchecked, auto_offset_reset="earliest", check_crcs=False)


def test_out_of_range_resets_to_earliest() -> None:
    log = PartitionLog(10, batch(10, 2) + batch(12, 1), 13)

    async def test(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        consumer.seek(TP, 3)
        records = await consumer.poll(timeout_ms=2000)
        assert [r.offset for r in records] == [10, 11]
        assert [int(b.topics[0].partitions[0].timestamp) for _, b in broker.of(ApiKey.LIST_OFFSETS)] == [-2]

    with_consumer(test, log, auto_offset_reset="earliest")


def test_latest_starts_at_the_end_and_none_raises_on_out_of_range() -> None:
    log = PartitionLog(0, batch(0, 2) + batch(2, 1), 3)

    async def latest(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        assert await consumer.poll(timeout_ms=200) == []
        assert await consumer.position(TP) == 3

    async def none(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        consumer.seek(TP, 50)
        with pytest.raises(OffsetOutOfRangeError):
            await consumer.poll(timeout_ms=1000)

    async def explicit_reset(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        consumer.seek_to_beginning(TP)
        assert [r.offset for r in await consumer.poll(timeout_ms=1000)] == [0, 1]  # 2 is the truncated tail

    with_consumer(latest, log)
    with_consumer(none, log, auto_offset_reset="none")
    with_consumer(explicit_reset, log, auto_offset_reset="none")  # an explicit seek needs no reset policy


def test_unassigned_partitions_and_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        AsyncConsumer("h:1", auto_offset_reset="smallest")
    with pytest.raises(ValueError):
        AsyncConsumer("h:1", isolation_level="serializable")
    consumer = AsyncConsumer("h:1")
    consumer.assign([TP])
    with pytest.raises(ValueError):
        consumer.seek(TopicPartition("t", 1), 0)


def test_poll_entries_hands_out_the_batches_poll_decodes() -> None:
    data = (
        batch(0, 3, Codec.GZIP)
        + batch(3, 2, producer_id=5, is_transactional=True)
        + build_control_batch(ABORT, 5, 0, 0, base_offset=5)
        + batch(6, 2)
    )

    class AbortingLog(PartitionLog):
        def fetch(self, header: RequestHeader, body: Any) -> dict[str, Any]:
            response = super().fetch(header, body)
            response["responses"][0]["partitions"][0]["aborted_transactions"] = [{"producer_id": 5, "first_offset": 3}]
            return response

    polled: list[list[Any]] = []

    async def records(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        consumer.seek(TP, 1)
        polled.append(await consumer.poll(timeout_ms=1000))
        assert await consumer.position(TP) == 8
        with pytest.raises(ValueError):
            await consumer.poll_entries()

    async def entries(consumer: AsyncConsumer, broker: FakeBroker) -> None:
        consumer.seek(TP, 1)
        fetched = await consumer.poll_entries(timeout_ms=1000)
        assert [(e.tp, e.position, e.next_position) for e in fetched] == [(TP, 1, 8)]
        polled.append(entry_records(fetched[0]))
        assert await consumer.position(TP) == 8
        assert await consumer.poll_entries(timeout_ms=200) == []  # offset 8 is the truncated tail
        with pytest.raises(ValueError):
            await consumer.poll()

    log = AbortingLog(0, data + batch(8, 1), 9)
    with_consumer(records, log, isolation_level="read_committed")
    with_consumer(entries, log, isolation_level="read_committed", decode_records=False)
    assert [r.offset for r in polled[0]] == [1, 2, 6, 7]
    assert polled[1] == polled[0]
