"""Transactions against a broker process: confluent-kafka's and kafka-python's transactional producers, a
read_committed consumer that sees committed records only, offsets sent to a transaction, fencing, and a broker
restart with a transaction open."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[bytes]:
    """The values a consumer of ``isolation`` reads from the start until ``expected`` values or a quiet second
    after the end of every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    while len(values) < expected or len(at_end) < partitions:
        msg = consumer.poll(10)
        assert msg is not None, f"only {len(values)} values came back"
        if msg.error() is not None:
            assert msg.error().code() == -191, msg.error()  # _PARTITION_EOF
            at_end.add(msg.partition())
            continue
        at_end.discard(msg.partition())
        values.append(msg.value())
    consumer.close()
    return values


def ask(bootstrap: str, api_key: ApiKey, body: dict[str, Any], version: int | None = None) -> Any:
    """One request to the first broker of ``bootstrap`` with mq's own client: the response entity."""

    async def send() -> Any:
        host, port = bootstrap.split(",")[0].split(":")
        connection = BrokerConnection(host, int(port))
        try:
            return await connection.send(api_key, body, version)
        finally:
            await connection.close()

    return asyncio.run(send())


def describe_and_list(broker, transactional_id: str) -> tuple[Any, list[tuple[str, str]]]:
    """DescribeTransactions of ``transactional_id`` and ListTransactions: (its state entity, (id, state) pairs)."""
    described = ask(broker.bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
    listed = ask(broker.bootstrap, ApiKey.LIST_TRANSACTIONS, {})
    return described.transaction_states[0], [
        (t.transactional_id, t.transaction_state) for t in listed.transaction_states
    ]


def test_committed_records_are_read_and_aborted_ones_never(broker) -> None:
    create(broker.bootstrap, "txn", 2)
    producer = transactional(broker.bootstrap, "tx-a")
    producer.begin_transaction()
    for i in range(10):
        producer.produce("txn", value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("txn", value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txn", value=b"last", partition=0)
    producer.commit_transaction(30)

    described, listed = describe_and_list(broker, "tx-a")
    assert (described.transaction_state, described.producer_epoch, described.topics) == ("CompleteCommit", 0, ())
    assert ("tx-a", "CompleteCommit") in listed

    committed = read_all(broker.bootstrap, "txn", 2, "read_committed", 11)
    assert sorted(committed) == sorted([b"committed-%d" % i for i in range(10)] + [b"last"])
    uncommitted = read_all(broker.bootstrap, "txn", 2, "read_uncommitted", 21)
    assert sum(v.startswith(b"aborted") for v in uncommitted) == 10  # they are in the log, skipped by isolation


def test_an_open_transaction_holds_read_committed_consumers_back(broker) -> None:
    create(broker.bootstrap, "open")
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("open", value=b"before")
    plain.flush(10)
    producer = transactional(broker.bootstrap, "tx-open")
    producer.begin_transaction()
    producer.produce("open", value=b"pending")
    producer.flush(10)
    plain.produce("open", value=b"after")
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "isolation.level": "read_committed"})
    low, high = consumer.get_watermark_offsets(TopicPartition("open", 0), timeout=10)
    assert (low, high) == (0, 1)  # the last stable offset: the open transaction's first offset
    consumer.close()
    producer.commit_transaction(30)
    assert read_all(broker.bootstrap, "open", 1, "read_committed", 3) == [b"before", b"pending", b"after"]


def fetch_committed(broker, require_stable: bool) -> tuple[ErrorCode, int]:
    """OffsetFetch v7 of the group "copier" for src-0: (error, offset)."""
    body = {
        "group_id": "copier",
        "topics": [{"name": "src", "partition_indexes": [0]}],
        "require_stable": require_stable,
    }
    p = ask(broker.bootstrap, ApiKey.OFFSET_FETCH, body, 7).topics[0].partitions[0]
    return ErrorCode(int(p.error_code)), int(p.committed_offset)


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(broker) -> None:
    create(broker.bootstrap, "src")
    create(broker.bootstrap, "dst")
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        plain.produce("src", value=b"m%d" % i)
    plain.flush(10)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "copier",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["src"])
    got = []
    while len(got) < 6:
        msg = consumer.poll(10)
        assert msg is not None
        if msg.error() is None:
            got.append(msg)
    producer = transactional(broker.bootstrap, "tx-copy")
    producer.begin_transaction()
    for msg in got[:3]:
        producer.produce("dst", value=msg.value())
    producer.send_offsets_to_transaction([TopicPartition("src", 0, 3)], consumer.consumer_group_metadata(), 30)
    producer.abort_transaction(30)
    assert consumer.committed([TopicPartition("src", 0)], 10)[0].offset < 0  # nothing committed
    producer.begin_transaction()
    for msg in got:
        producer.produce("dst", value=msg.value())
    producer.send_offsets_to_transaction([TopicPartition("src", 0, 6)], consumer.consumer_group_metadata(), 30)
    assert fetch_committed(broker, require_stable=False) == (ErrorCode.NONE, -1)  # pending: not committed yet
    assert fetch_committed(broker, require_stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    producer.commit_transaction(30)
    assert fetch_committed(broker, require_stable=True) == (ErrorCode.NONE, 6)
    assert consumer.committed([TopicPartition("src", 0)], 10)[0].offset == 6
    consumer.close()
    assert read_all(broker.bootstrap, "dst", 1, "read_committed", 6) == [b"m%d" % i for i in range(6)]


def test_a_new_producer_with_the_same_id_fences_the_old_one_and_aborts_its_transaction(broker) -> None:
    create(broker.bootstrap, "fence")
    old = transactional(broker.bootstrap, "tx-fence")
    old.begin_transaction()
    old.produce("fence", value=b"zombie")
    old.flush(10)
    new = transactional(broker.bootstrap, "tx-fence")  # aborts the old transaction under a bumped epoch
    new.begin_transaction()
    new.produce("fence", value=b"fresh")
    new.commit_transaction(30)
    old.produce("fence", value=b"zombie-2")
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(10)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert read_all(broker.bootstrap, "fence", 1, "read_committed", 1) == [b"fresh"]


@pytest.mark.parametrize("stop", ["clean", "kill"])
def test_a_transaction_open_across_a_broker_restart_can_still_commit(broker_factory, stop: str) -> None:
    broker = broker_factory().start()
    create(broker.bootstrap, "restart")
    producer = transactional(broker.bootstrap, "tx-restart")
    producer.begin_transaction()
    producer.produce("restart", value=b"one")
    producer.flush(10)
    if stop == "clean":
        broker.stop()  # producer snapshots written at the shutdown
    else:
        broker.kill()  # no snapshot: the open transaction is found again in the log
    broker.start()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "isolation.level": "read_committed"})
    assert consumer.get_watermark_offsets(TopicPartition("restart", 0), timeout=20) == (0, 0)  # still open
    consumer.close()
    producer.produce("restart", value=b"two")
    producer.commit_transaction(60)
    assert read_all(broker.bootstrap, "restart", 1, "read_committed", 2) == [b"one", b"two"]


