"""An in-memory TransactionAdmin for the transactions tool's unit tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mq.client.admin import AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing
from mq.client.cluster import PartitionMetadata, TopicMetadata
from mq.errors import ErrorCode, KafkaError, exception_for
from mq.topic_partition import TopicPartition as TP


def producer(
    producer_id: int, last_timestamp: int, start_offset: int | None = None, coordinator_epoch: int | None = 3
) -> ProducerState:
    return ProducerState(producer_id, 2, 7, last_timestamp, coordinator_epoch, start_offset)


@dataclass
class FakeTransactionAdmin:
    listings: dict[int, list[TransactionListing]] = field(default_factory=dict)
    descriptions: dict[str, TransactionDescription | KafkaError] = field(default_factory=dict)
    """Transactional id -> its description or error (unknown ids: TRANSACTIONAL_ID_NOT_FOUND)."""
    producers: dict[TP, tuple[ProducerState, ...]] = field(default_factory=dict)
    topics: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    """Topic -> the replicas of each partition."""
    failures: dict[str, KafkaError] = field(default_factory=dict)
    """Method name -> the error it raises."""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    aborted: list[AbortTransactionSpec] = field(default_factory=list)

    def __enter__(self) -> FakeTransactionAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _call(self, name: str, argument: Any) -> None:
        self.calls.append((name, argument))
        if name in self.failures:
            raise self.failures[name]

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> dict[int, list[TransactionListing]]:
        wanted = set(producer_ids)
        self._call("list_transactions", (sorted(wanted), duration_ms))
        return {b: [t for t in ts if not wanted or t.producer_id in wanted] for b, ts in self.listings.items()}

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription | KafkaError]:
        ids = list(transactional_ids)
        self._call("describe_transactions", ids)
        missing = "DescribeTransactions request for transactionalId `{}` failed because the ID could not be found"
        return {
            i: self.descriptions.get(i) or exception_for(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, missing.format(i))
            for i in ids
        }

    def describe_producers(
        self, partitions: Iterable[TP], broker_id: int | None = None
    ) -> dict[TP, tuple[ProducerState, ...]]:
        tps = list(partitions)
        self._call("describe_producers", (tps, broker_id))
        return {tp: self.producers.get(tp, ()) for tp in tps}

    def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        self._call("abort_transaction", spec)
        self.aborted.append(spec)

    def list_topics(self, include_internal: bool = True) -> list[str]:
        self._call("list_topics", include_internal)
        return sorted(self.topics)

    def describe_topics(self, names: Sequence[str]) -> list[TopicMetadata]:
        self._call("describe_topics", list(names))
        return [
            TopicMetadata(
                n,
                None,
                False,
                tuple(PartitionMetadata(n, p, r[0], 0, r, r) for p, r in enumerate(self.topics[n])),
            )
            for n in names
        ]
