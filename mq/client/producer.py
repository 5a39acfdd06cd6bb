"""Asyncio producer: Kafka's default partitioner, per-partition batching, acks 0/1/-1, idempotence, retries.

As Kafka's producer, its Metadata requests ask the broker to create a topic that does not exist (the broker's
``auto.create.topics.enable`` decides), and ``send`` waits up to ``max_block_ms`` for a topic just created to get
its leaders.

``send`` appends a record to the open batch of its partition and returns a future of ``RecordMetadata``. A sender
task drains a batch when it is full (``batch_size``), has waited ``linger_ms``, or on ``flush``/``close``, and sends
the drained batches of each leader in one Produce request. One batch per partition is in flight at a time, so a
retried batch keeps its place and its sequence numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mq.client.cluster import Cluster, kafka_error
from mq.client.connection import DEFAULT_CLIENT_ID
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.records.batch_header import BatchHeader, Codec
from mq.records.bulk_encode import field_lengths
from mq.records.crc import Buffer
from mq.records.default_batch import SEQUENCE_MODULUS, RecordBatchBuilder, reusable
from mq.topic_partition import TopicPartition

Headers = Sequence[tuple[str, bytes | None]]
_RECORD_OVERHEAD = 21
_MAX_TXN_TIMEOUT_MS = 2**31 - 1


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` as an unsigned 32-bit value (Java's int reinterpreted)."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length & ~3
    extra = length % 4
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partition of a non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def codec_named(compression: str | Codec) -> Codec:
    """A Codec from Kafka's ``compression.type`` names (none, gzip, snappy, lz4, zstd)."""
    if isinstance(compression, Codec):
        return compression
    try:
        return Codec[compression.upper()]
    except KeyError:
        raise ValueError(f"unknown compression type {compression!r}") from None


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    """-1 with acks=0."""
    timestamp: int
    """The broker's log-append time when the topic uses it, else the record's create time."""


Row = tuple[bytes | None, bytes | None, Headers, int | None]
"""One record for ``send_many``: key, value, headers, timestamp in ms (None: now)."""


@dataclass(eq=False)
class _BulkSend:
    """One ``send_many`` call: its future gets the record count once every batch holding its records succeeded."""

    future: asyncio.Future[int]
    records: int = 0
    batches: int = 0
    """Batches holding its records that have not succeeded yet."""


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    builder: RecordBatchBuilder
    created: float
    timestamps: list[int] = field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    """Per record sent with ``send`` (records of ``send_many`` have none; ``bulk`` tracks them)."""
    bulk: list[_BulkSend] = field(default_factory=list)
    full: bool = False
    data: bytes | None = None
    attempts: int = 0
    not_before: float = 0.0


