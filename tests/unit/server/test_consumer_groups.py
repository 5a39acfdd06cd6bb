"""The KIP-848 consumer group logic: joining, revoking before reassigning, leaving, fencing, expiry and the assignors."""

from __future__ import annotations

import uuid

from mq.errors import ErrorCode
from mq.server.consumer_groups import SESSION_TIMEOUT_MS, ConsumerGroups, range_assignor, uniform

T = uuid.UUID(int=7)


def groups(partitions: int = 4) -> ConsumerGroups:
    return ConsumerGroups(lambda: {"t": (T, partitions)})


def tps(*partitions: int) -> frozenset[tuple[str, int]]:
    return frozenset(("t", p) for p in partitions)


def test_a_lone_member_gets_every_partition_at_the_first_group_epoch() -> None:
    g = groups()
    joined = g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0)
    assert (joined.error, joined.member_id, joined.member_epoch, joined.assignment) == (
        ErrorCode.NONE,
        "a",
        1,
        tps(0, 1, 2, 3),
    )
    again = g.heartbeat("g", "a", 1, None, None, None, 10)
    assert (again.member_epoch, again.assignment) == (1, None)  # unchanged: no assignment in the answer
    assert g.groups["g"].state() == "Stable"


def test_partitions_move_only_once_their_holder_released_them() -> None:
    g = groups()
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0)
    b = g.heartbeat("g", "b", 0, ["t"], None, frozenset(), 1)
    assert (b.member_epoch, b.assignment) == (2, frozenset())  # a still holds everything
    a = g.heartbeat("g", "a", 1, None, None, None, 2)
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment) == 2  # asked to revoke two
    kept = a.assignment
    assert g.heartbeat("g", "b", 2, None, None, frozenset(), 3).assignment is None  # not released yet
    released = g.heartbeat("g", "a", 1, None, None, kept, 4)
    assert released.member_epoch == 2 and released.assignment is None
    b = g.heartbeat("g", "b", 2, None, None, frozenset(), 5)
    assert b.assignment == tps(0, 1, 2, 3) - kept
    assert g.groups["g"].state() == "Stable"


def test_a_member_that_leaves_hands_its_partitions_to_the_others() -> None:
    g = groups(2)
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0)
    g.heartbeat("g", "b", 0, ["t"], None, frozenset(), 0)
    a = g.heartbeat("g", "a", 1, None, None, None, 1)
    g.heartbeat("g", "a", 1, None, None, a.assignment, 2)
    assert g.heartbeat("g", "b", 2, None, None, frozenset(), 3).assignment is not None
    left = g.heartbeat("g", "b", -1, None, None, None, 4)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    a = g.heartbeat("g", "a", 2, None, None, None, 5)
    assert (a.member_epoch, a.assignment) == (3, tps(0, 1))


def test_unknown_members_and_wrong_epochs_are_refused() -> None:
    g = groups()
    assert g.heartbeat("g", "x", 3, None, None, None, 0).error == ErrorCode.UNKNOWN_MEMBER_ID
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0)
    assert g.heartbeat("g", "x", 1, None, None, None, 0).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.heartbeat("g", "a", 5, None, None, None, 0).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert g.heartbeat("g", "a", 1, None, "sticky", None, 0).error == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert g.member_epoch_error("g", "a", 1) == ErrorCode.NONE
    assert g.member_epoch_error("g", "a", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert g.member_epoch_error("g", "x", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.member_epoch_error("classic", "a", 1) is None


def test_a_silent_member_is_removed_when_another_heartbeats() -> None:
    g = groups(2)
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0)
    joined = g.heartbeat("g", "b", 0, ["t"], None, frozenset(), SESSION_TIMEOUT_MS)
    assert set(g.groups["g"].members) == {"b"}
    assert joined.assignment == tps(0, 1)  # a's partitions, at once: a is gone


def test_the_assignors() -> None:
    members = {"a": frozenset({"t", "u"}), "b": frozenset({"t"})}
    assert range_assignor(members, {"t": 5, "u": 2}, {}) == {
        "a": frozenset({("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)}),
        "b": frozenset({("t", 3), ("t", 4)}),
    }
    balanced = uniform(members, {"t": 5, "u": 2}, {})
    assert sorted(len(p) for p in balanced.values()) == [3, 4] and {("u", 0), ("u", 1)} <= balanced["a"]
    sticky = uniform({"a": frozenset({"t"}), "b": frozenset({"t"}), "c": frozenset({"t"})}, {"t": 6}, balanced)
    assert all(len(p) == 2 for p in sticky.values())
    assert len(sticky["a"] & balanced["a"]) == 2 and len(sticky["b"] & balanced["b"]) == 2  # each kept two
