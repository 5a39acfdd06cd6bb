"""Real clients across a failover: a 3-broker ZooKeeper cluster (conftest's ``cluster``), a topic with RF 3 and min.insync.replicas 2, a
producer (acks=all) and a consumer running while the partition leader is killed with SIGKILL.

kafka-python (retries, one request in flight): every acknowledged message is read at least once, in order.
confluent-kafka (idempotence): every acknowledged message is read exactly once, in order, and nothing is duplicated.
In both cases the consumer started before the kill goes on after it, what it read before the kill is still the head
of the log afterwards (it only ever saw committed records), and the killed broker comes back into the ISR.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from waiting import wait_for

from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]  # a failure waits out the clients' own timeouts


def value(i: int) -> bytes:
    return f"m{i}".encode()


def index(data: bytes) -> int:
    return int(data[1:])


@dataclass
class Traffic:
    """What the client threads saw: acknowledged message numbers in acknowledgement order, consumed
    (offset, message number) pairs in consumption order."""

    bootstrap: str
    topic: str
    acked: list[int] = field(default_factory=list)
    consumed: list[tuple[int, int]] = field(default_factory=list)
    producer_errors: list[str] = field(default_factory=list)
    stop_producing: threading.Event = field(default_factory=threading.Event)
    stop_consuming: threading.Event = field(default_factory=threading.Event)


def kafka_python_producer(traffic: Traffic) -> None:
    producer = KafkaProducer(
        bootstrap_servers=traffic.bootstrap,
        acks="all",
        retries=50,
        retry_backoff_ms=200,
        request_timeout_ms=10000,
        max_in_flight_requests_per_connection=1,
    )
    i = 0
    while not traffic.stop_producing.is_set():
        try:
            producer.send(traffic.topic, value(i)).get(60)
            traffic.acked.append(i)
        except Exception as e:  # a send that failed for good may still have been written: at least once
            traffic.producer_errors.append(repr(e))
        i += 1
        time.sleep(0.002)
    producer.close(timeout=30)


def kafka_python_consumer(traffic: Traffic) -> None:
    consumer = KafkaConsumer(bootstrap_servers=traffic.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(traffic.topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    while not traffic.stop_consuming.is_set():
        for batch in consumer.poll(timeout_ms=500).values():
            traffic.consumed.extend((r.offset, index(r.value)) for r in batch)
    consumer.close()


def confluent_producer(traffic: Traffic) -> None:
    producer = Producer(
        {"bootstrap.servers": traffic.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )

    def delivered(err, msg) -> None:  # librdkafka calls these in produce order for one partition
        if err is None:
            traffic.acked.append(index(msg.value()))
        else:
            traffic.producer_errors.append(str(err))

    i = 0
    while not traffic.stop_producing.is_set():
        producer.produce(traffic.topic, value(i), partition=0, on_delivery=delivered)
        producer.poll(0.002)
        i += 1
    assert producer.flush(120) == 0, "messages left undelivered"


def confluent_consumer(traffic: Traffic) -> None:
    consumer = Consumer(
        {"bootstrap.servers": traffic.bootstrap, "group.id": "failover-reader", "enable.auto.commit": False}
    )
    consumer.assign([ConfluentTopicPartition(traffic.topic, 0, OFFSET_BEGINNING)])
    while not traffic.stop_consuming.is_set():
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error() is None:
                traffic.consumed.append((msg.offset(), index(msg.value())))
    consumer.close()


def read_log(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """(offset, message number) of every record up to the high watermark, read by a fresh consumer."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    records: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while len(records) < end and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=2000).values():
            records.extend((r.offset, index(r.value)) for r in batch)
    consumer.close()
    assert len(records) == end
    return records


