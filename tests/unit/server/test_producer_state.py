from __future__ import annotations

import json

import pytest

from mq.server.producer_id_manager import ProducerIdManager
from mq.server.producer_state import (
    BatchMetadata,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
)
from mq.zk import paths
from mq.zk.local_store import LocalStore


def append(
    state: ProducerStateManager, pid: int, epoch: int, first: int, last: int, offset: int
) -> BatchMetadata | None:
    duplicate = state.check(pid, epoch, first, last)
    if duplicate is None:
        state.update(pid, epoch, BatchMetadata(first, last, offset, offset + last - first, 0))
    return duplicate


def test_in_order_batches_and_duplicates() -> None:
    state = ProducerStateManager()
    assert append(state, 7, 0, 0, 4, 100) is None
    assert append(state, 7, 0, 5, 9, 105) is None
    duplicate = append(state, 7, 0, 0, 4, 999)
    assert duplicate is not None and duplicate.first_offset == 100
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 0, 11, 12)


def test_only_the_last_five_batches_are_remembered() -> None:
    state = ProducerStateManager()
    for i in range(6):
        append(state, 1, 0, i, i, i)
    assert state.check(1, 0, 5, 5) is not None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(1, 0, 0, 0)


def test_epochs() -> None:
    state = ProducerStateManager()
    append(state, 1, 3, 0, 0, 0)
    with pytest.raises(InvalidProducerEpochError):
        state.check(1, 2, 1, 1)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(1, 4, 5, 5)
    assert append(state, 1, 4, 0, 0, 1) is None


def test_unknown_producer_may_start_anywhere_and_sequences_wrap() -> None:
    state = ProducerStateManager()
    assert append(state, 2, 0, 2147483646, 2147483647, 0) is None
    assert append(state, 2, 0, 0, 3, 2) is None


def test_idle_producers_without_an_open_transaction_expire() -> None:
    state = ProducerStateManager()
    state.update(1, 0, BatchMetadata(0, 4, 0, 4, 1_000))  # idle since 1000
    state.update(2, 0, BatchMetadata(0, 0, 5, 5, 1_000), transactional=True)  # as old, but its transaction is open
    state.update(3, 0, BatchMetadata(0, 0, 6, 6, 1_500))
    state.update(4, 0, BatchMetadata(0, 0, 7, 7, 500), transactional=True)
    state.complete_txn(4, 0, 0, commit=True, timestamp=1_800)  # a marker counts as its producer's last use
    assert state.remove_expired(now_ms=1_999, expiration_ms=1_000) == []
    assert state.remove_expired(now_ms=2_000, expiration_ms=1_000) == [1]
    assert sorted(state.producers) == [2, 3, 4]
    with pytest.raises(OutOfOrderSequenceError):
        state.check(3, 0, 7, 7)  # known: its sequence must follow on
    assert state.remove_expired(now_ms=10_000, expiration_ms=1_000) == [3, 4]
    assert state.check(3, 0, 7, 7) is None  # forgotten: an unknown producer may start anywhere (Kafka 2.5+)
    assert state.check(1, 0, 0, 4) is None  # and a retry of its batch is no longer a duplicate
    assert sorted(state.producers) == [2] and state.first_unstable_offset == 5


def test_producer_ids_are_unique_across_managers_and_restarts() -> None:
    store = LocalStore(None)
    a, b = ProducerIdManager(store, 0), ProducerIdManager(store, 1)
    ids = [a.next_id() for _ in range(1001)] + [b.next_id() for _ in range(3)]
    assert len(set(ids)) == len(ids)
    assert ids[:2] == [0, 1] and ids[1000] == 1000
    block = json.loads(store.get(paths.LATEST_PRODUCER_ID_BLOCK)[0])
    assert block == {"version": 1, "broker": 1, "block_start": "2000", "block_end": "2999"}
    assert ProducerIdManager(store, 0).next_id() == 3000
