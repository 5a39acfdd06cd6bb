"""The metric names a Grafana dashboard's Prometheus queries read: the ``expr`` of every panel target (rows and
nested panels included) and the ``query`` of every templating variable (``label_values(metric, label)``,
``query_result(...)``, ``metrics(...)`` regexes excepted). Used to check a dashboard against a scrape."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*|[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?")
_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
    }
)
_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((.*?)(?:,)?\s*\w+\s*\)\s*$", re.DOTALL)


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (function names, keywords and label names excluded)."""
    text = _VARIABLE.sub(" ", _STRING.sub(" ", expr))
    text = _LABEL_LIST.sub(" ", _RANGE.sub(" ", _MATCHERS.sub(" ", text)))
    names = set()
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token[0].isdigit() or match.group(1) or token in _KEYWORDS:
            continue
        names.add(token)
    return names


def _variable_metric_names(query: str) -> set[str]:
    label_values = _LABEL_VALUES.match(query)
    if label_values is not None:
        return promql_metric_names(label_values.group(1))
    if re.match(r"^\s*(?:label_names|metrics)\s*\(", query):
        return set()
    inner = re.match(r"^\s*query_result\s*\((.*)\)\s*$", query, re.DOTALL)
    return promql_metric_names(inner.group(1) if inner else query)


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every panel target's PromQL expression."""
    return [target["expr"] for panel in _panels(dashboard.get("panels", [])) for target in panel.get("targets", [])
            if target.get("expr")]  # fmt: skip


def dashboard_metric_names(dashboard: dict[str, Any]) -> set[str]:
    """Every metric name the dashboard's panel queries and query variables read."""
    names: set[str] = set()
    for expr in dashboard_queries(dashboard):
        names |= promql_metric_names(expr)
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        names |= _variable_metric_names(str(query or ""))
    return names
