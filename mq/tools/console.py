"""Console producer and consumer logic: Kafka's LineMessageReader and DefaultMessageFormatter, and get-offsets.

Reader properties: ``parse.key`` (false), ``key.separator`` (TAB), ``ignore.error`` (false). Formatter
properties: ``print.timestamp``, ``print.partition``, ``print.offset``, ``print.headers``, ``print.key`` (false),
``print.value`` (true), ``key.separator`` (TAB), ``line.separator`` (newline), ``headers.separator`` (","),
``null.literal`` ("null"). A formatted line holds, in order: ``CreateTime:<ts>``, ``Partition:<p>``,
``Offset:<o>``, headers (``k:v,...`` or ``NO_HEADERS``), key, value. ``group_consumer_settings`` turns the console
consumer's ``--group`` and Kafka consumer properties into group consumer settings (the security keys into one
``security``); ``zookeeper_consumer_properties`` does so for the ZooKeeper-coordinated consumer (``--zookeeper``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mq.client.security import SECURITY_KEYS, client_security
from mq.config import parse_properties as parse_java_properties
from mq.errors import ConfigError
from mq.topic_partition import TopicFilter

TRUE = ("true", "1", "yes")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class ConsoleError(Exception):
    """A console tool failure, in Kafka's words."""


def parse_properties(items: Iterable[str]) -> dict[str, str]:
    properties: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConsoleError(f"Invalid property '{item}': expected key=value")
        properties[key.strip()] = value
    return properties


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


@dataclass
class LineReader:
    """Splits input lines into (key, value) as Kafka's LineMessageReader does."""

    parse_key: bool = False
    key_separator: str = "\t"
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> LineReader:
        return cls(
            properties.get("parse.key", "false").lower() in TRUE,
            _unescape(properties.get("key.separator", "\t")),
            properties.get("ignore.error", "false").lower() in TRUE,
        )

    def parse(self, line: str, number: int) -> tuple[bytes | None, bytes]:
        if not self.parse_key:
            return None, line.encode("utf-8")
        key, sep, value = line.partition(self.key_separator)
        if not sep:
            if self.ignore_error:
                return None, line.encode("utf-8")
            raise ConsoleError(f"No key found on line {number}: {line}")
        return key.encode("utf-8"), value.encode("utf-8")


@dataclass
class Formatter:
    """Renders consumed records as Kafka's DefaultMessageFormatter."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> Formatter:
        def flag(name: str, default: bool) -> bool:
            return properties.get(name, str(default)).lower() in TRUE

        return cls(
            flag("print.timestamp", False),
            flag("print.partition", False),
            flag("print.offset", False),
            flag("print.headers", False),
            flag("print.key", False),
            flag("print.value", True),
            _unescape(properties.get("key.separator", "\t")),
            _unescape(properties.get("line.separator", "\n")),
            _unescape(properties.get("headers.separator", ",")),
            properties.get("null.literal", "null"),
        )

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", "replace")

    def format(
        self,
        *,
        timestamp_type: int,
        timestamp: int,
        partition: int,
        offset: int,
        headers: Iterable[tuple[str, bytes | None]],
        key: bytes | None,
        value: bytes | None,
    ) -> str:
        fields = []
        if self.print_timestamp:
            kind = TIMESTAMP_TYPES.get(timestamp_type)
            fields.append(f"{kind}:{timestamp}" if kind else "NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{partition}")
        if self.print_offset:
            fields.append(f"Offset:{offset}")
        if self.print_headers:
            rendered = [f"{k}:{self._text(v)}" for k, v in headers]
            fields.append(self.headers_separator.join(rendered) if rendered else "NO_HEADERS")
        if self.print_key:
            fields.append(self._text(key))
        if self.print_value:
            fields.append(self._text(value))
        return self.key_separator.join(fields) + self.line_separator

    def format_record(self, record: Any) -> str:
        """``format`` of a consumed record (anything with the attributes of ``mq.client.consumer.ConsumerRecord``)."""
        return self.format(
            timestamp_type=record.timestamp_type,
            timestamp=record.timestamp,
            partition=record.partition,
            offset=record.offset,
            headers=record.headers,
            key=record.key,
            value=record.value,
        )


def parse_partitions(text: str | None) -> list[int] | None:
    """``0,1,2`` -> [0, 1, 2]; empty or None -> None (all partitions)."""
    if not text:
        return None
    try:
        return [int(p) for p in re.split(r"\s*,\s*", text.strip()) if p]
    except ValueError:
        raise ConsoleError(f"Invalid partition list '{text}'") from None


def offset_lines(topic: str, offsets: Mapping[int, int | None]) -> list[str]:
    """GetOffsetShell's ``topic:partition:offset`` lines; an unknown offset prints empty, as Kafka 2.x does."""
    return [f"{topic}:{p}:{'' if o is None or o < 0 else o}" for p, o in sorted(offsets.items())]


