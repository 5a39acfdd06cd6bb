"""``mq monitor`` logic: each evaluation reads the metrics the rules name from the cluster, updates the alarms
(``mq.tools.monitor_rules``) and delivers each firing and resolving notification.

Group metrics reuse the consumer-groups tool: the rows of ``collect_offsets`` with ``with_lag_seconds``, and the
per-partition status of ``mq.tools.lag_status`` over the last ``STATUS_WINDOW`` evaluations (Burrow's sliding
window). Partition metrics come from Metadata, log directory sizes from DescribeLogDirs and their used space from the
local file system when the directory is on this host.

A notification is posted as JSON (``Notification.document``) to the rule's webhook and/or given on standard input
(one line) to the rule's command (run by the shell, with ``MQ_ALARM_RULE``, ``MQ_ALARM_STATE``, ``MQ_ALARM_VALUE``,
``MQ_ALARM_THRESHOLD`` and ``MQ_ALARM_LABELS`` (JSON) in its environment). A delivery that fails is reported and
not retried: the next evaluation goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.tools.consumer_groups import ClientGroupAdmin, GroupAdmin, collect_offsets, owners, with_lag_seconds
from mq.tools.lag_status import Sample, evaluate
from mq.tools.monitor_rules import GROUP_METRICS, STATUS_RANK, Alarms, Labels, Notification, Rule
from mq.tools.server_status import log_dir_usage, partition_health
from mq.topic_partition import TopicPartition

STATUS_WINDOW = 3
"""Samples per partition that ``group_status`` rates (the newest evaluations)."""
DELIVERY_TIMEOUT_S = 10.0

Values = dict[Labels, float | str]


def labels(**items: str) -> Labels:
    return tuple(sorted(items.items()))


@dataclass
class GroupSampler:
    """Each evaluation's per (group, topic) lag records, lag seconds and worst status, the status over a window of
    the last ``window`` samples of each partition."""

    admin: GroupAdmin
    window: int = STATUS_WINDOW
    history: dict[tuple[str, TopicPartition], deque[Sample]] = field(default_factory=dict)

    def sample(self, wanted: Callable[[str], bool]) -> dict[str, Values]:
        found: dict[str, Values] = {metric: {} for metric in GROUP_METRICS}
        groups = [g.group_id for g in self.admin.list_groups() if wanted(g.group_id)]
        seen: set[tuple[str, TopicPartition]] = set()
        for description in self.admin.describe_groups(groups) if groups else []:
            report = with_lag_seconds(self.admin, collect_offsets(self.admin, description))
            owned = set(owners(description))
            for row in report.rows:
                tp = TopicPartition(row.topic, row.partition)
                key = (description.group_id, tp)
                seen.add(key)
                window = self.history.setdefault(key, deque(maxlen=self.window))
                window.append(
                    Sample(row.current_offset, row.log_start_offset or 0, row.log_end_offset or 0, tp in owned)
                )
                at = labels(group=description.group_id, topic=row.topic)
                status = evaluate(window).value
                previous = found["group_status"].get(at)
                if previous is None or STATUS_RANK[status] > STATUS_RANK[str(previous)]:
                    found["group_status"][at] = status
                found["group_lag_records"][at] = float(found["group_lag_records"].get(at, 0.0)) + (row.lag or 0)
                if row.lag_seconds is not None:
                    found["group_lag_seconds"][at] = max(
                        float(found["group_lag_seconds"].get(at, 0.0)), row.lag_seconds
                    )
        for key in set(self.history) - seen:
            del self.history[key]
        return found


@dataclass
class Monitor:
    """The rules, their alarms and the connection they are evaluated over."""

    rules: Sequence[Rule]
    admin: SyncAdmin
    alarms: Alarms = field(default_factory=Alarms)
    sampler: GroupSampler = field(init=False)

    def __post_init__(self) -> None:
        self.sampler = GroupSampler(ClientGroupAdmin(self.admin))

    def values(self) -> dict[str, Values]:
        """The value of each metric the rules name, by labels."""
        metrics = {rule.metric for rule in self.rules}
        found: dict[str, Values] = {}
        if metrics & set(GROUP_METRICS):
            group_rules = [r for r in self.rules if r.metric in GROUP_METRICS]
            found.update(self.sampler.sample(lambda g: any(r.group.fullmatch(g) for r in group_rules)))
        if metrics & {"under_replicated_partitions", "offline_partitions"}:
            for topic in self.admin.call(AsyncAdmin.describe_topics):
                health = partition_health([topic])
                at = labels(topic=topic.name)
                found.setdefault("under_replicated_partitions", {})[at] = float(len(health.under_replicated))
                found.setdefault("offline_partitions", {})[at] = float(len(health.offline))
        if metrics & {"log_dir_bytes", "log_dir_used_percent"}:
            cluster = self.admin.call(AsyncAdmin.describe_cluster)
            dirs = self.admin.call(AsyncAdmin.describe_log_dir_descriptions, [b.node_id for b in cluster.brokers])
            for d in log_dir_usage(dirs, local=True):
                at = labels(broker=str(d.broker), log_dir=d.log_dir)
                found.setdefault("log_dir_bytes", {})[at] = float(d.size_bytes)
                if d.used_percent is not None:
                    found.setdefault("log_dir_used_percent", {})[at] = d.used_percent
        return found

    def evaluate(self, now: float, once: bool = False) -> list[Notification]:
        """One evaluation of every rule; the notifications it produced."""
        found = self.values()
        notes: list[Notification] = []
        for rule in self.rules:
            notes += self.alarms.evaluate(rule, found.get(rule.metric, {}), now, ignore_for=once)
        return notes


def deliver(note: Notification, report: Callable[[str], None]) -> None:
    """Post ``note`` to its rule's webhook and run its command; a failure is reported through ``report``."""
    body = json.dumps(note.document()).encode("utf-8")
    rule = note.rule
    if rule.webhook is not None:
        request = urllib.request.Request(
            rule.webhook, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=DELIVERY_TIMEOUT_S) as response:
                response.read()
        except (OSError, ValueError) as exc:
            report(f"cannot post alarm {rule.name} to {rule.webhook}: {exc}")
    if rule.command is not None:
        env = {
            **os.environ,
            "MQ_ALARM_RULE": rule.name,
            "MQ_ALARM_STATE": note.state,
            "MQ_ALARM_VALUE": "" if note.value is None else str(note.value),
            "MQ_ALARM_THRESHOLD": str(rule.threshold),
            "MQ_ALARM_LABELS": json.dumps(note.labels),
        }
        try:
            done = subprocess.run(
                rule.command, shell=True, input=body + b"\n", env=env, timeout=DELIVERY_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            report(f"alarm {rule.name} command failed: {exc}")
            return
        if done.returncode != 0:
            report(f"alarm {rule.name} command exited with {done.returncode}")


def notification_line(note: Notification) -> str:
    """``TIME STATE rule k=v,... value V (operator threshold)``."""
    document = note.document()
    where = ",".join(f"{k}={v}" for k, v in sorted(note.labels.items())) or "-"
    return (
        f"{document['time']} {note.state.upper()} {note.rule.name} {where} value {note.value} "
        f"({note.rule.operator} {note.rule.threshold})"
    )
