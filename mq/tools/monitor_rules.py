"""``mq monitor`` rules: the rules file and the alarm state machine (no I/O: the clock is passed in).

The rules file is TOML (a ``.toml`` name) or JSON (any other name) with one shape::

    webhook = "http://alerts.example/hook"    # optional defaults for every rule
    command = "logger -t mq"
    repeat_interval = 300                    # seconds; 0 = notify once per firing
    [[rules]]
    name = "orders-lag"
    metric = "group_lag_seconds"
    operator = ">"                           # > >= < <= == != (default >)
    threshold = 60
    group = "orders-.*"                      # scope: full-match regexes (default: everything)
    topic = ".*"
    for = 30                                 # seconds the condition must hold before it fires (default 0)

An alarm is one (rule, labels) pair. It fires once its condition has held for ``for`` seconds, re-notifies while
firing only after ``repeat_interval`` seconds since the last notification, and resolves (one notification) when the
condition stops holding or its labels are no longer seen.
"""

from __future__ import annotations

import datetime
import json
import operator
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mq.tools.lag_status import Status

METRICS = (
    "group_lag_seconds",
    "group_lag_records",
    "group_status",
    "under_replicated_partitions",
    "offline_partitions",
    "log_dir_bytes",
    "log_dir_used_percent",
)
"""What a rule can watch (``mq monitor --help`` says what each one measures and its labels)."""
GROUP_METRICS = ("group_lag_seconds", "group_lag_records", "group_status")
STATUS_RANK = {status.value: rank for rank, status in enumerate(Status)}
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
RULE_KEYS = {
    "name",
    "metric",
    "operator",
    "threshold",
    "group",
    "topic",
    "for",
    "repeat_interval",
    "webhook",
    "command",
}
FILE_KEYS = {"rules", "webhook", "command", "repeat_interval"}


class RulesError(ValueError):
    """The rules file cannot be used; the message names the file and the rule."""


@dataclass(frozen=True)
class Rule:
    name: str
    metric: str
    operator: str
    threshold: float | str
    """A number, or a status name for ``group_status``."""
    group: re.Pattern[str]
    topic: re.Pattern[str]
    for_s: float = 0.0
    repeat_interval_s: float = 0.0
    webhook: str | None = None
    command: str | None = None

    def holds(self, value: float | str) -> bool:
        """Whether ``value`` (a status name for ``group_status``) meets the condition."""
        compare = OPERATORS[self.operator]
        if self.metric == "group_status":
            return compare(STATUS_RANK[str(value)], STATUS_RANK[str(self.threshold)])
        return compare(float(value), float(self.threshold))

    def in_scope(self, labels: Mapping[str, str]) -> bool:
        group, topic = labels.get("group"), labels.get("topic")
        return (group is None or self.group.fullmatch(group) is not None) and (
            topic is None or self.topic.fullmatch(topic) is not None
        )


