"""The KIP-848 consumer group logic: joining, revoking before reassigning, leaving, fencing, expiry and the assignors."""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.consumer_offsets import (
    ConsumerGroupEpochValue,
    ConsumerGroupKey,
    OffsetCommitValue,
    decode_consumer_group_value,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from mq.security.acl import AclOperation, ResourceType
from mq.server.api_dispatch import ApiDispatcher
from mq.server.consumer_groups import SESSION_TIMEOUT_MS, ConsumerGroups, range_assignor, uniform
from mq.server.group_coordinator import JoinRequest
from mq.server.group_metadata import GroupMetadata, MemberMetadata
from mq.server.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, LoadedPartition, apply_record
from mq.server.handlers.consumer_group_protocol import consumer_group_protocol_apis
from mq.server.handlers.group_offsets import group_offset_apis
from mq.server.handlers.groups import group_apis
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.local_store import LocalStore
from tests.unit.server.group_fakes import committed, make
from tests.unit.server.test_authorization_checks import acl_cache, decoded, general, request_frame

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


def test_a_member_that_never_releases_is_removed_after_its_rebalance_timeout() -> None:
    g = groups(2)
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0, rebalance_timeout_ms=1000)
    g.heartbeat("g", "b", 0, ["t"], None, frozenset(), 0)
    asked = g.heartbeat("g", "a", 1, None, None, None, 10)
    assert asked.assignment is not None and len(asked.assignment) == 1  # asked to release one
    g.heartbeat("g", "a", 1, None, None, tps(0, 1), 500)  # still holds both
    assert g.heartbeat("g", "b", 2, None, None, frozenset(), 900).assignment is None
    taken = g.heartbeat("g", "b", 2, None, None, frozenset(), 1010)
    assert set(g.groups["g"].members) == {"b"} and taken.assignment == tps(0, 1)


def test_a_static_member_that_leaves_keeps_its_partitions_for_its_replacement() -> None:
    g = groups()
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0, instance_id="i1")
    g.heartbeat("g", "b", 0, ["t"], None, frozenset(), 1)
    kept = g.heartbeat("g", "a", 1, None, None, None, 2).assignment
    assert kept is not None and len(kept) == 2
    g.heartbeat("g", "a", 1, None, None, kept, 3)
    b = g.heartbeat("g", "b", 2, None, None, frozenset(), 4)
    assert b.assignment == tps(0, 1, 2, 3) - kept
    epoch = g.groups["g"].epoch
    assert g.heartbeat("g", "a", -2, None, None, None, 5, instance_id="i1").member_epoch == -2
    assert g.heartbeat("g", "b", 2, None, None, None, 6).assignment is None  # a's partitions stay a's
    busy = g.heartbeat("g", "c", 0, ["t"], None, frozenset(), 7, instance_id="b-not")
    assert busy.error == ErrorCode.NONE  # another instance id is a new member
    g.heartbeat("g", "c", -1, None, None, None, 8)
    epoch = g.groups["g"].epoch
    again = g.heartbeat("g", "a2", 0, ["t"], None, frozenset(), 9, instance_id="i1")
    assert (again.error, again.member_id, again.member_epoch, again.assignment) == (ErrorCode.NONE, "a2", epoch, kept)
    assert g.groups["g"].epoch == epoch and set(g.groups["g"].members) == {"a2", "b"}  # no rebalance
    assert g.heartbeat("g", "a", 1, None, None, None, 10, instance_id="i1").error == ErrorCode.FENCED_INSTANCE_ID
    taken = g.heartbeat("g", "a3", 0, ["t"], None, frozenset(), 11, instance_id="i1")
    assert taken.error == ErrorCode.UNRELEASED_INSTANCE_ID  # a2 is active


