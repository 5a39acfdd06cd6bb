"""Asyncio consumer of manually assigned partitions: positions, offset resets, fetch, record parsing.

``poll`` fetches from each partition's leader (one Fetch per broker), parses the returned batches and hands out
records in offset order per partition. Records below the fetch position (a batch that starts earlier), control
batches and, with ``read_committed``, aborted transactional batches are skipped; a partial batch at the end of the
fetched data is ignored and fetched again from its start. Group membership is not handled here:
``mq.client.group_consumer`` drives ``assign`` and ``seek`` from its assignments and committed offsets.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from mq.client.cluster import Cluster, kafka_error
from mq.client.connection import DEFAULT_CLIENT_ID
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import CorruptFetchedBatchError, ErrorCode, KafkaError, OffsetOutOfRangeError
from mq.protocol.api_keys import ApiKey
from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.records import iter_records
from mq.records.batch_header import BatchHeader, compute_crc, is_valid, iter_headers
from mq.records.bulk_decode import BulkDecodeError, V2Layout, v2_layout
from mq.records.record import ABORT, parse_control_key
from mq.topic_partition import TopicPartition

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}

_T = TypeVar("_T")


def fetch_request_body(
    offsets: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = 0,
) -> dict[str, Any]:
    """A consumer's Fetch request (no session, no leader epochs) of each partition from its offset in ``offsets``."""
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for tp, offset in offsets.items():
        topics[tp.topic].append(
            {
                "partition": tp.partition,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes,
            }
        )
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    """0 CreateTime, 1 LogAppendTime."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class FetchedEntries:
    """One partition's fetched data, undecoded: ``headers`` are the whole data batches (in ``data``) whose records
    the consumer returns, offset order; records below ``position`` (the fetch position: a batch may start before it)
    are not returned. Control batches and, with ``read_committed``, aborted transactional batches are left out."""

    tp: TopicPartition
    data: bytes
    headers: list[BatchHeader]
    position: int
    next_position: int
    """Where to fetch from next: past every whole entry fetched, control and aborted batches included, up to a corrupt
    batch."""
    corrupt: BatchHeader | None = None
    """The first batch whose checksum does not match its bytes; nothing from it on is in ``headers``."""

    def corrupt_error(self) -> CorruptFetchedBatchError:
        """The error that names the corrupt batch: its partition, offsets and checksums."""
        header = self.corrupt
        assert header is not None
        return CorruptFetchedBatchError(
            f"{self.tp}: the record batch at offsets {self.next_position}-{header.last_offset} is corrupt "
            f"(stored crc = {header.crc}, computed crc = {compute_crc(self.data, header)})"
        )


@dataclass(slots=True)
class _Fetched:
    records: deque[ConsumerRecord]
    next_position: int
    entries: FetchedEntries | None = None


def select_entries(
    tp: TopicPartition,
    data: bytes,
    position: int,
    aborted_transactions: Sequence[tuple[int, int]] = (),
    read_committed: bool = False,
    check_crcs: bool = True,
) -> FetchedEntries:
    """The data batches of fetched ``data`` that hold records at or after ``position`` and are returned.

    ``aborted_transactions`` are (producer_id, first_offset) pairs from the fetch response; they apply only with
    ``read_committed``: a producer's transactional batches from its first offset on are skipped until its ABORT
    marker. A trailing partial batch is left for the next fetch. With ``check_crcs`` (Kafka's ``check.crcs``) every
    batch's checksum is verified: the selection stops at the first that does not match (``corrupt``).
    """
    kept: list[BatchHeader] = []
    next_position = position
    pending = sorted((first, pid) for pid, first in aborted_transactions) if read_committed else []
    aborted: set[int] = set()
    for header in iter_headers(data):
        if header.next_offset <= position:
            continue
        if check_crcs and not is_valid(data, header):
            return FetchedEntries(tp, data, kept, position, next_position, header)
        next_position = max(next_position, header.next_offset)
        if read_committed and header.is_transactional:
            while pending and pending[0][0] <= header.last_offset:
                aborted.add(heapq.heappop(pending)[1])
            if header.is_control:
                first = next(iter_records(data, header), None)
                if first is not None and parse_control_key(first.key) == ABORT:
                    aborted.discard(header.producer_id)
                continue
            if header.producer_id in aborted:
                continue
        if not header.is_control:
            kept.append(header)
    return FetchedEntries(tp, data, kept, position, next_position)


def entry_records(entries: FetchedEntries) -> list[ConsumerRecord]:
    """The records of ``entries`` at or after its position, one object each. v2 batches are laid out in bulk
    (``v2_layout``: no Python work per field); legacy batches, records with headers and batches the bulk pass
    rejects go through the per-record decoder (which names a fault exactly)."""
    tp, data, position = entries.tp, entries.data, entries.position
    if entries.headers and all(header.magic >= 2 for header in entries.headers):
        try:
            layout = v2_layout([(data, header) for header in entries.headers])
        except (KafkaError, BulkDecodeError):
            layout = None
        if layout is not None and not layout.header_counts.any():
            return _laid_out_records(tp, layout, position)
    return [
        ConsumerRecord(
            tp.topic,
            tp.partition,
            record.offset,
            record.timestamp,
            int(header.timestamp_type),
            record.key,
            record.value,
            record.headers,
        )
        for header in entries.headers
        for record in iter_records(data, header)
        if record.offset >= position
    ]


def _laid_out_records(tp: TopicPartition, layout: V2Layout, position: int) -> list[ConsumerRecord]:
    """The records of ``layout`` (none with headers) at or after ``position``."""
    keep = np.flatnonzero(layout.offset >= position)
    joined = layout.joined

    def cut(
        start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], null: npt.NDArray[np.bool_]
    ) -> list[bytes | None]:
        bounds = zip(start[keep].tolist(), end[keep].tolist(), strict=True)
        if not null[keep].any():
            return [joined[a:b] for a, b in bounds]
        return [None if gone else joined[a:b] for (a, b), gone in zip(bounds, null[keep].tolist(), strict=True)]

    keys = cut(layout.key_start, layout.key_end, layout.key_null)
    values = cut(layout.value_start, layout.value_end, layout.value_null)
    types = layout.log_append_time[keep].astype(np.int64).tolist()
    topic, partition = tp.topic, tp.partition
    return [
        ConsumerRecord(topic, partition, offset, timestamp, kind, key, value)
        for offset, timestamp, kind, key, value in zip(
            layout.offset[keep].tolist(), layout.timestamp[keep].tolist(), types, keys, values, strict=True
        )
    ]


def parse_records(
    tp: TopicPartition,
    data: bytes,
    position: int,
    aborted_transactions: Sequence[tuple[int, int]] = (),
    read_committed: bool = False,
) -> tuple[list[ConsumerRecord], int]:
    """Records at or after ``position`` in fetched ``data`` (see ``select_entries``), and the position to fetch from
    next."""
    entries = select_entries(tp, data, position, aborted_transactions, read_committed)
    return entry_records(entries), entries.next_position


async def list_offsets(
    cluster: Cluster, timestamps: Mapping[TopicPartition, int], isolation_level: int = 0
) -> dict[TopicPartition, tuple[int, int]]:
    """(offset, timestamp) per partition for ``timestamps`` (-2 earliest, -1 latest, or a time in ms), with retries."""

    async def attempt() -> dict[TopicPartition, tuple[int, int]]:
        by_leader: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for tp, timestamp in timestamps.items():
            leader = await cluster.leader_for(tp)
            by_leader[leader][tp.topic].append({"partition_index": tp.partition, "timestamp": timestamp})
        requests = [
            cluster.send(
                leader,
                ApiKey.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": isolation_level,
                    "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                },
            )
            for leader, topics in by_leader.items()
        ]
        result: dict[TopicPartition, tuple[int, int]] = {}
        for response in await asyncio.gather(*requests):
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, int(part.partition_index))
                    if part.error_code != ErrorCode.NONE:
                        raise kafka_error(part.error_code, None, f"list offsets of {tp}")
                    result[tp] = (int(part.offset), int(part.timestamp))
        return result

    return await cluster.with_retries(attempt, {tp.topic for tp in timestamps})


class AsyncConsumer:
    """Consumes assigned partitions; ``poll`` returns records, ``position`` the next offset per partition.

    With ``allow_auto_create_topics`` (Kafka's ``allow.auto.create.topics``, default true) the metadata requests for
    its topics ask the broker to create missing ones (the broker's ``auto.create.topics.enable`` decides).

    With ``decode_records=False`` records are not decoded: ``poll_entries`` hands out each partition's fetched
    batches (``FetchedEntries``) and ``poll`` is not used.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        cluster: Cluster | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 1024 * 1024,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        allow_auto_create_topics: bool = True,
        default_api_timeout_ms: int = 60_000,
        security: ClientSecurity = PLAINTEXT,
        decode_records: bool = True,
        check_crcs: bool = True,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}")
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be read_uncommitted or read_committed, not {isolation_level!r}")
        self._owns_cluster = cluster is None
        if cluster is None:
            if bootstrap_servers is None:
                raise ValueError("bootstrap_servers or cluster is required")
            cluster = Cluster(
                bootstrap_servers,
                client_id=client_id,
                request_timeout_ms=request_timeout_ms + fetch_max_wait_ms,
                retry_backoff_ms=retry_backoff_ms,
                allow_auto_topic_creation=allow_auto_create_topics,
                security=security,
            )
        self.cluster = cluster
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = ISOLATION_LEVELS[isolation_level]
        self.retry_backoff_ms = retry_backoff_ms
        self.decode_records = decode_records
        self.check_crcs = check_crcs
        """Verify each fetched batch's checksum (Kafka's ``check.crcs``): ``poll`` raises CorruptFetchedBatchError at a
        corrupt batch (the records before it are returned first, the position stays at it); ``poll_entries`` hands
        it out as the entries' ``corrupt``."""
        self.default_api_timeout_ms = default_api_timeout_ms
        """How long ``partitions_for`` waits for a topic being created (Kafka's ``default.api.timeout.ms``)."""
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._pending_resets: dict[TopicPartition, int] = {}
        self._buffers: dict[TopicPartition, _Fetched] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (Kafka's ``partitionsFor``): a missing topic is created when
        ``allow_auto_create_topics`` and the broker allow it."""
        metadata = await self.cluster.topic_ready(topic, max_wait_ms=self.default_api_timeout_ms)
        return [p.partition for p in metadata.partitions]

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``; positions of partitions kept from the previous assignment survive."""
        self._assignment = list(dict.fromkeys(partitions))
        keep = set(self._assignment)
        for table in (self._positions, self._pending_resets, self._buffers):
            for tp in [tp for tp in table if tp not in keep]:
                del table[tp]

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assignment:
            raise ValueError(f"{tp} is not assigned to this consumer")

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next."""
        self._check_assigned(tp)
        self._buffers.pop(tp, None)
        self._pending_resets.pop(tp, None)
        self._positions[tp] = offset

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Fetch from the log start offset (resolved lazily); no arguments means every assigned partition."""
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Fetch from the log end offset (resolved lazily); no arguments means every assigned partition."""
        self._seek_to(partitions, LATEST)

    def _seek_to(self, partitions: Sequence[TopicPartition], timestamp: int) -> None:
        for tp in partitions or self._assignment:
            self._check_assigned(tp)
            self._buffers.pop(tp, None)
            self._positions.pop(tp, None)
            self._pending_resets[tp] = timestamp

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``tp``."""
        self._check_assigned(tp)
        await self._resolve_positions()
        return self._positions[tp]

    def known_positions(self) -> dict[TopicPartition, int]:
        """Positions of the assigned partitions that have one (no offset lookups): what a commit would store."""
        return {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark from the last fetch of ``tp``."""
        return self._high_watermarks.get(tp)

    async def poll(self, timeout_ms: int = 0, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, waiting at most ``timeout_ms`` for some to arrive."""
        if not self.decode_records:
            raise ValueError("poll needs decode_records; use poll_entries")
        return await self._poll(timeout_ms, lambda: self._take(max_records))

    async def poll_entries(self, timeout_ms: int = 0) -> list[FetchedEntries]:
        """The undecoded fetched data of the partitions that have some (positions move to their ``next_position``),
        waiting at most ``timeout_ms`` for some to arrive; entries with no batch to return and no corrupt batch are taken
        in silence."""
        if self.decode_records:
            raise ValueError("poll_entries needs decode_records=False")
        return await self._poll(timeout_ms, self._take_entries)

    async def _poll(self, timeout_ms: int, take: Callable[[], list[_T]]) -> list[_T]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            taken = take()
            if taken:
                return taken
            remaining_ms = int((deadline - loop.time()) * 1000)
            await self._fetch(max(0, min(self.fetch_max_wait_ms, remaining_ms)))
            taken = take()
            if taken or loop.time() >= deadline:
                return taken

    def _take_entries(self) -> list[FetchedEntries]:
        taken: list[FetchedEntries] = []
        for tp, fetched in self._buffers.items():
            self._positions[tp] = max(self._positions[tp], fetched.next_position)
            if fetched.entries is not None and (fetched.entries.headers or fetched.entries.corrupt is not None):
                taken.append(fetched.entries)
        self._buffers.clear()
        return taken

    def _take(self, max_records: int) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        for tp in list(self._buffers):
            fetched = self._buffers[tp]
            while fetched.records and len(records) < max_records:
                record = fetched.records.popleft()
                records.append(record)
                self._positions[tp] = record.offset + 1
            if not fetched.records:
                self._positions[tp] = max(self._positions[tp], fetched.next_position)
                del self._buffers[tp]
            if len(records) >= max_records:
                break
        return records

    async def _resolve_positions(self) -> None:
        missing = {
            tp: self._reset_target()
            for tp in self._assignment
            if tp not in self._positions and tp not in self._pending_resets
        }
        missing.update(self._pending_resets)
        if not missing:
            return
        offsets = await list_offsets(self.cluster, missing, self.isolation_level)
        for tp, (offset, _) in offsets.items():
            if self._pending_resets.pop(tp, None) is not None or tp not in self._positions:
                self._positions[tp] = offset

    def _reset_target(self) -> int:
        if self.auto_offset_reset == "none":
            raise OffsetOutOfRangeError("no position and auto_offset_reset is none")
        return EARLIEST if self.auto_offset_reset == "earliest" else LATEST

    async def _fetch(self, max_wait_ms: int) -> None:
        try:
            await self._resolve_positions()
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in self._assignment:
                if tp not in self._buffers:
                    by_leader[await self.cluster.leader_for(tp)].append(tp)
            if not by_leader:
                await asyncio.sleep(max_wait_ms / 1000)
                return
            await asyncio.gather(*(self._fetch_from(node, tps, max_wait_ms) for node, tps in by_leader.items()))
        except KafkaError as exc:
            if not exc.code.retriable or isinstance(exc, CorruptFetchedBatchError):
                raise
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            await self._refresh_quietly()

    async def _refresh_quietly(self) -> None:
        try:
            await self.cluster.refresh_metadata({tp.topic for tp in self._assignment})
        except KafkaError as exc:
            if not exc.code.retriable:
                raise

    async def _fetch_from(self, node: int, partitions: list[TopicPartition], max_wait_ms: int) -> None:
        body = fetch_request_body(
            {tp: self._positions[tp] for tp in partitions},
            max_wait_ms=max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            partition_max_bytes=self.max_partition_fetch_bytes,
            isolation_level=self.isolation_level,
        )
        response = await self.cluster.send(node, ApiKey.FETCH, body)
        if getattr(response, "error_code", ErrorCode.NONE) != ErrorCode.NONE:
            raise kafka_error(response.error_code, None, f"fetch from broker {node}")
        retriable: KafkaError | None = None
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, int(part.partition_index))
                error = self._handle_partition(tp, part)
                if error is not None:
                    retriable = error
        if retriable is not None:
            raise retriable

    def _handle_partition(self, tp: TopicPartition, part: Any) -> KafkaError | None:
        """Buffer the records of one partition's fetch result; a retriable error is returned, others raised."""
        position = self._positions.get(tp)
        if position is None or tp in self._buffers:
            return None  # sought or reassigned while the fetch was in flight
        code = ErrorCode(part.error_code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                raise OffsetOutOfRangeError(f"fetch position {position} is out of range for {tp}")
            del self._positions[tp]
            self._pending_resets[tp] = self._reset_target()
            return None
        if code != ErrorCode.NONE:
            error = kafka_error(code, None, f"fetch {tp}")
            if code.retriable:
                return error
            raise error
        self._high_watermarks[tp] = int(part.high_watermark)
        aborted = [(int(a.producer_id), int(a.first_offset)) for a in part.aborted_transactions or ()]
        read_committed = self.isolation_level == ISOLATION_LEVELS["read_committed"]
        entries = select_entries(tp, part.records or b"", position, aborted, read_committed, self.check_crcs)
        if self.decode_records:
            records = entry_records(entries)
            if records or entries.next_position != position:
                self._buffers[tp] = _Fetched(deque(records), entries.next_position)
            elif entries.corrupt is not None:
                raise entries.corrupt_error()
        elif entries.headers or entries.corrupt is not None or entries.next_position != position:
            self._buffers[tp] = _Fetched(deque(), entries.next_position, entries)
        return None

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()
