"""Batch and stream writers of the ``mq`` data source: rows become records, one producer per task.

Columns as Spark's Kafka sink: ``topic`` (string; the ``topic`` option overrides it), ``key`` and ``value``
(string or binary; value required), ``headers`` (array<struct<key:string,value:binary>>), ``partition`` (int; null
lets the producer choose). Each task sends its rows in bulk, an Arrow batch's rows for one topic-partition at a time
(``AsyncProducer.send_columns``), with an idempotent producer when ``kafka.acks`` is all (Kafka's default: a retried
request is never written twice), and returns a ``WriteResult`` counting the records it had acknowledged per topic;
the driver's commit logs the totals. Writes are at-least-once: a retried task sends its rows again, and an aborted
job may leave records.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from mq.client.producer import AsyncProducer
from mq.spark.options import WriteOptions

log = logging.getLogger(__name__)

_BYTES_TYPES = (StringType, BinaryType)


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote: acknowledged records per topic, and their key + value bytes."""

    records: dict[str, int] = field(default_factory=dict)
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
        enable_idempotence=options.acks == -1,  # a retried request is not written twice (Kafka's default)
    )
    result = WriteResult()
    pending: deque[tuple[asyncio.Future[int], str]] = deque()
    seen: set[str] = set()
    try:
        for batch in batches:
            for run in _runs(batch, options.topic):
                if run.topic not in seen:  # as Kafka's producer: a broker with auto.create.topics.enable creates it
                    seen.add(run.topic)
                    await producer.cluster.refresh_metadata([run.topic], allow_auto_topic_creation=True)
                if run.headers is None:
                    sent = await producer.send_columns(run.topic, run.keys, run.values, run.partition)
                else:
                    rows = list(zip(run.keys, run.values, run.headers, itertools.repeat(None), strict=False))
                    sent = await producer.send_many(run.topic, rows, run.partition)
                pending.append((sent, run.topic))
                result.bytes += sum(map(len, filter(None, run.keys))) + sum(map(len, filter(None, run.values)))
            while len(pending) > MAX_PENDING_SENDS or (pending and pending[0][0].done()):
                oldest, name = pending.popleft()
                _count(await oldest, name, result)
        await producer.flush()
        while pending:
            sent, topic = pending.popleft()
            _count(await sent, topic, result)
    finally:
        await producer.close()
    return result


MAX_PENDING_SENDS = 16
"""Bulk sends a task keeps unacknowledged before it reads on (each one Arrow batch's rows for one topic-partition)."""


def _count(records: int, topic: str, result: WriteResult) -> None:
    result.records[topic] = result.records.get(topic, 0) + records


@dataclass
class _Run:
    """Rows of one Arrow batch bound for one topic and partition (None: the partitioner's choice), in order."""

    topic: str
    partition: int | None
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]]] | None
    """None when no row has a header."""


def _runs(batch: pa.RecordBatch, topic: str | None) -> Iterator[_Run]:
    """The rows of ``batch`` grouped by topic and partition, in order within each; strings are sent as UTF-8.
    Columns become Python lists in bulk (Arrow's ``to_pylist``), the rows are looked at one by one only to group
    rows of several topics or partitions and to convert headers."""
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    size = batch.num_rows

    def column(name: str) -> pa.Array | None:
        index = names.get(name)
        return None if index is None else batch.column(index)

    keys, values = _binary_list(column("key"), size), _binary_list(column("value"), size)
    headers_column = column("headers")
    headers = None
    if headers_column is not None and (pc.max(pc.list_value_length(headers_column)).as_py() or 0) > 0:
        headers = [[(h["key"], _bytes(h["value"])) for h in row or ()] for row in headers_column.to_pylist()]
    topics_column = column("topic") if topic is None else None
    given: list[str | None] = [topic] * size if topics_column is None else topics_column.to_pylist()
    if None in given:
        raise ValueError("null topic present in the data; use the topic option to set a default")
    topics = cast(list[str], given)
    partition_column = column("partition")
    partitions = (
        None if partition_column is None or partition_column.null_count == size else partition_column.to_pylist()
    )
    if partitions is None and (topic is not None or len(set(topics)) == 1):
        if size:
            yield _Run(topics[0], None, keys, values, headers)
        return
    groups: dict[tuple[str, int | None], list[int]] = {}
    for index, place in enumerate(zip(topics, partitions or itertools.repeat(None), strict=False)):
        groups.setdefault(place, []).append(index)
    for (name, partition), rows in groups.items():
        yield _Run(
            name,
            partition,
            [keys[i] for i in rows],
            [values[i] for i in rows],
            None if headers is None else [headers[i] for i in rows],
        )


def _binary_list(array: pa.Array | None, size: int) -> list[bytes | None]:
    """A key or value column as bytes (strings as UTF-8), None for a missing column or a null."""
    if array is None:
        return [None] * size
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.binary() if pa.types.is_string(array.type) else pa.large_binary())
    return array.to_pylist()  # type: ignore[no-any-return]


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