def test_kafka_python_transactional_producer(broker) -> None:
    kafka = pytest.importorskip("kafka")
    create(broker.bootstrap, "kp")
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-kp")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp", b"kept")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp", b"dropped")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert read_all(broker.bootstrap, "kp", 1, "read_committed", 1) == [b"kept"]
    tp = kafka.TopicPartition("kp", 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    for _ in range(50):  # until it has read past both markers
        values += [m.value for m in consumer.poll(200).get(tp, [])]
        if consumer.position(tp) == 4:
            break
    consumer.close()
    assert values == [b"kept"]


def test_aiokafka_consume_transform_produce(broker) -> None:
    """aiokafka's transactional producer and read_committed consumer: a consume-transform-produce step commits its
    output and the input offsets together; an aborted one leaves neither."""
    aiokafka = pytest.importorskip("aiokafka")
    create(broker.bootstrap, "ak-in")
    create(broker.bootstrap, "ak-out")
    source = aiokafka.TopicPartition("ak-in", 0)

    async def scenario() -> tuple[list[bytes], int | None, list[bytes]]:
        async with aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap) as plain:
            for i in range(10):
                await plain.send_and_wait("ak-in", b"in-%d" % i)
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-ak")
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id="ak-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await producer.start()
        await consumer.start()
        try:
            consumer.assign([source])
            batch = (await consumer.getmany(source, timeout_ms=5000, max_records=6))[source]
            async with producer.transaction():
                for message in batch:
                    await producer.send("ak-out", message.value.replace(b"in", b"out"))
                await producer.send_offsets_to_transaction({source: batch[-1].offset + 1}, "ak-group")
            rest = (await consumer.getmany(source, timeout_ms=5000))[source]
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    for message in rest:
                        await producer.send("ak-out", b"aborted-" + message.value)
                    await producer.send_offsets_to_transaction({source: rest[-1].offset + 1}, "ak-group")
                    raise RuntimeError("the step fails: its transaction aborts")
            committed = await consumer.committed(source)
        finally:
            await consumer.stop()
            await producer.stop()
        reader = aiokafka.AIOKafkaConsumer(
            "ak-out", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
        )
        await reader.start()
        try:
            out = [
                m.value for m in (await reader.getmany(timeout_ms=5000)).get(aiokafka.TopicPartition("ak-out", 0), [])
            ]
        finally:
            await reader.stop()
        return [m.value for m in batch], committed, out

    inputs, committed, out = asyncio.run(scenario())
    assert inputs == [b"in-%d" % i for i in range(6)]
    assert committed == 6
    assert out == [b"out-%d" % i for i in range(6)]


def test_a_transaction_across_the_brokers_of_a_cluster(cluster) -> None:
    _, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("spread", 3, 2)])["spread"].result(30)
    producer = transactional(bootstrap, "tx-cluster")  # partitions led by each broker: markers go over the wire
    producer.begin_transaction()
    for i in range(9):
        producer.produce("spread", value=b"kept-%d" % i, partition=i % 3)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(9):
        producer.produce("spread", value=b"dropped-%d" % i, partition=i % 3)
    producer.flush(30)
    producer.abort_transaction(60)
    assert sorted(read_all(bootstrap, "spread", 3, "read_committed", 9)) == sorted(b"kept-%d" % i for i in range(9))


def transaction_coordinator_of(bootstrap: str, transactional_id: str) -> int:
    """The broker id FindCoordinator names for ``transactional_id``."""
    return int(ask(bootstrap, ApiKey.FIND_COORDINATOR, {"key": transactional_id, "key_type": 1}, 3).node_id)


def test_a_transaction_commits_after_its_coordinator_broker_is_killed(cluster) -> None:
    _, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("moved", 3, 3)])["moved"].result(30)
    producer = transactional(bootstrap, "tx-moved")
    coordinator = transaction_coordinator_of(bootstrap, "tx-moved")
    assert coordinator in (1, 2, 3)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("moved", value=b"v%d" % i, partition=i % 3)
    producer.flush(30)
    brokers[coordinator - 1].kill()
    alive = ",".join(b.bootstrap for i, b in enumerate(brokers) if i != coordinator - 1)
    producer.commit_transaction(90)  # the new coordinator loaded the transaction from __transaction_state
    assert transaction_coordinator_of(alive, "tx-moved") != coordinator
    assert sorted(read_all(alive, "moved", 3, "read_committed", 6)) == [b"v%d" % i for i in range(6)]
