from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mq.client.admin import MemberDescription
from mq.errors import ErrorCode
from mq.tools import consumer_groups as tool
from mq.tools.consumer_groups import GroupCommandError, ResetSpec
from mq.tools.lag_status import Status
from mq.topic_partition import TopicPartition as TP
from tests.unit.tools.group_fakes import FakeGroupAdmin, group, member

CONSUMER = "consumer-my-group-1-0b1c2d3e-aaaa-bbbb-cccc-123456789abc"
T0, T1, T2 = TP("my-topic", 0), TP("my-topic", 1), TP("my-topic", 2)


def admin_with_group(state: str = "Stable") -> FakeGroupAdmin:
    members = (member(CONSUMER, T0, client_id="consumer-my-group-1"),) if state == "Stable" else ()
    return FakeGroupAdmin(
        groups={"my-group": group("my-group", state, *members)},
        committed={"my-group": {T0: 120, T1: 70}},
        ends={T0: 150, T1: 80, T2: 5},
    )


# --- describe --------------------------------------------------------------------------------------------------------


def test_describe_lines_match_kafka() -> None:
    admin = admin_with_group()
    report = tool.collect_offsets(admin, admin.groups["my-group"])
    assert tool.offsets_lines(report) == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        "CONSUMER-ID                                              HOST            CLIENT-ID",
        "my-group        my-topic        0          120             150             30              "
        "consumer-my-group-1-0b1c2d3e-aaaa-bbbb-cccc-123456789abc /10.0.0.5       consumer-my-group-1",
        "my-group        my-topic        1          70              80              10              "
        "-                                                        -               -",
    ]


def test_describe_orders_members_by_assignment_size_then_partition() -> None:
    a, b = member("a-1", TP("x", 1)), member("b-1", TP("y", 2), TP("x", 0), TP("y", 0))
    admin = FakeGroupAdmin(
        groups={"g": group("g", "Stable", a, b, member("idle-1"))},
        committed={"g": {TP("z", 0): 3}},
        ends={TP("x", 0): 1, TP("x", 1): 1, TP("y", 0): 1, TP("y", 2): 1, TP("z", 0): 3},
    )
    rows = tool.collect_offsets(admin, admin.groups["g"]).rows
    assert [(r.topic, r.partition, r.consumer_id) for r in rows] == [
        ("x", 0, "b-1"),
        ("y", 0, "b-1"),
        ("y", 2, "b-1"),
        ("x", 1, "a-1"),
        ("z", 0, None),
    ]
    assert [r.current_offset for r in rows] == [None, None, None, None, 3]
    assert [r.lag for r in rows] == [None, None, None, None, 0]


def test_describe_lag_is_never_negative_and_counts_from_log_start() -> None:
    admin = FakeGroupAdmin(
        groups={"g": group("g", "Empty")},
        committed={"g": {TP("t", 0): 12, TP("t", 1): 2}},
        starts={TP("t", 1): 5},
        ends={TP("t", 0): 10, TP("t", 1): 9},
    )
    rows = tool.collect_offsets(admin, admin.groups["g"]).rows
    assert [(r.lag, r.log_start_offset) for r in rows] == [(0, 0), (4, 5)]


def test_describe_without_rows_prints_nothing() -> None:
    assert tool.offsets_lines(tool.GroupOffsets("g", "Empty", [])) == []


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("Dead", ("Consumer group 'g' does not exist.", True)),
        ("Empty", ("Consumer group 'g' has no active members.", False)),
        ("PreparingRebalance", ("Warning: Consumer group 'g' is rebalancing.", False)),
        ("CompletingRebalance", ("Warning: Consumer group 'g' is rebalancing.", False)),
        ("Stable", None),
    ],
)
def test_state_messages(state: str, expected: tuple[str, bool] | None) -> None:
    assert tool.state_message("g", state) == expected


def test_lag_seconds_from_first_unconsumed_record() -> None:
    admin = admin_with_group()
    admin.timestamps[(T0, 120)] = 1_000_000
    report = tool.with_lag_seconds(admin, tool.collect_offsets(admin, admin.groups["my-group"]), now_ms=1_012_500)
    assert [r.lag_seconds for r in report.rows] == [12.5, None]
    assert admin.timestamp_requests == [{T0: 120, T1: 70}]


