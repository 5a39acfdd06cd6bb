"""``mq transactions`` logic: Kafka's kafka-transactions (TransactionsCommand) over an admin connection.

Each subcommand returns a ``Table`` of Kafka's columns; ``Table.lines`` lays it out as Kafka's
``ToolsUtils.prettyPrintTable`` does: every cell left-aligned and padded with spaces to its column's widest cell
(header included), each cell followed by a tab (so every line ends with one), the header line first. A failure raises
``TransactionsError`` with the line Kafka's tool prints before exiting 1: its message, then for a failed admin call
``: <the error's message>. Enable debug logging for additional detail.``

find-hanging is Kafka's search: the partitions in scope (one partition, a topic's, or every partition with a replica
on the broker), their producers (DescribeProducers, 500 partitions a request, at the broker when given, else at each
leader) with a transaction open since before now minus the maximum transaction timeout (measured from the producer's
last timestamp), then per producer id its transactional id (ListTransactions on every broker filtered by the producer
ids) and that id's state at its coordinator (DescribeTransactions). An open transaction is hanging when no coordinator
knows its producer id, the coordinator does not know the transactional id, or the coordinator's transaction does not
include the partition (a transaction being completed lists only the partitions still waiting for a marker).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mq.client.admin import (
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from mq.client.cluster import TopicMetadata
from mq.errors import ErrorCode, KafkaError
from mq.topic_partition import TopicPartition

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCERS_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)
MAX_BATCH_SIZE = 500
"""Topics described, and partitions whose producers are described, per request by find-hanging (Kafka's)."""
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
T = TypeVar("T")

Cell = int | str | None
"""A table cell: None prints as Kafka's ``None``."""


class TransactionsError(Exception):
    """A failure, worded as Kafka's tool prints it before exiting 1."""


def failed(message: str, exc: BaseException) -> TransactionsError:
    """Kafka's ``printErrorAndExit(message, cause)`` line."""
    return TransactionsError(f"{message}: {exc}. Enable debug logging for additional detail.")


class TransactionAdmin(Protocol):
    """What the transactions tool needs from an admin connection (blocking; ``SyncAdmin`` is one)."""

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> dict[int, list[TransactionListing]]: ...

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription | KafkaError]: ...

    def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, tuple[ProducerState, ...]]: ...

    def abort_transaction(self, spec: AbortTransactionSpec) -> None: ...

    def list_topics(self, include_internal: bool = True) -> list[str]: ...

    def describe_topics(self, names: Sequence[str]) -> list[TopicMetadata]: ...


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]

    def cells(self) -> list[list[str]]:
        """The rows as Kafka prints their cells."""
        return [["None" if cell is None else str(cell) for cell in row] for row in self.rows]

    def lines(self) -> list[str]:
        """Kafka's ``prettyPrintTable`` layout (see the module docstring)."""
        cells = self.cells()
        widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(self.headers)]
        return [
            "".join(f"{cell.ljust(width)}\t" for cell, width in zip(row, widths, strict=True))
            for row in [list(self.headers), *cells]
        ]

    def documents(self) -> list[dict[str, Cell]]:
        """One object per row, keyed by Kafka's column names."""
        return [dict(zip(self.headers, row, strict=True)) for row in self.rows]


def list_transactions(admin: TransactionAdmin, duration_ms: int | None = None) -> Table:
    """Every coordinator's transactions (only those running longer than ``duration_ms`` when given), by broker id."""
    try:
        found = admin.list_transactions(duration_ms=-1 if duration_ms is None else duration_ms)
    except KafkaError as exc:
        raise failed("Failed to list transactions", exc) from exc
    rows = tuple(
        (t.transactional_id, broker, t.producer_id, t.state) for broker in sorted(found) for t in found[broker]
    )
    return Table(LIST_HEADERS, rows)


