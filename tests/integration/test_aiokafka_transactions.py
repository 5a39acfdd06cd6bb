"""aiokafka's transactional producer and read_committed consumer against broker processes: commits and aborts as
each isolation level sees them, offsets sent to a transaction, fencing by a newer producer with the same id, the
last stable offset while a transaction is open, control records, interleaved transactions over several partitions,
sequence gaps, a transaction the broker times out, and ACLs on transactional ids, groups and topics over a
SASL_PLAINTEXT listener."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    IllegalOperation,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from aiokafka.producer.transaction_manager import TransactionState
from conftest import BrokerProcess
from test_sasl import sasl_broker

pytestmark = pytest.mark.slow

TWO_PARTITIONS = ["num.partitions=2"]
"""Auto-created topics get two partitions, so the scenarios that use both need no admin step."""


@contextlib.asynccontextmanager
async def started(client: Any) -> AsyncIterator[Any]:
    """A started producer or consumer, stopped on the way out whatever happened."""
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


def transactional(bootstrap: str, transactional_id: str, **options: Any) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **options)


def reader(bootstrap: str, *topics: str, isolation: str = "read_committed", **options: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        *topics, bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=isolation, **options
    )


async def values_until_end(consumer: AIOKafkaConsumer, tp: TopicPartition) -> list[bytes]:
    """The values of ``tp`` from the start until the consumer's position reaches the partition's end for its
    isolation level (the last stable offset for read_committed)."""
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    end = (await consumer.end_offsets([tp]))[tp]
    values: list[bytes] = []
    while await consumer.position(tp) < end:
        values += [m.value for m in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, [])]
    return values


async def both_isolations(broker: BrokerProcess, tp: TopicPartition) -> tuple[list[bytes], list[bytes]]:
    """The values of ``tp`` a read_committed and a read_uncommitted consumer read to its end."""
    async with started(reader(broker.bootstrap)) as consumer:
        committed = await values_until_end(consumer, tp)
    async with started(reader(broker.bootstrap, isolation="read_uncommitted")) as consumer:
        return committed, await values_until_end(consumer, tp)


def test_committed_records_are_read_and_aborted_ones_only_by_read_uncommitted(broker: BrokerProcess) -> None:
    """A committed transaction's records come back with the offsets and timestamps the producer was told; an aborted
    one's only to read_uncommitted; transactions with nothing sent write no markers."""
    tp = TopicPartition("tx-basic", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-basic")) as producer:
            async with producer.transaction():
                committed = await producer.send_and_wait(tp.topic, b"committed", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(tp.topic, b"aborted", partition=0)
            await producer.abort_transaction()
            for end in (producer.commit_transaction, producer.abort_transaction):
                await producer.begin_transaction()
                await end()
        async with started(reader(broker.bootstrap, tp.topic)) as consumer:
            first = await consumer.getone()
            assert (first.offset, first.timestamp, first.key, first.value) == (
                committed.offset,
                committed.timestamp,
                None,
                b"committed",
            )
            assert (await consumer.end_offsets([tp]))[tp] == 4  # two records, two markers: the empty ones wrote none
        assert await both_isolations(broker, tp) == ([b"committed"], [b"committed", b"aborted"])

    asyncio.run(scenario())


def test_an_exception_in_the_transaction_block_aborts_it_and_the_producer_goes_on(broker: BrokerProcess) -> None:
    tp = TopicPartition("tx-block", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-block")) as producer:
            with pytest.raises(RuntimeError, match="processing failed"):
                async with producer.transaction():
                    await producer.send_and_wait(tp.topic, b"lost", partition=0)
                    raise RuntimeError("processing failed")
            assert producer._txn_manager.state == TransactionState.READY
            async with producer.transaction():
                await producer.send_and_wait(tp.topic, b"kept", partition=0)
        assert await both_isolations(broker, tp) == ([b"kept"], [b"lost", b"kept"])

    asyncio.run(scenario())


def test_commit_waits_for_every_pending_batch(broker: BrokerProcess) -> None:
    """Records still queued, and two batches of one partition sent one after the other, are all acknowledged before
    commit_transaction returns; sending outside a transaction is refused before and after it."""
    tp = TopicPartition("tx-flush", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-flush", linger_ms=50)) as producer:
            with pytest.raises(IllegalOperation):
                await producer.send(tp.topic, b"outside", partition=0)
            await producer.begin_transaction()
            pending = [await producer.send(tp.topic, b"queued-%d" % i, partition=0) for i in range(10)]
            for value in (b"batch-1", b"batch-2"):
                batch = producer.create_batch()
                batch.append(timestamp=None, key=None, value=value)
                batch.close()
                pending.append(await producer.send_batch(batch, tp.topic, partition=0))
            await producer.commit_transaction()
            assert all(future.done() for future in pending)
            assert [future.result().offset for future in pending] == list(range(12))
            with pytest.raises(IllegalOperation):
                await producer.send(tp.topic, b"outside", partition=0)
        async with started(reader(broker.bootstrap)) as consumer:
            assert await values_until_end(consumer, tp) == [
                *(b"queued-%d" % i for i in range(10)),
                b"batch-1",
                b"batch-2",
            ]

    asyncio.run(scenario())


def test_offsets_sent_to_a_transaction_are_committed_with_it_and_dropped_with_an_abort(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Consume, transform, produce over two partitions in batches of 20: while every transaction aborts the group's
    committed offsets stay where they were and nothing reaches the output; after seeking back to them the same input
    is processed again and committed, moving the offsets to the end."""
    broker = broker_factory(overrides=TWO_PARTITIONS).start()
    source, group = "tx-in", "tx-group"
    inputs = [TopicPartition(source, p) for p in (0, 1)]

    async def transform(consumer: AIOKafkaConsumer, producer: AIOKafkaProducer, fail: bool) -> int:
        """Process batches until a quiet second; the number of transactions."""
        transactions = 0
        while batch := await consumer.getmany(timeout_ms=1000, max_records=20):
            transactions += 1
            with contextlib.suppress(RuntimeError):
                async with producer.transaction():
                    for tp, messages in batch.items():
                        for message in messages:
                            await producer.send("tx-out", b"out-" + message.value, partition=tp.partition)
                    await producer.send_offsets_to_transaction(
                        {tp: messages[-1].offset + 1 for tp, messages in batch.items()}, group
                    )
                    if fail:
                        raise RuntimeError("the step fails")
        return transactions

    async def scenario() -> None:
        async with AIOKafkaProducer(bootstrap_servers=broker.bootstrap) as plain:
            for i in range(100):
                await plain.send(source, b"%d" % i, partition=i % 2)
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        async with started(consumer), started(transactional(broker.bootstrap, "tx-eos")) as producer:
            assert consumer.assignment() == set(inputs)
            await consumer.commit({tp: 0 for tp in inputs})
            assert await transform(consumer, producer, fail=True) >= 3
            assert [await consumer.committed(tp) for tp in inputs] == [0, 0]
            for tp in inputs:  # seek_to_committed leaves a position alone when the committed offset is 0
                consumer.seek(tp, await consumer.committed(tp))
            assert await transform(consumer, producer, fail=False) >= 3
            assert [await consumer.committed(tp) for tp in inputs] == [50, 50]
        async with started(reader(broker.bootstrap)) as output:
            for partition in (0, 1):
                values = await values_until_end(output, TopicPartition("tx-out", partition))
                assert values == [b"out-%d" % i for i in range(partition, 100, 2)]

    asyncio.run(scenario())


def test_a_second_producer_with_the_same_id_fences_the_first_and_aborts_its_transaction(
    broker: BrokerProcess,
) -> None:
    """The newer producer keeps the producer id at a higher epoch; the older one's open transaction is aborted and
    its next request fails with ProducerFenced. A producer started later with the id gets the same producer id."""
    tp = TopicPartition("tx-fence", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-fence", client_id="first")) as first:
            await first.begin_transaction()
            await first.send_and_wait(tp.topic, b"from the fenced producer", partition=0)
            async with started(transactional(broker.bootstrap, "tx-fence", client_id="second")) as second:
                assert second._txn_manager.producer_id == first._txn_manager.producer_id
                assert second._txn_manager.producer_epoch > first._txn_manager.producer_epoch
                async with second.transaction():
                    await second.send_and_wait(tp.topic, b"from the newer producer", partition=0)
                with pytest.raises(ProducerFenced):
                    await first.commit_transaction()
                producer_id = second._txn_manager.producer_id
        async with started(reader(broker.bootstrap)) as consumer:
            assert await values_until_end(consumer, tp) == [b"from the newer producer"]
        async with started(transactional(broker.bootstrap, "tx-fence")) as restarted:
            assert restarted._txn_manager.producer_id == producer_id  # a restart keeps the id

    asyncio.run(scenario())


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_an_open_transaction_holds_read_committed_consumers_at_the_last_stable_offset(
    broker: BrokerProcess, outcome: str
) -> None:
    """A transactional record then a plain one: read_committed consumers wait at the last stable offset (0) while the
    high watermark is 2, end_offsets and seek_to_end give the last stable offset; once the transaction ends the
    records come in offset order (the transactional one only if committed) and both offsets move past the marker."""
    tp = TopicPartition("tx-lso", 0)

    async def scenario() -> None:
        async with (
            started(transactional(broker.bootstrap, "tx-lso")) as producer,
            AIOKafkaProducer(bootstrap_servers=broker.bootstrap) as plain,
            started(reader(broker.bootstrap, tp.topic)) as consumer,
            started(reader(broker.bootstrap)) as seeker,
        ):
            await producer.begin_transaction()
            in_transaction = await producer.send_and_wait(tp.topic, b"in the transaction", partition=0)
            outside = await plain.send_and_wait(tp.topic, b"outside it", partition=0)
            first = asyncio.ensure_future(consumer.getone())
            # A fetch that answered nothing: the consumer has seen both offsets of the partition.
            while consumer.highwater(tp) != 2:
                await asyncio.sleep(0.05)
            assert not first.done()
            assert consumer.last_stable_offset(tp) == 0
            assert (await consumer.end_offsets([tp]))[tp] == 0
            seeker.assign([tp])
            await seeker.seek_to_end(tp)
            assert await seeker.position(tp) == 0
            await (producer.commit_transaction() if outcome == "commit" else producer.abort_transaction())
            values = {in_transaction.offset: b"in the transaction", outside.offset: b"outside it"}
            expected = [in_transaction, outside] if outcome == "commit" else [outside]
            received = [await first]
            while len(received) < len(expected):
                received.append(await consumer.getone())
            assert [(m.offset, m.timestamp, m.value) for m in received] == [
                (sent.offset, sent.timestamp, values[sent.offset]) for sent in expected
            ]
            assert await consumer.getmany(timeout_ms=500) == {}  # a fetch that answers the marker's offsets
            assert (consumer.last_stable_offset(tp), consumer.highwater(tp)) == (3, 3)
            assert (await consumer.end_offsets([tp]))[tp] == 3
            await seeker.seek_to_end(tp)
            assert await seeker.position(tp) == 3

    asyncio.run(scenario())


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_consumer_positioned_on_a_marker_moves_past_it(broker: BrokerProcess, isolation: str) -> None:
    """Seeking to a commit marker (small fetches, fetch_max_bytes=10) returns no record but moves the position past
    it, and the next transaction's record is then returned."""
    tp = TopicPartition("tx-marker", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-marker")) as producer:
            async with producer.transaction():
                first = await producer.send_and_wait(tp.topic, b"first", partition=0)
            async with started(reader(broker.bootstrap, isolation=isolation, fetch_max_bytes=10)) as consumer:
                consumer.assign([tp])
                consumer.seek(tp, first.offset + 1)
                assert await consumer.getmany(tp, timeout_ms=500) == {}
                assert await consumer.position(tp) == first.offset + 2
                async with producer.transaction():
                    second = await producer.send_and_wait(tp.topic, b"second", partition=0)
                message = await consumer.getone()
                assert (message.offset, message.value) == (second.offset, b"second")

    asyncio.run(scenario())


def test_interleaved_committed_and_aborted_transactions_over_two_partitions(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Ten transactions, each over both partitions, every third committed: a read_committed subscriber gets exactly
    the committed records, in order within each partition, and nothing after them."""
    broker = broker_factory(overrides=TWO_PARTITIONS).start()
    topic = "tx-several"

    async def scenario() -> None:
        expected: dict[int, list[bytes]] = {0: [], 1: []}
        async with started(transactional(broker.bootstrap, "tx-several")) as producer:
            for i in range(10):
                await producer.begin_transaction()
                for partition in (0, 1):
                    for j in range(2):
                        await producer.send(topic, b"%d-%d-%d" % (i, partition, j), partition=partition)
                if i % 3 == 0:
                    await producer.commit_transaction()
                    for partition in (0, 1):
                        expected[partition] += [b"%d-%d-%d" % (i, partition, j) for j in range(2)]
                else:
                    await producer.abort_transaction()
        received: dict[int, list[bytes]] = {0: [], 1: []}
        async with started(reader(broker.bootstrap, topic)) as consumer:
            async for message in consumer:
                received[message.partition].append(message.value)
                if sum(map(len, received.values())) == 16:
                    break
            assert received == expected
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(consumer.getone(), timeout=1)

    asyncio.run(scenario())


def test_a_sequence_gap_in_a_transaction_fails_it_with_out_of_order_sequence(broker: BrokerProcess) -> None:
    """A record whose sequence number skips one (as if the one before had been lost) is refused with
    OUT_OF_ORDER_SEQUENCE_NUMBER; the transaction block aborts and its first record is never read committed."""
    tp = TopicPartition("tx-sequence", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-sequence")) as producer:
            with pytest.raises(OutOfOrderSequenceNumber):
                async with producer.transaction():
                    await producer.send_and_wait(tp.topic, b"first", partition=0)
                    producer._txn_manager.increment_sequence_number(tp, 1)
                    await producer.send_and_wait(tp.topic, b"after a gap", partition=0)
        async with started(reader(broker.bootstrap)) as consumer:
            assert await values_until_end(consumer, tp) == []
        async with started(reader(broker.bootstrap, isolation="read_uncommitted")) as consumer:
            assert await values_until_end(consumer, tp) == [b"first"]

    asyncio.run(scenario())


def test_cancelled_commit_and_abort_still_complete(broker: BrokerProcess) -> None:
    """Cancelling begin_transaction leaves the producer ready; cancelling the caller of commit or abort does not stop
    the transaction from ending."""
    tp = TopicPartition("tx-cancel", 0)

    async def cancelled(call: Any) -> None:
        task = asyncio.ensure_future(call)
        await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-cancel")) as producer:
            manager = producer._txn_manager
            await cancelled(producer.begin_transaction())
            assert manager.state == TransactionState.READY
            for end, value in ((producer.commit_transaction, b"committed"), (producer.abort_transaction, b"aborted")):
                await producer.begin_transaction()
                await producer.send(tp.topic, value, partition=0)
                await cancelled(end())
                while manager.state != TransactionState.READY:
                    await asyncio.sleep(0.05)
        async with started(reader(broker.bootstrap)) as consumer:
            assert await values_until_end(consumer, tp) == [b"committed"]

    asyncio.run(scenario())


def test_the_broker_aborts_a_transaction_past_its_timeout_and_fences_the_producer(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """With transaction_timeout_ms=1000 and a transaction left open, the broker aborts it (the marker moves the last
    stable offset past the record) and bumps the epoch: the producer's commit then fails with ProducerFenced."""
    broker = broker_factory(overrides=["transaction.abort.timed.out.transaction.cleanup.interval.ms=100"]).start()
    tp = TopicPartition("tx-timeout", 0)

    async def scenario() -> None:
        async with started(transactional(broker.bootstrap, "tx-timeout", transaction_timeout_ms=1000)) as producer:
            await producer.begin_transaction()
            await producer.send_and_wait(tp.topic, b"never committed", partition=0)
            async with started(reader(broker.bootstrap)) as consumer:
                consumer.assign([tp])
                while (await consumer.end_offsets([tp]))[tp] != 2:  # the record and the abort marker
                    await asyncio.sleep(0.1)
                assert await values_until_end(consumer, tp) == []
            with pytest.raises(ProducerFenced):
                await producer.commit_transaction()

    asyncio.run(scenario())


def add_acls(mq_command: list[str], bootstrap: str, *args: str) -> None:
    """``mq acls --add`` over the broker's PLAINTEXT listener (no ACL names the cluster, so everyone may)."""
    result = subprocess.run(
        [*mq_command, "acls", "--bootstrap-server", bootstrap, "--add", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


ALICE = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "alice",
    "sasl_plain_password": "alice-secret",
}


def test_transactions_under_acls(broker_factory: Callable[..., BrokerProcess], mq_command: list[str]) -> None:
    """A SASL_PLAINTEXT listener with PLAIN users and the AclAuthorizer, everything allowed where no ACL names the
    resource. Alice's producer cannot start with DESCRIBE or WRITE denied on its transactional id, nor send once
    WRITE is denied mid-transaction; with DESCRIBE or READ denied on a group, sending offsets to a transaction
    fails with GroupAuthorizationFailed, the commit too, and after an abort the producer goes on (the offsets
    partition of the group it could not look up gets no marker); with WRITE denied on a topic mid-transaction, adding
    its next partition fails with TopicAuthorizationFailed. The transaction left open by the producer refused WRITE
    holds read_committed consumers at its first offset."""
    broker, bootstrap = sasl_broker(
        broker_factory,
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found=true",
        *TWO_PARTITIONS,
    )

    def acl(permission: str, operation: str, *resources: str) -> None:
        """Alice's ``permission`` (allow or deny) of ``operation`` on ``resources`` (``--topic NAME`` ...)."""
        add_acls(mq_command, broker.bootstrap, f"--{permission}-principal", "User:alice", "--operation", operation,
                 *resources)  # fmt: skip

    acl("allow", "All", "--transactional-id", "no-describe", "--transactional-id", "no-write",
        "--transactional-id", "revoked", "--group", "group-no-describe", "--group", "group-no-read",
        "--topic", "write-revoked")  # fmt: skip
    acl("deny", "Describe", "--transactional-id", "no-describe", "--group", "group-no-describe")
    acl("deny", "Write", "--transactional-id", "no-write")
    acl("deny", "Read", "--group", "group-no-read")

    def producer(transactional_id: str) -> AIOKafkaProducer:
        return AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **ALICE)

    async def refused_at_start(transactional_id: str) -> None:
        unstarted = producer(transactional_id)
        try:
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await unstarted.start()
        finally:
            await unstarted.stop()

    async def scenario() -> None:
        await refused_at_start("no-describe")
        await refused_at_start("no-write")

        async with started(producer("revoked")) as revoked:
            await revoked.begin_transaction()
            await revoked.send_and_wait("revoked-topic", b"allowed", partition=0)
            acl("deny", "Write", "--transactional-id", "revoked")
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await revoked.send_and_wait("revoked-topic", b"refused", partition=1)

        async with started(producer("offsets")) as offsets:
            with pytest.raises(GroupAuthorizationFailedError):
                async with offsets.transaction():
                    await offsets.send_offsets_to_transaction({TopicPartition("acl-topic", 0): 0}, "group-no-describe")
            await offsets.begin_transaction()
            with pytest.raises(GroupAuthorizationFailedError):
                await offsets.send_offsets_to_transaction({TopicPartition("acl-topic", 0): 0}, "group-no-read")
            with pytest.raises(GroupAuthorizationFailedError):
                await offsets.commit_transaction()
            await offsets.abort_transaction()
            async with offsets.transaction():
                await offsets.send_and_wait("acl-topic", b"after the refused offsets", partition=0)

            await offsets.begin_transaction()
            await offsets.send_and_wait("write-revoked", b"allowed", partition=0)
            acl("deny", "Write", "--topic", "write-revoked")
            with pytest.raises(TopicAuthorizationFailedError):
                await offsets.send_and_wait("write-revoked", b"refused", partition=1)
            await offsets.abort_transaction()

        async with started(reader(bootstrap, **ALICE)) as consumer:
            assert await values_until_end(consumer, TopicPartition("acl-topic", 0)) == [b"after the refused offsets"]
            assert await values_until_end(consumer, TopicPartition("write-revoked", 0)) == []
            assert await values_until_end(consumer, TopicPartition("revoked-topic", 0)) == []
            assert (await consumer.end_offsets([TopicPartition("revoked-topic", 0)])).popitem()[1] == 0
        async with started(reader(bootstrap, isolation="read_uncommitted", **ALICE)) as consumer:
            assert await values_until_end(consumer, TopicPartition("revoked-topic", 0)) == [b"allowed"]

    asyncio.run(scenario())