class AsyncProducer:
    """A producer on an event loop; call ``start`` (or use ``async with``), then ``send``, ``flush``, ``close``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        cluster: Cluster | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        acks: int | str = 1,
        linger_ms: int = 5,
        batch_size: int = 16384,
        compression: str | Codec = Codec.NONE,
        enable_idempotence: bool = False,
        retries: int = 5,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        max_block_ms: int = 60_000,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        if cluster is None:
            if bootstrap_servers is None:
                raise ValueError("bootstrap_servers or cluster is required")
            cluster = Cluster(
                bootstrap_servers,
                client_id=client_id,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                retries=retries,
                allow_auto_topic_creation=True,
                security=security,
            )
            self._owns_cluster = True
        else:
            self._owns_cluster = False
        self.cluster = cluster
        self.acks = -1 if acks == "all" else int(acks)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if enable_idempotence and self.acks != -1:
            raise ValueError("enable_idempotence requires acks=-1 (all)")
        self.linger_ms = linger_ms
        self.batch_size = batch_size
        self.codec = codec_named(compression)
        self.enable_idempotence = enable_idempotence
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.max_block_ms = max_block_ms
        """How long ``send`` waits for a topic without leaders yet (Kafka's ``max.block.ms``)."""
        self.producer_id = -1
        self.producer_epoch = -1
        self.transactional_id: str | None = None
        """Set by transactional producers: their batches carry the transactional flag and their Produce requests
        the id."""
        self._batches: dict[TopicPartition, deque[_Batch]] = defaultdict(deque)
        self._in_flight: set[TopicPartition] = set()
        self._next_sequence: dict[TopicPartition, int] = defaultdict(int)
        self._sticky: dict[str, int] = {}
        self._pending: set[asyncio.Future[Any]] = set()
        self._requests: set[asyncio.Task[None]] = set()
        self._wakeup = asyncio.Event()
        self._flushing = 0
        self._sender: asyncio.Task[None] | None = None
        self._refresh: asyncio.Task[None] | None = None
        self._closed = False

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Get a producer id when idempotent and start the sender task (idempotent call)."""
        if self._sender is not None:
            return
        if self.enable_idempotence:
            await self.cluster.with_retries(self._init_producer_id)
        self._sender = asyncio.create_task(self._run())

    async def _init_producer_id(self) -> None:
        body = {
            "transactional_id": None,
            "transaction_timeout": _MAX_TXN_TIMEOUT_MS,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        response = await self.cluster.send(None, ApiKey.INIT_PRODUCER_ID, body)
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, None, "InitProducerId")
        self.producer_id = int(response.producer_id)
        self.producer_epoch = int(response.producer_epoch)

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, asking the broker to create the topic if it does not exist and waiting up to
        ``max_block_ms`` for a topic being created."""
        metadata = await self.cluster.topic_ready(topic, max_wait_ms=self.max_block_ms, allow_auto_topic_creation=True)
        return [p.partition for p in metadata.partitions]

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the returned future completes once the broker acknowledged it (or failed)."""
        self._check_send()
        await self.start()
        partitions = await self.partitions_for(topic)
        if partition is None:
            partition = self._choose_partition(topic, key, len(partitions))
        elif partition not in partitions:
            raise KafkaError(
                f"partition {partition} of topic {topic!r} does not exist", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        timestamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        tp = TopicPartition(topic, partition)
        batch = self._open_batch(tp, _record_size(key, value, headers))
        batch.builder.append(timestamp, key, value, headers)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        batch.timestamps.append(timestamp)
        batch.futures.append(future)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        if batch.builder.estimated_size >= self.batch_size:
            batch.full = True
        if batch.full or self.linger_ms <= 0:
            self._wakeup.set()
        return future

    async def send_many(self, topic: str, rows: Iterable[Row], partition: int | None = None) -> asyncio.Future[int]:
        """Queue many records of ``topic``, all to ``partition`` or each where the partitioner puts it, with one
        future instead of one per record: it gets the number of records once all were acknowledged, or the first
        error. The records join the same per-partition batches as ``send``'s, in order; records without headers are
        encoded in bulk (``RecordBatchBuilder.extend``)."""
        count = await self._bulk_partitions(topic, partition)
        bulk = _BulkSend(asyncio.get_running_loop().create_future())
        rows = rows if isinstance(rows, list) else list(rows)
        wake = False
        if rows:
            keys, values, headers, given = zip(*rows, strict=True)
            stamps = _timestamps(given)
            if any(headers):
                wake = self._queue_rows(topic, rows, stamps, partition, count, bulk)
            else:
                wake = self._queue_columns(topic, keys, values, stamps, partition, count, bulk)
        return self._queued(bulk, wake)

    async def send_columns(
        self,
        topic: str,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        partition: int | None = None,
    ) -> asyncio.Future[int]:
        """``send_many`` of records given as columns (keys and values of the same length), without headers and
        timestamped now: no row tuples to make or take apart."""
        count = await self._bulk_partitions(topic, partition)
        bulk = _BulkSend(asyncio.get_running_loop().create_future())
        wake = False
        if values:
            stamps = [int(time.time() * 1000)] * len(values)
            wake = self._queue_columns(topic, keys, values, stamps, partition, count, bulk)
        return self._queued(bulk, wake)

    def reuses(self, header: BatchHeader) -> bool:
        """Whether ``send_batches`` takes a fetched batch as it is: ``reusable`` and at least half of ``batch_size``
        (smaller ones are better decoded and sent with their neighbours in this producer's own batches)."""
        return reusable(header) and header.size * 2 >= self.batch_size

    async def send_batches(
        self, topic: str, partition: int, batches: Sequence[tuple[Buffer, BatchHeader]]
    ) -> asyncio.Future[int]:
        """Queue the records of fetched v2 batches (each ``reusable``: a copy tool's batches from another topic) for
        ``partition`` of ``topic`` without decoding them: each becomes one batch of this producer, its records area
        reused as it is (``RecordBatchBuilder.adopt``), after every record queued before. One future for all, as
        ``send_many``'s."""
        await self._bulk_partitions(topic, partition)
        bulk = _BulkSend(asyncio.get_running_loop().create_future())
        tp = TopicPartition(topic, partition)
        queue = self._batches[tp]
        if queue and queue[-1].data is None:
            queue[-1].full = True  # records sent after these go to a batch after them
        for buf, header in batches:
            batch = self._new_batch(tp)
            batch.builder.adopt(buf, header)
            batch.full = True
            self._joined(batch, bulk, header.records_count)
        return self._queued(bulk, True)

    async def _bulk_partitions(self, topic: str, partition: int | None) -> int:
        """The partition count of ``topic`` for a bulk send (to ``partition``, which must exist, when given)."""
        self._check_send()
        await self.start()
        partitions = await self.partitions_for(topic)
        if partition is not None and partition not in partitions:
            raise KafkaError(
                f"partition {partition} of topic {topic!r} does not exist", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        return len(partitions)

    def _queued(self, bulk: _BulkSend, wake: bool) -> asyncio.Future[int]:
        """``bulk``'s future, pending until its batches are answered (done at once when it holds no record)."""
        if bulk.batches == 0:
            bulk.future.set_result(0)
            return bulk.future
        self._pending.add(bulk.future)
        bulk.future.add_done_callback(self._pending.discard)
        if wake or self.linger_ms <= 0:
            self._wakeup.set()
        return bulk.future

    def _queue_rows(
        self,
        topic: str,
        rows: list[Row],
        stamps: Sequence[int],
        partition: int | None,
        count: int,
        bulk: _BulkSend,
    ) -> bool:
        """Queue ``rows`` one record at a time; whether a batch filled up."""
        tps: dict[int, TopicPartition] = {}
        wake = False
        for (key, value, headers, _), timestamp in zip(rows, stamps, strict=True):
            chosen = partition if partition is not None else self._choose_partition(topic, key, count)
            tp = tps.get(chosen)
            if tp is None:
                tp = tps[chosen] = TopicPartition(topic, chosen)
            batch = self._open_batch(tp, _record_size(key, value, headers))
            batch.builder.append(timestamp, key, value, headers)
            self._joined(batch, bulk, 1)
            wake |= batch.full
        return wake

    def _queue_columns(
        self,
        topic: str,
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        stamps: Sequence[int],
        partition: int | None,
        count: int,
        bulk: _BulkSend,
    ) -> bool:
        """Queue records without headers in runs per partition, each run encoded in bulk; whether a batch filled
        up."""
        runs: dict[int, Sequence[int]]
        if partition is not None or keys.count(None) == len(keys):
            chosen = partition if partition is not None else self._choose_partition(topic, None, count)
            runs = {chosen: range(len(keys))}
        else:
            by_partition: dict[int, list[int]] = defaultdict(list)
            for index, key in enumerate(keys):
                by_partition[self._choose_partition(topic, key, count)].append(index)
            runs = dict(by_partition)
        wake = False
        for chosen, indexes in runs.items():
            tp = TopicPartition(topic, chosen)
            picked = isinstance(indexes, list)
            run_keys = [keys[i] for i in indexes] if picked else keys
            run_values = [values[i] for i in indexes] if picked else values
            run_stamps = [stamps[i] for i in indexes] if picked else stamps
            lengths = np.maximum(field_lengths(run_keys), 0) + np.maximum(field_lengths(run_values), 0)
            sizes = _RECORD_OVERHEAD + lengths
            ends = np.cumsum(sizes)
            first = 0
            while first < len(run_values):
                batch = self._open_batch(tp, int(sizes[first]))
                room = self.batch_size - batch.builder.estimated_size
                done = int(ends[first - 1]) if first else 0
                last = max(first + 1, int(np.searchsorted(ends, done + room, side="right")))
                batch.builder.extend(run_stamps[first:last], run_keys[first:last], run_values[first:last])
                self._joined(batch, bulk, last - first)
                wake |= batch.full
                first = last
        return wake

    def _joined(self, batch: _Batch, bulk: _BulkSend, records: int) -> None:
        """``records`` of ``bulk`` were added to ``batch``."""
        bulk.records += records
        if not batch.bulk or batch.bulk[-1] is not bulk:
            batch.bulk.append(bulk)
            bulk.batches += 1
        if batch.builder.estimated_size >= self.batch_size:
            batch.full = True

    def _check_send(self) -> None:
        """Raise when no record may be sent now."""
        if self._closed:
            raise KafkaError("the producer is closed", code=ErrorCode.UNKNOWN_SERVER_ERROR)

    def _choose_partition(self, topic: str, key: bytes | None, count: int) -> int:
        if key is not None:
            return partition_for_key(key, count)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= count:
            sticky = self._sticky[topic] = self._next_sticky(topic, None, count)
        return sticky

    def _next_sticky(self, topic: str, previous: int | None, count: int) -> int:
        metadata = self.cluster.topics.get(topic)
        available = [p.partition for p in metadata.partitions if p.leader >= 0] if metadata else []
        candidates = [p for p in available or range(count) if p != previous] or [previous or 0]
        return random.choice(candidates)

    def _open_batch(self, tp: TopicPartition, record_size: int) -> _Batch:
        queue = self._batches[tp]
        if queue and not queue[-1].full and queue[-1].data is None:
            batch = queue[-1]
            if batch.builder.estimated_size + record_size <= self.batch_size:
                return batch
            batch.full = True
        return self._new_batch(tp)

    def _new_batch(self, tp: TopicPartition) -> _Batch:
        """An empty batch of this producer at the end of ``tp``'s queue."""
        builder = RecordBatchBuilder(
            codec=self.codec,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            is_transactional=self.transactional_id is not None,
        )
        batch = _Batch(tp, builder, asyncio.get_running_loop().time())
        self._batches[tp].append(batch)
        self._wakeup.set()  # the sender learns the new batch's linger deadline
        return batch

    async def flush(self) -> None:
        """Send every queued record now and wait until each has succeeded or failed."""
        self._flushing += 1
        self._wakeup.set()
        try:
            while self._pending:
                await asyncio.gather(*list(self._pending), return_exceptions=True)
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        """Flush, stop the sender and close the connections this producer opened."""
        if self._closed:
            return
        self._closed = True
        if self._sender is not None:
            await self.flush()
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        for task in (self._refresh, *self._requests):
            if task is not None:
                task.cancel()
        if self._owns_cluster:
            await self.cluster.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wakeup.clear()
            delay = self._drain(loop.time())
            if delay is None:
                await self._wakeup.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), delay)

    def _drain(self, now: float) -> float | None:
        """Send every ready batch; return seconds until the next one may be ready (None: wait for a wakeup)."""
        by_node: dict[int, list[_Batch]] = defaultdict(list)
        next_check: float | None = None
        for tp, queue in self._batches.items():
            if not queue or tp in self._in_flight or not self._may_send(tp):
                continue
            batch = queue[0]
            ready_at = max(batch.not_before, batch.created + self.linger_ms / 1000)
            if batch.data is None and (batch.full or len(queue) > 1 or self._flushing):
                ready_at = batch.not_before
            if ready_at > now:
                next_check = ready_at - now if next_check is None else min(next_check, ready_at - now)
                continue
            leader = self._leader(tp)
            if leader is None:
                next_check = self.retry_backoff_ms / 1000
                continue
            queue.popleft()
            self._in_flight.add(tp)
            if batch.data is None:
                self._seal(batch)
            by_node[leader].append(batch)
        for node, batches in by_node.items():
            task = asyncio.create_task(self._produce(node, batches))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        return next_check

    def _may_send(self, tp: TopicPartition) -> bool:
        """Whether batches of ``tp`` may be sent now (a transactional producer first adds ``tp`` to its
        transaction)."""
        return True

    def _leader(self, tp: TopicPartition) -> int | None:
        metadata = self.cluster.topics.get(tp.topic)
        for partition in metadata.partitions if metadata else ():
            if partition.partition == tp.partition and partition.leader in self.cluster.brokers:
                return partition.leader
        self._request_metadata(tp.topic)
        return None

    def _request_metadata(self, topic: str) -> None:
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.create_task(self._refresh_metadata(topic))

    async def _refresh_metadata(self, topic: str) -> None:
        with contextlib.suppress(KafkaError):
            await self.cluster.refresh_metadata(
                [topic, *(tp.topic for tp, q in self._batches.items() if q)], allow_auto_topic_creation=True
            )
        self._wakeup.set()

    def _seal(self, batch: _Batch) -> None:
        """Build the batch's bytes once: sequence numbers are fixed from here on, retries resend the same bytes."""
        tp = batch.tp
        if self.enable_idempotence:
            sequence = self._next_sequence[tp]
            batch.builder.base_sequence = sequence
            self._next_sequence[tp] = (sequence + len(batch.builder)) % SEQUENCE_MODULUS
        batch.data = batch.builder.build()
        if self._sticky.get(tp.topic) == tp.partition:
            metadata = self.cluster.topics.get(tp.topic)
            count = len(metadata.partitions) if metadata else tp.partition + 1
            self._sticky[tp.topic] = self._next_sticky(tp.topic, tp.partition, count)

    async def _produce(self, node: int, batches: list[_Batch]) -> None:
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for batch in batches:
            topics[batch.tp.topic].append({"index": batch.tp.partition, "records": batch.data})
        body = {
            "transactional_id": self.transactional_id,
            "acks": self.acks,
            "timeout": self.request_timeout_ms,
            "topic_data": [{"name": name, "partition_data": parts} for name, parts in topics.items()],
        }
        by_tp = {b.tp: b for b in batches}
        try:
            response = await self.cluster.send(node, ApiKey.PRODUCE, body)
        except KafkaError as exc:
            for batch in batches:
                self._failed(batch, exc)
        else:
            if response is None:
                for batch in batches:
                    self._succeeded(batch, -1, None)
            else:
                for topic in response.responses:
                    for part in topic.partition_responses:
                        tp = TopicPartition(topic.name, int(part.index))
                        if tp not in by_tp:
                            continue
                        batch = by_tp.pop(tp)
                        code = ErrorCode(part.error_code)
                        if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                            self._succeeded(batch, int(part.base_offset), part.log_append_time)
                        else:
                            error = kafka_error(code, getattr(part, "error_message", None), f"produce to {batch.tp}")
                            self._failed(batch, error)
                for batch in by_tp.values():
                    self._failed(
                        batch, KafkaError(f"no produce result for {batch.tp}", code=ErrorCode.UNKNOWN_SERVER_ERROR)
                    )
        finally:
            for batch in batches:
                self._in_flight.discard(batch.tp)
            self._wakeup.set()

    def _succeeded(self, batch: _Batch, base_offset: int, log_append_time: Any) -> None:
        append_ms = None if log_append_time is None else int(log_append_time.timestamp() * 1000)
        for i, (future, timestamp) in enumerate(zip(batch.futures, batch.timestamps, strict=True)):
            if not future.done():
                offset = -1 if base_offset < 0 else base_offset + i
                stamp = timestamp if append_ms is None else append_ms
                future.set_result(RecordMetadata(batch.tp.topic, batch.tp.partition, offset, stamp))
        for bulk in batch.bulk:
            bulk.batches -= 1
            if bulk.batches == 0 and not bulk.future.done():
                bulk.future.set_result(bulk.records)

    def _failed(self, batch: _Batch, error: KafkaError) -> None:
        if error.code.retriable and batch.attempts < self.retries:
            batch.attempts += 1
            batch.not_before = asyncio.get_running_loop().time() + self.retry_backoff_ms / 1000
            self._batches[batch.tp].appendleft(batch)
            self._request_metadata(batch.tp.topic)
            return
        self._give_up(batch, error)

    def _give_up(self, batch: _Batch, error: KafkaError) -> None:
        """Fail every record of ``batch`` with ``error``."""
        for future in batch.futures:
            if not future.done():
                future.set_exception(error)
        for bulk in batch.bulk:
            if not bulk.future.done():
                bulk.future.set_exception(error)


def _timestamps(given: Sequence[int | None]) -> Sequence[int]:
    """Each row's timestamp: now for those that have none."""
    if given.count(None) == len(given):
        return [int(time.time() * 1000)] * len(given)
    if None in given:
        now = int(time.time() * 1000)
        return [now if t is None else t for t in given]
    return given  # type: ignore[return-value]


def _record_size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    size = _RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    return size + sum(len(k) + len(v or b"") + 2 for k, v in headers)
