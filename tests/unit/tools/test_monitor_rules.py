"""The rules file of ``mq monitor`` and the alarm state machine, on a fake clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mq.tools.monitor import GroupSampler, deliver, labels
from mq.tools.monitor_rules import Alarms, Notification, Rule, RulesError, load_rules, parse_rules
from mq.topic_partition import TopicPartition as TP
from tests.unit.tools.group_fakes import FakeGroupAdmin, group, member


def rule(**items: object) -> Rule:
    (parsed,) = parse_rules({"rules": [{"name": "r", "metric": "group_lag_seconds", "threshold": 2, **items}]}, "f")
    return parsed


def test_a_toml_file_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        'webhook = "http://127.0.0.1:1/hook"\nrepeat_interval = 60\n'
        '[[rules]]\nname = "lag"\nmetric = "group_lag_records"\nthreshold = 100\ngroup = "orders-.*"\nfor = 30\n'
        '[[rules]]\nname = "stuck"\nmetric = "group_status"\nthreshold = "STALL"\ncommand = "cat"\n'
        "repeat_interval = 0\n",
        encoding="utf-8",
    )
    lag, stuck = load_rules(str(path))
    assert (lag.metric, lag.operator, lag.threshold, lag.for_s, lag.repeat_interval_s) == (
        "group_lag_records",
        ">",
        100,
        30.0,
        60.0,
    )
    assert lag.webhook == "http://127.0.0.1:1/hook" and lag.command is None
    assert lag.in_scope({"group": "orders-eu", "topic": "t"}) and not lag.in_scope({"group": "billing"})
    assert (stuck.operator, stuck.repeat_interval_s, stuck.command) == (">=", 0.0, "cat")
    assert stuck.holds("STOP") and stuck.holds("STALL") and not stuck.holds("WARN")


def test_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [{"name": "urp", "metric": "offline_partitions", "threshold": 0}]}))
    (urp,) = load_rules(str(path))
    assert urp.holds(1) and not urp.holds(0)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"rules": [{"name": "x", "metric": "lag", "threshold": 1}]}, "f: rule 'x': unknown metric 'lag' (expected"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": "2s"}]}, "threshold must be a number"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": True}]}, "threshold must be a number"),
        ({"rules": [{"name": "x", "metric": "group_status", "threshold": "BAD"}]}, "threshold must be a status"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": 1, "operator": "=>"}]}, "operator"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": 1, "group": "("}]}, "regular exp"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": 1, "for": -1}]}, "'for' must be"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": 1, "treshold": 1}]}, "unknown key"),
        ({"rules": [{"name": "x", "metric": "group_lag_seconds", "threshold": 1, "webhook": "ftp://h"}]}, "http"),
        ({"rules": [{"metric": "group_lag_seconds", "threshold": 1}]}, "f: rule 1: 'name' must be"),
        ({"rules": []}, "no rules"),
        ({"rule": []}, "unknown key 'rule'"),
        (
            {"rules": [{"name": "x", "metric": "offline_partitions", "threshold": 0}] * 2},
            "two rules are named 'x'",
        ),
    ],
)
def test_bad_rules_are_one_clear_message(document: object, message: str) -> None:
    with pytest.raises(RulesError, match=None) as caught:
        parse_rules(document, "f")
    assert message in str(caught.value)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="cannot read"):
        load_rules(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rules]\n", encoding="utf-8")
    with pytest.raises(RulesError, match="is not valid TOML"):
        load_rules(str(bad))


AT = labels(group="g", topic="t")


def test_fires_after_for_and_resolves_once() -> None:
    r, alarms = rule(**{"for": 10}), Alarms()
    assert alarms.evaluate(r, {AT: 5.0}, now=100) == []  # pending
    assert alarms.evaluate(r, {AT: 5.0}, now=105) == []
    (fired,) = alarms.evaluate(r, {AT: 6.0}, now=110)
    assert (fired.state, fired.value, fired.labels) == ("firing", 6.0, {"group": "g", "topic": "t"})
    assert fired.document()["time"] == "1970-01-01T00:01:50Z"
    assert alarms.firing() == [("r", {"group": "g", "topic": "t"})]
    assert alarms.evaluate(r, {AT: 7.0}, now=200) == []  # no repeat_interval: notified once
    (resolved,) = alarms.evaluate(r, {AT: 0.0}, now=210)
    assert (resolved.state, resolved.value) == ("resolved", 0.0)
    assert alarms.evaluate(r, {AT: 0.0}, now=220) == [] and alarms.firing() == []


def test_a_condition_that_breaks_before_for_never_fires() -> None:
    r, alarms = rule(**{"for": 10}), Alarms()
    alarms.evaluate(r, {AT: 5.0}, now=100)
    assert alarms.evaluate(r, {AT: 1.0}, now=105) == []  # pending dropped, nothing to resolve
    assert alarms.evaluate(r, {AT: 5.0}, now=111) == []  # pending again from 111
    assert [n.state for n in alarms.evaluate(r, {AT: 5.0}, now=121)] == ["firing"]


def test_repeat_interval_suppresses_until_it_passed() -> None:
    r, alarms = rule(repeat_interval=60), Alarms()
    assert [n.state for n in alarms.evaluate(r, {AT: 5.0}, now=0)] == ["firing"]
    assert alarms.evaluate(r, {AT: 5.0}, now=30) == []
    assert alarms.evaluate(r, {AT: 5.0}, now=59) == []
    assert [n.state for n in alarms.evaluate(r, {AT: 5.0}, now=60)] == ["firing"]
    assert alarms.evaluate(r, {AT: 5.0}, now=100) == []
    assert [n.state for n in alarms.evaluate(r, {AT: 5.0}, now=120)] == ["firing"]


def test_labels_that_vanish_resolve_and_scope_filters() -> None:
    r, alarms = rule(group="orders"), Alarms()
    other = labels(group="billing", topic="t")
    (fired,) = alarms.evaluate(r, {labels(group="orders", topic="t"): 9.0, other: 9.0}, now=0)
    assert fired.labels["group"] == "orders"
    (resolved,) = alarms.evaluate(r, {}, now=1)
    assert (resolved.state, resolved.value) == ("resolved", None)


def test_once_ignores_for() -> None:
    r, alarms = rule(**{"for": 600}), Alarms()
    assert [n.state for n in alarms.evaluate(r, {AT: 5.0}, now=0, ignore_for=True)] == ["firing"]


def test_group_sampler_reuses_lag_and_status_over_a_window() -> None:
    tp0, tp1 = TP("t", 0), TP("t", 1)
    admin = FakeGroupAdmin(
        groups={"g": group("g", "Empty")},
        committed={"g": {tp0: 5, tp1: 10}},
        ends={tp0: 8, tp1: 10},
        timestamps={(tp0, 5): 1_000},
    )
    sampler = GroupSampler(admin, window=2)
    first = sampler.sample(lambda g: True)
    assert first["group_lag_records"][AT] == 3.0
    assert first["group_lag_seconds"][AT] > 0  # now minus the record at offset 5
    assert first["group_status"][AT] == "STOP"  # lag, no member owns it, no commit moved
    admin.groups["g"] = group("g", "Stable", member("c-1", tp0, tp1))
    admin.committed["g"][tp0] = 8
    second = sampler.sample(lambda g: True)
    assert (second["group_lag_records"][AT], second["group_lag_seconds"][AT], second["group_status"][AT]) == (
        0.0,
        0.0,
        "OK",
    )
    admin.ends[tp0] = 20
    admin.timestamps[(tp0, 8)] = 2_000
    assert sampler.sample(lambda g: True)["group_status"][AT] == "STALL"  # owned, lag, no progress over 2 samples
    assert sampler.sample(lambda g: g != "g") == {"group_lag_seconds": {}, "group_lag_records": {}, "group_status": {}}
    assert sampler.history == {}


def test_a_command_gets_the_document_and_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = rule(command=f'cat > {out}; echo "$MQ_ALARM_RULE $MQ_ALARM_STATE $MQ_ALARM_VALUE $MQ_ALARM_LABELS" >> {out}')
    (fired,) = Alarms().evaluate(r, {AT: 5.0}, now=0)
    problems: list[str] = []
    deliver(fired, problems.append)
    document, environment = out.read_text().splitlines()
    assert json.loads(document) == fired.document()
    assert environment == 'r firing 5.0 {"group": "g", "topic": "t"}' and problems == []
    deliver(Notification(rule(command="exit 3"), "resolved", None, {}, 0), problems.append)
    deliver(Notification(rule(webhook="http://127.0.0.1:1/x"), "resolved", None, {}, 0), problems.append)
    assert problems[0] == "alarm r command exited with 3"
    assert problems[1].startswith("cannot post alarm r to http://127.0.0.1:1/x: ")
