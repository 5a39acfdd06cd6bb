"""Console producer and consumer logic: Kafka's LineMessageReader and DefaultMessageFormatter, and get-offsets.

Reader properties: ``parse.key`` (false), ``key.separator`` (TAB), ``ignore.error`` (false). Formatter
properties: ``print.timestamp``, ``print.partition``, ``print.offset``, ``print.headers``, ``print.key`` (false),
``print.value`` (true), ``key.separator`` (TAB), ``line.separator`` (newline), ``headers.separator`` (","),
``null.literal`` ("null"). A formatted line holds, in order: ``CreateTime:<ts>``, ``Partition:<p>``,
``Offset:<o>``, headers (``k:v,...`` or ``NO_HEADERS``), key, value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
