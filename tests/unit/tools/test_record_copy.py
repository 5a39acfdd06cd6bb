"""Record copies keep key, value, headers and timestamp; placement follows the source partition when it exists."""

from __future__ import annotations

import asyncio
from typing import Any

from mq.client.consumer import ConsumerRecord
from mq.tools.record_copy import record_size, send_copies, target_partition


def _record(partition: int, timestamp: int = 1234) -> ConsumerRecord:
    return ConsumerRecord("in", partition, 7, timestamp, 0, b"k", b"value", (("h", b"1"), ("n", None)))


def test_target_partition_keeps_the_source_partition_when_it_exists() -> None:
    assert target_partition(2, 3) == 2
    assert target_partition(3, 3) is None
    assert target_partition(0, 1) == 0


def test_record_size_counts_key_and_value() -> None:
    assert record_size(_record(0)) == 6
    assert record_size(ConsumerRecord("t", 0, 0, 0, 0, None, None)) == 0


class _BulkProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    async def send_many(self, topic: str, rows: list[Any], partition: int | None) -> asyncio.Future[int]:
        self.sent.append((topic, rows, partition))
        return asyncio.get_running_loop().create_future()


def test_copies_of_a_run_keep_key_value_headers_and_timestamp_in_one_send_many() -> None:
    producer = _BulkProducer()

    async def run() -> None:
        await send_copies(producer, "out", [_record(1), _record(1, timestamp=-1)], 1)  # type: ignore[arg-type]

    asyncio.run(run())
    headers = (("h", b"1"), ("n", None))
    assert producer.sent == [("out", [(b"k", b"value", headers, 1234), (b"k", b"value", headers, None)], 1)]
