"""The partition assignors of the ZooKeeper-coordinated consumer, as Kafka 0.8 computes them, and its config."""

from __future__ import annotations

from pathlib import Path

import pytest

from mq.client.zk_consumer import (
    ConsumerThreadId,
    ZkConsumerConfig,
    java_string_hash,
    new_consumer_id,
    range_assignment,
    roundrobin_assignment,
)
from mq.config import parse_properties
from mq.topic_partition import TopicPartition

C1 = [ConsumerThreadId("g_c1", 0), ConsumerThreadId("g_c1", 1)]
C2 = [ConsumerThreadId("g_c2", 0), ConsumerThreadId("g_c2", 1)]


def named(decision: dict[TopicPartition, ConsumerThreadId]) -> dict[str, str]:
    return {f"{tp.topic}-{tp.partition}": str(thread) for tp, thread in sorted(decision.items())}


def test_range_gives_the_first_threads_one_extra_partition() -> None:
    # Kafka's own example: two consumers with two streams each, five partitions.
    decision = range_assignment({"t": C2 + C1}, {"t": [4, 3, 2, 1, 0]})
    assert named(decision) == {"t-0": "g_c1-0", "t-1": "g_c1-0", "t-2": "g_c1-1", "t-3": "g_c2-0", "t-4": "g_c2-1"}


def test_range_is_per_topic_and_leaves_surplus_threads_idle() -> None:
    decision = range_assignment({"a": C1 + C2, "b": [C2[0]]}, {"a": [0, 1], "b": [0, 1, 2]})
    assert named(decision) == {"a-0": "g_c1-0", "a-1": "g_c1-1", "b-0": "g_c2-0", "b-1": "g_c2-0", "b-2": "g_c2-0"}


def test_thread_ids_sort_by_consumer_then_thread_number() -> None:
    threads = [ConsumerThreadId("g_c", 10), ConsumerThreadId("g_c", 9), ConsumerThreadId("g_b", 11)]
    assert [str(t) for t in sorted(threads)] == ["g_b-11", "g_c-9", "g_c-10"]


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)


def test_roundrobin_deals_partitions_in_hash_order() -> None:
    # "[t,10]" and "[t,11]" overflow to negative hash codes, so they come first.
    decision = roundrobin_assignment({"t": [C1[0], C2[0]]}, {"t": list(range(12))})
    order = [10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert {tp.partition: str(thread) for tp, thread in decision.items()} == {
        p: ("g_c1-0" if i % 2 == 0 else "g_c2-0") for i, p in enumerate(order)
    }


def test_roundrobin_spreads_every_topic_over_all_threads() -> None:
    decision = roundrobin_assignment({"a": C1, "b": C1}, {"a": [0, 1], "b": [0]})
    owners = [str(t) for _, t in sorted(decision.items())]
    assert sorted(owners) == ["g_c1-0", "g_c1-0", "g_c1-1"]


def test_roundrobin_needs_identical_subscriptions() -> None:
    with pytest.raises(ValueError, match="Round-robin assignment is allowed only if all consumers"):
        roundrobin_assignment({"a": C1, "b": [C1[0]]}, {"a": [0], "b": [0]})


def test_consumer_ids_as_kafka_makes_them() -> None:
    assert new_consumer_id("mygid", "mycid") == "mygid_mycid"
    generated = new_consumer_id("g")
    host_and_time, _, suffix = generated.removeprefix("g_").rpartition("-")
    assert len(suffix) == 8 and int(suffix, 16) >= 0 and host_and_time.rsplit("-", 1)[1].isdigit()


def test_config_reads_the_seed_era_keys() -> None:
    config = ZkConsumerConfig.from_properties(
        {
            "zookeeper.connect": "127.0.0.1:2181",
            "group.id": "mygid",
            "auto.offset.reset": "smallest",
            "zookeeper.sync.time.ms": "300",
            "partition.assignment.strategy": "roundrobin",
            "offsets.storage": "kafka",
            "queued.max.message.chunks": "2",
        }
    )
    assert config.auto_offset_reset == "smallest" and config.rebalance_backoff_ms == 300
    assert config.partition_assignment_strategy == "roundrobin" and config.offsets_storage == "kafka"
    with pytest.raises(ValueError, match="Missing required configuration group.id"):
        ZkConsumerConfig.from_properties({"zookeeper.connect": "z"})
    with pytest.raises(ValueError, match="auto.offset.reset"):
        ZkConsumerConfig.from_properties({"zookeeper.connect": "z", "group.id": "g", "auto.offset.reset": "earliest"})


def test_the_seed_era_consumer_properties_are_understood() -> None:
    text = (Path(__file__).parents[2] / "data" / "seed_era_consumer.properties").read_text(encoding="utf-8")
    config = ZkConsumerConfig.from_properties(parse_properties(text))
    assert (config.zookeeper_connect, config.group_id, config.consumer_id) == ("127.0.0.1:2181", "mygid", "mycid")
    assert new_consumer_id(config.group_id, config.consumer_id) == "mygid_mycid"
    assert config.auto_commit_enable and config.auto_commit_interval_ms == 60000
    assert config.auto_offset_reset == "smallest" and config.consumer_timeout_ms == -1
    assert (config.offsets_storage, config.dual_commit_enabled) == ("zookeeper", True)
    assert (config.rebalance_max_retries, config.rebalance_backoff_ms) == (4, 2000)
    assert config.zookeeper_session_timeout_ms == 6000 and config.fetch_message_max_bytes == 1048576
