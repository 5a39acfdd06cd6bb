"""Validation of the mq data source's options (Spark's Kafka source rules)."""

from __future__ import annotations

import pytest

from mq.spark.offsets import OffsetSpec
from mq.spark.options import include_headers, read_options, write_options
from mq.topic_partition import TopicPartition

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_of_batch_and_streaming_reads() -> None:
    batch = read_options({**SERVERS, "subscribe": "a,b"}, streaming=False)
    assert batch.subscribe == ("a", "b")
    assert (batch.starting, batch.ending) == (OffsetSpec("earliest"), OffsetSpec("latest"))
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.client.bootstrap_servers == "127.0.0.1:9092"
    stream = read_options({"bootstrap.servers": "h:1", "subscribePattern": "a.*"}, streaming=True)
    assert stream.starting == OffsetSpec("latest")
    assert stream.subscribe_pattern == "a.*"
    assert stream.client.bootstrap_servers == "h:1"


def test_options_are_case_insensitive_and_typed() -> None:
    read = read_options(
        {
            **SERVERS,
            "ASSIGN": '{"a": [0, 1]}',
            "maxoffsetspertrigger": "10",
            "MinPartitions": "4",
            "maxRecordsPerPartition": "1000",
            "failOnDataLoss": "False",
            "includeHeaders": "true",
            "commitToGroup": "g",
            "kafka.isolation.level": "read_committed",
        },
        streaming=True,
    )
    assert read.assign == (TopicPartition("a", 0), TopicPartition("a", 1))
    assert (read.max_offsets_per_trigger, read.min_partitions, read.max_records_per_partition) == (10, 4, 1000)
    assert not read.fail_on_data_loss and read.include_headers
    assert read.commit_to_group == "g"
    assert read.isolation_level == "read_committed"
    assert include_headers({"INCLUDEHEADERS": "TRUE"})


def test_timestamps_take_precedence_over_offsets() -> None:
    both = {**SERVERS, "subscribe": "a", "startingOffsets": "earliest"}
    by_partition = read_options({**both, "startingOffsetsByTimestamp": '{"a": {"0": 5}}'}, streaming=False)
    assert by_partition.starting.kind == "timestamps"
    assert by_partition.starting.as_map() == {TopicPartition("a", 0): 5}
    overall = read_options(
        {**both, "startingOffsetsByTimestamp": '{"a": {"0": 5}}', "startingTimestamp": "9"}, streaming=False
    )
    assert overall.starting == OffsetSpec("timestamps", timestamp_ms=9)
    ending = read_options({**both, "endingTimestamp": "12"}, streaming=False)
    assert ending.ending == OffsetSpec("timestamps", timestamp_ms=12)


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "a"}, False, "kafka.bootstrap.servers"),
        ({**SERVERS}, False, "exactly one of"),
        ({**SERVERS, "subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one of"),
        ({**SERVERS, "subscribePattern": "("}, False, "subscribePattern"),
        ({**SERVERS, "subscribe": "a", "startingOffsets": "latest"}, False, "can't be latest"),
        ({**SERVERS, "subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, False, "can't be latest"),
        ({**SERVERS, "subscribe": "a", "endingOffsets": "earliest"}, False, "can't be earliest"),
        ({**SERVERS, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "can't be earliest"),
        ({**SERVERS, "subscribe": "a", "endingOffsets": "latest"}, True, "not valid in streaming"),
        ({**SERVERS, "subscribe": "a", "minPartitions": "0"}, False, "minPartitions must be positive"),
        ({**SERVERS, "subscribe": "a", "maxOffsetsPerTrigger": "x"}, True, "maxOffsetsPerTrigger must be an integer"),
        ({**SERVERS, "subscribe": "a", "failOnDataLoss": "maybe"}, False, "failOnDataLoss must be true or false"),
        ({**SERVERS, "subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, False, "Strategy"),
        ({**SERVERS, "subscribe": "a", "kafka.isolation.level": "x"}, False, "isolation"),
    ],
)
def test_bad_read_options_are_refused(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read_options(options, streaming=streaming)


def test_write_options() -> None:
    options = write_options({**SERVERS, "topic": "t", "kafka.acks": "1", "kafka.compression.type": "LZ4"})
    assert (options.topic, options.acks, options.compression) == ("t", 1, "lz4")
    assert write_options(SERVERS).acks == -1
    with pytest.raises(ValueError, match="kafka.acks"):
        write_options({**SERVERS, "kafka.acks": "2"})
    with pytest.raises(ValueError, match="compression"):
        write_options({**SERVERS, "kafka.compression.type": "brotli"})