def describe_transaction(admin: TransactionAdmin, transactional_id: str, now_ms: int) -> Table:
    """The transactional id's state at its coordinator; the duration is ``now_ms`` minus the transaction's start."""
    try:
        result = admin.describe_transactions([transactional_id])[transactional_id]
        if isinstance(result, KafkaError):
            raise result
    except KafkaError as exc:
        raise failed(f"Failed to describe transaction state of transactional-id `{transactional_id}`", exc) from exc
    start = result.transaction_start_time_ms
    row: tuple[Cell, ...] = (
        result.coordinator_id,
        transactional_id,
        result.producer_id,
        result.producer_epoch,
        result.state,
        result.transaction_timeout_ms,
        start,
        None if start is None else now_ms - start,
        ",".join(str(tp) for tp in sorted(result.topic_partitions)),
    )
    return Table(DESCRIBE_HEADERS, (row,))


def describe_producers(admin: TransactionAdmin, tp: TopicPartition, broker_id: int | None = None) -> Table:
    """The active producers of ``tp`` at its leader (or at ``broker_id``'s replica)."""
    try:
        producers = admin.describe_producers([tp], broker_id)[tp]
    except KafkaError as exc:
        where = "leader" if broker_id is None else f"broker {broker_id}"
        raise failed(f"Failed to describe producers for partition {tp} on {where}", exc) from exc
    rows = tuple(
        (
            p.producer_id,
            p.producer_epoch,
            -1 if p.coordinator_epoch is None else p.coordinator_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.current_transaction_start_offset,
        )
        for p in producers
    )
    return Table(PRODUCERS_HEADERS, rows)


def abort_spec(
    admin: TransactionAdmin,
    tp: TopicPartition,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
) -> AbortTransactionSpec:
    """The transaction to abort: the one open on ``tp`` from ``start_offset`` (its producer from the leader's
    DescribeProducers), else the one of ``producer_id``, ``producer_epoch`` and ``coordinator_epoch`` (a negative
    coordinator epoch, as a producer that never completed a transaction shows, counts as 0)."""
    if start_offset is None and producer_id is None:
        raise TransactionsError(
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) "
            "or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    if start_offset is not None:
        try:
            producers = admin.describe_producers([tp])[tp]
        except KafkaError as exc:
            raise failed(f"Failed to validate producer state for partition {tp}", exc) from exc
        for p in producers:
            if p.current_transaction_start_offset == start_offset:
                return AbortTransactionSpec(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch or 0)
        raise TransactionsError(
            f"Could not find any open transactions starting at offset {start_offset} on partition {tp}"
        )
    assert producer_id is not None
    if producer_epoch is None:
        raise TransactionsError("Missing required argument --producer-epoch")
    if coordinator_epoch is None:
        raise TransactionsError("Missing required argument --coordinator-epoch")
    return AbortTransactionSpec(tp, producer_id, producer_epoch, max(coordinator_epoch, 0))


def abort(admin: TransactionAdmin, spec: AbortTransactionSpec) -> None:
    """Write the ABORT marker of ``spec`` at its partition's leader."""
    try:
        admin.abort_transaction(spec)
    except KafkaError as exc:
        raise failed(f"Failed to abort transaction {spec}", exc) from exc


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    tp: TopicPartition
    producer: ProducerState


def find_hanging(
    admin: TransactionAdmin,
    now_ms: int,
    broker_id: int | None = None,
    topic: str | None = None,
    partition: int | None = None,
    max_transaction_timeout_min: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
) -> Table:
    """The hanging transactions in scope (see the module docstring), with their duration in whole minutes."""
    if topic is None and broker_id is None:
        raise TransactionsError(
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"
        )
    if partition is not None and topic is None:
        raise TransactionsError("The --partition argument requires --topic to be provided")
    partitions = _partitions_to_search(admin, broker_id, topic, partition)
    candidates = _open_transactions(admin, broker_id, max_transaction_timeout_min * 60_000, partitions, now_ms)
    hanging: list[OpenTransaction] = []
    if candidates:
        by_producer: dict[int, list[OpenTransaction]] = {}
        for candidate in candidates:
            by_producer.setdefault(candidate.producer.producer_id, []).append(candidate)
        transactional_ids = _transactional_ids(admin, set(by_producer))
        descriptions = _descriptions(admin, list(transactional_ids.values()))
        for producer_id in sorted(by_producer):
            transactional_id = transactional_ids.get(producer_id)
            description = None if transactional_id is None else descriptions.get(transactional_id)
            hanging += [
                t for t in by_producer[producer_id] if description is None or t.tp not in description.topic_partitions
            ]
    rows = tuple(
        (
            t.tp.topic,
            t.tp.partition,
            t.producer.producer_id,
            t.producer.producer_epoch,
            -1 if t.producer.coordinator_epoch is None else t.producer.coordinator_epoch,
            -1 if t.producer.current_transaction_start_offset is None else t.producer.current_transaction_start_offset,
            t.producer.last_timestamp,
            _whole_minutes(now_ms - t.producer.last_timestamp),
        )
        for t in hanging
    )
    return Table(HANGING_HEADERS, rows)