def _flag(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, not {value!r}")
    return value.lower() == "true"


_ASSIGNOR_NAMES = {
    "range": "range",
    "roundrobin": "roundrobin",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
}


def _strategies(value: str) -> tuple[str, ...]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in _ASSIGNOR_NAMES]
    if unknown or not names:
        raise ValueError(f"unsupported assignor {', '.join(unknown) or value!r} (range and roundrobin are supported)")
    return tuple(_ASSIGNOR_NAMES[n] for n in names)


CONSUMER_KEYS: Mapping[str, tuple[str, Callable[[str], Any]]] = {
    "group.id": ("group_id", str),
    "group.instance.id": ("group_instance_id", str),
    "client.id": ("client_id", str),
    "auto.offset.reset": ("auto_offset_reset", str),
    "enable.auto.commit": ("enable_auto_commit", _flag),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "partition.assignment.strategy": ("partition_assignment_strategy", _strategies),
    "exclude.internal.topics": ("exclude_internal_topics", _flag),
    "isolation.level": ("isolation_level", str),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "allow.auto.create.topics": ("allow_auto_create_topics", _flag),
}
"""Kafka consumer config keys the group consumer understands, with its keyword argument and value parser. Other
keys (bootstrap.servers, deserializers, ...) are accepted and have no effect."""


def group_consumer_settings(group: str | None, properties: Mapping[str, str], from_beginning: bool) -> dict[str, Any]:
    """Keyword arguments of a group consumer for the console consumer's --group and consumer properties (Kafka's
    rules: the group ids given must agree; --from-beginning means auto.offset.reset=earliest and cannot be combined
    with another reset policy). Without a group id the result has no ``group_id``."""
    groups = list(dict.fromkeys(g for g in (group, properties.get("group.id")) if g))
    if len(groups) > 1:
        raise ConsoleError(
            "The group ids provided in different places (directly using '--group', via '--consumer-property', or via "
            f"'--consumer.config') do not match. Detected group ids: {', '.join(repr(g) for g in groups)}"
        )
    settings: dict[str, Any] = {}
    for key, value in properties.items():
        known = CONSUMER_KEYS.get(key)
        if known is None:
            continue
        name, parse = known
        try:
            settings[name] = parse(value.strip())
        except ValueError as exc:
            raise ConsoleError(f"Invalid value {value!r} for configuration {key}: {exc}") from None
    if groups:
        settings["group_id"] = groups[0]
    if SECURITY_KEYS.intersection(properties):
        try:
            settings["security"] = client_security(properties, "the consumer properties")
        except ConfigError as exc:
            raise ConsoleError(str(exc)) from None
    reset = settings.get("auto_offset_reset")
    if from_beginning and reset not in (None, "earliest"):
        raise ConsoleError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}'")
    settings.setdefault("auto_offset_reset", "earliest" if from_beginning else "latest")
    return settings


def zookeeper_consumer_properties(
    zookeeper: str | None, group: str | None, properties: Mapping[str, str], from_beginning: bool
) -> tuple[dict[str, str], bool]:
    """The 0.8 consumer properties of ``console-consumer --zookeeper`` and whether the group id was generated
    (``console-consumer-<0..99999>``, as Kafka 0.8 makes it, when neither --group nor group.id gives one);
    --from-beginning means auto.offset.reset=smallest."""
    merged = dict(properties)
    if zookeeper is not None:
        merged["zookeeper.connect"] = zookeeper
    groups = list(dict.fromkeys(g for g in (group, merged.get("group.id")) if g))
    if len(groups) > 1:
        raise ConsoleError(f"The group ids provided do not match. Detected group ids: {', '.join(groups)}")
    generated = not groups
    merged["group.id"] = groups[0] if groups else f"console-consumer-{random.randrange(100000)}"
    if from_beginning:
        if merged.get("auto.offset.reset", "smallest") != "smallest":
            raise ConsoleError(
                f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={merged['auto.offset.reset']}'"
            )
        merged["auto.offset.reset"] = "smallest"
    return merged, generated


def read_properties_file(path: str) -> dict[str, str]:
    """A Java properties file (``--consumer.config``) as a dict."""
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_java_properties(handle.read(), path)
    except ConfigError as exc:
        raise ConsoleError(str(exc)) from None


def topic_filter(text: str) -> re.Pattern[str]:
    """Kafka's topic whitelist: a regular expression matched against whole topic names, where "," also separates
    alternatives and spaces and surrounding quotes are dropped."""
    try:
        return TopicFilter(text).compiled
    except ValueError as exc:
        raise ConsoleError(str(exc)) from None
