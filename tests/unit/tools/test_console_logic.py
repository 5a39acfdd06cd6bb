from __future__ import annotations

from pathlib import Path

import pytest

from mq.tools.console import (
    ConsoleError,
    Formatter,
    LineReader,
    group_consumer_settings,
    offset_lines,
    parse_partitions,
    parse_properties,
    read_properties_file,
    topic_filter,
)


def test_line_reader() -> None:
    assert LineReader().parse("a\tb", 1) == (None, b"a\tb")
    keyed = LineReader.from_properties(parse_properties(["parse.key=true", "key.separator=:"]))
    assert keyed.parse("k:v:w", 1) == (b"k", b"v:w")
    with pytest.raises(ConsoleError, match="No key found on line 3: nokey"):
        keyed.parse("nokey", 3)
    lenient = LineReader.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse("nokey", 1) == (None, b"nokey")
    assert LineReader.from_properties({"parse.key": "true"}).parse("k\tv", 1) == (b"k", b"v")


def test_formatter_field_order_and_literals() -> None:
    formatter = Formatter.from_properties(
        {k: "true" for k in ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")}
    )
    line = formatter.format(
        timestamp_type=0, timestamp=5, partition=1, offset=7, headers=[("h", b"x"), ("n", None)], key=None, value=b"v"
    )
    assert line == "CreateTime:5\tPartition:1\tOffset:7\th:x,n:null\tnull\tv\n"
    plain = Formatter()
    assert (
        plain.format(timestamp_type=1, timestamp=5, partition=0, offset=0, headers=[], key=b"k", value=None) == "null\n"
    )
    custom = Formatter.from_properties(
        {"print.key": "true", "key.separator": ",", "line.separator": "|", "print.headers": "true"}
    )
    assert (
        custom.format(timestamp_type=1, timestamp=5, partition=0, offset=0, headers=[], key=b"k", value=b"v")
        == "NO_HEADERS,k,v|"
    )


def test_offsets_and_partitions() -> None:
    assert parse_partitions("0, 2") == [0, 2] and parse_partitions("") is None
    with pytest.raises(ConsoleError):
        parse_partitions("a")
    assert offset_lines("t", {1: 77, 0: 150, 2: -1}) == ["t:0:150", "t:1:77", "t:2:"]
    with pytest.raises(ConsoleError):
        parse_properties(["novalue"])


def test_group_consumer_settings_from_kafka_keys() -> None:
    settings = group_consumer_settings(
        "g",
        {
            "group.id": "g",
            "enable.auto.commit": "false",
            "session.timeout.ms": "6000",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor,range",
            "key.deserializer": "ignored",
        },
        from_beginning=True,
    )
    assert settings == {
        "group_id": "g",
        "enable_auto_commit": False,
        "session_timeout_ms": 6000,
        "partition_assignment_strategy": ("roundrobin", "range"),
        "auto_offset_reset": "earliest",
    }
    assert group_consumer_settings(None, {}, from_beginning=False) == {"auto_offset_reset": "latest"}
    assert group_consumer_settings(None, {"group.id": "p"}, False)["group_id"] == "p"


def test_group_consumer_settings_reject_conflicts_and_bad_values() -> None:
    with pytest.raises(ConsoleError, match="Detected group ids: 'a', 'b'"):
        group_consumer_settings("a", {"group.id": "b"}, False)
    with pytest.raises(ConsoleError, match="--from-beginning and 'auto.offset.reset=latest'"):
        group_consumer_settings("a", {"auto.offset.reset": "latest"}, True)
    with pytest.raises(ConsoleError, match="session.timeout.ms"):
        group_consumer_settings("a", {"session.timeout.ms": "soon"}, False)
    with pytest.raises(ConsoleError, match="sticky"):
        group_consumer_settings("a", {"partition.assignment.strategy": "sticky"}, False)


def test_group_consumer_settings_carry_security() -> None:
    settings = group_consumer_settings(
        "g",
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"},
        False,
    )
    assert (settings["security"].protocol, settings["security"].username) == ("SASL_PLAINTEXT", "u")
    assert "security" not in group_consumer_settings("g", {}, False)
    with pytest.raises(ConsoleError, match="needs sasl.mechanism in the consumer properties"):
        group_consumer_settings("g", {"security.protocol": "SASL_SSL"}, False)


def test_consumer_config_file(tmp_path: Path) -> None:
    path = tmp_path / "consumer.properties"
    path.write_text("# comment\ngroup.id=from-file\nenable.auto.commit = false\n")
    assert read_properties_file(str(path)) == {"group.id": "from-file", "enable.auto.commit": "false"}


def test_topic_filter_is_kafkas_whitelist() -> None:
    pattern = topic_filter(" 'orders, events.*' ")
    assert [t for t in ("orders", "events-1", "orders2", "xevents") if pattern.fullmatch(t)] == ["orders", "events-1"]
    with pytest.raises(ConsoleError, match="invalid regex"):
        topic_filter("(unclosed")
