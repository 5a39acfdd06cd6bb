"""Exactly-once copying (``mq mirror --exactly-once``, ``mq replay-log-producer --exactly-once``): one
transactional producer on the target per source partition.

Records of source partition ``tp`` are written to the target in transactions of the transactional id
``<prefix><topic>-<partition>``, and each transaction also commits the source position reached (the next offset
to read) to the copier's group *on the target* (TxnOffsetCommit): the copies and the position become visible
together or not at all. Whoever takes ``tp`` over (the copier after a crash, another instance after a rebalance)
starts a producer of the same id, which fences the previous one (its late writes and commits are refused) and
completes or aborts its open transaction; only then is the position read back from the target (OffsetFetch with
require_stable, retried while a transaction is still being completed), so it matches exactly what the target holds.
A read_committed consumer of the target therefore sees every source record once.

An abortable failure (a record refused, a partition that could not be added) aborts that partition's transaction;
``commit`` returns the position to rewind the source to, the last committed one. A fenced producer means another
owner took the partition: TransactionFatalError reaches the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mq.client.admin import AsyncAdmin
from mq.client.cluster import Cluster
from mq.client.producer import Row
from mq.client.transactional_producer import AbortableTransactionError, TransactionalProducer
from mq.errors import ErrorCode, KafkaError
from mq.topic_partition import TopicPartition

STABLE_RETRY_S = 0.1
"""Pause between OffsetFetch attempts while the target still completes a transaction of the group's offsets."""


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
        started = await asyncio.gather(*(self._start(tp) for tp in wanted))
        self.producers.update(zip(wanted, started, strict=True))
        found = await self._stable_offsets(wanted)
        self.committed.update(found)
        return found

    def start_from(self, positions: Mapping[TopicPartition, int]) -> None:
        """Where partitions without a committed position start: what an abort before their first commit rewinds
        to."""
        for tp, offset in positions.items():
            self.committed.setdefault(tp, offset)

    async def _start(self, tp: TopicPartition) -> TransactionalProducer:
        producer = TransactionalProducer(transactional_id(self.prefix, tp), cluster=self.cluster, **self.settings)
        await producer.start()
        return producer

    async def _stable_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``tps`` on the target, once no transaction holds one pending."""
        while tps:
            try:
                return await self._admin.list_group_offsets(self.group_id, tps, require_stable=True)
            except KafkaError as exc:
                if exc.code != ErrorCode.UNSTABLE_OFFSET_COMMIT:
                    raise
            await asyncio.sleep(STABLE_RETRY_S)
        return {}

    async def send(self, source: TopicPartition, topic: str, rows: list[Row], partition: int | None) -> None:
        """Queue copies of ``source``'s records in its open transaction (opened here when none is)."""
        producer = self.producers[source]
        if not producer.in_transaction:
            producer.begin_transaction()
        future = await producer.send_many(topic, rows, partition)
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
            await producer.send_offsets_to_transaction({tp: position}, self.group_id)
            await producer.commit_transaction()
        except AbortableTransactionError:
            await producer.abort_transaction()
            return self.committed[tp]
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