def test_lag_seconds_zero_without_lag_and_position_clamped_to_log_start() -> None:
    admin = FakeGroupAdmin(
        groups={"g": group("g", "Empty")},
        committed={"g": {TP("t", 0): 10, TP("t", 1): 1}},
        starts={TP("t", 1): 4},
        ends={TP("t", 0): 10, TP("t", 1): 9},
        timestamps={(TP("t", 1), 4): 500},
    )
    report = tool.with_lag_seconds(admin, tool.collect_offsets(admin, admin.groups["g"]), now_ms=2500)
    assert [r.lag_seconds for r in report.rows] == [0.0, 2.0]
    assert admin.timestamp_requests == [{TP("t", 1): 4}]


def test_extra_columns_follow_client_id() -> None:
    admin = admin_with_group()
    admin.timestamps[(T0, 120)] = 0
    report = tool.with_lag_seconds(admin, tool.collect_offsets(admin, admin.groups["my-group"]), now_ms=1500)
    lines = tool.offsets_lines(report, extra=True)
    assert lines[1].endswith("CLIENT-ID           LAG-SECONDS")
    assert lines[2].endswith("consumer-my-group-1 1.500")
    assert lines[3].endswith("-                   -")


def test_sampled_status_per_partition() -> None:
    admin = admin_with_group()
    steps = iter([({T0: 120, T1: 70}, {T0: 150, T1: 80}), ({T0: 130, T1: 70}, {T0: 170, T1: 90})])
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        admin.committed["my-group"], admin.ends = next(steps)

    admin.committed["my-group"], admin.ends = next(steps)
    report = tool.sample_offsets(admin, "my-group", 2, 0.5, sleep=sleep)
    assert slept == [0.5]
    # T0: committing, lag 30 -> 40 (WARN); T1: unowned, frozen with lag (STOP)
    assert [(r.partition, r.status) for r in report.rows] == [(0, Status.WARN), (1, Status.STOP)]
    assert tool.offsets_lines(report, extra=True)[1].endswith("LAG-SECONDS     STATUS")


def test_members_lines_match_kafka() -> None:
    description = group(
        "my-group",
        "Stable",
        member("c1-aaaa", TP("b", 2), TP("a", 1), TP("a", 0), host="/127.0.0.1", client_id="c1"),
        member("c2-bbbb", host="/127.0.0.1", client_id="c2"),
    )
    report = tool.collect_members(description)
    assert tool.members_lines(report, verbose=False) == [
        "",
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ",
        "my-group        c1-aaaa         /127.0.0.1      c1              3               ",
        "my-group        c2-bbbb         /127.0.0.1      c2              0               ",
    ]
    assert tool.members_lines(report, verbose=True)[1:] == [
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ASSIGNMENT",
        "my-group        c1-aaaa         /127.0.0.1      c1              3               a(0,1), b(2)",
        "my-group        c2-bbbb         /127.0.0.1      c2              0               -",
    ]


def test_state_lines_match_kafka() -> None:
    state = tool.collect_state(group("my-group", "Stable", member("c-1", T0)))
    assert state.coordinator == "broker1:9092 (1)"
    assert tool.state_lines(state) == [
        "",
        "GROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS",
        "my-group                  broker1:9092 (1)          range                Stable          1",
    ]


def test_list_with_states() -> None:
    admin = FakeGroupAdmin(groups={"a": group("a", "Empty"), "long-group-name-x": group("long-group-name-x", "Stable")})
    assert tool.list_state_lines(admin.list_groups()) == [
        "GROUP             STATE",
        "a                 Empty",
        "long-group-name-x Stable",
    ]
    assert tool.parse_states("stable, EMPTY") == ["Stable", "Empty"]
    assert tool.parse_states("") == []
    with pytest.raises(GroupCommandError, match="Invalid state list 'bogus'"):
        tool.parse_states("bogus")


# --- reset -----------------------------------------------------------------------------------------------------------

PARTS = [T0, T1]
COMMITTED = {T0: 5}
STARTS = {T0: 2, T1: 3}
ENDS = {T0: 10, T1: 20}


@pytest.mark.parametrize(
    ("spec", "expected", "warnings"),
    [
        (ResetSpec("to_earliest"), {T0: 2, T1: 3}, []),
        (ResetSpec("to_latest"), {T0: 10, T1: 20}, []),
        (ResetSpec("to_current"), {T0: 5, T1: 20}, []),
        (
            ResetSpec("to_offset", 15),
            {T0: 10, T1: 15},
            ["New offset (15) is higher than latest offset for topic partition my-topic-0. Value will be set to 10"],
        ),
        (
            ResetSpec("to_offset", 1),
            {T0: 2, T1: 3},
            [
                "New offset (1) is lower than earliest offset for topic partition my-topic-0. Value will be set to 2",
                "New offset (1) is lower than earliest offset for topic partition my-topic-1. Value will be set to 3",
            ],
        ),
    ],
)
def test_plan_reset(spec: ResetSpec, expected: dict[TP, int], warnings: list[str]) -> None:
    assert tool.plan_reset(spec, PARTS, COMMITTED, STARTS, ENDS) == (expected, warnings)


