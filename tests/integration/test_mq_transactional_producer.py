"""mq's own transactional producer against a broker process: committed records and offsets count, aborted ones
never (also after a record failed), a newer producer of the same id fences the older one, and a consumer's member
id and generation fence the offsets of a consumer that left or missed a rebalance."""

from __future__ import annotations

import asyncio

import pytest
from conftest import BrokerProcess
from test_transactions import create, read_all

from mq.client.admin import AsyncAdmin
from mq.client.group_consumer import AsyncGroupConsumer
from mq.client.transactional_producer import (
    AbortableTransactionError,
    TransactionalProducer,
    TransactionFatalError,
)
from mq.errors import ErrorCode
from mq.topic_partition import TopicPartition

pytestmark = pytest.mark.slow


def test_commit_abort_offsets_and_fencing(broker: BrokerProcess) -> None:
    create(broker.bootstrap, "out", 2)
    create(broker.bootstrap, "in", 1)
    source = TopicPartition("in", 0)

    async def scenario() -> list[dict[TopicPartition, int]]:
        producer = TransactionalProducer("app", bootstrap_servers=broker.bootstrap)
        await producer.start()
        producer.begin_transaction()
        await producer.send_many("out", [(b"k%d" % i, b"committed-%d" % i, (), None) for i in range(50)])
        await producer.send_offsets_to_transaction({source: 10}, "app-group")
        await producer.send_offsets_to_transaction({source: 7}, "audit-group")  # a second group, its own partition
        await producer.commit_transaction()

        producer.begin_transaction()
        sent = await producer.send_many("out", [(b"k", b"aborted-after-send", (), None)])
        await sent  # written to the log, then aborted
        await producer.send_offsets_to_transaction({source: 20}, "app-group")
        await producer.abort_transaction()

        producer.begin_transaction()
        too_big = await producer.send("out", b"x" * 2_000_000, partition=0)  # the broker refuses it
        await producer.send_many("out", [(b"k", b"aborted-with-a-failure", (), None)], partition=1)
        with pytest.raises(AbortableTransactionError):
            await producer.commit_transaction()
        assert too_big.done() and too_big.exception() is not None
        await producer.abort_transaction()  # bumps the epoch: the spent sequence numbers start again

        producer.begin_transaction()
        await producer.send_many("out", [(b"k", b"committed-last", (), None)], partition=1)
        await producer.commit_transaction()

        newer = TransactionalProducer("app", bootstrap_servers=broker.bootstrap)
        await newer.start()
        assert newer.producer_epoch > producer.producer_epoch
        producer.begin_transaction()
        await producer.send_many("out", [(b"k", b"fenced", (), None)], partition=0)
        with pytest.raises(TransactionFatalError):
            await producer.commit_transaction()
        await asyncio.gather(producer.close(), newer.close(), return_exceptions=True)
        async with AsyncAdmin(broker.bootstrap) as admin:
            return [await admin.list_group_offsets(group) for group in ("app-group", "audit-group")]

    offsets = asyncio.run(scenario())
    assert offsets == [{source: 10}, {source: 7}]
    committed = read_all(broker.bootstrap, "out", 2, "read_committed", 51)
    assert sorted(committed) == sorted([b"committed-%d" % i for i in range(50)] + [b"committed-last"])
    everything = read_all(broker.bootstrap, "out", 2, "read_uncommitted", 52)
    assert b"aborted-after-send" in everything and b"fenced" not in everything


def test_offsets_of_a_consumer_that_left_or_missed_a_rebalance_are_refused(broker: BrokerProcess) -> None:
    """TxnOffsetCommit v3 (KIP-447) with the consumer's member id and generation: refused with UNKNOWN_MEMBER_ID
    once the member left the group, with ILLEGAL_GENERATION after a rebalance it missed; the current member's are
    taken."""
    create(broker.bootstrap, "fence-in", 2)
    source = TopicPartition("fence-in", 0)

    async def commit(producer: TransactionalProducer, offset: int, member: tuple[str, int]) -> ErrorCode:
        producer.begin_transaction()
        try:
            await producer.send_offsets_to_transaction(
                {source: offset}, "fence-group", member_id=member[0], generation_id=member[1]
            )
        except AbortableTransactionError as exc:
            await producer.abort_transaction()
            return exc.code
        await producer.commit_transaction()
        return ErrorCode.NONE

    async def scenario() -> tuple[list[ErrorCode], dict[TopicPartition, int]]:
        settings = {"group_id": "fence-group", "enable_auto_commit": False, "session_timeout_ms": 6000}
        first = AsyncGroupConsumer(broker.bootstrap, **settings)
        first.subscribe(["fence-in"])
        await first.poll(3000)
        old = (first.member_id, first.generation_id)
        second = AsyncGroupConsumer(broker.bootstrap, **settings)
        second.subscribe(["fence-in"])
        await asyncio.gather(first.poll(5000), second.poll(5000))  # both rejoin: a new generation
        current = (second.member_id, second.generation_id)
        assert current[1] > old[1]
        producer = TransactionalProducer("fencing", bootstrap_servers=broker.bootstrap)
        await producer.start()
        codes = [
            await commit(producer, 3, (old[0], old[1])),  # a member that missed the rebalance
            await commit(producer, 4, current),
        ]
        await second.close()
        codes.append(await commit(producer, 5, current))  # a member that left
        await first.close()
        await producer.close()
        async with AsyncAdmin(broker.bootstrap) as admin:
            return codes, await admin.list_group_offsets("fence-group")

    codes, offsets = asyncio.run(scenario())
    assert codes == [ErrorCode.ILLEGAL_GENERATION, ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert offsets == {source: 4}
