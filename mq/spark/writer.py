"""Batch and stream writers of the ``mq`` data source: rows become records, one producer per task.

Columns as Spark's Kafka sink: ``topic`` (string; the ``topic`` option overrides it), ``key`` and ``value``
(string or binary; value required), ``headers`` (array<struct<key:string,value:binary>>), ``partition`` (int; null
lets the producer choose). Each task returns a ``WriteResult`` counting the records it had acknowledged per
topic-partition; the driver's commit logs the totals. Writes are at-least-once: an aborted job may leave records.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from mq.client.producer import AsyncProducer, RecordMetadata
from mq.spark.options import WriteOptions
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

_BYTES_TYPES = (StringType, BinaryType)


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote: acknowledged records per topic-partition, and their key + value bytes."""

    records: dict[TopicPartition, int] = field(default_factory=dict)
    bytes: int = 0

    @property
    def total(self) -> int:
        return sum(self.records.values())


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Reject, on the driver, columns a write cannot use (the rules of Spark's Kafka sink)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if options.topic is None and "topic" not in types:
        raise ValueError("topic option required when no 'topic' attribute is present")
    if "topic" in types and options.topic is None and not isinstance(types["topic"], StringType):
        raise ValueError(f"topic attribute type must be a string, not {types['topic'].simpleString()}")
    if "value" not in types:
        raise ValueError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], _BYTES_TYPES):
            raise ValueError(f"{name} attribute type must be a string or binary, not {types[name].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be an int, not {types['partition'].simpleString()}")
    if "headers" in types:
        headers = types["headers"]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        if not (
            isinstance(element, StructType)
            and [f.name for f in element.fields] == ["key", "value"]
            and isinstance(element.fields[0].dataType, StringType)
            and isinstance(element.fields[1].dataType, _BYTES_TYPES)
        ):
            raise ValueError(
                f"headers attribute type must be array<struct<key:string,value:binary>>, not {headers.simpleString()}"
            )


class _Writing:
    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return produce_batches(self.options, iterator)


class BatchWriter(_Writing, DataSourceArrowWriter):
    """``df.write.format("mq")``."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("wrote %d records", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("write aborted after %d records were acknowledged", _total(messages))


class StreamWriter(_Writing, DataSourceStreamArrowWriter):
    """``df.writeStream.format("mq")``."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("batch %d: wrote %d records", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted after %d records were acknowledged", batchId, _total(messages))


def _total(messages: Iterable[WriterCommitMessage | None]) -> int:
    return sum(m.total for m in messages if isinstance(m, WriteResult))


def produce_batches(options: WriteOptions, batches: Iterable[pa.RecordBatch]) -> WriteResult:
    """Send every row of ``batches`` with one producer and wait for all acknowledgements; the first failure raises."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_produce(options, batches))
    finally:
        loop.close()


async def _produce(options: WriteOptions, batches: Iterable[pa.RecordBatch]) -> WriteResult:
    producer = AsyncProducer(
        options.client.bootstrap_servers,
        client_id=options.client.client_id,
        acks=options.acks,
        linger_ms=options.linger_ms,
        batch_size=options.batch_size,
        compression=options.compression,
        request_timeout_ms=options.client.request_timeout_ms,
    )
    result = WriteResult()
    pending: list[asyncio.Future[RecordMetadata]] = []
    seen: set[str] = set()
    try:
        for batch in batches:
            for topic, key, value, headers, partition in _rows(batch, options.topic):
                if topic not in seen:  # as Kafka's producer: a broker with auto.create.topics.enable creates it
                    seen.add(topic)
                    await producer.cluster.refresh_metadata([topic], allow_auto_topic_creation=True)
                pending.append(await producer.send(topic, value, key, headers, partition))
                result.bytes += len(key or b"") + len(value or b"")
            pending = _settle(pending, result)
        await producer.flush()
        _settle(pending, result)
    finally:
        await producer.close()
    return result


def _settle(futures: list[asyncio.Future[RecordMetadata]], result: WriteResult) -> list[asyncio.Future[RecordMetadata]]:
    """Count the acknowledged futures, raise the first failure, return those still pending."""
    counts: Counter[TopicPartition] = Counter()
    still: list[asyncio.Future[RecordMetadata]] = []
    for future in futures:
        if not future.done():
            still.append(future)
            continue
        metadata = future.result()
        counts[TopicPartition(metadata.topic, metadata.partition)] += 1
    for tp, count in counts.items():
        result.records[tp] = result.records.get(tp, 0) + count
    return still


def _rows(
    batch: pa.RecordBatch, topic: str | None
) -> Iterator[tuple[str, bytes | None, bytes | None, Any, int | None]]:
    """(topic, key, value, headers, partition) per row; strings are sent as UTF-8."""
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    size = batch.num_rows

    def column(name: str) -> list[Any]:
        index = names.get(name)
        return [None] * size if index is None else batch.column(index).to_pylist()

    topics = [topic] * size if topic is not None else column("topic")
    keys, values, headers, partitions = column("key"), column("value"), column("headers"), column("partition")
    for i in range(size):
        if topics[i] is None:
            raise ValueError("null topic present in the data; use the topic option to set a default")
        row_headers = [(h["key"], _bytes(h["value"])) for h in headers[i] or ()]
        yield topics[i], _bytes(keys[i]), _bytes(values[i]), row_headers, partitions[i]


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
