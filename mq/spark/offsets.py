"""Offset options and offset ranges of the ``mq`` data source, as Spark's Kafka source spells them. Pure functions.

Offsets travel as JSON objects keyed by topic, then by partition number as a string:
``{"orders": {"0": 42, "1": -1}}``. In ``startingOffsets`` / ``endingOffsets`` -2 means earliest and -1 latest;
``assign`` is ``{"orders": [0, 1]}``; ``startingOffsetsByTimestamp`` maps partitions to times in ms.
Every parse error is a ``ValueError`` whose message names the option.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mq.protocol.list_offsets import EARLIEST
from mq.topic_partition import TopicPartition

OffsetMap = dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends: ``earliest``/``latest`` for every partition, specific offsets (-2/-1 allowed per
    partition), or times in ms per partition (the first offset whose record time is at or after it)."""

    kind: str
    """``earliest``, ``latest``, ``offsets`` or ``timestamps``."""
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp_ms: int | None = None
    """With ``timestamps``: one time for every partition (``startingTimestamp``); else ``offsets`` holds them."""

    def as_map(self) -> OffsetMap:
        return dict(self.offsets)


def option_name(spec: OffsetSpec, which: str) -> str:
    """The option ``spec`` came from, for messages: ``{which}Offsets``, ``{which}Timestamp`` or
    ``{which}OffsetsByTimestamp`` (``which`` is ``starting`` or ``ending``)."""
    if spec.kind != "timestamps":
        return f"{which}Offsets"
    return f"{which}Timestamp" if spec.timestamp_ms is not None else f"{which}OffsetsByTimestamp"


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{topic: {"partition": offset}}``, topics and partitions in order (what stream offsets and checkpoints hold)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(value: Any, option: str = "offsets") -> OffsetMap:
    """The inverse of ``offsets_to_json``; accepts a JSON text or the decoded object."""
    data = _decode(value, option)
    if not isinstance(data, dict):
        raise ValueError(f"{option}: expected a JSON object of topics, got {value!r}")
    result: OffsetMap = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"{option}: expected an object of partitions for topic {topic!r}")
        for partition, offset in partitions.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"{option}: offset of {topic}-{partition} must be an integer, not {offset!r}")
            result[TopicPartition(topic, _partition_number(partition, option))] = offset
    return result


def parse_assign(value: str) -> list[TopicPartition]:
    """``assign``: ``{"topicA": [0, 1], "topicB": [2]}``."""
    data = _decode(value, "assign")
    if not isinstance(data, dict) or not data:
        raise ValueError(f'assign: expected a JSON object like {{"topicA":[0,1]}}, got {value!r}')
    result: list[TopicPartition] = []
    for topic, partitions in data.items():
        if not isinstance(partitions, list) or not all(_is_int(p) for p in partitions):
            raise ValueError(f"assign: partitions of topic {topic!r} must be a list of integers")
        result.extend(TopicPartition(topic, int(p)) for p in partitions)
    return list(dict.fromkeys(result))


def parse_subscribe(value: str) -> list[str]:
    """``subscribe``: a comma-separated list of topics."""
    topics = [t.strip() for t in value.split(",") if t.strip()]
    if not topics:
        raise ValueError("subscribe: no topic given")
    return topics


def parse_offset_spec(value: str, option: str) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or a JSON object of offsets."""
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    offsets = offsets_from_json(text, option)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise ValueError(f"{option}: offset {offset} of {tp} is invalid (use -2 for earliest, -1 for latest)")
    return OffsetSpec("offsets", tuple(offsets.items()))


def parse_timestamp_spec(value: str, option: str) -> OffsetSpec:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: ``{"topic": {"0": 1700000000000}}``."""
    times = offsets_from_json(value, option)
    for tp, timestamp in times.items():
        if timestamp < 0:
            raise ValueError(f"{option}: timestamp {timestamp} of {tp} must not be negative")
    return OffsetSpec("timestamps", tuple(times.items()))


def parse_global_timestamp(value: str, option: str) -> OffsetSpec:
    """``startingTimestamp`` / ``endingTimestamp``: one time in ms for every partition."""
    try:
        timestamp = int(value.strip())
    except ValueError:
        raise ValueError(f"{option}: expected a time in milliseconds, got {value!r}") from None
    if timestamp < 0:
        raise ValueError(f"{option}: timestamp {timestamp} must not be negative")
    return OffsetSpec("timestamps", timestamp_ms=timestamp)


def check_specified(spec: OffsetSpec, partitions: Iterable[TopicPartition], option: str) -> None:
    """Specific offsets or times must name exactly the partitions being read, as Spark requires."""
    if spec.kind not in ("offsets", "timestamps") or spec.timestamp_ms is not None:
        return
    named, wanted = set(spec.as_map()), set(partitions)
    if named != wanted:
        missing = sorted(str(tp) for tp in wanted - named)
        extra = sorted(str(tp) for tp in named - wanted)
        raise ValueError(
            f"{option} must name every partition being read (-2 earliest, -1 latest); "
            f"missing: {', '.join(missing) or 'none'}; not read: {', '.join(extra) or 'none'}"
        )


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition: what one input partition reads."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None, max_records: int | None = None
) -> list[OffsetRange]:
    """Empty ranges dropped; with ``max_records``, each range cut into pieces of at most that many offsets; then,
    with ``min_partitions`` above the count, each range cut into pieces in proportion to its share of all offsets
    (at least one piece each). Pieces of one range are as equal as offsets allow."""
    kept = [r for r in ranges if r.size > 0]
    if max_records:
        kept = [piece for r in kept for piece in _cut(r, -(-r.size // max_records))]
    if not min_partitions or min_partitions <= len(kept):
        return kept
    total = sum(r.size for r in kept)
    return [piece for r in kept for piece in _cut(r, max(1, round(r.size / total * min_partitions)))]


def _cut(r: OffsetRange, pieces: int) -> list[OffsetRange]:
    pieces = min(r.size, pieces)
    bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
    return [OffsetRange(r.tp, a, b) for a, b in itertools.pairwise(bounds)]


def rate_limit(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int) -> OffsetMap:
    """Ends that keep the total of offsets read within about ``limit``, shared in proportion to each partition's
    backlog (a partition with any backlog advances at least one offset). Partitions missing from ``start`` begin
    at their ``end`` (they have nothing to read)."""
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    result: OffsetMap = {}
    for tp, until in end.items():
        size = backlog[tp]
        if size == 0:
            result[tp] = until
            continue
        share = limit * size / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(start[tp] + step, until)
    return result


def _decode(value: Any, option: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{option}: invalid JSON ({exc.msg}): {value!r}") from None


def _partition_number(text: str, option: str) -> int:
    try:
        partition = int(text)
    except ValueError:
        raise ValueError(f"{option}: partition {text!r} is not a number") from None
    if partition < 0:
        raise ValueError(f"{option}: partition {partition} must not be negative")
    return partition


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