def test_a_static_member_that_does_not_come_back_is_removed_after_its_session() -> None:
    g = groups(2)
    g.heartbeat("g", "a", 0, ["t"], None, frozenset(), 0, instance_id="i1")
    g.heartbeat("g", "a", -2, None, None, None, 10, instance_id="i1")
    b = g.heartbeat("g", "b", 0, ["t"], None, frozenset(), 20)
    assert b.assignment == frozenset()
    b = g.heartbeat("g", "b", b.member_epoch, None, None, frozenset(), 10 + SESSION_TIMEOUT_MS)
    assert set(g.groups["g"].members) == {"b"} and b.assignment == tps(0, 1)


# --- records in __consumer_offsets ----------------------------------------------------------------------------------


def test_records_have_kafkas_layout_and_skip_unknown_tagged_fields() -> None:
    assert encode_consumer_group_key(ConsumerGroupKey(3, "g")) == b"\x00\x03\x00\x01g"
    assert encode_consumer_group_key(ConsumerGroupKey(8, "g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"
    assert encode_consumer_group_value(ConsumerGroupEpochValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"
    tagged = b"\x00\x00\x00\x00\x00\x05\x01\x00\x08" + bytes(8)  # tag 0 (Kafka 4.1's metadata hash), 8 bytes
    assert decode_consumer_group_value(3, tagged) == ConsumerGroupEpochValue(5)


def replayed(records: list[tuple[bytes, bytes | None]], loaded: LoadedPartition | None = None) -> LoadedPartition:
    loaded = loaded or LoadedPartition()
    for key, value in records:
        apply_record(loaded, key, value)
    return loaded


def test_a_group_is_rebuilt_from_its_records_and_only_changes_are_written() -> None:
    g = groups()
    g.heartbeat("g", "a", 0, ["t"], "range", frozenset(), 0, rebalance_timeout_ms=1000)
    g.heartbeat("g", "b", 0, ["t"], None, frozenset(), 1, instance_id="i1")
    g.heartbeat("g", "a", 1, None, None, None, 2)  # a is asked to release two partitions
    written = g.unwritten("g")
    assert g.unwritten("g") == []  # nothing changed since
    loaded = replayed(written)
    rebuilt = groups()
    rebuilt.install("g", loaded.consumer_groups["g"], 100)
    old, new = g.groups["g"], rebuilt.groups["g"]
    assert (new.epoch, new.assignment_epoch, new.target, new.assignor) == (
        old.epoch,
        old.assignment_epoch,
        old.target,
        "range",
    )
    for member_id, member in old.members.items():
        again = new.members[member_id]
        assert (
            again.epoch,
            again.assigned,
            again.revoking,
            again.subscribed,
            again.rebalance_timeout_ms,
            again.instance_id,
        ) == (
            member.epoch,
            member.assigned,
            member.revoking,
            member.subscribed,
            member.rebalance_timeout_ms,
            member.instance_id,
        )
    assert new.members["b"].instance_id == "i1"
    assert rebuilt.unwritten("g") == []
    left = rebuilt.heartbeat("g", "b", -1, None, None, None, 200)
    assert left.error == ErrorCode.NONE
    changes = rebuilt.unwritten("g")
    gone = {k for k, v in changes if v is None}
    assert gone == {encode_consumer_group_key(ConsumerGroupKey(r, "g", "b")) for r in (5, 7, 8)}
    after = replayed(changes, loaded).consumer_groups["g"]
    assert {k.member_id for k in after if k.member_id} == {"a"}
    assert after[ConsumerGroupKey(3, "g")] == ConsumerGroupEpochValue(rebuilt.groups["g"].epoch)


def test_a_coordinator_loads_consumer_groups_and_expires_a_silent_member_on_its_timer() -> None:
    coordinator, manager, clock = make()
    coordinator.consumer_groups = groups()
    coordinator.consumer_groups.heartbeat("g", "a", 0, ["t"], None, frozenset(), clock.now)
    coordinator.consumer_groups.heartbeat("g", "b", 0, ["t"], None, frozenset(), clock.now)
    assert asyncio.run(coordinator.store_consumer_group("g")) == ErrorCode.NONE
    epoch = coordinator.consumer_groups.groups["g"].epoch

    async def reload_and_expire() -> tuple[set[str], int, set[str], list[bytes]]:
        restarted, fresh, _ = make()
        restarted.clock = clock
        restarted.time_ms = clock.time_ms
        restarted.owned_partitions.clear()
        restarted.consumer_groups = groups()
        fresh.loaded = replayed(manager.records)
        restarted.on_leadership_change(TopicPartition(GROUP_METADATA_TOPIC_NAME, 0), True)
        await restarted._loads[0]
        loaded = restarted.consumer_groups.groups["g"]
        members, loaded_epoch = set(loaded.members), loaded.epoch
        clock.now += SESSION_TIMEOUT_MS - 1
        restarted.consumer_groups.heartbeat("g", "b", loaded.members["b"].epoch, None, None, None, clock.now)
        restarted.watch_consumer_member("g", "b")
        clock.now += 1
        restarted.watch_consumer_member("g", "a")  # a's deadline has passed: its timer fires at once
        await asyncio.sleep(0.05)
        tombstones = [k for k, v in fresh.records if v is None]
        restarted.on_leadership_change(TopicPartition(GROUP_METADATA_TOPIC_NAME, 0), False)
        assert "g" not in restarted.consumer_groups.groups and not restarted._consumer_sessions  # unloaded
        return members, loaded_epoch, set(loaded.members), tombstones

    members, loaded_epoch, left, tombstones = asyncio.run(reload_and_expire())
    assert (members, loaded_epoch) == ({"a", "b"}, epoch)
    assert left == {"b"}  # a was silent for its session timeout; nobody else heartbeat after it expired
    assert encode_consumer_group_key(ConsumerGroupKey(5, "g", "a")) in tombstones


def test_a_heartbeat_moves_a_consumer_members_deadline_without_a_new_timer_and_a_passed_deadline_fires_at_once() -> (
    None
):
    async def scenario() -> None:
        coordinator, _, clock = make()
        coordinator.consumer_groups = groups()
        coordinator.consumer_groups.heartbeat("g", "a", 0, ["t"], None, frozenset(), clock.now)
        coordinator.watch_consumer_members("g")
        due, timer = coordinator._consumer_sessions["g"]["a"]
        assert due == clock.now + SESSION_TIMEOUT_MS
        clock.now += 1_000
        epoch = coordinator.consumer_groups.groups["g"].members["a"].epoch
        coordinator.consumer_groups.heartbeat("g", "a", epoch, None, None, None, clock.now)
        coordinator.watch_consumer_members("g")
        assert coordinator._consumer_sessions["g"]["a"] == (due, timer)  # a later deadline keeps the timer
        coordinator.consumer_groups.groups["g"].members["a"].last_seen_ms = clock.now - SESSION_TIMEOUT_MS - 1
        coordinator.watch_consumer_member("g", "a")  # past its deadline: a new timer, due at once
        assert coordinator._consumer_sessions["g"]["a"][1] is not timer
        await asyncio.sleep(0.05)
        assert "a" not in coordinator.consumer_groups.groups["g"].members and not coordinator._consumer_sessions

    asyncio.run(scenario())


# --- through the handlers and the coordinator ------------------------------------------------------------------------


def topic_cache() -> MetadataCache:
    metadata = MetadataCache(1, "cluster")
    metadata.update_brokers([BrokerEndpoint(1, "h", 9092)], 1)
    for p in range(2):
        metadata.update_partition(
            "t", base64.urlsafe_b64encode(T.bytes).decode().rstrip("="), p, PartitionInfo(1, 0, (1,), (1,))
        )
    return metadata


def heartbeat_values(member_epoch: int, names: list[str] | None) -> dict[str, Any]:
    return {
        "group_id": "g",
        "member_id": "m1",
        "member_epoch": member_epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": names,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None if names is None else [],
    }


def test_the_handlers_answer_by_topic_id_check_topics_and_let_members_commit_at_their_epoch() -> None:
    coordinator, _, _ = make()
    heartbeat_key, describe_key = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE
    refused = ApiDispatcher(
        consumer_group_protocol_apis(
            coordinator, topic_cache(), acl_cache((ResourceType.GROUP, "g", AclOperation.READ))
        ),
    )
    answer = decoded(heartbeat_key, 1, general(refused, request_frame(heartbeat_key, 1, heartbeat_values(0, ["t"]))))
    assert answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    dispatcher = ApiDispatcher(consumer_group_protocol_apis(coordinator, topic_cache()))
    answer = decoded(heartbeat_key, 1, general(dispatcher, request_frame(heartbeat_key, 1, heartbeat_values(0, ["t"]))))
    assert (answer.error_code, answer.member_id, answer.member_epoch) == (ErrorCode.NONE, "m1", 1)
    assert [(tp.topic_id, tp.partitions) for tp in answer.assignment.topic_partitions] == [(T, (0, 1))]
    described = decoded(
        describe_key,
        0,
        general(
            dispatcher,
            request_frame(describe_key, 0, {"group_ids": ["g", "other"], "include_authorized_operations": False}),
        ),
    )
    assert [(d.group_id, d.error_code, d.group_state) for d in described.groups] == [
        ("g", ErrorCode.NONE, "Stable"),
        ("other", ErrorCode.GROUP_ID_NOT_FOUND, ""),
    ]
    offsets = {TopicPartition("t", 0): OffsetCommitValue(5, "", 0)}
    assert asyncio.run(committed(coordinator, "g", "m1", None, 1, offsets)) == ErrorCode.NONE
    assert asyncio.run(committed(coordinator, "g", "m1", None, 0, offsets)) == ErrorCode.STALE_MEMBER_EPOCH
    assert asyncio.run(committed(coordinator, "g", "m2", None, 1, offsets)) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.fetch_offsets("g", [TopicPartition("t", 0)])[1][TopicPartition("t", 0)] is not None


def test_list_groups_shows_consumer_protocol_groups_once_with_their_type() -> None:
    coordinator, _, _ = make()
    metadata = topic_cache()
    dispatcher = ApiDispatcher(
        [*consumer_group_protocol_apis(coordinator, metadata), *group_apis(coordinator, metadata, lambda: True)]
    )
    heartbeat_key, list_key = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.LIST_GROUPS
    general(dispatcher, request_frame(heartbeat_key, 1, heartbeat_values(0, ["t"])))
    offsets = {TopicPartition("t", 0): OffsetCommitValue(5, "", 0)}
    assert asyncio.run(committed(coordinator, "g", "m1", None, 1, offsets)) == ErrorCode.NONE  # keeps a classic entry

    def listed(types: list[str], states: list[str]) -> list[tuple[str, str, str, str]]:
        frame = request_frame(list_key, 5, {"states_filter": states, "types_filter": types})
        answer = decoded(list_key, 5, general(dispatcher, frame))
        return [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in answer.groups]

    assert listed([], []) == [("g", "consumer", "Stable", "consumer")]
    assert listed(["consumer"], ["stable"]) == [("g", "consumer", "Stable", "consumer")]
    assert listed(["classic"], []) == [] and listed([], ["Empty"]) == []


def test_describe_groups_does_not_describe_a_consumer_protocol_group_as_classic() -> None:
    coordinator, _, _ = make()
    metadata = topic_cache()
    dispatcher = ApiDispatcher(
        [*consumer_group_protocol_apis(coordinator, metadata), *group_apis(coordinator, metadata, lambda: True)]
    )
    general(dispatcher, request_frame(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_values(0, ["t"])))
    offsets = {TopicPartition("t", 0): OffsetCommitValue(5, "", 0)}
    assert asyncio.run(committed(coordinator, "g", "m1", None, 1, offsets)) == ErrorCode.NONE
    key = ApiKey.DESCRIBE_GROUPS
    for version, code, state in ((6, ErrorCode.GROUP_ID_NOT_FOUND, "Dead"), (5, ErrorCode.NONE, "Dead")):
        frame = request_frame(key, version, {"groups": ["g"], "include_authorized_operations": False})
        [group] = decoded(key, version, general(dispatcher, frame)).groups
        assert (group.error_code, group.group_state, group.members) == (code, state, ())
    assert group.group_id == "g"


def test_the_classic_group_apis_know_consumer_protocol_groups() -> None:
    coordinator, manager, clock = make()
    coordinator.consumer_groups = groups()
    t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)

    async def scenario() -> None:
        assert coordinator.consumer_groups is not None
        coordinator.consumer_groups.heartbeat("g", "a", 0, ["t"], None, frozenset(), clock.now)
        offsets = {t0: OffsetCommitValue(5, "", 0), u0: OffsetCommitValue(7, "", 0)}
        assert await committed(coordinator, "g", "a", None, 1, offsets) == ErrorCode.NONE
        assert coordinator.fetch_offsets("g", [t0], "a", 0)[0] == ErrorCode.STALE_MEMBER_EPOCH
        assert coordinator.fetch_offsets("g", [t0], "b", 1)[0] == ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.fetch_offsets("g", [t0], "a", 1)[1][t0] == OffsetCommitValue(5, "", 0)
        assert coordinator.fetch_offsets("g", [t0])[1][t0] is not None  # an admin's fetch names no member
        join = JoinRequest("g", "", None, True, "c", "/h", 5000, 5000, "consumer", [("range", b"")])
        assert (await coordinator.join_group(join)).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert await coordinator.delete_groups(["g"]) == {"g": ErrorCode.NON_EMPTY_GROUP}
        code, results = await coordinator.delete_offsets("g", [t0, u0])
        assert (code, results) == (ErrorCode.NONE, {t0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, u0: ErrorCode.NONE})
        coordinator.consumer_groups.heartbeat("g", "a", -1, None, None, None, clock.now)
        assert await coordinator.store_consumer_group("g") == ErrorCode.NONE
        assert await coordinator.delete_groups(["g"]) == {"g": ErrorCode.NONE}
        assert "g" not in coordinator.consumer_groups.groups and coordinator.fetch_offsets("g", None)[1] == {}
        assert (encode_consumer_group_key(ConsumerGroupKey(3, "g")), None) in manager.records
        assert await coordinator.delete_groups(["g"]) == {"g": ErrorCode.GROUP_ID_NOT_FOUND}

    asyncio.run(scenario())


def test_an_empty_consumer_protocol_group_becomes_a_classic_group_on_join() -> None:
    coordinator, manager, clock = make()
    coordinator.consumer_groups = groups()

    async def scenario() -> ErrorCode:
        assert coordinator.consumer_groups is not None
        coordinator.consumer_groups.heartbeat("g", "a", 0, ["t"], None, frozenset(), clock.now)
        coordinator.consumer_groups.heartbeat("g", "a", -1, None, None, None, clock.now)
        await coordinator.store_consumer_group("g")
        join = JoinRequest("g", "", None, True, "c", "/h", 5000, 5000, "consumer", [("range", b"")])
        return (await coordinator.join_group(join)).error

    assert asyncio.run(scenario()) == ErrorCode.MEMBER_ID_REQUIRED
    assert coordinator.consumer_groups is not None and "g" not in coordinator.consumer_groups.groups
    assert (encode_consumer_group_key(ConsumerGroupKey(3, "g")), None) in manager.records


def test_offset_fetch_v9_checks_the_member_and_a_heartbeat_for_a_busy_classic_group_is_refused() -> None:
    coordinator, _, _ = make()
    metadata = topic_cache()
    dispatcher = ApiDispatcher(
        [
            *consumer_group_protocol_apis(coordinator, metadata),
            *group_offset_apis(coordinator, metadata, coordinator.config, ZkConsumerGroups(LocalStore(None))),
        ]
    )
    heartbeat_key, fetch_key = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.OFFSET_FETCH
    general(dispatcher, request_frame(heartbeat_key, 1, heartbeat_values(0, ["t"])))

    def fetched(member_id: str | None, member_epoch: int) -> ErrorCode:
        group = {"group_id": "g", "member_id": member_id, "member_epoch": member_epoch, "topics": None}
        frame = request_frame(fetch_key, 9, {"groups": [group], "require_stable": False})
        return ErrorCode(decoded(fetch_key, 9, general(dispatcher, frame)).groups[0].error_code)

    assert [fetched("m1", 1), fetched("m1", 0), fetched("m2", 1), fetched(None, -1)] == [
        ErrorCode.NONE,
        ErrorCode.STALE_MEMBER_EPOCH,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.NONE,
    ]
    classic = GroupMetadata("busy", 0)
    classic.add(MemberMetadata("x", None, "c", "h", 5000, 5000, "consumer", [("range", b"")]), None)
    coordinator.groups["busy"] = classic
    values = {**heartbeat_values(0, ["t"]), "group_id": "busy"}
    answer = decoded(heartbeat_key, 1, general(dispatcher, request_frame(heartbeat_key, 1, values)))
    assert answer.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_offsets_of_topics_a_consumer_protocol_group_subscribes_to_do_not_expire() -> None:
    coordinator, _, clock = make()
    coordinator.consumer_groups = groups()
    t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)

    async def scenario() -> int:
        assert coordinator.consumer_groups is not None
        coordinator.consumer_groups.heartbeat("g", "a", 0, ["t"], None, frozenset(), clock.now)
        offsets = {t0: OffsetCommitValue(5, "", clock.now), u0: OffsetCommitValue(7, "", clock.now)}
        assert await committed(coordinator, "g", "a", None, 1, offsets) == ErrorCode.NONE
        clock.now += coordinator.config.offsets_retention_minutes * 60000
        return await coordinator.expire_offsets()

    assert asyncio.run(scenario()) == 1
    assert set(coordinator.groups["g"].offsets) == {t0}


def test_a_regex_subscription_follows_the_matching_topics() -> None:
    topics = {"rx-a": (uuid.UUID(int=1), 2), "other": (uuid.UUID(int=2), 1), "__consumer_offsets": (None, 50)}
    g = ConsumerGroups(lambda: dict(topics))
    assert (
        g.heartbeat("g", "a", 0, None, None, frozenset(), 0, regex="rx-(").error == ErrorCode.INVALID_REGULAR_EXPRESSION
    )
    joined = g.heartbeat("g", "a", 0, None, None, frozenset(), 0, regex="rx-.*|__.*")  # internal topics never match
    assert joined.error == ErrorCode.NONE and joined.assignment == frozenset({("rx-a", 0), ("rx-a", 1)})
    topics["rx-b"] = (uuid.UUID(int=3), 1)  # a matching topic created: taken up at the next heartbeat
    later = g.heartbeat("g", "a", joined.member_epoch, None, None, None, 10)
    assert later.member_epoch == joined.member_epoch + 1
    assert later.assignment == frozenset({("rx-a", 0), ("rx-a", 1), ("rx-b", 0)})
    assert g.subscribed_topics("g") == {"rx-a", "rx-b"}
    hidden = g.heartbeat("g", "b", 0, ["other"], None, frozenset(), 20, regex="rx-b", visible=lambda t: t != "rx-b")
    assert g.groups["g"].members["b"].subscribed == {"other"}  # a regex matches only the topics the member may see
    assert hidden.error == ErrorCode.NONE

    loaded = LoadedPartition()
    for key, value in g.unwritten("g"):
        apply_record(loaded, key, value)
    rebuilt = ConsumerGroups(lambda: dict(topics))
    rebuilt.install("g", loaded.consumer_groups["g"], 100)
    member = rebuilt.groups["g"].members["a"]
    assert (member.regex, member.names, member.subscribed) == ("rx-.*|__.*", frozenset(), {"rx-a", "rx-b"})