def run_across_leader_kill(
    cluster, topic: str, produce: Callable[[Traffic], None], consume: Callable[[Traffic], None]
) -> tuple[Traffic, list[tuple[int, int]], int, int]:
    """Runs producer and consumer threads, kills the leader, brings it back. Returns the traffic, the final log,
    and how many messages were acknowledged and consumed at the moment of the kill."""
    connect, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    admin.close()
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)

    def state():
        found = zk.get_partition_state(topic, 0)
        return found[0] if found is not None else None

    assert wait_for(lambda: state() is not None and len(state().isr) == 3)
    traffic = Traffic(bootstrap, topic)
    producer = threading.Thread(target=produce, args=(traffic,), daemon=True)
    consumer = threading.Thread(target=consume, args=(traffic,), daemon=True)
    producer.start()
    consumer.start()
    try:
        assert wait_for(lambda: len(traffic.acked) >= 300 and len(traffic.consumed) >= 200, timeout=60), (
            f"before the kill: {len(traffic.acked)} acknowledged, {len(traffic.consumed)} consumed"
        )
        old_leader = state().leader
        brokers[old_leader - 1].kill()
        acked_at_kill, consumed_at_kill = len(traffic.acked), len(traffic.consumed)
        assert wait_for(lambda: state().leader not in (old_leader, -1), timeout=30), f"no new leader: {state()}"
        assert wait_for(lambda: len(traffic.acked) >= acked_at_kill + 300, timeout=60), (
            f"the producer did not continue: {len(traffic.acked) - acked_at_kill} acknowledged since the kill, "
            f"errors {traffic.producer_errors[-3:]}, partition state {state()}"
        )
        assert wait_for(lambda: len(traffic.consumed) >= acked_at_kill + 300, timeout=60), (
            f"the consumer did not continue: {len(traffic.consumed) - consumed_at_kill} consumed since the kill"
        )
        brokers[old_leader - 1].start()
        assert wait_for(lambda: sorted(state().isr) == [1, 2, 3], timeout=60), (
            f"broker {old_leader} did not rejoin the ISR: {state()}"
        )
        traffic.stop_producing.set()
        producer.join(180)
        log = read_log(bootstrap, topic)
        assert wait_for(lambda: len(traffic.consumed) >= len(log), timeout=60)
    finally:
        traffic.stop_producing.set()
        traffic.stop_consuming.set()
        producer.join(180)
        consumer.join(30)
        store.close()
    return traffic, log, acked_at_kill, consumed_at_kill


def check_consumer(traffic: Traffic, log: list[tuple[int, int]], consumed_at_kill: int) -> None:
    """The consumer read the log exactly as it is, without gaps or repeats, across the kill."""
    assert [offset for offset, _ in log] == list(range(len(log)))
    assert traffic.consumed == log
    assert consumed_at_kill < len(log)


def test_kafka_python_clients_across_leader_kill(cluster) -> None:
    traffic, log, acked_at_kill, consumed_at_kill = run_across_leader_kill(
        cluster, "failover-kafka-python", kafka_python_producer, kafka_python_consumer
    )
    check_consumer(traffic, log, consumed_at_kill)
    numbers = [n for _, n in log]
    assert set(traffic.acked) <= set(numbers), "an acknowledged message was lost"
    first_seen = {}
    for position, n in enumerate(numbers):
        first_seen.setdefault(n, position)
    positions = [first_seen[n] for n in traffic.acked]
    assert positions == sorted(positions), "acknowledged messages out of order"
    assert len(traffic.acked) > acked_at_kill


def test_confluent_kafka_idempotent_clients_across_leader_kill(cluster) -> None:
    traffic, log, acked_at_kill, consumed_at_kill = run_across_leader_kill(
        cluster, "failover-confluent", confluent_producer, confluent_consumer
    )
    check_consumer(traffic, log, consumed_at_kill)
    assert traffic.producer_errors == []
    numbers = [n for _, n in log]
    assert len(numbers) == len(set(numbers)), "duplicates in the log"
    assert numbers == sorted(numbers), "messages out of order"
    assert traffic.acked == numbers, "every acknowledged message exactly once, in order, and nothing else"
    assert len(traffic.acked) > acked_at_kill