def load_rules(path: str) -> list[Rule]:
    """The rules of a TOML or JSON file; raises RulesError for anything unusable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesError(f"cannot read {path}: {exc.strerror}") from None
    try:
        document = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise RulesError(f"{path} is not valid {'TOML' if path.endswith('.toml') else 'JSON'}: {exc}") from None
    return parse_rules(document, path)


def parse_rules(document: Any, source: str) -> list[Rule]:
    if not isinstance(document, dict):
        raise RulesError(f"{source}: expected a table/object with a 'rules' list")
    unknown = sorted(set(document) - FILE_KEYS)
    if unknown:
        raise RulesError(f"{source}: unknown key {unknown[0]!r} (expected one of {', '.join(sorted(FILE_KEYS))})")
    items = document.get("rules")
    if not isinstance(items, list) or not items:
        raise RulesError(f"{source}: no rules (expected a non-empty 'rules' list)")
    defaults = {key: document[key] for key in ("webhook", "command", "repeat_interval") if key in document}
    rules = [
        _rule({**defaults, **item} if isinstance(item, dict) else item, index, source)
        for index, item in enumerate(items)
    ]
    names = [r.name for r in rules]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise RulesError(f"{source}: two rules are named {duplicate!r}")
    return rules


def _rule(item: Any, index: int, source: str) -> Rule:
    where = f"{source}: rule {index + 1}"
    if not isinstance(item, dict):
        raise RulesError(f"{where}: expected a table/object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise RulesError(f"{where}: 'name' must be a non-empty string")
    where = f"{source}: rule {name!r}"
    unknown = sorted(set(item) - RULE_KEYS)
    if unknown:
        raise RulesError(f"{where}: unknown key {unknown[0]!r}")
    metric = item.get("metric")
    if metric not in METRICS:
        raise RulesError(f"{where}: unknown metric {metric!r} (expected one of {', '.join(METRICS)})")
    op = item.get("operator", ">=" if metric == "group_status" else ">")
    if op not in OPERATORS:
        raise RulesError(f"{where}: unknown operator {op!r} (expected one of {' '.join(OPERATORS)})")
    threshold = item.get("threshold")
    if metric == "group_status":
        if threshold not in STATUS_RANK:
            raise RulesError(f"{where}: threshold must be a status, one of {' '.join(STATUS_RANK)}")
    elif isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise RulesError(f"{where}: threshold must be a number, not {threshold!r}")
    webhook, command = item.get("webhook"), item.get("command")
    for key, value in (("webhook", webhook), ("command", command)):
        if value is not None and not (isinstance(value, str) and value):
            raise RulesError(f"{where}: {key!r} must be a non-empty string")
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        raise RulesError(f"{where}: webhook must be an http:// or https:// URL")
    return Rule(
        name,
        metric,
        op,
        threshold,
        _pattern(item, "group", where),
        _pattern(item, "topic", where),
        _seconds(item, "for", where),
        _seconds(item, "repeat_interval", where),
        webhook,
        command,
    )


def _pattern(item: Mapping[str, Any], key: str, where: str) -> re.Pattern[str]:
    text = item.get(key, ".*")
    if not isinstance(text, str):
        raise RulesError(f"{where}: {key!r} must be a regular expression string")
    try:
        return re.compile(text)
    except re.error as exc:
        raise RulesError(f"{where}: {key!r} is not a valid regular expression: {exc}") from None


def _seconds(item: Mapping[str, Any], key: str, where: str) -> float:
    value = item.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise RulesError(f"{where}: {key!r} must be a number of seconds >= 0, not {value!r}")
    return float(value)


Labels = tuple[tuple[str, str], ...]
"""An alarm's labels, sorted by name (hashable)."""


@dataclass(frozen=True)
class Notification:
    rule: Rule
    state: str
    """``firing`` or ``resolved``."""
    value: float | str | None
    """The metric's value (None: no longer seen)."""
    labels: dict[str, str]
    time: float
    """Seconds since the epoch."""

    def document(self) -> dict[str, Any]:
        """The JSON body posted to webhooks and given to commands."""
        return {
            "rule": self.rule.name,
            "state": self.state,
            "metric": self.rule.metric,
            "value": self.value,
            "operator": self.rule.operator,
            "threshold": self.rule.threshold,
            "labels": self.labels,
            "time": datetime.datetime.fromtimestamp(self.time, datetime.UTC).isoformat().replace("+00:00", "Z"),
        }


@dataclass
class _Alarm:
    pending_since: float | None = None
    firing: bool = False
    notified_at: float = 0.0


@dataclass
class Alarms:
    """Every rule's alarms across evaluations."""

    _alarms: dict[tuple[str, Labels], _Alarm] = field(default_factory=dict)

    def evaluate(
        self, rule: Rule, values: Mapping[Labels, float | str], now: float, ignore_for: bool = False
    ) -> list[Notification]:
        """Update ``rule``'s alarms with the values of this evaluation (those in scope) and return what to notify.
        ``ignore_for`` fires at once (a single evaluation has no history)."""
        notes: list[Notification] = []
        seen = {labels: value for labels, value in values.items() if rule.in_scope(dict(labels))}
        keys = set(seen) | {labels for name, labels in self._alarms if name == rule.name}
        for labels in sorted(keys):
            alarm = self._alarms.setdefault((rule.name, labels), _Alarm())
            value = seen.get(labels)
            if value is not None and rule.holds(value):
                if alarm.pending_since is None:
                    alarm.pending_since = now
                if not alarm.firing and (ignore_for or now - alarm.pending_since >= rule.for_s):
                    alarm.firing, alarm.notified_at = True, now
                    notes.append(Notification(rule, "firing", value, dict(labels), now))
                elif alarm.firing and rule.repeat_interval_s and now - alarm.notified_at >= rule.repeat_interval_s:
                    alarm.notified_at = now
                    notes.append(Notification(rule, "firing", value, dict(labels), now))
            else:
                if alarm.firing:
                    notes.append(Notification(rule, "resolved", value, dict(labels), now))
                del self._alarms[(rule.name, labels)]
        return notes

    def firing(self) -> list[tuple[str, dict[str, str]]]:
        return [(name, dict(labels)) for (name, labels), alarm in sorted(self._alarms.items()) if alarm.firing]
