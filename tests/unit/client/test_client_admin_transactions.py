"""AsyncAdmin's transaction methods against fake brokers: routing, request shapes, decoding, retries, errors."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from client_fakes import FakeBroker, with_coordinator

from mq.client.admin import AbortTransactionSpec, AsyncAdmin, ProducerState, TransactionDescription
from mq.client.connection import UnsupportedVersionError
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.topic_partition import TopicPartition as TP

TXN_VERSIONS = {
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
}


def with_brokers(test: Any, versions: dict[int, tuple[int, int]] | None = None) -> None:
    """Two brokers; t-0 is led by broker 0, t-1 by broker 1; broker 1 coordinates every transactional id."""
    with_coordinator(test, versions or TXN_VERSIONS)


def listing(*entries: tuple[str, int, str], error_code: int = 0) -> Any:
    def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
        return {
            "error_code": error_code,
            "transaction_states": [
                {"transactional_id": i, "producer_id": p, "transaction_state": s} for i, p, s in entries
            ],
        }

    return handle


def test_list_transactions_asks_every_broker_with_the_filters() -> None:
    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[0].handlers[ApiKey.LIST_TRANSACTIONS] = listing(("a", 5, "Ongoing"))
        brokers[1].handlers[ApiKey.LIST_TRANSACTIONS] = listing(("b", 6, "CompleteCommit"), ("c", 7, "Empty"))
        found = await admin.list_transactions(["Ongoing"], [5, 6], 1000)
        assert {b: [(t.transactional_id, t.producer_id, t.state) for t in ts] for b, ts in found.items()} == {
            0: [("a", 5, "Ongoing")],
            1: [("b", 6, "CompleteCommit"), ("c", 7, "Empty")],
        }
        for broker in brokers:
            ((header, body),) = broker.of(ApiKey.LIST_TRANSACTIONS)
            assert header.api_version == 1
            assert (body.state_filters, body.producer_id_filters, body.duration_filter) == (("Ongoing",), (5, 6), 1000)

    with_brokers(test)


def test_list_transactions_retries_a_loading_coordinator_and_words_other_errors_as_kafka() -> None:
    answers = iter([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 0])

    def loading(header: RequestHeader, body: Any) -> dict[str, Any]:
        return listing(("a", 5, "Ongoing"), error_code=next(answers))(header, body)

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[0].handlers[ApiKey.LIST_TRANSACTIONS] = loading
        brokers[1].handlers[ApiKey.LIST_TRANSACTIONS] = listing()
        assert [t.transactional_id for t in (await admin.list_transactions())[0]] == ["a"]
        assert len(brokers[0].of(ApiKey.LIST_TRANSACTIONS)) == 2

        brokers[0].handlers[ApiKey.LIST_TRANSACTIONS] = listing()
        brokers[1].handlers[ApiKey.LIST_TRANSACTIONS] = listing(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        with pytest.raises(KafkaError) as shutting_down:
            await admin.list_transactions()
        assert str(shutting_down.value) == (
            "ListTransactions request sent to broker 1 failed because the coordinator is shutting down"
        )
        assert shutting_down.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        brokers[1].handlers[ApiKey.LIST_TRANSACTIONS] = listing(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        with pytest.raises(KafkaError, match="^ListTransactions request sent to broker 1 failed with an unexpected"):
            await admin.list_transactions()

    with_brokers(test)


def test_a_duration_filter_needs_list_transactions_v1() -> None:
    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        for broker in brokers:
            broker.handlers[ApiKey.LIST_TRANSACTIONS] = listing(("a", 5, "Ongoing"))
        with pytest.raises(UnsupportedVersionError, match="^Duration filter can be set only when using API version 1"):
            await admin.list_transactions(duration_ms=0)
        assert not brokers[0].of(ApiKey.LIST_TRANSACTIONS)
        found = await admin.list_transactions()
        assert [t.transactional_id for t in found[0]] == ["a"]
        assert brokers[0].of(ApiKey.LIST_TRANSACTIONS)[0][0].api_version == 0

    with_brokers(test, {**TXN_VERSIONS, ApiKey.LIST_TRANSACTIONS: (0, 0)})


def described(transactional_id: str, error_code: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "error_code": error_code,
        "transactional_id": transactional_id,
        "transaction_state": "Ongoing",
        "transaction_timeout": 60000,
        "transaction_start_time": None,
        "producer_id": 11,
        "producer_epoch": 4,
        "topics": [],
        **fields,
    }


def test_describe_transactions_asks_each_coordinator_once_and_retries_the_ids_that_moved() -> None:
    started = datetime.datetime.fromtimestamp(1_700_000_000.5, datetime.UTC)
    moved = iter([ErrorCode.NOT_COORDINATOR])
    topics = [{"topic": "t", "partitions": [1, 0]}]
    answers = {
        "gone": lambda: described("gone", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND),
        "idle": lambda: described("idle", transaction_state="Empty"),
        "tx": lambda: described("tx", next(moved, 0), transaction_start_time=started, topics=topics),
    }

    def describe(header: RequestHeader, body: Any) -> dict[str, Any]:
        return {"transaction_states": [answers[i]() for i in body.transactional_ids]}

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.DESCRIBE_TRANSACTIONS] = describe
        found = await admin.describe_transactions(["tx", "idle", "gone", "tx"])
        assert list(found) == ["tx", "idle", "gone"]
        assert found["tx"] == TransactionDescription(
            1, "tx", "Ongoing", 11, 4, 60000, 1_700_000_000_500, frozenset({TP("t", 0), TP("t", 1)})
        )
        idle = found["idle"]
        assert isinstance(idle, TransactionDescription)
        assert (idle.state, idle.transaction_start_time_ms, idle.topic_partitions) == ("Empty", None, frozenset())
        gone = found["gone"]
        assert isinstance(gone, KafkaError) and gone.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert str(gone) == (
            "DescribeTransactions request for transactionalId `gone` failed because the ID could not be found"
        )
        finds = [body for _, body in brokers[0].of(ApiKey.FIND_COORDINATOR) + brokers[1].of(ApiKey.FIND_COORDINATOR)]
        assert sorted((b.key_type, b.coordinator_keys) for b in finds) == [
            (1, ("gone",)),
            (1, ("idle",)),
            (1, ("tx",)),
            (1, ("tx",)),
        ]
        asked = [body.transactional_ids for _, body in brokers[1].of(ApiKey.DESCRIBE_TRANSACTIONS)]
        assert asked == [("tx", "idle", "gone"), ("tx",)]
        assert not brokers[0].of(ApiKey.DESCRIBE_TRANSACTIONS)

    with_brokers(test)


def producers(*partitions: tuple[int, int, list[dict[str, Any]]], message: str | None = None) -> Any:
    """DescribeProducers answers: (partition, error code, producers) for topic t."""

    def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
        return {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": p, "error_code": e, "error_message": message, "active_producers": a}
                        for p, e, a in partitions
                    ],
                }
            ]
        }

    return handle


OPEN = {
    "producer_id": 11,
    "producer_epoch": 4,
    "last_sequence": 9,
    "last_timestamp": 1000,
    "coordinator_epoch": -1,
    "current_txn_start_offset": 42,
}
IDLE = {**OPEN, "producer_id": 12, "coordinator_epoch": 3, "current_txn_start_offset": -1}


def test_describe_producers_asks_each_partition_leader_and_retries_a_moved_leader() -> None:
    moved = iter([ErrorCode.NOT_LEADER_OR_FOLLOWER])

    def leader_one(header: RequestHeader, body: Any) -> dict[str, Any]:
        return producers((1, next(moved, 0), [IDLE]))(header, body)

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[0].handlers[ApiKey.DESCRIBE_PRODUCERS] = producers((0, 0, [OPEN]))
        brokers[1].handlers[ApiKey.DESCRIBE_PRODUCERS] = leader_one
        found = await admin.describe_producers([TP("t", 0), TP("t", 1)])
        assert found == {
            TP("t", 0): (ProducerState(11, 4, 9, 1000, None, 42),),
            TP("t", 1): (ProducerState(12, 4, 9, 1000, 3, None),),
        }
        ((_, asked),) = brokers[0].of(ApiKey.DESCRIBE_PRODUCERS)
        assert [(t.name, t.partition_indexes) for t in asked.topics] == [("t", (0,))]
        assert len(brokers[1].of(ApiKey.DESCRIBE_PRODUCERS)) == 2

    with_brokers(test)


def test_describe_producers_at_a_chosen_broker_fails_on_not_leader_and_words_errors_as_kafka() -> None:
    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.DESCRIBE_PRODUCERS] = producers((0, ErrorCode.NOT_LEADER_OR_FOLLOWER, []))
        with pytest.raises(KafkaError) as not_leader:
            await admin.describe_producers([TP("t", 0)], broker_id=1)
        assert str(not_leader.value) == "Failed to describe active producers for partition t-0 on brokerId 1"
        assert not_leader.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert len(brokers[1].of(ApiKey.DESCRIBE_PRODUCERS)) == 1
        assert not brokers[0].of(ApiKey.DESCRIBE_PRODUCERS)

        brokers[0].handlers[ApiKey.DESCRIBE_PRODUCERS] = producers((0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, []))
        with pytest.raises(KafkaError) as denied:
            await admin.describe_producers([TP("t", 0)])
        assert str(denied.value) == (
            "Failed to describe active producers for partition t-0 due to authorization failure on topic `t`"
        )

    with_brokers(test)


SPEC = AbortTransactionSpec(TP("t", 1), 11, 4, 7)


def markers(code: int, *, producer_id: int = 11) -> Any:
    def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
        partitions = [{"partition_index": 1, "error_code": code}]
        return {"markers": [{"producer_id": producer_id, "topics": [{"name": "t", "partitions": partitions}]}]}

    return handle


@pytest.mark.parametrize("version", [0, 1])
def test_abort_transaction_writes_an_abort_marker_at_the_leader(version: int) -> None:
    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.WRITE_TXN_MARKERS] = markers(0)
        await admin.abort_transaction(SPEC)
        ((header, body),) = brokers[1].of(ApiKey.WRITE_TXN_MARKERS)
        assert header.api_version == version
        (marker,) = body.markers
        assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == (
            11,
            4,
            False,
            7,
        )
        assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", (1,))]
        assert not brokers[0].of(ApiKey.WRITE_TXN_MARKERS)

    with_brokers(test, {**TXN_VERSIONS, ApiKey.WRITE_TXN_MARKERS: (0, version)})


def test_abort_transaction_retries_a_moved_leader_and_words_errors_as_kafka() -> None:
    answers = iter([ErrorCode.NOT_LEADER_OR_FOLLOWER, 0])

    def moved(header: RequestHeader, body: Any) -> dict[str, Any]:
        return markers(next(answers))(header, body)

    async def test(admin: AsyncAdmin, brokers: list[FakeBroker]) -> None:
        brokers[1].handlers[ApiKey.WRITE_TXN_MARKERS] = moved
        await admin.abort_transaction(SPEC)
        assert len(brokers[1].of(ApiKey.WRITE_TXN_MARKERS)) == 2

        spec = "AbortTransactionSpec(topicPartition=t-1, producerId=11, producerEpoch=4, coordinatorEpoch=7)"
        brokers[1].handlers[ApiKey.WRITE_TXN_MARKERS] = markers(ErrorCode.INVALID_PRODUCER_EPOCH)
        with pytest.raises(KafkaError) as epoch:
            await admin.abort_transaction(SPEC)
        assert str(epoch.value) == f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch"
        assert epoch.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        brokers[1].handlers[ApiKey.WRITE_TXN_MARKERS] = markers(ErrorCode.TRANSACTION_COORDINATOR_FENCED)
        with pytest.raises(KafkaError, match="coordinator epoch 7 has been fenced by the active coordinator$"):
            await admin.abort_transaction(SPEC)
        brokers[1].handlers[ApiKey.WRITE_TXN_MARKERS] = markers(0, producer_id=12)
        with pytest.raises(KafkaError, match="^WriteTxnMarkers response included unexpected marker entries"):
            await admin.abort_transaction(SPEC)

    with_brokers(test)
