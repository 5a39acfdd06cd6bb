"""Exactly-once copying (``mq mirror --exactly-once``, ``mq replay-log-producer --exactly-once``): one
transactional producer on the target per source partition.

Records of source partition ``tp`` are written to the target in transactions of the transactional id
``<prefix><topic>-<partition>``, and each transaction also writes the source position reached (the next offset to
read) to the compacted positions topic on the target (``POSITIONS_TOPIC``, one partition; key
``["<group>", "<topic>", <partition>]`` as JSON, value the offset in ASCII), as Kafka Connect keeps source offsets:
the copies and the position become visible together or not at all, whether or not the target has the source's
topic. Whoever takes ``tp`` over (the copier after a crash, another instance after a rebalance) starts a producer of
the same id, which fences the previous one (its late writes are refused) and completes or aborts its open
transaction; only then are the positions read back, read_committed up to the end the topic had at that moment (so
past other copiers' open transactions once they end), and they match exactly what the target holds. A
read_committed consumer of the target therefore sees every source record once.

An abortable failure (a record refused, a partition that could not be added) aborts that partition's transaction;
``commit`` returns the position to rewind the source to, the last committed one. A fenced producer means another
owner took the partition: TransactionFatalError reaches the caller.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.cluster import Cluster
from mq.client.consumer import AsyncConsumer, list_offsets
from mq.client.producer import Row
from mq.client.transactional_producer import AbortableTransactionError, TransactionalProducer
from mq.errors import ErrorCode, KafkaError
from mq.protocol.list_offsets import LATEST
from mq.records.batch_header import BatchHeader
from mq.records.crc import Buffer
from mq.topic_partition import TopicPartition

POSITIONS_TOPIC = "mq-copy-positions"
POSITIONS_READ_WAIT_MS = 200
POSITIONS_REPLICATION = 3


def transactional_id(prefix: str, tp: TopicPartition) -> str:
    """The transactional id of the producer that copies source partition ``tp``."""
    return f"{prefix}{tp.topic}-{tp.partition}"


class PartitionTransactions:
    """The transactional producers of the source partitions a stream owns, sharing the target's connections."""

    def __init__(self, cluster: Cluster, group_id: str, prefix: str, settings: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.prefix = prefix
        self.settings = {k: v for k, v in settings.items() if k not in ("bootstrap_servers", "security", "client_id")}
        self.producers: dict[TopicPartition, TransactionalProducer] = {}
        self.committed: dict[TopicPartition, int] = {}
        """Per owned partition, the position its last committed transaction recorded (absent: none yet)."""
        self._admin = AsyncAdmin(cluster=cluster)

    async def own(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Start (fence) the producers of ``tps``, then read their committed positions from the target; returns the
        partitions that have one."""
        wanted = [tp for tp in tps if tp not in self.producers]
        if not wanted:
            return {}
        await self._create_positions_topic()
        started = await asyncio.gather(*(self._start(tp) for tp in wanted))
        self.producers.update(zip(wanted, started, strict=True))
        positions = await self._read_positions()
        found = {tp: positions[key] for tp in wanted if (key := self._key(tp)) in positions}
        self.committed.update(found)
        return found

    def _key(self, tp: TopicPartition) -> bytes:
        return json.dumps([self.group_id, tp.topic, tp.partition]).encode()

    async def _create_positions_topic(self) -> None:
        """Create the positions topic where missing: compacted, replicated on up to ``POSITIONS_REPLICATION``
        brokers (as Kafka Connect's offsets topic) so that losing a broker loses no position."""
        await self.cluster.refresh_metadata([])
        replication = min(POSITIONS_REPLICATION, max(1, len(self.cluster.brokers)))
        topic = NewTopic(POSITIONS_TOPIC, 1, replication, configs={"cleanup.policy": "compact"})
        try:
            await self._admin.create_topics([topic])
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    async def _read_positions(self) -> dict[bytes, int]:
        """Every committed position in the positions topic, read up to the end it has now."""
        tp = TopicPartition(POSITIONS_TOPIC, 0)
        ((end, _),) = (await list_offsets(self.cluster, {tp: LATEST})).values()
        positions: dict[bytes, int] = {}
        consumer = AsyncConsumer(
            cluster=self.cluster,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            fetch_max_wait_ms=POSITIONS_READ_WAIT_MS,
        )
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        try:
            while await consumer.position(tp) < end:
                for record in await consumer.poll(POSITIONS_READ_WAIT_MS, 10_000):
                    if record.key is not None and record.value is not None:
                        positions[record.key] = int(record.value)
        finally:
            await consumer.close()
        return positions

    def start_from(self, positions: Mapping[TopicPartition, int]) -> None:
        """Where partitions without a committed position start: what an abort before their first commit rewinds
        to."""
        for tp, offset in positions.items():
            self.committed.setdefault(tp, offset)

    async def _start(self, tp: TopicPartition) -> TransactionalProducer:
        producer = TransactionalProducer(transactional_id(self.prefix, tp), cluster=self.cluster, **self.settings)
        await producer.start()
        return producer

    async def send(self, source: TopicPartition, topic: str, rows: list[Row], partition: int | None) -> None:
        """Queue copies of ``source``'s records in its open transaction (opened here when none is)."""
        future = await self._producer(source).send_many(topic, rows, partition)
        future.add_done_callback(_retrieve)

    def _producer(self, source: TopicPartition) -> TransactionalProducer:
        """The producer of ``source``'s copies, in a transaction (begun here when none is open)."""
        producer = self.producers[source]
        if not producer.in_transaction:
            producer.begin_transaction()
        return producer

    async def send_batches(
        self, source: TopicPartition, topic: str, batches: Sequence[tuple[Buffer, BatchHeader]], partition: int
    ) -> None:
        """``send`` of fetched batches taken as they are (``AsyncProducer.send_batches``)."""
        future = await self._producer(source).send_batches(topic, partition, batches)
        future.add_done_callback(_retrieve)

    async def record(self, positions: Mapping[TopicPartition, int]) -> None:
        """Commit ``positions`` as they are (a transaction of offsets alone where none is open): where a new copy
        starts, so that no position an earlier copy left on the target applies."""
        for tp in positions:
            if not self.producers[tp].in_transaction:
                self.producers[tp].begin_transaction()
        if await self.commit(positions):
            raise KafkaError(
                "the start positions could not be recorded on the target", code=ErrorCode.UNKNOWN_SERVER_ERROR
            )

    async def commit(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Commit every open transaction with its partition's position; returns, for the partitions whose
        transaction had to be aborted instead, the position to read again from."""
        open_ = {tp: p for tp, p in self.producers.items() if p.in_transaction and tp in positions}
        outcomes = await asyncio.gather(*(self._commit(tp, p, positions[tp]) for tp, p in open_.items()))
        return {tp: rewind for tp, rewind in zip(open_, outcomes, strict=True) if rewind is not None}

    async def _commit(self, tp: TopicPartition, producer: TransactionalProducer, position: int) -> int | None:
        try:
            row = (self._key(tp), str(position).encode(), (), None)
            future = await producer.send_many(POSITIONS_TOPIC, [row], 0)
            future.add_done_callback(_retrieve)
            await producer.commit_transaction()
        except AbortableTransactionError:
            await producer.abort_transaction()
            return self.committed.get(tp, position)  # none yet: ``record`` of the start position failed
        self.committed[tp] = position
        return None

    async def release(self, tps: Iterable[TopicPartition], positions: Mapping[TopicPartition, int]) -> None:
        """Commit what ``tps`` hold (a failed commit leaves its records to the next owner) and close their
        producers."""
        mine = [tp for tp in tps if tp in self.producers]
        await self.commit({tp: positions[tp] for tp in mine if tp in positions})
        for tp in mine:
            self.committed.pop(tp, None)
            await self.producers.pop(tp).close()


def _retrieve(future: asyncio.Future[int]) -> None:
    """A failed send is reported by the transaction's commit; retrieving it here keeps asyncio quiet."""
    if not future.cancelled():
        future.exception()
