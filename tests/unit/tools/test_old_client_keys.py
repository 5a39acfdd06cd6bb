"""Kafka 0.8 producer and consumer keys rewritten to the current ones, and what mq's clients then get."""

from __future__ import annotations

from pathlib import Path

import pytest

from mq.config import parse_properties
from mq.tools.client_properties import consumer_settings, producer_settings
from mq.tools.old_client_keys import current_consumer_keys, current_producer_keys

DATA = Path(__file__).parents[2] / "data"


def _seed(name: str) -> dict[str, str]:
    path = DATA / name
    return parse_properties(path.read_text(encoding="utf-8"), str(path))


def test_seed_producer_file_gives_the_producer_its_0_8_meaning() -> None:
    warnings: list[str] = []
    settings = producer_settings(_seed("seed_era_producer.properties"), warnings.append)
    assert settings == {
        "bootstrap_servers": "127.0.0.1:9092",
        "acks": -1,
        "request_timeout_ms": 10000,
        "compression": "snappy",
        "retries": 3,
        "retry_backoff_ms": 100,
        "linger_ms": 0,
        "client_id": "my_client",
    }
    old_keys = [
        "metadata.broker.list",
        "request.required.acks",
        "message.send.max.retries",
        "topic.metadata.refresh.interval.ms",
        "queue.enqueue.timeout.ms",
        "compression.codec",
        "compressed.topics",
        "producer.type",
        "queue.buffering.max.ms",
        "batch.num.messages",
        "queue.buffering.max.messages",
        "serializer.class",
        "key.serializer.class",
        "partitioner.class",
    ]
    for key in old_keys:
        lines = [w for w in warnings if w.startswith(f"Warning: producer property {key} is deprecated (Kafka 0.8); ")]
        assert len(lines) == 1, (key, warnings)
    assert len(warnings) == len(old_keys)


def test_seed_consumer_file_renames_the_0_8_consumer_keys() -> None:
    warnings: list[str] = []
    current = current_consumer_keys(_seed("seed_era_consumer.properties"), warnings.append)
    assert current["max.partition.fetch.bytes"] == "1048576"
    assert current["receive.buffer.bytes"] == "65536"
    assert current["enable.auto.commit"] == "true"
    assert current["auto.offset.reset"] == "earliest"
    assert current["fetch.max.wait.ms"] == "100"
    assert current["consumer.timeout.ms"] == "-1"
    assert current["zookeeper.connect"] == "127.0.0.1:2181"
    for old in ("fetch.message.max.bytes", "socket.receive.buffer.bytes", "auto.commit.enable", "fetch.wait.max.ms"):
        assert old not in current
    assert len(warnings) == 5
    assert "Warning: consumer property auto.offset.reset=smallest is deprecated (Kafka 0.8); use " in warnings[-1]
    settings = consumer_settings(current, [].append)
    assert settings["max_partition_fetch_bytes"] == 1048576
    assert settings["enable_auto_commit"] is True
    assert settings["auto_offset_reset"] == "earliest"
    assert settings["group_id"] == "mygid"


def test_a_second_pass_changes_and_reports_nothing() -> None:
    first = current_producer_keys(_seed("seed_era_producer.properties"), [].append)
    warnings: list[str] = []
    assert current_producer_keys(first, warnings.append) == first
    consumer = current_consumer_keys(_seed("seed_era_consumer.properties"), [].append)
    assert current_consumer_keys(consumer, warnings.append) == consumer
    assert warnings == []


@pytest.mark.parametrize(
    ("codec", "expected"), [("0", "none"), ("1", "gzip"), ("2", "snappy"), ("gzip", "gzip"), ("NONE", "none")]
)
def test_compression_codec_names_and_ids(codec: str, expected: str) -> None:
    assert current_producer_keys({"compression.codec": codec}, [].append)["compression.type"] == expected


def test_bad_compression_codec_and_producer_type_are_errors() -> None:
    with pytest.raises(ValueError, match=r"compression\.codec"):
        current_producer_keys({"compression.codec": "7"}, [].append)
    with pytest.raises(ValueError, match=r"producer\.type"):
        current_producer_keys({"producer.type": "later"}, [].append)


def test_async_lingers_queue_buffering_max_ms_and_sync_sends_at_once() -> None:
    assert current_producer_keys({"producer.type": "async"}, [].append)["linger.ms"] == "5000"
    got = current_producer_keys({"producer.type": "async", "queue.buffering.max.ms": "20"}, [].append)
    assert got == {"linger.ms": "20"}
    warnings: list[str] = []
    got = current_producer_keys({"producer.type": "sync", "queue.buffering.max.ms": "20"}, warnings.append)
    assert got == {"producer.type": "sync", "linger.ms": "0"}
    assert warnings[-1] == (
        "Warning: producer property queue.buffering.max.ms is deprecated (Kafka 0.8); only producer.type=async "
        "buffers, so it is unused"
    )


def test_compressed_topics_compress_only_the_listed_topics() -> None:
    props = {"compression.codec": "gzip", "compressed.topics": "a, b"}
    assert current_producer_keys(props, [].append, "a")["compression.type"] == "gzip"
    assert current_producer_keys(props, [].append, "c")["compression.type"] == "none"
    warnings: list[str] = []
    assert current_producer_keys(props, warnings.append)["compression.type"] == "gzip"
    assert "mq applies compression.type to every topic" in warnings[-1]


def test_the_current_key_wins_over_its_0_8_spelling() -> None:
    warnings: list[str] = []
    got = current_producer_keys({"acks": "1", "request.required.acks": "-1"}, warnings.append)
    assert got == {"acks": "1"}
    assert warnings == [
        "Warning: producer property request.required.acks is deprecated (Kafka 0.8); acks=1 given too, so "
        "request.required.acks is ignored"
    ]


def test_encoders_and_partitioner_are_reported_not_loaded() -> None:
    warnings: list[str] = []
    props = {"serializer.class": "kafka.serializer.StringEncoder", "partitioner.class": "com.example.P"}
    assert producer_settings(props, warnings.append) == {}
    assert warnings == [
        "Warning: producer property serializer.class is deprecated (Kafka 0.8); use value.serializer; mq sends "
        "UTF-8 strings as kafka.serializer.StringEncoder did",
        "Warning: producer property partitioner.class is deprecated (Kafka 0.8); mq cannot load com.example.P and "
        "uses its default partitioner",
    ]


def test_mirror_takes_the_seed_files() -> None:
    from mq.tools.mirror_maker import source_config, target_config

    lines: list[str] = []
    source = source_config({**_seed("seed_era_consumer.properties"), "bootstrap.servers": "s:1"}, lines.append)
    assert source.auto_offset_reset == "earliest"
    assert source.consumer["group_id"] == "mygid"
    target = target_config(_seed("seed_era_producer.properties"), lines.append)
    assert (target["bootstrap_servers"], target["acks"], target["compression"]) == ("127.0.0.1:9092", -1, "snappy")
    assert "Property enable.auto.commit is overridden to true - data loss or message reordering is possible." in lines
