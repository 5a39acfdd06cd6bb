"""mq mirror logic: topic patterns, configs with the no-data-loss defaults, handlers, placement, gaps."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import replace

import pytest

from mq.client.consumer import ConsumerRecord
from mq.tools.mirror_maker import (
    Gap,
    MirrorError,
    MirrorStats,
    ZkSourceConfig,
    find_gaps,
    forced_settings,
    load_handler,
    load_rebalance_listener,
    source_config,
    target_config,
    topic_filter,
    topic_pattern,
)
from mq.tools.record_copy import target_partition
from mq.topic_partition import TopicFilter, TopicPartition, java_topic_regex

TP = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("whitelist", "normalised"),
    [(" a,b ", "a|b"), ("'logs.*'", "logs.*"), ('"x, y"', "x|y"), ("a|b", "a|b")],
)
def test_whitelist_is_normalised_as_kafka_does(whitelist: str, normalised: str) -> None:
    assert java_topic_regex(whitelist) == normalised


def test_whitelist_matches_whole_names_and_blacklist_removes() -> None:
    pattern = topic_pattern("orders.*,users", "orders-private")
    matching = [
        n for n in ("orders", "orders-eu", "orders-private", "users", "users2", "xorders") if pattern.fullmatch(n)
    ]
    assert matching == ["orders", "orders-eu", "users"]
    only_black = topic_pattern(None, "internal.*")
    assert only_black.fullmatch("a") and not only_black.fullmatch("internal-x")
    assert topic_pattern("foo.bar", None).fullmatch("fooXbar")  # a regex, as Kafka's


def test_zookeeper_sources_register_kafka_0_8_filters() -> None:
    assert topic_filter("orders.*, users", None) == TopicFilter("orders.*|users")
    assert topic_filter(None, "internal.*") == TopicFilter("internal.*", blacklist=True)
    both = topic_filter("orders.*", "orders-private")
    assert both.pattern == "white_list"
    assert [n for n in ("orders", "orders-eu", "orders-private", "users") if both.allows(n)] == ["orders", "orders-eu"]


def test_a_config_naming_only_zookeeper_makes_a_zookeeper_source_without_auto_commit() -> None:
    lines: list[str] = []
    source = source_config(
        {"zookeeper.connect": "zk:2181/c", "group.id": "g", "offsets.storage": "kafka"}, lines.append
    )
    assert isinstance(source, ZkSourceConfig)
    config = source.consumer
    assert (config.zookeeper_connect, config.group_id, config.offsets_storage) == ("zk:2181/c", "g", "kafka")
    assert not config.auto_commit_enable and lines == []
    with pytest.raises(MirrorError, match="Missing required configuration group.id") as missing:
        source_config({"zookeeper.connect": "zk:2181"}, lines.append)
    assert missing.value.usage
    named = source_config({"zookeeper.connect": "zk:2181", "bootstrap.servers": "b:9092", "group.id": "g"}, print)
    assert not isinstance(named, ZkSourceConfig) and named.consumer["bootstrap_servers"] == "b:9092"


def test_topic_pattern_errors_are_usage_errors() -> None:
    with pytest.raises(MirrorError, match="Exactly one of whitelist or blacklist") as missing:
        topic_pattern(None, None)
    assert missing.value.usage
    with pytest.raises(MirrorError, match="invalid topic regex") as bad:
        topic_pattern("a(", None)
    assert bad.value.usage


def test_no_data_loss_defaults_are_forced_and_overrides_print_kafkas_line() -> None:
    lines: list[str] = []
    result = forced_settings({"acks": "1", "retries": "3"}, {"acks": "all", "retries": "9", "x": "y"}, lines.append)
    assert result == {"acks": "1", "retries": "3", "x": "y"}
    assert lines == [
        "Property acks is overridden to 1 - data loss or message reordering is possible.",
        "Property retries is overridden to 3 - data loss or message reordering is possible.",
    ]


def test_target_config_defaults_to_acks_all_and_endless_retries() -> None:
    lines: list[str] = []
    settings = target_config({"bootstrap.servers": "t:9092", "compression.type": "zstd", "foo": "1"}, lines.append)
    assert settings == {"bootstrap_servers": "t:9092", "compression": "zstd", "acks": -1, "retries": 2**31 - 1}
    assert lines == ["Warning: ignoring producer property foo (mq's client does not use it)"]
    with pytest.raises(MirrorError, match="bootstrap.servers"):
        target_config({}, lines.append)


def test_source_config_maps_consumer_keys_and_keeps_resets_to_itself() -> None:
    lines: list[str] = []
    source = source_config(
        {
            "bootstrap.servers": "s:9092",
            "group.id": "mirror",
            "auto.offset.reset": "earliest",
            "max.poll.records": "2000",
            "session.timeout.ms": "6000",
            "client.id": "c",
        },
        lines.append,
    )
    assert source.max_poll_records == 2000
    assert source.auto_offset_reset == "earliest"
    assert source.consumer == {
        "bootstrap_servers": "s:9092",
        "group_id": "mirror",
        "session_timeout_ms": 6000,
        "client_id": "c",
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
    }
    assert lines == []


def test_source_config_auto_commit_override_and_errors() -> None:
    lines: list[str] = []
    source = source_config({"bootstrap.servers": "s", "group.id": "g", "enable.auto.commit": "true"}, lines.append)
    assert source.consumer["enable_auto_commit"] is True
    assert lines == ["Property enable.auto.commit is overridden to true - data loss or message reordering is possible."]
    for properties, message in [
        ({"bootstrap.servers": "s"}, "group.id"),
        ({"group.id": "g"}, "bootstrap.servers"),
        ({"bootstrap.servers": "s", "group.id": "g", "auto.offset.reset": "soonest"}, "auto.offset.reset"),
        ({"bootstrap.servers": "s", "group.id": "g", "max.poll.records": "many"}, "invalid literal"),
        ({"bootstrap.servers": "s", "group.id": "g", "session.timeout.ms": "x"}, "session.timeout.ms"),
    ]:
        with pytest.raises(MirrorError, match=message):
            source_config(properties, lines.append)


def record(offset: int = 0, **changes: object) -> ConsumerRecord:
    base = ConsumerRecord("t", 1, offset, 1000, 0, b"k", b"v", (("h", b"1"),))
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.fixture
def handler_module() -> Iterator[str]:
    module = types.ModuleType("mirror_test_handlers")

    def rename(r: ConsumerRecord) -> list[ConsumerRecord]:
        return [replace(r, topic="copy." + r.topic)]

    def factory(args: str) -> object:
        times = int(args)
        return lambda r: [r] * times

    module.rename = rename  # type: ignore[attr-defined]
    module.factory = factory  # type: ignore[attr-defined]
    module.not_callable = 3  # type: ignore[attr-defined]

    class Listener:
        def __init__(self, tag: str = "") -> None:
            self.tag = tag

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...

    module.Listener = Listener  # type: ignore[attr-defined]
    module.listener = Listener("plain")  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


def test_handlers_load_from_module_function_with_optional_args(handler_module: str) -> None:
    rename = load_handler(f"{handler_module}:rename")
    assert [r.topic for r in rename(record())] == ["copy.t"]
    repeat = load_handler(f"{handler_module}:factory", "3")
    assert list(repeat(record(5))) == [record(5)] * 3


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "module:function"),
        ("mirror_test_handlers:missing", "cannot load"),
        ("no.such.module:f", "cannot load"),
        ("mirror_test_handlers:not_callable", "not callable"),
    ],
)
def test_bad_handlers_are_usage_errors(handler_module: str, spec: str, message: str) -> None:
    with pytest.raises(MirrorError, match=message) as info:
        load_handler(spec)
    assert info.value.usage


def test_rebalance_listeners_load_as_objects_or_from_a_factory(handler_module: str) -> None:
    assert load_rebalance_listener(f"{handler_module}:listener").tag == "plain"  # type: ignore[attr-defined]
    assert load_rebalance_listener(f"{handler_module}:Listener", "made").tag == "made"  # type: ignore[attr-defined]
    with pytest.raises(MirrorError, match="has no on_partitions_revoked and on_partitions_assigned") as info:
        load_rebalance_listener(f"{handler_module}:rename")
    assert info.value.usage
    with pytest.raises(MirrorError, match="--consumer.rebalance.listener must be module:function"):
        load_rebalance_listener("Listener")


@pytest.mark.parametrize(
    ("source", "target_count", "expected"),
    [(0, 1, 0), (3, 4, 3), (3, 8, 3), (4, 4, None), (7, 2, None), (-1, 4, None)],
)
def test_same_partition_number_when_the_target_has_it_else_the_partitioner(
    source: int, target_count: int, expected: int | None
) -> None:
    assert target_partition(source, target_count) == expected


def test_positions_outside_the_log_are_gaps() -> None:
    a, b, c, d = (TopicPartition("t", p) for p in range(4))
    positions = {a: 10, b: 50, c: 500, d: 0}
    starts = {a: 10, b: 120, c: 0, d: 0}
    ends = {a: 90, b: 200, c: 100, d: 0}
    gaps = find_gaps(positions, starts, ends)
    assert gaps == [Gap(b, 50, 120, 200), Gap(c, 500, 0, 100)]
    assert [g.lost for g in gaps] == [70, None]
    assert gaps[0].describe() == (
        "GAP in source t-1: offsets 50 to 119 (70 records) were removed before they were mirrored; "
        "resuming at the log start offset 120"
    )
    assert "position 500 is beyond the log end offset 100" in gaps[1].describe()
    assert find_gaps({a: 90}, starts, ends) == []  # at the log end: nothing to read yet, nothing lost
    assert find_gaps({a: 5}, {}, {}) == []  # offsets unknown: no verdict


def test_summary_counts_gaps_and_lost_records() -> None:
    stats = MirrorStats(records=10, bytes=2_000_000, gaps=2, records_lost=70, send_failures=0)
    line = stats.summary()
    assert line.startswith("Mirrored 10 records (2.0 MB) in ")
    assert line.endswith("; gaps: 2 (70 records lost); send failures: 0")
