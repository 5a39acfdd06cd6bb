"""``mq consumer-groups`` logic: Kafka 2.8's ConsumerGroupCommand over an admin connection, returning data.

Describe collects, per group, one row per partition assigned to a member (members with the most partitions first,
each member's partitions by partition number) followed by the partitions with a committed offset but no member.
Lag is ``log end - committed`` clamped at 0 (and counted from the log start offset when retention passed the
committed offset), so it is never negative. Beyond Kafka, a row can carry the lag in seconds (now minus the timestamp
of the first unconsumed record) and a status over several samples (``mq.tools.lag_status``).

Reset computes a plan per group (``plan_reset``): the requested offsets clamped into [log start, log end] as Kafka
clamps them, and commits it only with ``execute`` and only for groups that are Empty or Dead.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from typing import Protocol

from mq.client.admin import AsyncAdmin, GroupDescription, GroupListing, MemberDescription
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.tools.lag_status import Sample, Status, evaluate, lag
from mq.topic_partition import TopicPartition

MISSING = "-"
OFFSETS_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
"""Kafka's group states: the classic protocol's, then those of KIP-848 consumer groups."""
GROUP_TYPES = ("Consumer", "Classic")
"""The group types ``--list --type`` takes (Kafka's ``GroupType`` names)."""
RESET_SPECS = (
    "to_datetime",
    "by_duration",
    "to_earliest",
    "to_latest",
    "shift_by",
    "from_file",
    "to_current",
    "to_offset",
)


class GroupCommandError(Exception):
    """A failure worded as Kafka's tool words it; ``usage`` marks bad command-line input."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class GroupAdmin(Protocol):
    """What the consumer group tools need from an admin connection (blocking)."""

    def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]: ...

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]: ...

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]: ...

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None: ...

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]: ...

    def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]: ...

    def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offset per partition for -2 (earliest), -1 (latest) or a timestamp (-1: no record at or after it)."""
        ...

    def partitions_of(self, topics: Sequence[str]) -> list[TopicPartition]:
        """Every partition of ``topics``; raises for a topic that does not exist."""
        ...

    def record_timestamps(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]: ...


class ClientGroupAdmin:
    """``GroupAdmin`` over mq's admin client."""

    def __init__(self, sync: SyncAdmin, isolation_level: str = "read_uncommitted") -> None:
        self.sync = sync
        self.isolation_level = isolation_level
        """Of the end offsets lag is measured against (read_committed: the last stable offset)."""

    def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        return self.sync.call(
            AsyncAdmin.list_groups, None if states is None else list(states), None if types is None else list(types)
        )

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        return self.sync.call(AsyncAdmin.describe_groups, list(group_ids))

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return self.sync.call(AsyncAdmin.list_group_offsets, group_id)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.sync.call(AsyncAdmin.alter_group_offsets, group_id, dict(offsets))

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        return self.sync.call(AsyncAdmin.delete_groups, list(group_ids))

    def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        return self.sync.call(AsyncAdmin.delete_group_offsets, group_id, list(partitions))

    def list_offsets(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        found = self.sync.call(AsyncAdmin.list_offsets, dict(timestamps), self.isolation_level)
        return {tp: entry.offset for tp, entry in found.items()}

    def partitions_of(self, topics: Sequence[str]) -> list[TopicPartition]:
        described = self.sync.call(AsyncAdmin.describe_topics, list(dict.fromkeys(topics)))
        return [TopicPartition(t.name, p.partition) for t in described for p in t.partitions]

    def record_timestamps(self, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self.sync.call(AsyncAdmin.record_timestamps, dict(positions))


# --- describe --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionRow:
    """One row of ``--describe --offsets``; None prints as ``-``."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None
    log_start_offset: int | None = None
    lag_seconds: float | None = None
    status: Status | None = None


@dataclass
class GroupOffsets:
    group: str
    state: str
    rows: list[PartitionRow]


@dataclass(frozen=True)
class MemberRow:
    group: str
    consumer_id: str
    group_instance_id: str | None
    host: str
    client_id: str
    assignment: tuple[TopicPartition, ...]


@dataclass
class GroupMembers:
    group: str
    state: str
    members: list[MemberRow]


@dataclass(frozen=True)
class GroupState:
    group: str
    coordinator: str
    """``host:port (id)``."""
    assignment_strategy: str
    state: str
    members: int


def group_ids(admin: GroupAdmin, groups: Sequence[str], all_groups: bool) -> list[str]:
    return [g.group_id for g in admin.list_groups()] if all_groups else list(dict.fromkeys(groups))


def owners(description: GroupDescription) -> dict[TopicPartition, MemberDescription]:
    """The member each assigned partition belongs to."""
    return {tp: member for member in description.members for tp in member.assignment}


def collect_offsets(admin: GroupAdmin, description: GroupDescription) -> GroupOffsets:
    """Rows as Kafka orders them: members by assignment size (largest first), then unassigned committed offsets."""
    committed = admin.list_group_offsets(description.group_id)
    members = sorted((m for m in description.members if m.assignment), key=lambda m: -len(m.assignment))
    placed: list[tuple[TopicPartition, MemberDescription | None]] = [
        (tp, member) for member in members for tp in sorted(member.assignment, key=lambda tp: tp.partition)
    ]
    assigned = {tp for tp, _ in placed}
    placed += [(tp, None) for tp in sorted(committed) if tp not in assigned]
    return GroupOffsets(description.group_id, description.state, partition_rows(admin, description, placed, committed))


def partition_rows(
    admin: GroupAdmin,
    description: GroupDescription,
    placed: Sequence[tuple[TopicPartition, MemberDescription | None]],
    committed: Mapping[TopicPartition, int],
) -> list[PartitionRow]:
    """A row per (partition, owning member or None), with the log start/end offsets and the clamped lag."""
    partitions = [tp for tp, _ in placed]
    starts = admin.list_offsets(dict.fromkeys(partitions, EARLIEST)) if partitions else {}
    ends = admin.list_offsets(dict.fromkeys(partitions, LATEST)) if partitions else {}
    rows = []
    for tp, member in placed:
        current, start, end = committed.get(tp), starts.get(tp), ends.get(tp)
        rows.append(
            PartitionRow(
                description.group_id,
                tp.topic,
                tp.partition,
                current,
                end,
                None if end is None else lag(current, start or 0, end),
                None if member is None else member.member_id,
                None if member is None else member.host,
                None if member is None else member.client_id,
                start,
            )
        )
    return rows


def with_lag_seconds(admin: GroupAdmin, report: GroupOffsets, now_ms: int | None = None) -> GroupOffsets:
    """Each row with ``lag_seconds``: 0 without lag, else now minus the timestamp of the first unconsumed record."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    positions = {
        TopicPartition(r.topic, r.partition): max(r.current_offset, r.log_start_offset or 0)
        for r in report.rows
        if r.current_offset is not None and r.lag
    }
    timestamps = admin.record_timestamps(positions) if positions else {}
    rows = []
    for row in report.rows:
        seconds: float | None = None
        if row.lag == 0:
            seconds = 0.0
        elif (stamp := timestamps.get(TopicPartition(row.topic, row.partition))) is not None:
            seconds = max(0, now_ms - stamp) / 1000
        rows.append(replace(row, lag_seconds=seconds))
    return GroupOffsets(report.group, report.state, rows)


Collector = Callable[[GroupDescription], GroupOffsets]
"""Builds a group's rows from its description (``collect_offsets`` or the offset checker's)."""


def sample_offsets(
    admin: GroupAdmin,
    group: str,
    samples: int,
    interval_s: float,
    collect: Collector | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> GroupOffsets:
    """Describe ``group`` ``samples`` times, ``interval_s`` apart; the last report's rows carry a status each."""
    if samples < 1:
        raise GroupCommandError("--samples must be at least 1", usage=True)
    if collect is None:
        collect = partial(collect_offsets, admin)
    history: dict[TopicPartition, list[Sample]] = {}
    report = GroupOffsets(group, "Dead", [])
    for index in range(samples):
        if index:
            sleep(interval_s)
        (description,) = admin.describe_groups([group])
        report = collect(description)
        owned = set(owners(description))
        for row in report.rows:
            tp = TopicPartition(row.topic, row.partition)
            history.setdefault(tp, []).append(
                Sample(row.current_offset, row.log_start_offset or 0, row.log_end_offset or 0, tp in owned)
            )
    rows = [replace(row, status=evaluate(history[TopicPartition(row.topic, row.partition)])) for row in report.rows]
    return GroupOffsets(report.group, report.state, rows)


def collect_members(description: GroupDescription) -> GroupMembers:
    members = [
        MemberRow(description.group_id, m.member_id, m.group_instance_id, m.host, m.client_id, m.assignment)
        for m in description.members
    ]
    return GroupMembers(description.group_id, description.state, members)


def collect_state(description: GroupDescription) -> GroupState:
    c = description.coordinator
    return GroupState(
        description.group_id,
        f"{c.host}:{c.port} ({c.node_id})",
        description.protocol,
        description.state,
        len(description.members),
    )


def state_message(group: str, state: str) -> tuple[str, bool] | None:
    """Kafka's note for a group's state: (line, is_error), or None for a stable group."""
    if state == "Dead":
        return f"Consumer group '{group}' does not exist.", True
    if state == "Empty":
        return f"Consumer group '{group}' has no active members.", False
    if state in ("PreparingRebalance", "CompletingRebalance"):
        return f"Warning: Consumer group '{group}' is rebalancing.", False
    return None


def _value(value: object) -> str:
    return MISSING if value is None else str(value)


def offsets_cells(report: GroupOffsets, extra: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the describe table; ``extra`` appends LAG-SECONDS, and STATUS when the rows carry one."""
    rows = report.rows
    with_status = extra and any(r.status is not None for r in rows)
    header = list(OFFSETS_HEADER)
    table = [
        [
            r.group,
            r.topic,
            str(r.partition),
            _value(r.current_offset),
            _value(r.log_end_offset),
            _value(r.lag),
            _value(r.consumer_id),
            _value(r.host),
            _value(r.client_id),
        ]
        for r in rows
    ]
    if extra:
        header.append("LAG-SECONDS")
        for cells, r in zip(table, rows, strict=True):
            cells.append(MISSING if r.lag_seconds is None else f"{r.lag_seconds:.3f}")
    if with_status:
        header.append("STATUS")
        for cells, r in zip(table, rows, strict=True):
            cells.append(_value(r.status and r.status.value))
    return header, table


def offsets_lines(report: GroupOffsets, extra: bool = False) -> list[str]:
    """Kafka 2.8's describe table: a blank line, the header, one row per partition (GROUP, TOPIC, CONSUMER-ID and
    HOST as wide as their longest value, at least 15), or nothing without rows."""
    if not report.rows:
        return []
    header, table = offsets_cells(report, extra)
    widths = [max(15, *(len(c[i]) for c in table)) for i in range(len(header) - 1)]
    widths[2:6] = [10, 15, 15, 15]
    return ["", pad_row(widths, header)] + [pad_row(widths, cells) for cells in table]


def pad_row(widths: Sequence[int], cells: Sequence[str]) -> str:
    """Cells left-aligned to ``widths``, single spaces between, the last cell unpadded (Kafka's ``%-Ns`` layout)."""
    return " ".join(
        [cell.ljust(width) for width, cell in zip(widths, cells, strict=False)] + list(cells[len(widths) :])
    )


def members_lines(report: GroupMembers, verbose: bool) -> list[str]:
    """Kafka 2.8's ``--members`` table; GROUP-INSTANCE-ID only when a member has one, ASSIGNMENT with ``verbose``."""
    if not report.members:
        return []
    ms = report.members
    with_instance = any(m.group_instance_id for m in ms)
    widths = [max(15, *(len(m.group) for m in ms)), max(15, *(len(m.consumer_id) for m in ms))]
    header = ["GROUP", "CONSUMER-ID"]
    if with_instance:
        widths.append(max(17, *(len(m.group_instance_id or "") for m in ms)))
        header.append("GROUP-INSTANCE-ID")
    widths += [max(15, *(len(m.host) for m in ms)), max(15, *(len(m.client_id) for m in ms)), 15]
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    lines = [
        "",
        " ".join(c.ljust(w) for w, c in zip(widths, header, strict=True)) + " " + ("ASSIGNMENT" if verbose else ""),
    ]
    for m in ms:
        cells = [m.group, m.consumer_id] + ([m.group_instance_id or ""] if with_instance else [])
        cells += [m.host, m.client_id, str(len(m.assignment))]
        line = " ".join(c.ljust(w) for w, c in zip(widths, cells, strict=True)) + " "
        lines.append(line + (format_assignment(m.assignment) if verbose else ""))
    return lines


def format_assignment(partitions: Iterable[TopicPartition]) -> str:
    """``topicA(0,1), topicB(2)``: topics sorted, partitions sorted; ``-`` when empty."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))


def state_lines(state: GroupState) -> list[str]:
    """Kafka 2.8's ``--state`` table (its GROUP column is as wide as the coordinator column would need)."""
    widths = [max(25, len(state.coordinator)), 25, 20, 15]
    return [
        "",
        pad_row(widths, ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]),
        pad_row(widths, [state.group, state.coordinator, state.assignment_strategy, state.state, str(state.members)]),
    ]


def list_state_lines(listings: Sequence[GroupListing]) -> list[str]:
    width = max(15, *(len(g.group_id) for g in listings)) if listings else 15
    return [f"{'GROUP':<{width}} STATE"] + [f"{g.group_id:<{width}} {g.state}" for g in listings]


def list_type_lines(listings: Sequence[GroupListing], include_state: bool) -> list[str]:
    """Kafka 3.8+'s ``--list --type`` table: GROUP (10 wider than the longest id, at least 15), TYPE, [STATE]."""
    width = max([15, *(len(g.group_id) for g in listings)]) + 10
    header = [f"{'GROUP':<{width}} {'TYPE':<20}" + (f" {'STATE':<20}" if include_state else "")]
    return header + [
        f"{g.group_id:<{width}} {group_type_name(g.group_type):<20}"
        + (f" {g.state or 'Unknown':<20}" if include_state else "")
        for g in listings
    ]


def group_type_name(group_type: str) -> str:
    """Kafka's name of a ListGroups ``group_type`` (``Unknown`` for a broker that does not say)."""
    return next((t for t in GROUP_TYPES if t.lower() == group_type.lower()), "Unknown")


def parse_types(text: str) -> list[str]:
    """A ``--type`` list (case-insensitive, comma-separated) as ListGroups' filter values; empty means every type."""
    types = [item.strip().lower() for item in text.split(",") if item.strip()]
    if any(t not in (name.lower() for name in GROUP_TYPES) for t in types):
        valid = ", ".join(GROUP_TYPES)
        raise GroupCommandError(f"Invalid types list '{text}'. Valid types are: {valid}", usage=True)
    return types


def parse_states(text: str) -> list[str]:
    """A ``--state`` list for ``--list`` (case-insensitive, comma-separated); empty means every state."""
    states = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        match = next((s for s in GROUP_STATES if s.lower() == item.lower()), None)
        if match is None:
            valid = ", ".join(GROUP_STATES)
            raise GroupCommandError(f"Invalid state list '{text}'. Valid states are: {valid}", usage=True)
        states.append(match)
    return states


# --- reset offsets ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResetSpec:
    """One reset scenario: ``kind`` is a RESET_SPECS name; ``value`` its offset, shift or timestamp in ms."""

    kind: str
    value: int | None = None


@dataclass
class ResetOutcome:
    plans: dict[str, dict[TopicPartition, int]]
    """New offsets per group (empty for a group that was refused)."""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,9})?(Z|[+-]\d{2}(?::?\d{2})?)?")
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_datetime(text: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS[.sss][zone]`` (zone ``Z``, ``+hh``, ``+hhmm`` or ``+hh:mm``; none means UTC) in ms."""
    match = _DATETIME.fullmatch(text.strip())
    if match is None:
        raise GroupCommandError(
            f"Error parsing timestamp '{text}': expected format 'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone",
            usage=True,
        )
    moment = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")
    fraction = match.group(2)
    if fraction:
        moment += timedelta(microseconds=round(float(fraction) * 1_000_000))
    zone = match.group(3)
    tz = UTC
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        tz = timezone(offset if zone[0] == "+" else -offset)
    return int(moment.replace(tzinfo=tz).timestamp() * 1000)


def parse_duration(text: str) -> int:
    """An ISO-8601 ``PnDTnHnMn.nS`` duration (as Java's ``Duration.parse``) in ms."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(i) for i in range(2, 6)):
        raise GroupCommandError(f"Text cannot be parsed to a Duration: {text}", usage=True)
    sign, days, hours, minutes, seconds, fraction = match.groups()
    total = timedelta(
        days=int(days or 0),
        hours=int(hours or 0),
        minutes=int(minutes or 0),
        seconds=int(seconds or 0),
    )
    if fraction:
        millis = int((fraction + "000")[:3])
        total += timedelta(milliseconds=-millis if (seconds or "").startswith("-") else millis)
    ms = int(total.total_seconds() * 1000)
    return -ms if sign == "-" else ms


def parse_topic_partitions(argument: str) -> tuple[str, list[int] | None]:
    """``topic`` (every partition) or ``topic:0,1,2``."""
    topic, colon, partitions = argument.partition(":")
    if not colon:
        return topic, None
    if not topic or not partitions:
        raise GroupCommandError(f"Invalid topic arg '{argument}', expected topic name and partitions", usage=True)
    numbers = []
    for item in partitions.split(","):
        try:
            numbers.append(int(item))
        except ValueError:
            raise GroupCommandError(
                f"Invalid partition '{item}' specified in topic arg '{argument}'", usage=True
            ) from None
    return topic, numbers


def scope_partitions(admin: GroupAdmin, topics: Sequence[str]) -> list[TopicPartition]:
    """The partitions ``--topic`` arguments name, in argument order."""
    parsed = [parse_topic_partitions(t) for t in topics]
    whole = [t for t, ps in parsed if ps is None]
    every = admin.partitions_of(whole) if whole else []
    result: list[TopicPartition] = []
    for topic, numbers in parsed:
        if numbers is None:
            result += [tp for tp in every if tp.topic == topic]
        else:
            result += [TopicPartition(topic, p) for p in numbers]
    return list(dict.fromkeys(result))


def parse_reset_csv(text: str, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """A ``--from-file`` plan: ``topic,partition,offset`` lines when exactly one group is given (and the first line
    has three fields), else ``group,topic,partition,offset``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    single = len(groups) == 1 and bool(lines) and len(lines[0].split(",")) == 3
    plans: dict[str, dict[TopicPartition, int]] = {}
    for number, line in enumerate(lines, 1):
        fields = line.split(",")
        try:
            if single:
                group, (topic, partition, offset) = groups[0], fields
            else:
                group, topic, partition, offset = fields
            plans.setdefault(group, {})[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            expected = "topic,partition,offset" if single else "group,topic,partition,offset"
            raise GroupCommandError(f"Invalid reset plan line {number}: '{line}', expected {expected}") from None
    return plans


def export_csv(plans: Mapping[str, Mapping[TopicPartition, int]], single_group: bool) -> str:
    """Kafka's ``--export``: one line per partition, with the group column unless exactly one group was given."""
    lines = []
    for group, plan in plans.items():
        for tp, offset in plan.items():
            prefix = "" if single_group else f"{group},"
            lines.append(f"{prefix}{tp.topic},{tp.partition},{offset}\n")
    return "".join(lines)


def plan_reset(
    spec: ResetSpec,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int] | None = None,
    requested: Mapping[TopicPartition, int] | None = None,
) -> tuple[dict[TopicPartition, int], list[str]]:
    """New offsets for ``partitions`` and Kafka's warnings, from the log start/end offsets, the committed offsets,
    the offsets by time (``to_datetime``/``by_duration``: -1 means no record at or after the time) and the file's
    ``requested`` offsets (``from_file``)."""
    warnings: list[str] = []
    plan: dict[TopicPartition, int] = {}
    for tp in partitions:
        if spec.kind == "to_earliest":
            plan[tp] = starts[tp]
        elif spec.kind == "to_latest":
            plan[tp] = ends[tp]
        elif spec.kind == "to_current":
            plan[tp] = committed.get(tp, ends[tp])
        elif spec.kind in ("to_datetime", "by_duration"):
            assert by_time is not None
            offset = by_time.get(tp, -1)
            if offset < 0:
                warnings.append(
                    f"Warn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset."
                )
                offset = ends[tp]
            plan[tp] = offset
        else:
            if spec.kind == "to_offset":
                assert spec.value is not None
                wanted = spec.value
            elif spec.kind == "shift_by":
                assert spec.value is not None
                if tp not in committed:
                    raise GroupCommandError(
                        f"Cannot shift offset for partition {tp} since there is no current committed offset"
                    )
                wanted = committed[tp] + spec.value
            else:
                assert requested is not None
                wanted = requested[tp]
            plan[tp] = _clamp(tp, wanted, starts[tp], ends[tp], warnings)
    return plan, warnings


def _clamp(tp: TopicPartition, offset: int, start: int, end: int, warnings: list[str]) -> int:
    if offset > end:
        warnings.append(
            f"New offset ({offset}) is higher than latest offset for topic partition {tp}. Value will be set to {end}"
        )
        return end
    if offset < start:
        warnings.append(
            f"New offset ({offset}) is lower than earliest offset for topic partition {tp}. Value will be set to {start}"
        )
        return start
    return offset


def reset_offsets(
    admin: GroupAdmin,
    groups: Sequence[str],
    spec: ResetSpec,
    *,
    topics: Sequence[str] = (),
    all_topics: bool = False,
    file_plans: Mapping[str, Mapping[TopicPartition, int]] | None = None,
    execute: bool = False,
) -> ResetOutcome:
    """Plan (and with ``execute`` commit) a reset for each group; active groups are refused as Kafka refuses them."""
    outcome = ResetOutcome({})
    for description in admin.describe_groups(groups):
        group = description.group_id
        if description.state not in ("Empty", "Dead"):
            outcome.errors.append(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {description.state}."
            )
            outcome.plans[group] = {}
            continue
        committed = admin.list_group_offsets(group)
        requested: Mapping[TopicPartition, int] | None = None
        if spec.kind == "from_file":
            requested = (file_plans or {}).get(group)
            if requested is None:
                outcome.errors.append(f"No reset plan for group {group} found")
                outcome.plans[group] = {}
                continue
            partitions = list(requested)
        elif all_topics:
            partitions = sorted(committed)
        else:
            partitions = scope_partitions(admin, topics)
        plan, warnings = _plan_for(admin, spec, partitions, committed, requested)
        outcome.warnings += warnings
        if execute and plan:
            admin.alter_group_offsets(group, plan)
        outcome.plans[group] = plan
    return outcome


def _plan_for(
    admin: GroupAdmin,
    spec: ResetSpec,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    requested: Mapping[TopicPartition, int] | None,
) -> tuple[dict[TopicPartition, int], list[str]]:
    if not partitions:
        return {}, []
    starts = admin.list_offsets(dict.fromkeys(partitions, EARLIEST))
    ends = admin.list_offsets(dict.fromkeys(partitions, LATEST))
    by_time = None
    if spec.kind in ("to_datetime", "by_duration"):
        assert spec.value is not None
        by_time = admin.list_offsets(dict.fromkeys(partitions, spec.value))
    return plan_reset(spec, partitions, committed, starts, ends, by_time, requested)


def reset_lines(plans: Mapping[str, Mapping[TopicPartition, int]]) -> list[str]:
    """Kafka 2.8's plan table (``%-30s %-30s %-10s %-15s``, trailing spaces kept)."""
    if not plans:
        return []
    lines = ["", f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"]
    for group, plan in plans.items():
        for tp, offset in plan.items():
            lines.append(f"{group:<30} {tp.topic:<30} {tp.partition!s:<10} {offset!s:<15}")
    return lines


# --- delete ----------------------------------------------------------------------------------------------------------


@dataclass
class DeleteOutcome:
    results: dict[str, ErrorCode]

    @property
    def failed(self) -> dict[str, ErrorCode]:
        return {g: e for g, e in self.results.items() if e != ErrorCode.NONE}

    @property
    def deleted(self) -> list[str]:
        return [g for g, e in self.results.items() if e == ErrorCode.NONE]


ERROR_TEXT = {
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Not authorized to access group: Group authorization failed.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "The consumer group is actively subscribed to the topic",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}
"""Kafka's exception messages for the errors group deletions report."""

EXCEPTION_NAMES = {
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
    ErrorCode.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
    ErrorCode.INVALID_GROUP_ID: "InvalidGroupIdException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "GroupSubscribedToTopicException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
}


def error_text(code: ErrorCode) -> str:
    return ERROR_TEXT.get(code, code.name)


def delete_groups(admin: GroupAdmin, groups: Sequence[str]) -> DeleteOutcome:
    return DeleteOutcome(admin.delete_groups(groups))


def _quoted(groups: Iterable[str]) -> str:
    return ", ".join(f"'{g}'" for g in groups)


def delete_lines(outcome: DeleteOutcome) -> tuple[list[str], list[str]]:
    """(stdout lines, error lines) as Kafka 2.8 prints a group deletion."""
    failed = outcome.failed
    if not failed:
        return [f"Deletion of requested consumer groups ({_quoted(outcome.deleted)}) was successful."], []
    lines = [
        f"* Group '{g}' could not be deleted due to: "
        f"org.apache.kafka.common.errors.{EXCEPTION_NAMES.get(e, 'KafkaException')}: {error_text(e)}"
        for g, e in failed.items()
    ]
    if outcome.deleted:
        lines += ["", f"These consumer groups were deleted successfully: {_quoted(outcome.deleted)}"]
    return lines, ["Deletion of some consumer groups failed:"]


@dataclass
class DeleteOffsetsOutcome:
    group: str
    topics: list[str]
    error: ErrorCode
    """The group-level outcome (NONE, or the first partition error when only partitions failed)."""
    partitions: dict[TopicPartition, ErrorCode]


def delete_offsets(admin: GroupAdmin, group: str, topics: Sequence[str]) -> DeleteOffsetsOutcome:
    partitions = scope_partitions(admin, topics)
    try:
        results = admin.delete_group_offsets(group, partitions)
    except KafkaError as exc:
        return DeleteOffsetsOutcome(group, list(topics), exc.code, {})
    failed = [e for e in results.values() if e != ErrorCode.NONE]
    return DeleteOffsetsOutcome(group, list(topics), failed[0] if failed else ErrorCode.NONE, results)


def delete_offsets_lines(outcome: DeleteOffsetsOutcome) -> tuple[list[str], str | None]:
    """(stdout lines, error line) as Kafka 2.8 prints ``--delete-offsets``."""
    group, error = outcome.group, outcome.error
    message = None
    lines: list[str] = []
    if error == ErrorCode.NONE:
        lines.append(f"Request succeed for deleting offsets with topic {', '.join(outcome.topics)} group {group}")
    elif error == ErrorCode.GROUP_ID_NOT_FOUND:
        message = f"'{group}' does not exist."
    elif error == ErrorCode.NON_EMPTY_GROUP:
        message = f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."
    elif error in (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        message = "Encounter some partition level error, see the follow-up details:"
    else:
        message = f"Encounter some unknown error: {error.name}"
    lines += ["", f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"]
    for tp in sorted(outcome.partitions, key=lambda tp: tp.topic + str(tp.partition)):
        code = outcome.partitions[tp]
        status = "Successful" if code == ErrorCode.NONE else f"Error: {error_text(code)}"
        lines.append(f"{tp.topic:<30} {tp.partition!s:<15} {status:<15}")
    return lines, message
