"""JmxTool's rendering: the report formats, Java's number printing, SimpleDateFormat patterns, selection."""

from __future__ import annotations

import datetime as dt

import pytest

from mq.tools.jmx_names import ObjectName, ObjectNamePattern
from mq.tools.jmx_tool import (
    JmxToolError,
    compile_date_format,
    header_line,
    java_double,
    java_value,
    metrics_url,
    report_lines,
    select,
    time_field,
)

KEYS = ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec:Count", "kafka.server:type=X,name=Y:Value")


def test_original_format_is_a_quoted_header_and_bare_rows() -> None:
    assert header_line(KEYS) == (
        '"time","kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec:Count","kafka.server:type=X,name=Y:Value"'
    )
    assert report_lines("original", KEYS, "1700000000000", ["12", "0"]) == ["1700000000000,12,0"]


@pytest.mark.parametrize(
    ("report_format", "lines"),
    [
        ("properties", ["time=1", f"{KEYS[0]}=12", f"{KEYS[1]}=0"]),
        ("csv", ['time,"1"', f'{KEYS[0]},"12"', f'{KEYS[1]},"0"']),
        ("tsv", ["time\t1", f"{KEYS[0]}\t12", f"{KEYS[1]}\t0"]),
    ],
)
def test_key_value_formats(report_format: str, lines: list[str]) -> None:
    assert report_lines(report_format, KEYS, "1", ["12", "0"]) == lines


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.5, "1.5"),
        (12.25, "12.25"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (0.00012345, "1.2345E-4"),
        (9999999.0, "9999999.0"),
        (10000000.0, "1.0E7"),
        (123456789.5, "1.234567895E8"),
        (-2.5, "-2.5"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
    ],
)
def test_doubles_print_as_java_prints_them(value: float, text: str) -> None:
    assert java_double(value) == text


def test_attribute_values_print_with_their_jmx_type() -> None:
    assert java_value("Count", 42.0) == "42"
    assert java_value("Value", 3.0) == "3"
    assert java_value("Value", 0.25) == "0.25"
    assert java_value("99thPercentile", 3.0) == "3.0"


MOMENT = dt.datetime(2024, 3, 5, 14, 7, 9, 45000, tzinfo=dt.timezone(dt.timedelta(hours=2)))


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("yyyy-MM-dd HH:mm:ss.SSS", "2024-03-05 14:07:09.045"),
        ("yyyy-MM-dd'T'HH:mm:ssXXX", "2024-03-05T14:07:09+02:00"),
        ("dd/MMM/yy hh:mm a", "05/Mar/24 02:07 PM"),
        ("EEEE d MMMM yyyy", "Tuesday 5 March 2024"),
        ("EEE HH:mm Z", "Tue 14:07 +0200"),
        ("H:m:s", "14:7:9"),
        ("'at' HH 'o''clock'", "at 14 o'clock"),
        ("''yy''", "'24'"),
    ],
)
def test_simple_date_format_patterns(pattern: str, text: str) -> None:
    assert compile_date_format(pattern)(MOMENT) == text


@pytest.mark.parametrize("pattern", ["yyyy-MM-dd q", "'unterminated"])
def test_bad_date_formats_are_usage_errors(pattern: str) -> None:
    with pytest.raises(JmxToolError) as raised:
        compile_date_format(pattern)
    assert raised.value.usage


def test_time_is_epoch_milliseconds_without_a_format() -> None:
    assert time_field(None, 1700000000.1234) == "1700000000123"


def test_metrics_url() -> None:
    assert metrics_url("http://127.0.0.1:9404") == "http://127.0.0.1:9404/metrics"
    assert metrics_url("http://127.0.0.1:9404/") == "http://127.0.0.1:9404/metrics"
    assert metrics_url("http://h:1/custom/path") == "http://h:1/custom/path"
    with pytest.raises(JmxToolError) as raised:
        metrics_url("service:jmx:rmi:///jndi/rmi://:9999/jmxrmi")
    assert raised.value.usage


BTM = (("type", "BrokerTopicMetrics"), ("name", "MessagesInPerSec"))
TOTAL = (("type", "RequestMetrics"), ("name", "TotalTimeMs"), ("request", "Produce"))
MBEANS = {
    ObjectName("kafka.server", BTM): {"Count": 30.0},
    ObjectName("kafka.server", (*BTM, ("topic", "b"))): {"Count": 20.0},
    ObjectName("kafka.server", (*BTM, ("topic", "a"))): {"Count": 10.0},
    ObjectName("kafka.network", TOTAL): {"Count": 7.0, "99thPercentile": 9.5, "50thPercentile": 1.0},
}


def test_selection_is_sorted_and_filtered_by_attribute() -> None:
    queries = [
        ObjectNamePattern.parse("kafka.network:type=RequestMetrics,*"),
        ObjectNamePattern.parse("kafka.server:*"),
    ]
    selection = select(queries, MBEANS, ["Count", "99thPercentile"])
    assert selection.keys == (
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:99thPercentile",
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:Count",
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=a:Count",
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=b:Count",
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec:Count",
    )
    assert selection.values(MBEANS) == ["9.5", "7", "10", "20", "30"]
    without_b = {name: values for name, values in MBEANS.items() if ("topic", "b") not in name.properties}
    assert selection.values(without_b) is None


def test_no_attribute_left_is_a_usage_error_naming_unexported_ones() -> None:
    with pytest.raises(
        JmxToolError, match="No matched attributes for the queried objects kafka.server:.*OneMinuteRate"
    ):
        select([ObjectNamePattern.parse("kafka.server:*")], MBEANS, ["OneMinuteRate"])
