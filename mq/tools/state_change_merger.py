"""``mq state-change-log-merger``: Kafka's StateChangeLogMerger. Merge the state-change logs of several brokers into
one history, in time order.

A line is kept when it carries a timestamp ``yyyy-MM-dd HH:mm:ss,SSS`` within [start, end] (both inclusive) and
names a partition of the wanted topic and partitions (any, when not given): ``[topic,partition]`` as Kafka 0.8 wrote
them, or ``topic-partition`` as Kafka 2.x and mq write them; lines naming no partition are left out, as Kafka's
tool does. Each file is read in order and the files are merged by timestamp (ties keep the order the files were
given in). ``--logs-regex`` matches the file names of one directory (``/tmp/state-change.log.*``: the regex
``state-change.log.*`` in ``/tmp``).
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DATE_FORMAT = "yyyy-MM-dd HH:mm:ss,SSS"
DEFAULT_START = "0000-00-00 00:00:00,000"
DEFAULT_END = "9999-12-31 23:59:59,999"

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}")
_TOPIC_CHARS = r"[a-zA-Z0-9._-]"
_PARTITION = re.compile(
    rf"\[({_TOPIC_CHARS}+),\s*([0-9]+)\]|(?<![a-zA-Z0-9._=-])({_TOPIC_CHARS}+)-([0-9]+)(?![a-zA-Z0-9._-])"
)
"""``[topic,partition]`` (groups 1, 2) or ``topic-partition`` (groups 3, 4), the latter not part of a longer word."""


class MergerError(Exception):
    """Bad input, reported in one line."""


@dataclass(frozen=True)
class MergeFilter:
    """Which lines to keep: ``topic`` None = every topic, ``partitions`` empty = every partition; ``start`` and
    ``end`` in DATE_FORMAT (compared as text, which orders that format by time)."""

    topic: str | None = None
    partitions: frozenset[int] = frozenset()
    start: str = DEFAULT_START
    end: str = DEFAULT_END


def parse_time(value: str, option: str) -> str:
    """A ``--start-time``/``--end-time`` argument (quotes around it are dropped), checked against DATE_FORMAT."""
    text = value.replace('"', " ").strip()
    if text in (DEFAULT_START, DEFAULT_END):
        return text
    try:
        datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")
    except ValueError:
        raise MergerError(f"Invalid {option} '{value}': the format is {DATE_FORMAT}") from None
    if not _DATE.fullmatch(text):
        raise MergerError(f"Invalid {option} '{value}': the format is {DATE_FORMAT}")
    return text


def parse_partitions(value: str) -> frozenset[int]:
    """``--partitions 0,1,2``; repeated ids are refused as Kafka refuses them."""
    try:
        ids = [int(item) for item in value.split(",")]
    except ValueError:
        raise MergerError(f"Invalid partitions '{value}': expected comma-separated partition ids") from None
    repeated = sorted({p for p in ids if ids.count(p) > 1})
    if repeated:
        raise MergerError(f"The list of partitions contains repeated entries: {','.join(map(str, repeated))}")
    return frozenset(ids)


def files_matching(regex: str) -> list[Path]:
    """The files of the regex's directory (the part before its last ``/``; ``.`` without one) whose names the rest
    of it matches (anywhere in the name, as Kafka's ``findFirstIn``), sorted by name."""
    directory, _, pattern = regex.rpartition("/")
    try:
        name_regex = re.compile(pattern)
    except re.error as exc:
        raise MergerError(f"Invalid --logs-regex '{regex}': {exc}") from None
    root = Path(directory or ".")
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise MergerError(f"cannot list {root}: {exc.strerror}") from None
    return [root / name for name in names if name_regex.search(name) and (root / name).is_file()]


def _wanted(line: str, keep: MergeFilter) -> str | None:
    """The line's timestamp when the line is kept, else None."""
    date = _DATE.search(line)
    if date is None or not keep.start <= date.group() <= keep.end:
        return None
    for found in _PARTITION.finditer(line, date.end()):
        topic = found.group(1) or found.group(3)
        partition = int(found.group(2) or found.group(4))
        if (keep.topic is None or topic == keep.topic) and (not keep.partitions or partition in keep.partitions):
            return date.group()
        if found.group(1) is not None:
            return None  # Kafka matches only the first [topic,partition] of a line
    return None


def _lines(path: Path, index: int, keep: MergeFilter) -> Iterator[tuple[str, int, str]]:
    with open(path, encoding="utf-8", errors="replace") as file:
        for raw in file:
            line = raw.rstrip("\n")
            date = _wanted(line, keep)
            if date is not None:
                yield date, index, line


def merge(paths: Sequence[Path], keep: MergeFilter) -> Iterator[str]:
    """The kept lines of every file, in timestamp order. Unreadable files fail before any line is produced."""
    for path in paths:
        if not path.is_file() or not os.access(path, os.R_OK):
            raise MergerError(f"cannot read {path}: no such readable file")
    streams = [_lines(path, index, keep) for index, path in enumerate(paths)]
    for _, _, line in heapq.merge(*streams):
        yield line
