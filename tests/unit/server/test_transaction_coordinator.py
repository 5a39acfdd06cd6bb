"""The transaction coordinator's state machine over a recording state log and marker writer: producer ids and
epochs, fencing, the two phases of an end, a fenced producer's open transaction, and a load that finds a
transaction prepared but not completed."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.transaction_log import TransactionLogValue, TransactionState
from mq.server.clock import ManualClock
from mq.server.transaction_coordinator import TransactionCoordinator
from mq.server.transaction_state_manager import TRANSACTION_STATE_TOPIC_NAME, TransactionStateManager
from mq.topic_partition import TopicPartition

T = TypeVar("T")
STATE_TP = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, 0)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
COORDINATOR_EPOCH = 7
NOW = ManualClock().time_ms()


class RecordingLog(TransactionStateManager):
    """One partition; every write is kept, ``failing`` makes the next writes fail."""

    def __init__(self, stored: dict[str, TransactionLogValue] | None = None) -> None:
        self.values: list[tuple[str, TransactionLogValue | None]] = []
        self.stored = stored or {}
        self.failing: ErrorCode | None = None

    def partition_for(self, transactional_id: str) -> int:
        return 0

    def load(self, partition: int) -> dict[str, TransactionLogValue]:
        return dict(self.stored)

    async def append(self, transactional_id: str, value: TransactionLogValue | None) -> ErrorCode:
        if self.failing is not None:
            return self.failing
        self.values.append((transactional_id, value))
        return ErrorCode.NONE

    def states(self) -> list[TransactionState]:
        return [v.state for _, v in self.values if v is not None]


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[TopicPartition, int, int, int, bool]] = []
        self.fail_first: set[TopicPartition] = set()
        self.unknown: set[TopicPartition] = set()
        """Partitions the metadata does not name (UNKNOWN_TOPIC_OR_PARTITION)."""

    async def __call__(
        self, tp: TopicPartition, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool
    ) -> ErrorCode:
        if tp in self.unknown:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if tp in self.fail_first:
            self.fail_first.discard(tp)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        self.written.append((tp, producer_id, epoch, coordinator_epoch, commit))
        return ErrorCode.NONE


def coordinator(log: RecordingLog, markers: Markers) -> TransactionCoordinator:
    """A standalone coordinator (no ``send_markers``) leading every partition but those ``markers`` call unknown."""
    ids = iter(range(1000, 2000))

    async def next_id() -> int:
        return next(ids)

    config = BrokerConfig.load(None, [])
    return TransactionCoordinator(config, log, next_id, markers, lambda tp: tp not in markers.unknown, ManualClock())


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(scenario)


async def loaded(c: TransactionCoordinator) -> None:
    c.on_leadership_change(STATE_TP, True, COORDINATOR_EPOCH)
    while c.loading_partitions or any(not t.done() for t in c._tasks):
        await asyncio.sleep(0)


async def settle(c: TransactionCoordinator) -> None:
    while any(not t.done() for t in c._tasks):
        await asyncio.sleep(0.01)


async def open_on_tp0() -> tuple[RecordingLog, Markers, TransactionCoordinator, int, int]:
    """A loaded coordinator with the transaction of "tx" open on TP0: (log, markers, coordinator, pid, epoch)."""
    log, markers = RecordingLog(), Markers()
    c = coordinator(log, markers)
    await loaded(c)
    _, pid, epoch = await c.init_producer_id("tx", 60000, -1, -1)
    assert await c.add_partitions("tx", pid, epoch, [TP0]) == ErrorCode.NONE
    return log, markers, c, pid, epoch


def test_producer_ids_epochs_and_the_coordinator_s_checks() -> None:
    async def scenario() -> None:
        log, markers = RecordingLog(), Markers()
        c = coordinator(log, markers)
        assert await c.init_producer_id("tx", 60000, -1, -1) == (ErrorCode.NOT_COORDINATOR, -1, -1)
        await loaded(c)
        assert (await c.init_producer_id("tx", 10**9, -1, -1))[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert await c.init_producer_id("tx", 60000, -1, -1) == (ErrorCode.NONE, 1000, 0)
        assert await c.init_producer_id("tx", 60000, -1, -1) == (ErrorCode.NONE, 1000, 1)
        assert await c.add_partitions("tx", 1000, 0, [TP0]) == ErrorCode.PRODUCER_FENCED
        assert await c.add_partitions("tx", 999, 1, [TP0]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await c.add_partitions("unknown", 1000, 1, [TP0]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert await c.end_txn("tx", 1000, 1, commit=True) == ErrorCode.INVALID_TXN_STATE  # nothing open
        assert log.states() == [TransactionState.EMPTY, TransactionState.EMPTY]

    run(scenario())


def test_a_commit_is_prepared_then_marked_on_every_partition_then_completed() -> None:
    async def scenario() -> None:
        log, markers, c, pid, epoch = await open_on_tp0()
        assert c.verify_partitions("tx", pid, epoch, [TP0, TP1]) == {
            TP0: ErrorCode.NONE,
            TP1: ErrorCode.INVALID_TXN_STATE,
        }
        assert c.verify_partitions("tx", pid, epoch - 1, [TP0]) == {TP0: ErrorCode.PRODUCER_FENCED}
        assert await c.add_partitions("tx", pid, epoch, [TP0, TP1]) == ErrorCode.NONE
        markers.fail_first = {TP1}  # its leader moves: tried again
        assert await c.end_txn("tx", pid, epoch, commit=True) == ErrorCode.NONE
        await settle(c)
        assert sorted(markers.written) == [(TP0, pid, epoch, COORDINATOR_EPOCH, True), (TP1, pid, epoch, 7, True)]
        assert log.states() == [
            TransactionState.EMPTY,
            TransactionState.ONGOING,
            TransactionState.ONGOING,
            TransactionState.PREPARE_COMMIT,
            TransactionState.COMPLETE_COMMIT,
        ]
        prepared = log.values[3][1]
        assert prepared is not None and prepared.partitions == (TP0, TP1)
        assert await c.end_txn("tx", pid, epoch, commit=True) == ErrorCode.NONE  # a retry
        assert await c.end_txn("tx", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert c.transactions["tx"].partitions == set()

    run(scenario())


def test_a_partition_that_does_not_exist_gets_no_marker_and_the_transaction_completes() -> None:
    """An offsets partition added by AddOffsetsToTxn whose topic was never created (the group's coordinator was never
    looked up): a standalone coordinator asks its own replica manager, which does not know it, and goes on."""
    offsets = TopicPartition("__consumer_offsets", 3)

    async def scenario() -> None:
        log, markers = RecordingLog(), Markers()
        markers.unknown = {offsets}
        c = coordinator(log, markers)
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("tx", 60000, -1, -1)
        assert await c.add_partitions("tx", pid, epoch, [offsets, TP0]) == ErrorCode.NONE
        assert await c.end_txn("tx", pid, epoch, commit=True) == ErrorCode.NONE
        await settle(c)
        assert markers.written == [(TP0, pid, epoch, COORDINATOR_EPOCH, True)]
        assert log.states()[-1] == TransactionState.COMPLETE_COMMIT
        assert await c.add_partitions("tx", pid, epoch, [TP1]) == ErrorCode.NONE

    run(scenario())


def test_a_new_producer_fences_the_old_one_and_its_open_transaction_is_aborted() -> None:
    async def scenario() -> None:
        log, markers = RecordingLog(), Markers()
        c = coordinator(log, markers)
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("tx", 60000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP0])
        assert (await c.init_producer_id("tx", 60000, -1, -1))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        await settle(c)
        assert markers.written == [(TP0, pid, epoch + 1, COORDINATOR_EPOCH, False)]
        assert await c.init_producer_id("tx", 60000, -1, -1) == (ErrorCode.NONE, pid, epoch + 2)
        assert await c.end_txn("tx", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED

    run(scenario())


def test_a_failed_write_changes_nothing() -> None:
    async def scenario() -> None:
        log, markers = RecordingLog(), Markers()
        c = coordinator(log, markers)
        await loaded(c)
        _, pid, epoch = await c.init_producer_id("tx", 60000, -1, -1)
        log.failing = ErrorCode.NOT_COORDINATOR
        assert await c.add_partitions("tx", pid, epoch, [TP0]) == ErrorCode.NOT_COORDINATOR
        assert await c.init_producer_id("tx", 60000, -1, -1) == (ErrorCode.NOT_COORDINATOR, -1, -1)
        meta = c.transactions["tx"]
        assert (meta.state, meta.partitions, meta.producer_epoch) == (TransactionState.EMPTY, set(), epoch)

    run(scenario())


def test_a_loaded_prepared_transaction_is_completed_and_timed_out_ones_aborted() -> None:
    async def scenario() -> None:
        stored = {
            "prepared": TransactionLogValue(5, 3, 60000, TransactionState.PREPARE_ABORT, (TP0,), 0, 0),
            "open": TransactionLogValue(6, 0, 60000, TransactionState.ONGOING, (TP1,), NOW, NOW),
        }
        log, markers = RecordingLog(stored), Markers()
        c = coordinator(log, markers)
        await loaded(c)
        await settle(c)
        assert markers.written == [(TP0, 5, 3, COORDINATOR_EPOCH, False)]
        assert c.transactions["prepared"].state == TransactionState.COMPLETE_ABORT
        c.abort_timed_out()  # the clock has not passed the open one's timeout
        await settle(c)
        assert c.transactions["open"].state == TransactionState.ONGOING
        assert isinstance(c.clock, ManualClock)
        c.clock.advance(60001)
        c.abort_timed_out()
        await settle(c)
        assert markers.written[1:] == [(TP1, 6, 1, COORDINATOR_EPOCH, False)]
        assert c.transactions["open"].state == TransactionState.COMPLETE_ABORT
        c.on_leadership_change(STATE_TP, False, COORDINATOR_EPOCH)
        assert c.transactions == {}
        assert await c.end_txn("open", 6, 1, commit=False) == ErrorCode.NOT_COORDINATOR

    run(scenario())


def test_a_completion_left_running_by_a_resignation_stops_once_the_partition_is_loaded_again() -> None:
    """The markers of a prepared commit cannot be written; the coordinator resigns its partition and is elected
    again before its retry: only the completion of the reloaded transaction writes markers and the Complete state."""

    async def scenario() -> None:
        log, markers, c, pid, epoch = await open_on_tp0()
        stalled = asyncio.Event()

        async def stalled_then_written(
            tp: TopicPartition, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool
        ) -> ErrorCode:
            if not stalled.is_set():
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            return await markers(tp, producer_id, epoch, coordinator_epoch, commit)

        c.write_marker = stalled_then_written
        assert await c.end_txn("tx", pid, epoch, commit=True) == ErrorCode.NONE
        await asyncio.sleep(0.01)  # the first attempt failed: the completion waits to retry
        log.stored = {"tx": log.values[-1][1]}  # type: ignore[dict-item]
        c.on_leadership_change(STATE_TP, False, COORDINATOR_EPOCH)
        c.on_leadership_change(STATE_TP, True, COORDINATOR_EPOCH + 1)
        while c.loading_partitions:
            await asyncio.sleep(0)
        stalled.set()
        await settle(c)
        assert markers.written == [(TP0, pid, epoch, COORDINATOR_EPOCH + 1, True)]
        assert log.states().count(TransactionState.COMPLETE_COMMIT) == 1
        assert c.transactions["tx"].state == TransactionState.COMPLETE_COMMIT

    run(scenario())


def test_a_complete_state_that_cannot_be_stored_yet_is_retried_and_the_id_then_serves_its_next_producer() -> None:
    """The markers are written but the state log refuses the Complete state for a while (too few in-sync replicas):
    the producer's next InitProducerId waits (CONCURRENT_TRANSACTIONS) until the coordinator's retry stores it."""

    async def scenario() -> None:
        log, markers, c, pid, epoch = await open_on_tp0()

        async def written_then_state_log_unavailable(
            tp: TopicPartition, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool
        ) -> ErrorCode:
            log.failing = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return await markers(tp, producer_id, epoch, coordinator_epoch, commit)

        c.write_marker = written_then_state_log_unavailable
        assert await c.end_txn("tx", pid, epoch, commit=True) == ErrorCode.NONE
        await asyncio.sleep(0.25)  # the Complete state failed to be stored at least twice
        assert c.transactions["tx"].state == TransactionState.PREPARE_COMMIT
        assert (await c.init_producer_id("tx", 60000, -1, -1))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        log.failing = None
        await settle(c)
        assert c.transactions["tx"].state == TransactionState.COMPLETE_COMMIT
        assert log.states()[-1] == TransactionState.COMPLETE_COMMIT
        assert await c.init_producer_id("tx", 60000, -1, -1) == (ErrorCode.NONE, pid, epoch + 1)

    run(scenario())
