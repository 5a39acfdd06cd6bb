"""The PySpark data source mq against a real broker: batch reads of what confluent-kafka produced (all of it, offset
ranges, times), data loss, availableNow streams into Parquet across restarts with group commits, and writes that
confluent-kafka reads back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.records.batch_header import iter_headers
from mq.topic_partition import TopicPartition
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.slow

BASE_TIME = (int(time.time()) - 3600) * 1000
"""Record times an hour ago: recent enough that retention (7 days by default) never removes them."""


@pytest.fixture(scope="module")
def broker(mq_command: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module (each test uses its own topics), as the Spark session is one per module."""
    process = BrokerProcess(mq_command, tmp_path_factory.mktemp("spark-broker")).start()
    yield process
    process.stop()


COLUMNS = ["partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "timestampType", "headers"]


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce(bootstrap: str, topic: str, first: int, count: int) -> list[tuple[Any, ...]]:
    """Records ``first`` .. ``first + count - 1`` round-robin over 3 partitions, record i at time BASE_TIME + i; returns
    (partition, offset, key, value, time, timestamp type, headers) as the broker acknowledged them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    acked: list[tuple[Any, ...]] = []

    def delivered(headers: list[tuple[str, bytes | None]]) -> Any:
        def on_delivery(error: Any, message: Any) -> None:
            assert error is None, error
            kind, stamp = message.timestamp()
            acked.append(
                (message.partition(), message.offset(), message.key(), message.value(), stamp, kind - 1, headers)
            )

        return on_delivery

    for i in range(first, first + count):
        key = None if i % 7 == 0 else f"k{i}".encode()
        headers: list[tuple[str, bytes | None]] = [("n", str(i).encode()), ("empty", None)] if i % 2 else []
        producer.produce(
            topic,
            f"v{i}".encode(),
            key,
            partition=i % 3,
            timestamp=BASE_TIME + i,
            headers=headers,
            on_delivery=delivered(headers),
        )
    assert producer.flush(10) == 0
    return acked


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    read = spark.read.format("mq").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        read = read.option(key, value)
    return read.load()


def rows(df: Any) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value, time in ms, timestamp type, headers) of each row, sorted."""
    found = []
    for r in df.selectExpr(*COLUMNS).collect():
        headers = [(h.key, h.value) for h in r.headers]
        found.append((r.partition, r.offset, r.key, r.value, r.ts, r.timestampType, headers))
    return sorted(found)


def positions(df: Any) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_batch_read_returns_exactly_what_was_produced(spark: Any, broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "orders")
    produced = produce(broker.bootstrap, "orders", 0, 30)
    df = reader(spark, broker.bootstrap, subscribe="orders", includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.rdd.getNumPartitions() == 3
    assert rows(df) == sorted(produced)
    assert {r.topic for r in df.select("topic").collect()} == {"orders"}

    without_headers = reader(spark, broker.bootstrap, subscribePattern="ord.*", minPartitions="6")
    assert "headers" not in without_headers.columns
    assert without_headers.rdd.getNumPartitions() == 6
    assert positions(without_headers) == sorted((p[0], p[1]) for p in produced)
    assert reader(spark, broker.bootstrap, subscribe="missing").count() == 0


def test_read_committed_never_sees_aborted_records(spark: Any, broker: BrokerProcess) -> None:
    """kafka.isolation.level=read_committed: a batch read returns the committed transactions' records and none of an
    aborted one nor of one still open (the range ends at the last stable offset); read_uncommitted returns them."""
    create_topic(broker.bootstrap, "txn-orders", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-tx", "linger.ms": 5})
    producer.init_transactions(30)
    for name in ("committed-1", "aborted", "committed-2", "open"):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("txn-orders", f"{name}-{i}".encode(), partition=i % 2)
        producer.flush(10)
        if name == "aborted":
            producer.abort_transaction(10)
        elif name != "open":
            producer.commit_transaction(10)
    try:
        committed = reader(
            spark, broker.bootstrap, subscribe="txn-orders", **{"kafka.isolation.level": "read_committed"}
        )
        values = sorted(r.value.decode() for r in committed.select("value").collect())
        assert values == sorted(f"{name}-{i}" for name in ("committed-1", "committed-2") for i in range(10))
        everything = reader(spark, broker.bootstrap, subscribe="txn-orders")
        assert everything.count() == 40
    finally:
        producer.abort_transaction(10)


def test_offset_ranges_and_times_select_exactly(spark: Any, broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "events")
    produced = produce(broker.bootstrap, "events", 0, 30)  # 10 per partition; record i at offset i // 3
    ranged = reader(
        spark,
        broker.bootstrap,
        assign='{"events": [0, 1, 2]}',
        startingOffsets='{"events": {"0": 2, "1": -2, "2": 7}}',
        endingOffsets='{"events": {"0": 5, "1": 1, "2": -1}}',
    )
    assert positions(ranged) == [(0, 2), (0, 3), (0, 4), (1, 0), (2, 7), (2, 8), (2, 9)]

    times = {(p[0], p[1]): p[4] for p in produced}
    since = BASE_TIME + 20
    by_time = reader(spark, broker.bootstrap, subscribe="events", startingTimestamp=str(since))
    assert positions(by_time) == sorted(k for k, t in times.items() if t >= since)

    # partition 0 would start at time 27 (offset 9) and end at the first record at or after time 10 (offset 4)
    backwards = reader(
        spark,
        broker.bootstrap,
        subscribe="events",
        startingOffsetsByTimestamp=f'{{"events": {{"0": {BASE_TIME + 27}, "1": {BASE_TIME}, "2": {BASE_TIME}}}}}',
        endingTimestamp=str(BASE_TIME + 10),
    )
    with pytest.raises(Exception, match="before its starting offset"):
        backwards.collect()
    no_record_after = f'{{"events": {{"0": {BASE_TIME + 99}, "1": {BASE_TIME}, "2": {BASE_TIME}}}}}'
    with pytest.raises(Exception, match="startingOffsetsByTimestamp: no offset of events-0"):
        reader(spark, broker.bootstrap, subscribe="events", startingOffsetsByTimestamp=no_record_after).collect()
    at_latest = reader(
        spark,
        broker.bootstrap,
        subscribe="events",
        startingOffsetsByTimestamp=no_record_after,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert positions(at_latest) == [(p, o) for p in (1, 2) for o in range(10)]
    in_order = reader(
        spark,
        broker.bootstrap,
        subscribe="events",
        startingOffsetsByTimestamp=f'{{"events": {{"0": {BASE_TIME + 3}, "1": {BASE_TIME}, "2": {BASE_TIME + 26}}}}}',
        endingOffsetsByTimestamp=f'{{"events": {{"0": {BASE_TIME + 9}, "1": {BASE_TIME + 99}, "2": {BASE_TIME + 99}}}}}',
    )
    assert positions(in_order) == [(0, 1), (0, 2), *((1, o) for o in range(10)), (2, 8), (2, 9)]


def test_data_lost_to_retention_fails_or_is_skipped(spark: Any, broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "lossy", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("lossy", f"v{i}".encode())
    producer.flush(10)
    with SyncAdmin(broker.bootstrap) as admin:
        admin.call(AsyncAdmin.delete_records, {TopicPartition("lossy", 0): 6})
    from_zero = {"subscribe": "lossy", "startingOffsets": '{"lossy": {"0": 0}}'}
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader(spark, broker.bootstrap, **from_zero).collect()
    skipped = reader(spark, broker.bootstrap, failOnDataLoss="false", **from_zero)
    assert positions(skipped) == [(0, 6), (0, 7), (0, 8), (0, 9)]


def test_a_corrupt_batch_fails_the_read_or_is_skipped(spark: Any, broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "rotten", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for batch in range(3):  # offsets 0-9, 10-19, 20-29: one batch each
        for i in range(10):
            producer.produce("rotten", f"value-{batch * 10 + i}".encode(), partition=0)
        assert producer.flush(10) == 0
    segment = broker.log_dir / "rotten-0" / "00000000000000000000.log"
    data = segment.read_bytes()
    middle = [h for h in iter_headers(data) if h.offset == 10]
    assert len(middle) == 1
    with open(segment, "r+b") as file:  # one bit of a value flips on disk; the broker serves the file as it is
        file.seek(middle[0].end_position - 3)
        file.write(bytes([data[middle[0].end_position - 3] ^ 0x01]))
    with pytest.raises(Exception, match=r"rotten-0: the record batch at offsets 10-19 is corrupt"):
        reader(spark, broker.bootstrap, subscribe="rotten").collect()
    skipped = reader(spark, broker.bootstrap, subscribe="rotten", failOnDataLoss="false")
    assert positions(skipped) == [(0, offset) for offset in [*range(10), *range(20, 30)]]


def test_available_now_streams_write_each_record_once_and_commit_to_the_group(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "clicks")
    produced = produce(broker.bootstrap, "clicks", 0, 40)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> list[int]:
        stream = (
            spark.readStream.format("mq")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "clicks")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "15")
            .option("commitToGroup", "clicks-export")
            .option("includeHeaders", "true")
            .load()
        )
        query = (
            stream.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    first = run()
    assert sum(first) == 40 and len(first) > 1 and max(first) <= 15
    produced += produce(broker.bootstrap, "clicks", 40, 9)
    assert sum(run()) == 9
    assert rows(spark.read.parquet(str(out))) == sorted(produced)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        committed = admin.list_group_offsets("clicks-export")["clicks-export"]
    finally:
        admin.close()
    ends: dict[int, int] = {}
    for partition, offset, *_ in produced:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    assert {tp.partition: meta.offset for tp, meta in committed.items() if tp.topic == "clicks"} == ends


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple[Any, ...]]:
    """(partition, key, value, headers) of the first ``count`` records of the topic's partitions, sorted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([KafkaPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    found: list[tuple[Any, ...]] = []
    try:
        for _ in range(100):
            if len(found) >= count:
                break
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            headers = [(k, v) for k, v in message.headers() or []]
            found.append((message.partition(), message.key(), message.value(), headers))
    finally:
        consumer.close()
    return sorted(found, key=repr)


def test_writes_are_read_back_by_confluent_kafka(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "written", partitions=2)
    data = [
        ("written", "k1", b"one", [("h", b"1")], 0),
        ("written", None, b"two", [], 1),
        ("written", "k3", None, [("a", b"x"), ("b", None)], 1),
    ]
    schema = "topic string, key string, value binary, headers array<struct<key:string,value:binary>>, partition int"
    df = spark.createDataFrame(data, schema)
    df.write.format("mq").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    expected = [(p, k and k.encode(), v, h) for _, k, v, h, p in data]
    assert consume_all(broker.bootstrap, "written", 2, 3) == sorted(expected, key=repr)

    # a topic that does not exist yet is created by the broker (auto.create.topics.enable), as for Kafka's producer
    only_values = spark.createDataFrame([("text",)], "value string")
    only_values.write.format("mq").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "created").mode(
        "append"
    ).save()
    assert consume_all(broker.bootstrap, "created", 1, 1) == [(0, None, b"text", [])]

    # a stream copy: what the topic holds, read as a stream and written to another topic named by the option
    create_topic(broker.bootstrap, "copied", partitions=2)
    query = (
        spark.readStream.format("mq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "written")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers", "partition")
        .writeStream.format("mq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "copied")
        .option("checkpointLocation", str(tmp_path / "copy-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert consume_all(broker.bootstrap, "copied", 2, 3) == sorted(expected, key=repr)


def test_bad_options_are_reported(spark: Any, broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe, subscribePattern, assign"):
        reader(spark, broker.bootstrap).collect()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("mq").schema("value string").option("subscribe", "t").option(
            "kafka.bootstrap.servers", broker.bootstrap
        ).load().collect()
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="required attribute 'value' not found"):
        df.write.format("mq").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "t").mode(
            "append"
        ).save()
