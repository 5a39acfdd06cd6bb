"""The transaction coordinator: transactional ids, their producer ids and epochs, and two-phase commit.

A broker coordinates the transactional ids whose ``__transaction_state`` partition it leads
(``partition_for(transactional id)``); it owns a partition once it has replayed its log (COORDINATOR_LOAD_IN_PROGRESS
meanwhile, NOT_COORDINATOR for a partition it does not lead). Its leader epoch is the coordinator epoch written
in the markers.

States (Kafka's): Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn) -> PrepareCommit | PrepareAbort (EndTxn,
or a timeout, or a new InitProducerId fencing the producer) -> CompleteCommit | CompleteAbort (after the COMMIT/ABORT
markers are on every partition of the transaction) -> Ongoing again at the next AddPartitionsToTxn. Every change is
written to ``__transaction_state`` first and applied once stored; while a write (or the markers of a prepared end)
is in flight, other requests for the id get CONCURRENT_TRANSACTIONS and retry. EndTxn is answered once the Prepare
state is stored; the markers follow. Markers for partitions this broker leads are appended through the replica
manager (those on ``__consumer_offsets`` also settle the transaction's offset commits in the group coordinator);
markers for partitions led elsewhere go by ``send_markers`` (WriteTxnMarkers to their leader), retried until
written. A partition that does not exist (deleted, or ``__consumer_offsets`` never created because the group's
coordinator was never looked up) gets no marker, as Kafka skips partitions with no leader in its metadata. A
partition that loads with an id in a Prepare state writes its markers then.

Fencing: InitProducerId bumps the epoch (a new producer id once the epoch is exhausted), so requests and appends of
an older epoch fail with PRODUCER_FENCED (INVALID_PRODUCER_EPOCH on older request versions); an open transaction is
aborted under the bumped epoch first. A transaction older than its timeout is aborted the same way by
``abort_timed_out`` (scheduled on the loop); ids with no transaction in progress and no update for
``transactional.id.expiration.ms`` are removed by ``remove_expired`` (a tombstone).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.transaction_log import TransactionLogValue, TransactionState
from mq.server.clock import Clock, SystemClock
from mq.server.coordinator_partitions import CoordinatorPartitions
from mq.server.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionMetadata,
    TransactionStateManager,
)
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

MAX_PRODUCER_EPOCH = 32767
MARKER_RETRY_MS = 100
"""Backoff before markers that could not be written are tried again (a leader moving, say)."""

State = TransactionState
IN_PROGRESS = frozenset({State.ONGOING, State.PREPARE_COMMIT, State.PREPARE_ABORT, State.PREPARE_EPOCH_FENCE})

MarkerWriter = Callable[[TopicPartition, int, int, int, bool], Awaitable[ErrorCode]]
"""Writes a marker on a partition (partition, producer id, epoch, coordinator epoch, commit): through the replica
manager where this broker leads it or is standalone (``write_marker``), else to its leader (``send_markers``); either
answers UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not name."""


class TransactionCoordinator(CoordinatorPartitions[dict[str, TransactionLogValue]]):
    topic = TRANSACTION_STATE_TOPIC_NAME

    def __init__(
        self,
        config: BrokerConfig,
        manager: TransactionStateManager,
        next_producer_id: Callable[[], Awaitable[int]],
        write_marker: MarkerWriter,
        leads: Callable[[TopicPartition], bool],
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.manager = manager
        self.next_producer_id = next_producer_id
        self.write_marker = write_marker
        self.leads = leads
        """Whether this broker leads a partition (its markers are written locally)."""
        self.send_markers: MarkerWriter | None = None
        """Set in cluster mode: WriteTxnMarkers to the leader of a partition led elsewhere."""
        self.clock = clock or SystemClock()
        self.time_ms = self.clock.time_ms
        self.transactions: dict[str, TransactionMetadata] = {}

    # --- ownership (``owned_partitions``: partition -> its leader epoch, the coordinator epoch) -----------------

    def status(self, transactional_id: str) -> ErrorCode:
        """Whether this coordinator may act on ``transactional_id`` now."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        return self.partition_status(self.manager.partition_for(transactional_id))

    def _read_partition(self, partition: int) -> dict[str, TransactionLogValue]:
        return self.manager.load(partition)

    def _install(self, partition: int, loaded: dict[str, TransactionLogValue]) -> None:
        for transactional_id, value in loaded.items():
            meta = TransactionMetadata.of_value(transactional_id, value)
            self.transactions[transactional_id] = meta
            if meta.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT):
                meta.pending_state = (
                    State.COMPLETE_COMMIT if meta.state == State.PREPARE_COMMIT else State.COMPLETE_ABORT
                )
                self._spawn(self._complete(meta, partition))

    def _uninstall(self, partition: int) -> None:
        for transactional_id in [t for t in self.transactions if self.manager.partition_for(t) == partition]:
            del self.transactions[transactional_id]

    # --- writes --------------------------------------------------------------------------------------------------

    async def _store(self, meta: TransactionMetadata, state: TransactionState) -> ErrorCode:
        """Write ``meta`` in ``state`` (with ``pending_state`` set meanwhile); on success the state is applied."""
        now = self.time_ms()
        meta.pending_state = state
        try:
            error = await self.manager.append(meta.transactional_id, meta.value(state, now))
        finally:
            meta.pending_state = None
        if error == ErrorCode.NONE:
            meta.state = state
            meta.last_update_ms = now
            if state in (State.EMPTY, State.COMPLETE_COMMIT, State.COMPLETE_ABORT):
                meta.partitions.clear()
        return error

    def _current(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        """The metadata a request of (``producer_id``, ``producer_epoch``) for ``transactional_id`` may act on, or the
        error to answer (not the coordinator, unknown id, another producer id, an older epoch, a change in flight)."""
        error = self.status(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        meta = self.transactions.get(transactional_id)
        if meta is None or producer_id != meta.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if producer_epoch != meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if meta.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, meta

    # --- InitProducerId ------------------------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer starting (or restarting) with ``timeout_ms``;
        ``producer_id``/``producer_epoch`` >= 0 when it asks to bump its current epoch (KIP-360)."""
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        error = self.status(transactional_id)
        if error != ErrorCode.NONE:
            return error, -1, -1
        meta = self.transactions.get(transactional_id)
        if meta is None:
            new_id = await self.next_producer_id()
            error = self.status(transactional_id)
            if error != ErrorCode.NONE:
                return error, -1, -1
            meta = self.transactions.get(transactional_id)
            if meta is None:
                meta = TransactionMetadata(transactional_id, new_id, -1, timeout_ms, State.EMPTY)
                self.transactions[transactional_id] = meta
        if meta.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0 and (producer_id, producer_epoch) != (meta.producer_id, meta.producer_epoch):
            retried = producer_id == meta.previous_producer_id or (
                producer_id == meta.producer_id and producer_epoch == meta.last_producer_epoch
            )
            if not retried:
                return ErrorCode.PRODUCER_FENCED, -1, -1
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch  # its bump was done: answer it again
        if meta.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT, State.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if meta.state == State.ONGOING:
            self._abort_fenced(meta)
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        previous = (meta.producer_id, meta.producer_epoch, meta.previous_producer_id, meta.last_producer_epoch)
        if meta.producer_epoch >= MAX_PRODUCER_EPOCH - 1:
            meta.pending_state = State.EMPTY
            try:
                new_id = await self.next_producer_id()
            finally:
                meta.pending_state = None
            meta.previous_producer_id, meta.producer_id, meta.producer_epoch = meta.producer_id, new_id, 0
        else:
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch += 1
        meta.timeout_ms = timeout_ms
        meta.start_ms = -1
        error = await self._store(meta, State.EMPTY)
        if error != ErrorCode.NONE:
            meta.producer_id, meta.producer_epoch, meta.previous_producer_id, meta.last_producer_epoch = previous
            return error, -1, -1
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    def _abort_fenced(self, meta: TransactionMetadata) -> None:
        """Abort ``meta``'s open transaction under a bumped epoch (the producer is fenced), in the background."""
        meta.last_producer_epoch = meta.producer_epoch
        meta.producer_epoch = min(meta.producer_epoch + 1, MAX_PRODUCER_EPOCH)
        meta.pending_state = State.PREPARE_ABORT
        self._spawn(self._end(meta, commit=False))

    # --- the transaction's partitions ----------------------------------------------------------------------------

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        """Add ``partitions`` to the producer's transaction (starting it when none is open)."""
        error, meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        if meta.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT, State.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted = set(partitions)
        if meta.state == State.ONGOING and wanted <= meta.partitions:
            return ErrorCode.NONE
        before = set(meta.partitions)
        started = meta.start_ms
        if meta.state != State.ONGOING:
            meta.start_ms = self.time_ms()
        meta.partitions |= wanted
        error = await self._store(meta, State.ONGOING)
        if error != ErrorCode.NONE:
            meta.partitions, meta.start_ms = before, started
        return error

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Whether each partition is in the producer's ongoing transaction (AddPartitionsToTxn v4 ``verify_only``):
        NONE, or INVALID_TXN_STATE; the coordinator's error for all of them when the request is not current."""
        error, meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta is None and error != ErrorCode.CONCURRENT_TRANSACTIONS:
            return dict.fromkeys(partitions, error)
        meta = self.transactions[transactional_id]
        ongoing = meta.state == State.ONGOING
        return {
            tp: ErrorCode.NONE if ongoing and tp in meta.partitions else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    # --- EndTxn --------------------------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """Commit or abort the producer's transaction: answered once the Prepare state is stored; the markers and
        the Complete state follow."""
        error, meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        state = meta.state
        if state == State.ONGOING:
            return await self._end(meta, commit)
        if (state == State.COMPLETE_COMMIT and commit) or (state == State.COMPLETE_ABORT and not commit):
            return ErrorCode.NONE  # a retry of an end that went through
        if (state == State.PREPARE_COMMIT and commit) or (state == State.PREPARE_ABORT and not commit):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    async def _end(self, meta: TransactionMetadata, commit: bool) -> ErrorCode:
        prepared = State.PREPARE_COMMIT if commit else State.PREPARE_ABORT
        error = await self._store(meta, prepared)
        if error != ErrorCode.NONE:
            return error
        meta.pending_state = State.COMPLETE_COMMIT if commit else State.COMPLETE_ABORT
        self._spawn(self._complete(meta, self.manager.partition_for(meta.transactional_id)))
        return ErrorCode.NONE

    async def _complete(self, meta: TransactionMetadata, partition: int) -> None:
        """Write the markers of a prepared transaction on all its partitions, then store its Complete state, each
        retried until it succeeds or this coordinator stops completing it (``_completing``); the producer's next
        transaction waits for that Complete state."""
        commit = meta.state == State.PREPARE_COMMIT
        remaining = set(meta.partitions)
        while remaining:
            for tp in sorted(remaining):
                coordinator_epoch = self._completing(meta, partition)
                if coordinator_epoch is None:
                    return
                if self.send_markers is None or self.leads(tp):
                    code = await self.write_marker(tp, meta.producer_id, meta.producer_epoch, coordinator_epoch, commit)
                else:
                    code = await self.send_markers(tp, meta.producer_id, meta.producer_epoch, coordinator_epoch, commit)
                if code in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    remaining.discard(tp)  # a partition that does not exist (deleted, never created) needs no marker
                else:
                    log.debug("marker for %s of %s failed with %s", tp, meta.transactional_id, code.name)
            if remaining:
                await asyncio.sleep(MARKER_RETRY_MS / 1000)
        final = State.COMPLETE_COMMIT if commit else State.COMPLETE_ABORT
        warned = False
        while self._completing(meta, partition) is not None:
            error = await self._store(meta, final)
            if error == ErrorCode.NONE:
                return
            meta.pending_state = final  # still in flight: the id's producer waits (CONCURRENT_TRANSACTIONS)
            if not warned:
                log.warning("could not store %s of %s (retrying): %s", final.name, meta.transactional_id, error.name)
                warned = True
            await asyncio.sleep(MARKER_RETRY_MS / 1000)

    def _completing(self, meta: TransactionMetadata, partition: int) -> int | None:
        """The coordinator epoch to write ``meta``'s markers with; None once this coordinator no longer completes it
        (its partition resigned, and maybe loaded again: whoever loaded it completes it)."""
        coordinator_epoch = self.owned_partitions.get(partition)
        if coordinator_epoch is None or not self.active or self.transactions.get(meta.transactional_id) is not meta:
            return None
        return coordinator_epoch

    # --- timeouts and expiry -------------------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        """On the loop: abort (fencing their producers) the open transactions older than their timeout."""
        now = self.time_ms()
        for meta in list(self.transactions.values()):
            if meta.state == State.ONGOING and meta.pending_state is None and meta.start_ms + meta.timeout_ms < now:
                log.info("Aborting transaction %s: it timed out", meta.transactional_id)
                self._abort_fenced(meta)

    def remove_expired(self) -> None:
        """On the loop: remove ids with no transaction in progress not updated for transactional.id.expiration.ms."""
        now = self.time_ms()
        limit = self.config.transactional_id_expiration_ms
        for meta in list(self.transactions.values()):
            if meta.state not in IN_PROGRESS and meta.pending_state is None and meta.last_update_ms + limit < now:
                meta.pending_state = State.DEAD
                self._spawn(self._remove(meta))

    async def _remove(self, meta: TransactionMetadata) -> None:
        error = await self.manager.append(meta.transactional_id, None)
        meta.pending_state = None
        if error == ErrorCode.NONE and self.transactions.get(meta.transactional_id) is meta:
            del self.transactions[meta.transactional_id]
            log.info("Removed expired transactional id %s", meta.transactional_id)

    # --- listing -------------------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        error = self.status(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        meta = self.transactions.get(transactional_id)
        return (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None) if meta is None else (ErrorCode.NONE, meta)

    def list(self) -> list[TransactionMetadata]:
        return list(self.transactions.values())
