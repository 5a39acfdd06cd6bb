"""Copying consumed records to another topic, as the copy tools (mirror, replay) do.

A copy keeps the record's key, value, headers and timestamp (a negative timestamp lets the producer stamp the
current time). Placement: the source partition number when the target topic has that partition, else the
producer's partitioner (by key). ``send_copies`` queues a run of records with the producer's ``send_many``: one future
for the run instead of one per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from mq.client.consumer import ConsumerRecord
from mq.client.producer import AsyncProducer, Row


def target_partition(source_partition: int, target_partitions: int) -> int | None:
    """The source partition number when the target topic has it; None lets the producer's partitioner choose."""
    return source_partition if 0 <= source_partition < target_partitions else None


def record_size(record: ConsumerRecord) -> int:
    """Bytes of payload a copy carries: key and value (headers and framing not counted)."""
    return len(record.key or b"") + len(record.value or b"")


async def send_copies(
    producer: AsyncProducer, topic: str, records: Iterable[ConsumerRecord], partition: int | None
) -> asyncio.Future[int]:
    """Queue copies of ``records`` for ``partition`` of ``topic`` (None: each where the partitioner puts it); the
    future gets the number of records once the target acknowledged all of them."""
    return await producer.send_many(topic, copy_rows(records), partition)


def copy_rows(records: Iterable[ConsumerRecord]) -> list[Row]:
    """``records`` as rows of ``send_many``: key, value, headers, and timestamp (None where the record has none)."""
    return [(r.key, r.value, r.headers, r.timestamp if r.timestamp >= 0 else None) for r in records]