def test_plan_shift_by_clamps_and_needs_a_committed_offset() -> None:
    assert tool.plan_reset(ResetSpec("shift_by", -2), [T0], COMMITTED, STARTS, ENDS) == ({T0: 3}, [])
    plan, warnings = tool.plan_reset(ResetSpec("shift_by", -4), [T0], COMMITTED, STARTS, ENDS)
    assert plan == {T0: 2} and len(warnings) == 1
    with pytest.raises(
        GroupCommandError, match="Cannot shift offset for partition my-topic-1 since there is no current committed"
    ):
        tool.plan_reset(ResetSpec("shift_by", 1), PARTS, COMMITTED, STARTS, ENDS)


def test_plan_by_time_falls_back_to_log_end() -> None:
    plan, warnings = tool.plan_reset(ResetSpec("to_datetime", 1000), PARTS, COMMITTED, STARTS, ENDS, {T0: 7, T1: -1})
    assert plan == {T0: 7, T1: 20}
    assert warnings == ["Warn: Partition 1 from topic my-topic is empty. Falling back to latest known offset."]


def test_plan_from_file_clamps() -> None:
    plan, warnings = tool.plan_reset(ResetSpec("from_file"), PARTS, {}, STARTS, ENDS, requested={T0: 4, T1: 99})
    assert plan == {T0: 4, T1: 20} and len(warnings) == 1


def test_reset_dry_run_changes_nothing_and_execute_commits() -> None:
    admin = admin_with_group("Empty")
    outcome = tool.reset_offsets(admin, ["my-group"], ResetSpec("to_earliest"), topics=["my-topic"])
    assert outcome.plans == {"my-group": {T0: 0, T1: 0, T2: 0}} and not outcome.errors
    assert admin.altered == []
    outcome = tool.reset_offsets(admin, ["my-group"], ResetSpec("to_latest"), all_topics=True, execute=True)
    assert outcome.plans == {"my-group": {T0: 150, T1: 80}}
    assert admin.altered == [("my-group", {T0: 150, T1: 80})]


def test_reset_refuses_an_active_group() -> None:
    admin = admin_with_group("Stable")
    outcome = tool.reset_offsets(admin, ["my-group"], ResetSpec("to_earliest"), all_topics=True, execute=True)
    assert outcome.errors == [
        "Assignments can only be reset if the group 'my-group' is inactive, but the current state is Stable."
    ]
    assert outcome.plans == {"my-group": {}} and admin.altered == []
    assert tool.reset_lines(outcome.plans) == ["", f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}"]


def test_reset_topic_scope_with_partitions_and_time() -> None:
    admin = admin_with_group("Dead")
    admin.by_time[1234] = {T1: 75}
    outcome = tool.reset_offsets(admin, ["my-group"], ResetSpec("to_datetime", 1234), topics=["my-topic:1"])
    assert outcome.plans == {"my-group": {T1: 75}}


def test_reset_from_file_for_groups_without_plan() -> None:
    admin = FakeGroupAdmin(groups={"a": group("a", "Empty"), "b": group("b", "Empty")}, ends={T0: 10})
    plans = tool.parse_reset_csv("a,my-topic,0,4\n", ["a", "b"])
    outcome = tool.reset_offsets(admin, ["a", "b"], ResetSpec("from_file"), file_plans=plans, execute=True)
    assert outcome.plans == {"a": {T0: 4}, "b": {}}
    assert outcome.errors == ["No reset plan for group b found"]


def test_reset_unknown_topic_fails() -> None:
    admin = admin_with_group("Empty")
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PARTITION"):
        tool.reset_offsets(admin, ["my-group"], ResetSpec("to_earliest"), topics=["nope"])


def test_reset_plan_lines_match_kafka() -> None:
    assert tool.reset_lines({"my-group": {T0: 0}}) == [
        "",
        "GROUP                          TOPIC                          PARTITION  NEW-OFFSET     ",
        "my-group                       my-topic                       0          0              ",
    ]


def test_csv_round_trip_single_and_multi_group() -> None:
    plans = {"g1": {T0: 5, T1: 6}}
    single = tool.export_csv(plans, single_group=True)
    assert single == "my-topic,0,5\nmy-topic,1,6\n"
    assert tool.parse_reset_csv(single, ["g1"]) == plans
    multi = tool.export_csv({**plans, "g2": {T2: 1}}, single_group=False)
    assert multi == "g1,my-topic,0,5\ng1,my-topic,1,6\ng2,my-topic,2,1\n"
    assert tool.parse_reset_csv(multi, ["g1", "g2"]) == {**plans, "g2": {T2: 1}}
    assert tool.parse_reset_csv(multi, ["g1"]) == {**plans, "g2": {T2: 1}}


