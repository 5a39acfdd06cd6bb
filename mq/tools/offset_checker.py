"""``mq consumer-offset-checker`` logic: Kafka's ConsumerOffsetChecker over the group coordinator.

Offsets live in ``__consumer_offsets`` (OffsetFetch), not in ZooKeeper, so ``--zookeeper`` only finds the brokers.
Topics: the ``--topic`` list, else every topic the group has committed offsets for or a member is assigned; every
partition of each topic is listed, sorted. ``Offset`` and ``Lag`` are ``unknown`` without a committed offset,
``Owner`` is the owning member's id or ``none``. Rows are consumer-groups rows (``PartitionRow``), so lag in seconds
and the sampled status come from the same functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq.client.admin import GroupDescription
from mq.client.cluster import BrokerMetadata
from mq.tools.consumer_groups import GroupAdmin, GroupOffsets, owners, pad_row, partition_rows

UNKNOWN = "unknown"
NONE = "none"
HEADER = ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner")


def parse_topics(text: str | None) -> list[str] | None:
    """The comma-separated ``--topic`` list (None: all)."""
    if text is None:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def check(admin: GroupAdmin, description: GroupDescription, topics: Sequence[str] | None = None) -> GroupOffsets:
    """One row per partition of the chosen topics, sorted by topic and partition."""
    committed = admin.list_group_offsets(description.group_id)
    owned = owners(description)
    if topics is None:
        topics = sorted({tp.topic for tp in committed} | {tp.topic for tp in owned})
    partitions = sorted(admin.partitions_of(topics)) if topics else []
    placed = [(tp, owned.get(tp)) for tp in partitions]
    return GroupOffsets(description.group_id, description.state, partition_rows(admin, description, placed, committed))


def cells(report: GroupOffsets, extra: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and cells; ``extra`` appends lagSeconds, and status when the rows carry one."""
    with_status = extra and any(r.status is not None for r in report.rows)
    header = list(HEADER) + (["lagSeconds"] if extra else []) + (["status"] if with_status else [])
    table = []
    for r in report.rows:
        row = [
            r.group,
            r.topic,
            str(r.partition),
            UNKNOWN if r.current_offset is None else str(r.current_offset),
            UNKNOWN if r.log_end_offset is None else str(r.log_end_offset),
            UNKNOWN if r.lag is None or r.current_offset is None else str(r.lag),
            r.consumer_id or NONE,
        ]
        if extra:
            row.append(UNKNOWN if r.lag_seconds is None else f"{r.lag_seconds:.3f}")
        if with_status:
            row.append(r.status.value if r.status is not None else UNKNOWN)
        table.append(row)
    return header, table


def lines(report: GroupOffsets, extra: bool = False) -> list[str]:
    """Kafka's ``%-15s %-30s %-3s %-15s %-15s %-15s %s`` lines (extra columns after Owner, Owner then padded)."""
    header, table = cells(report, extra)
    widths = [15, 30, 3, 15, 15, 15]
    if extra:
        widths.append(max(len(r[6]) for r in [header, *table]))
        widths += [15] * (len(header) - len(widths) - 1)
    return [pad_row(widths, row) for row in [header, *table]]


def broker_lines(brokers: Sequence[BrokerMetadata]) -> list[str]:
    """``--broker-info``: ``BROKER INFO`` and ``id -> host:port`` per broker."""
    return ["BROKER INFO"] + [f"{b.node_id} -> {b.host}:{b.port}" for b in sorted(brokers, key=lambda b: b.node_id)]