def _whole_minutes(ms: int) -> int:
    """Milliseconds as minutes, truncated toward zero (Java's ``TimeUnit.toMinutes``)."""
    return ms // 60_000 if ms >= 0 else -(-ms // 60_000)


def _batches(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[i : i + MAX_BATCH_SIZE] for i in range(0, len(items), MAX_BATCH_SIZE)]


def _partitions_to_search(
    admin: TransactionAdmin, broker_id: int | None, topic: str | None, partition: int | None
) -> list[TopicPartition]:
    if topic is not None and partition is not None:
        return [TopicPartition(topic, partition)]
    if topic is not None:
        topics = [topic]
    else:
        try:
            topics = admin.list_topics(include_internal=True)
        except KafkaError as exc:
            raise failed("Failed to list topics", exc) from exc
    found: list[TopicPartition] = []
    for batch in _batches(topics):
        try:
            described = admin.describe_topics(list(batch))
        except KafkaError as exc:
            raise failed(f"Failed to describe {len(batch)} topics", exc) from exc
        found += [
            TopicPartition(t.name, p.partition)
            for t in described
            for p in t.partitions
            if broker_id is None or broker_id in p.replicas
        ]
    return found


def _open_transactions(
    admin: TransactionAdmin,
    broker_id: int | None,
    max_timeout_ms: int,
    partitions: list[TopicPartition],
    now_ms: int,
) -> list[OpenTransaction]:
    """The producers of ``partitions`` whose open transaction is older than ``max_timeout_ms``."""
    found: list[OpenTransaction] = []
    for batch in _batches(partitions):
        try:
            producers = admin.describe_producers(batch, broker_id)
        except KafkaError as exc:
            # Kafka's line shows the broker as Java prints an Optional.
            broker = "Optional.empty" if broker_id is None else f"Optional[{broker_id}]"
            raise failed(f"Failed to describe producers for {len(batch)} partitions on broker {broker}", exc) from exc
        found += [
            OpenTransaction(tp, p)
            for tp in batch
            for p in producers.get(tp, ())
            if p.current_transaction_start_offset is not None and now_ms - p.last_timestamp > max_timeout_ms
        ]
    return found


def _transactional_ids(admin: TransactionAdmin, producer_ids: set[int]) -> dict[int, str]:
    """Producer id -> the transactional id a coordinator holds it under (producer ids no coordinator knows are left
    out)."""
    try:
        listings = admin.list_transactions(producer_ids=sorted(producer_ids))
    except KafkaError as exc:
        raise failed(f"Failed to list transactions for {len(producer_ids)} producers", exc) from exc
    return {t.producer_id: t.transactional_id for ts in listings.values() for t in ts if t.producer_id in producer_ids}


def _descriptions(admin: TransactionAdmin, transactional_ids: list[str]) -> dict[str, TransactionDescription]:
    """Each transactional id's description; ids the coordinator does not know are left out, another error fails."""
    try:
        described = admin.describe_transactions(transactional_ids)
        result: dict[str, TransactionDescription] = {}
        for transactional_id, description in described.items():
            if isinstance(description, KafkaError):
                if description.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    continue
                raise description
            result[transactional_id] = description
    except KafkaError as exc:
        raise failed(f"Failed to describe {len(transactional_ids)} transactions", exc) from exc
    return result
