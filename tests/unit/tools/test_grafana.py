"""The metric names a dashboard's PromQL reads, and the shipped dashboard's names against mq's Strimzi names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mq.tools.grafana import dashboard_metric_names, promql_metric_names
from mq.tools.jmx_names import templates

DASHBOARD = Path(__file__).resolve().parents[3] / "config" / "grafana" / "mq-overview.json"


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        (
            'sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total{topic=~"$topic"}[$__rate_interval]))',
            {"kafka_server_brokertopicmetrics_messagesin_total"},
        ),
        (
            'histogram_quantile(0.99, sum without (le) (rate(x_bucket{a="b,c)"}[5m] offset 1h)))',
            {"x_bucket"},
        ),
        ("a / on (instance) group_left (job) b > bool 1e3", {"a", "b"}),
        ("max(foo:bar:rate5m) or vector(0) unless ignoring(x) baz", {"foo:bar:rate5m", "baz"}),
        ('count({__name__="x"})', set()),
        ("rate(${metric}[1m]) + [[other]]", set()),
    ],
)
def test_promql_metric_names(expr: str, names: set[str]) -> None:
    assert promql_metric_names(expr) == names


def test_dashboard_names_cover_panels_rows_and_variables() -> None:
    dashboard = {
        "panels": [
            {"type": "row", "panels": [{"targets": [{"expr": "rate(a_total[1m])"}]}]},
            {"targets": [{"expr": "b"}, {"refId": "B"}]},
        ],
        "templating": {
            "list": [
                {"type": "datasource", "query": "prometheus"},
                {"type": "query", "query": {"query": "label_values(c{x='y'}, topic)"}},
                {"type": "query", "query": "label_values(instance)"},
                {"type": "query", "query": "query_result(topk(3, d))"},
            ]
        },
    }
    assert dashboard_metric_names(dashboard) == {"a_total", "b", "c", "d"}


def test_shipped_dashboard_reads_only_names_mq_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["templating"]["list"][0] == {**dashboard["templating"]["list"][0], "type": "datasource"}
    names = dashboard_metric_names(dashboard)
    beyond_kafka = {"kafka_consumergroup_lag", "kafka_consumergroup_lag_seconds"}  # kafka_exporter's names
    kafka = {name for name in names if name.startswith("kafka_") and name not in beyond_kafka}
    assert kafka <= set(templates()), kafka - set(templates())
    assert names - kafka == {*beyond_kafka, "process_cpu_seconds_total", "process_resident_memory_bytes"}
