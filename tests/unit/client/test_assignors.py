"""Range and round-robin assignors against hand-computed assignments (Kafka's documented examples and more)."""

from __future__ import annotations

import pytest

from mq.client.assignors import GroupMember, RangeAssignor, RoundRobinAssignor, assignor_named
from mq.topic_partition import TopicPartition as TP


def member(member_id: str, *topics: str, instance: str | None = None) -> GroupMember:
    return GroupMember(member_id, frozenset(topics), instance)


def names(assignment: dict[str, list[TP]]) -> dict[str, list[str]]:
    return {m: [f"{tp.topic}{tp.partition}" for tp in tps] for m, tps in assignment.items()}


def test_range_gives_the_first_members_of_each_topic_one_extra() -> None:
    members = [member("c1", "t0", "t1"), member("c0", "t0", "t1")]
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, members)
    assert names(result) == {"c0": ["t00", "t01", "t10", "t11"], "c1": ["t02", "t12"]}


def test_range_seven_partitions_over_three_members() -> None:
    members = [member(m, "t") for m in ("b", "c", "a")]
    result = RangeAssignor().assign({"t": 7}, members)
    assert names(result) == {"a": ["t0", "t1", "t2"], "b": ["t3", "t4"], "c": ["t5", "t6"]}


def test_range_with_unequal_subscriptions_splits_each_topic_among_its_own_subscribers() -> None:
    members = [member("m1", "x"), member("m2", "x", "y"), member("m3", "y")]
    result = RangeAssignor().assign({"x": 3, "y": 4}, members)
    assert names(result) == {"m1": ["x0", "x1"], "m2": ["x2", "y0", "y1"], "m3": ["y2", "y3"]}


def test_range_more_members_than_partitions_and_unknown_topics() -> None:
    members = [member(m, "t", "missing") for m in ("a", "b", "c")]
    result = RangeAssignor().assign({"t": 2}, members)
    assert names(result) == {"a": ["t0"], "b": ["t1"], "c": []}


def test_static_members_come_first_ordered_by_instance_id() -> None:
    members = [member("a-dyn", "t"), member("z-1", "t", instance="i2"), member("y-2", "t", instance="i1")]
    assert names(RangeAssignor().assign({"t": 4}, members)) == {"y-2": ["t0", "t1"], "z-1": ["t2"], "a-dyn": ["t3"]}
    assert names(RoundRobinAssignor().assign({"t": 4}, members)) == {
        "y-2": ["t0", "t3"],
        "z-1": ["t1"],
        "a-dyn": ["t2"],
    }


def test_roundrobin_deals_sorted_partitions_to_sorted_members() -> None:
    members = [member("c1", "t0", "t1"), member("c0", "t0", "t1")]
    result = RoundRobinAssignor().assign({"t1": 3, "t0": 3}, members)
    assert names(result) == {"c0": ["t00", "t02", "t11"], "c1": ["t01", "t10", "t12"]}


def test_roundrobin_skips_members_not_subscribed() -> None:
    # Kafka's documented example: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2.
    members = [member("C0", "t0"), member("C1", "t0", "t1"), member("C2", "t0", "t1", "t2")]
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, members)
    assert names(result) == {"C0": ["t00"], "C1": ["t10"], "C2": ["t11", "t20", "t21", "t22"]}


def test_roundrobin_unequal_subscriptions_keep_the_cycle_position() -> None:
    members = [member("a", "x", "y"), member("b", "y"), member("c", "x", "y")]
    result = RoundRobinAssignor().assign({"x": 3, "y": 3}, members)
    # x0->a, x1->c (b skipped), x2->a, then y0->b, y1->c, y2->a
    assert names(result) == {"a": ["x0", "x2", "y2"], "b": ["y0"], "c": ["x1", "y1"]}


@pytest.mark.parametrize("name", ["range", "roundrobin"])
def test_every_subscribed_partition_is_assigned_exactly_once(name: str) -> None:
    members = [member(f"m{i}", "a", "b") for i in range(4)] + [member("solo", "c")]
    result = assignor_named(name).assign({"a": 6, "b": 5, "c": 2, "unsubscribed": 3}, members)
    assigned = [tp for tps in result.values() for tp in tps]
    expected = [TP(t, p) for t, n in (("a", 6), ("b", 5), ("c", 2)) for p in range(n)]
    assert sorted(assigned) == expected
    assert sorted(result["solo"]) == [TP("c", 0), TP("c", 1)]


def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ValueError, match="sticky"):
        assignor_named("sticky")