def test_csv_rejects_bad_lines() -> None:
    with pytest.raises(GroupCommandError, match="Invalid reset plan line 2: 't,x,1'"):
        tool.parse_reset_csv("t,0,1\nt,x,1\n", ["g"])
    with pytest.raises(GroupCommandError, match="expected group,topic,partition,offset"):
        tool.parse_reset_csv("t,0,1\n", ["g1", "g2"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05.678", datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
        ("2024-01-02T03:04:05", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05.000Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T05:04:05.000+02:00", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T05:34:05.000+0230", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T00:04:05.000-03", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ],
)
def test_parse_datetime(text: str, expected: datetime) -> None:
    assert tool.parse_datetime(text) == int(expected.timestamp() * 1000)


def test_parse_datetime_rejects_other_formats() -> None:
    with pytest.raises(GroupCommandError):
        tool.parse_datetime("2024/01/02 03:04")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H30M", 5_400_000),
        ("P1DT2H", 93_600_000),
        ("PT0.5S", 500),
        ("pt10s", 10_000),
        ("P2D", 172_800_000),
        ("-PT1M", -60_000),
        ("PT-1.5S", -1_500),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert tool.parse_duration(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "1H", "P1H", "PT1X"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(GroupCommandError, match="Text cannot be parsed to a Duration"):
        tool.parse_duration(text)


def test_topic_arguments() -> None:
    assert tool.parse_topic_partitions("t") == ("t", None)
    assert tool.parse_topic_partitions("t:0,2") == ("t", [0, 2])
    with pytest.raises(GroupCommandError, match="Invalid partition 'x' specified in topic arg 't:x'"):
        tool.parse_topic_partitions("t:x")
    with pytest.raises(GroupCommandError, match="expected topic name and partitions"):
        tool.parse_topic_partitions("t:")


# --- delete ----------------------------------------------------------------------------------------------------------


def test_delete_lines() -> None:
    ok = tool.DeleteOutcome({"g1": ErrorCode.NONE, "g2": ErrorCode.NONE})
    assert tool.delete_lines(ok) == (["Deletion of requested consumer groups ('g1', 'g2') was successful."], [])
    partial = tool.DeleteOutcome({"g1": ErrorCode.NON_EMPTY_GROUP, "g2": ErrorCode.NONE})
    assert tool.delete_lines(partial) == (
        [
            "* Group 'g1' could not be deleted due to: "
            "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.",
            "",
            "These consumer groups were deleted successfully: 'g2'",
        ],
        ["Deletion of some consumer groups failed:"],
    )


def test_delete_offsets_lines() -> None:
    admin = admin_with_group("Empty")
    outcome = tool.delete_offsets(admin, "my-group", ["my-topic:1,0"])
    lines, error = tool.delete_offsets_lines(outcome)
    assert error is None
    assert lines == [
        "Request succeed for deleting offsets with topic my-topic:1,0 group my-group",
        "",
        f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}",
        f"{'my-topic':<30} {'0':<15} {'Successful':<15}",
        f"{'my-topic':<30} {'1':<15} {'Successful':<15}",
    ]


def test_delete_offsets_errors() -> None:
    admin = admin_with_group("Stable")
    admin.offset_delete_results = {T0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}
    lines, error = tool.delete_offsets_lines(tool.delete_offsets(admin, "my-group", ["my-topic:0"]))
    assert error == "Encounter some partition level error, see the follow-up details:"
    assert lines[-1] == f"{'my-topic':<30} {'0':<15} Error: The consumer group is actively subscribed to the topic"
    admin.offset_delete_error = ErrorCode.GROUP_ID_NOT_FOUND
    lines, error = tool.delete_offsets_lines(tool.delete_offsets(admin, "my-group", ["my-topic:0"]))
    assert error == "'my-group' does not exist."


def test_members_lines_show_group_instance_ids_when_a_member_has_one() -> None:
    static = MemberDescription("s-1", "instance-a", "s", "/h", (T0,))
    report = tool.collect_members(group("g", "Stable", static, member("d-1", T1, host="/h", client_id="d")))
    assert tool.members_lines(report, verbose=False)[1:] == [
        "GROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID       #PARTITIONS     ",
        "g               s-1             instance-a        /h              s               1               ",
        "g               d-1                               /h              d               1               ",
    ]
