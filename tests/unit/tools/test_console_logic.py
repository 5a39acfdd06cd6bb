from __future__ import annotations

import pytest

from mq.tools.console import ConsoleError, Formatter, LineReader, offset_lines, parse_partitions, parse_properties


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
