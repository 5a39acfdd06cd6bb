"""mq's own transactional producer against a broker process: committed records and offsets count, aborted ones
never (also after a record failed), and a newer producer of the same id fences the older one."""

from __future__ import annotations

import asyncio

import pytest
from conftest import BrokerProcess
from test_transactions import create, read_all

from mq.client.admin import AsyncAdmin
from mq.client.transactional_producer import (
    AbortableTransactionError,
    TransactionalProducer,
    TransactionFatalError,
)
from mq.topic_partition import TopicPartition

pytestmark = pytest.mark.slow


def test_commit_abort_offsets_and_fencing(broker: BrokerProcess) -> None:
    create(broker.bootstrap, "out", 2)
    create(broker.bootstrap, "in", 1)
    source = TopicPartition("in", 0)

    async def scenario() -> dict[TopicPartition, int]:
        producer = TransactionalProducer("app", bootstrap_servers=broker.bootstrap)
        await producer.start()
        producer.begin_transaction()
        await producer.send_many("out", [(b"k%d" % i, b"committed-%d" % i, (), None) for i in range(50)])
        await producer.send_offsets_to_transaction({source: 10}, "app-group")
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
            return await admin.list_group_offsets("app-group")

    offsets = asyncio.run(scenario())
    assert offsets == {source: 10}
    committed = read_all(broker.bootstrap, "out", 2, "read_committed", 51)
    assert sorted(committed) == sorted([b"committed-%d" % i for i in range(50)] + [b"committed-last"])
    everything = read_all(broker.bootstrap, "out", 2, "read_uncommitted", 52)
    assert b"aborted-after-send" in everything and b"fenced" not in everything
