from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence

import pytest
from click.testing import CliRunner

from mq.cli.main import cli
from mq.client.admin import OngoingReassignment, ReassignmentResult
from mq.errors import ErrorCode
from mq.tools import reassign_partitions as tool
from mq.tools.reassign_partitions import Assignment, PartitionStatus, ReassignCommandError
from mq.topic_partition import TopicPartition as TP
from mq.zk import paths
from mq.zk.codecs import BrokerRegistration, PartitionState, TopicAssignment, decode_reassignment
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore

# --- JSON ------------------------------------------------------------------------------------------------------------


def test_reassignment_json_keeps_file_order_and_accepts_any_log_dirs() -> None:
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "foo", "partition": 1, "replicas": [6, 5], "log_dirs": ["any", "any"]},
                {"topic": "foo", "partition": 0, "replicas": [5, 6]},
            ],
        }
    )
    assert list(tool.parse_reassignment(text).items()) == [(TP("foo", 1), [6, 5]), (TP("foo", 0), [5, 6])]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": 1, "partitions": []}, "Partition reassignment data file is empty"),
        ({"version": 2, "partitions": []}, "Not supported version field value 2"),
        (
            {"partitions": [{"topic": "foo", "partition": 0, "replicas": [1]}] * 2},
            "Partition reassignment contains duplicate topic partitions: [foo,0]",
        ),
        (
            {"partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 2, 1]}]},
            "Partition replica lists may not contain duplicate entries: [foo,0] contains multiple entries for 1",
        ),
        (
            {"partitions": [{"topic": "foo", "partition": 1, "replicas": [5, 6], "log_dirs": ["any"]}]},
            "Size of replicas list [5, 6] is different from size of log dirs list [any] for partition foo-1",
        ),
        ({"partitions": [{"topic": "foo", "replicas": [5]}]}, "every entry needs topic, partition and replicas"),
    ],
)
def test_reassignment_json_errors(document: object, message: str) -> None:
    with pytest.raises(ReassignCommandError) as caught:
        tool.parse_reassignment(json.dumps(document))
    assert message in str(caught.value)


def test_log_dirs_other_than_any_are_replica_moves() -> None:
    text = json.dumps(
        {
            "partitions": [
                {"topic": "foo", "partition": 1, "replicas": [5, 6], "log_dirs": ["/data/k2", "any"]},
                {"topic": "foo", "partition": 0, "replicas": [6], "log_dirs": ["/data/k1"]},
                {"topic": "bar", "partition": 0, "replicas": [6]},
            ]
        }
    )
    assert tool.parse_reassignment(text)[TP("foo", 1)] == [5, 6]
    assert tool.parse_log_dir_moves(text) == {(TP("foo", 1), 5): "/data/k2", (TP("foo", 0), 6): "/data/k1"}


def test_unparsable_reassignment_json() -> None:
    with pytest.raises(ReassignCommandError, match="Unable to parse the reassignment JSON"):
        tool.parse_reassignment("{not json")


def test_topics_to_move_and_broker_list() -> None:
    assert tool.parse_topics_to_move('{"topics": [{"topic": "b"}, {"topic": "a"}], "version": 1}') == ["b", "a"]
    with pytest.raises(ReassignCommandError, match="List of topics to reassign contains duplicate entries: a"):
        tool.parse_topics_to_move('{"topics": [{"topic": "a"}, {"topic": "a"}]}')
    with pytest.raises(ReassignCommandError, match="Not supported version field value 2"):
        tool.parse_topics_to_move('{"topics": [], "version": 2}')
    assert tool.parse_broker_list("3,1,2") == [3, 1, 2]
    with pytest.raises(ReassignCommandError, match="Broker list contains duplicate entries: 1"):
        tool.parse_broker_list("1,2,1")


def test_written_json_is_compact_sorted_with_any_log_dirs() -> None:
    text = tool.format_reassignment({TP("b", 0): [2], TP("a", 10): [1, 2], TP("a", 2): [3, 1]})
    assert text == (
        '{"version":1,"partitions":[{"topic":"a","partition":2,"replicas":[3,1],"log_dirs":["any","any"]},'
        '{"topic":"a","partition":10,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[2],"log_dirs":["any"]}]}'
    )
    assert tool.parse_reassignment(text) == {TP("a", 2): [3, 1], TP("a", 10): [1, 2], TP("b", 0): [2]}


# --- generate --------------------------------------------------------------------------------------------------------


def test_generate_keeps_partition_count_and_factor_on_the_listed_brokers() -> None:
    current = {TP("foo", p): [1, 2] for p in range(4)} | {TP("bar", 0): [1, 2, 3], TP("baz", 0): [1]}
    racks: dict[int, str | None] = {b: None for b in (1, 2, 3, 5, 6, 7)}
    lines = tool.generate(current, ["foo", "bar"], [5, 6, 7], racks, rng=random.Random(3))
    assert lines[0] == "Current partition replica assignment"
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    assert tool.parse_reassignment(lines[1]) == {tp: r for tp, r in sorted(current.items()) if tp.topic != "baz"}
    proposed = tool.parse_reassignment(lines[4])
    assert sorted(proposed) == [TP("bar", 0)] + [TP("foo", p) for p in range(4)]
    assert all(len(r) == 2 and set(r) <= {5, 6, 7} for tp, r in proposed.items() if tp.topic == "foo")
    assert sorted(proposed[TP("bar", 0)]) == [5, 6, 7]
    leaders = [proposed[TP("foo", p)][0] for p in range(3)]
    assert sorted(leaders) == [5, 6, 7]


def test_generate_errors() -> None:
    current = {TP("foo", 0): [1, 2]}
    racks: dict[int, str | None] = {1: None, 2: None, 3: None}
    with pytest.raises(ReassignCommandError, match="Topic nope not found"):
        tool.generate(current, ["nope"], [1, 2], racks)
    with pytest.raises(ReassignCommandError, match="Replication factor: 2 larger than available brokers: 1"):
        tool.generate(current, ["foo"], [3, 9], racks)
    partial: dict[int, str | None] = {1: "r1", 2: None}
    with pytest.raises(ReassignCommandError, match="Not all brokers have rack information"):
        tool.generate(current, ["foo"], [1, 2], partial)
    lines = tool.generate(current, ["foo"], [1, 2], partial, rack_aware=False)
    assert sorted(tool.parse_reassignment(lines[4])[TP("foo", 0)]) == [1, 2]


# --- throttles -------------------------------------------------------------------------------------------------------


def test_throttle_configs_follow_kafkas_table() -> None:
    current = {TP("foo", 0): [1, 2], TP("foo", 1): [2, 3], TP("foo", 2): [3, 1], TP("bar", 0): [1]}
    target = {TP("foo", 0): [1, 4], TP("foo", 1): [5, 6], TP("foo", 2): [3, 1], TP("bar", 0): [1]}
    throttles = tool.throttles_for(current, target, 1024)
    rate = {"leader.replication.throttled.rate": "1024", "follower.replication.throttled.rate": "1024"}
    assert throttles.brokers == {b: rate for b in (1, 2, 3, 4, 5, 6)}
    assert throttles.topics == {
        "foo": {
            "leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
            "follower.replication.throttled.replicas": "0:4,1:5,1:6",
        }
    }


# --- ZooKeeper path --------------------------------------------------------------------------------------------------


def _zk(brokers: Iterable[int] = (1, 2, 3)) -> KafkaZkClient:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    for broker in brokers:
        zk.register_broker(BrokerRegistration(broker, [f"PLAINTEXT://h:{9000 + broker}"]))
    zk.create_topic("foo", TopicAssignment({0: [1, 2], 1: [2, 3]}), {"retention.ms": "1000"})
    return zk


def test_zk_execute_writes_the_znode_and_throttles() -> None:
    zk = _zk()
    target = {TP("foo", 0): [3, 1]}
    lines, started = tool.zk_execute(zk, target, throttle=2048)
    assert started
    assert lines == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run Verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed. You can also alter the throttle by rerunning the Execute command passing a new value.",
        "The inter-broker throttle limit was set to 2048 B/s",
        "Successfully started reassignment of partitions.",
    ]
    assert decode_reassignment(zk.store.get(paths.REASSIGN_PARTITIONS)[0]) == [("foo", 0, [3, 1])]
    assert zk.get_entity_config("brokers", "3") == {
        "leader.replication.throttled.rate": "2048",
        "follower.replication.throttled.rate": "2048",
    }
    assert zk.get_entity_config("topics", "foo") == {
        "retention.ms": "1000",
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3",
    }
    changes = zk.store.get_children(paths.CONFIG_CHANGES)
    assert len(changes) == 4
    again, started = tool.zk_execute(zk, {TP("foo", 1): [1, 2]})
    assert (again, started) == (["There is an existing assignment running."], False)


def test_zk_execute_rejects_missing_partitions_and_brokers() -> None:
    zk = _zk()
    with pytest.raises(ReassignCommandError, match="non-existent partitions: foo-9"):
        tool.zk_execute(zk, {TP("foo", 9): [1]})
    with pytest.raises(ReassignCommandError, match="non-existent brokerIDs: 7"):
        tool.zk_execute(zk, {TP("foo", 0): [7, 1]})
    assert zk.get_partition_reassignment() is None


def test_zk_verify_states_and_throttle_removal() -> None:
    zk = _zk()
    target = {TP("foo", 1): [3, 1], TP("foo", 0): [1, 2]}
    tool.zk_execute(zk, target, throttle=100)
    lines, ok = tool.zk_verify(zk, target)
    assert ok
    assert lines == [
        "Status of partition reassignment: ",
        "Reassignment of partition foo-1 is still in progress",
        "Reassignment of partition foo-0 is still in progress",
    ]
    zk.store.delete(paths.REASSIGN_PARTITIONS)
    zk.set_topic_assignment("foo", TopicAssignment({0: [1, 2], 1: [1, 3]}))
    lines, ok = tool.zk_verify(zk, target)
    assert not ok
    assert lines == [
        "Status of partition reassignment: ",
        "ERROR: Assigned replicas (1,3) don't match the list of replicas for reassignment (3,1) for partition foo-1",
        "Reassignment of partition foo-1 failed",
        "Reassignment of partition foo-0 completed successfully",
        "Throttle was removed.",
    ]
    assert zk.get_entity_config("topics", "foo") == {"retention.ms": "1000"}
    assert all(zk.get_entity_config("brokers", str(b)) == {} for b in (1, 2, 3))
    assert tool.zk_verify(zk, target)[0][-1] == "Reassignment of partition foo-0 completed successfully"


def test_zk_progress_counts_new_replicas_in_the_isr() -> None:
    zk = _zk()
    target = {TP("foo", 0): [3, 1]}
    original = tool.zk_assignment(zk)
    tool.zk_execute(zk, target)
    zk.set_topic_assignment("foo", TopicAssignment({0: [3, 1, 2], 1: [2, 3]}, adding_replicas={0: [3]}))
    zk.create_partition_state("foo", 0, PartitionState(1, 1, [1, 2], 1))
    [item] = tool.zk_progress(zk, target, original)
    assert (item.joining, item.in_sync, item.done, item.copied_bytes) == ((3,), (), False, None)
    sizes = {(1, TP("foo", 0)): 900, (3, TP("foo", 0)): 300}
    [item] = tool.zk_progress(zk, target, original, lambda brokers, partitions: sizes)
    assert (item.copied_bytes, item.total_bytes) == (300, 900)
    zk.set_partition_state("foo", 0, PartitionState(1, 2, [1, 2, 3], 1), 0)
    assert tool.zk_progress(zk, target, original)[0].in_sync == (3,)
    zk.store.delete(paths.REASSIGN_PARTITIONS)
    zk.set_topic_assignment("foo", TopicAssignment({0: [3, 1], 1: [2, 3]}))
    assert tool.zk_progress(zk, target, original)[0].done


def test_progress_counts_bytes_against_the_leader() -> None:
    live = {
        TP("a", 0): tool.LiveState((2,), (2,), 2),
        TP("a", 1): tool.LiveState((3, 4, 1), (1,), 1),
        TP("a", 2): tool.LiveState((1,), (1,), 1),
    }
    sizes = {
        (2, TP("a", 0)): 50,
        (1, TP("a", 1)): 1000,
        (3, TP("a", 1)): 1500,
        (4, TP("a", 1)): 200,
        (1, TP("a", 2)): 9,
    }
    items = tool.progress_of(
        {TP("a", 0): [2], TP("a", 1): [3, 4], TP("a", 2): [1]},
        {TP("a", 0): [1], TP("a", 1): [1], TP("a", 2): [1]},
        live,
        [TP("a", 1)],
        sizes,
    )
    assert [p.done for p in items] == [True, False, True]
    assert [(p.copied_bytes, p.total_bytes) for p in items] == [(50, 50), (1200, 2000), (0, 0)]
    assert tool.copied_total(items) == 1250
    assert tool.progress_line(items, 10.0, 1024.0) == (
        "[10s] 2/3 partitions reassigned, 1/3 new replicas in sync, 1.2 KB of 2.0 KB copied, 1.0 KB/s, ETA 1s"
    )
    unknown = tool.progress_of({TP("a", 0): [2]}, {TP("a", 0): [1]}, live, [])
    assert (unknown[0].copied_bytes, tool.copied_total(unknown)) == (None, None)
    assert tool.progress_line(unknown, 3.0) == "[3s] 1/1 partitions reassigned, 1/1 new replicas in sync"


def test_rate_meter_measures_from_the_first_observation() -> None:
    meter = tool.RateMeter()
    assert meter.rate(10.0, 500) is None
    assert meter.rate(12.0, 2500) == 1000.0
    assert meter.rate(14.0, 4500) == 1000.0


def test_admin_progress_reads_log_sizes() -> None:
    admin = FakeAdmin({TP("foo", 0): [2, 3]})
    [item] = tool.admin_progress(admin, {TP("foo", 0): [2, 3]}, {TP("foo", 0): [1, 2]})
    assert (item.joining, item.done, item.copied_bytes, item.total_bytes) == ((3,), True, 200, 200)


# --- bootstrap-server path -------------------------------------------------------------------------------------------


class FakeAdmin:
    """A cluster as the bootstrap path sees it: assignments, ongoing moves and dynamic configs."""

    def __init__(self, assignment: Assignment, brokers: Sequence[int] = (1, 2, 3)) -> None:
        self.assignment = dict(assignment)
        self.brokers = list(brokers)
        self.moving: dict[TP, OngoingReassignment] = {}
        self.configs: dict[tuple[int | None, str | None], dict[str, str]] = {}
        self.refuse: dict[TP, ReassignmentResult] = {}

    def replicas(self, topics: Iterable[str]) -> Assignment:
        wanted = set(topics)
        return {tp: r for tp, r in self.assignment.items() if tp.topic in wanted}

    def live(self, topics: Iterable[str]) -> dict[TP, tool.LiveState]:
        return {tp: tool.LiveState(tuple(r), tuple(r), r[0]) for tp, r in self.replicas(topics).items()}

    def log_sizes(self, brokers: Iterable[int], partitions: Iterable[TP]) -> tool.LogSizes:
        wanted = set(partitions)
        return {(b, tp): 100 * b for tp, r in self.assignment.items() if tp in wanted for b in r if b in brokers}

    def broker_ids(self) -> list[int]:
        return self.brokers

    def ongoing(self) -> dict[TP, OngoingReassignment]:
        return dict(self.moving)

    def alter(self, moves: Mapping[TP, Sequence[int] | None]) -> dict[TP, ReassignmentResult]:
        results = {}
        for tp, replicas in moves.items():
            if tp in self.refuse:
                results[tp] = self.refuse[tp]
            elif replicas is None:
                if tp in self.moving:
                    del self.moving[tp]
                    results[tp] = ReassignmentResult(ErrorCode.NONE)
                else:
                    results[tp] = ReassignmentResult(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "none")
            else:
                old = self.assignment[tp]
                self.moving[tp] = OngoingReassignment(
                    tuple(replicas) + tuple(b for b in old if b not in replicas),
                    tuple(b for b in replicas if b not in old),
                    tuple(b for b in old if b not in replicas),
                )
                results[tp] = ReassignmentResult(ErrorCode.NONE)
        return results

    def set_configs(self, broker: int | None, topic: str | None, changes: Mapping[str, str | None]) -> None:
        config = self.configs.setdefault((broker, topic), {})
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value

    def dynamic_broker_keys(self, broker: int, keys: Sequence[str]) -> list[str]:
        return [k for k in keys if k in self.configs.get((broker, None), {})]

    def alter_log_dirs(self, moves: Mapping[tuple[TP, int], str]) -> dict[tuple[TP, int], ErrorCode]:
        """A broker hosts a replica once it is in the partition's replica list (being added counts after one ask)."""
        self.log_dir_asks = getattr(self, "log_dir_asks", 0) + 1
        hosted = {(tp, b) for tp, r in self.assignment.items() for b in r}
        if self.log_dir_asks > 1:
            hosted |= {(tp, b) for tp, m in self.moving.items() for b in m.adding}
        return {
            key: ErrorCode.NONE if key in hosted else ErrorCode.REPLICA_NOT_AVAILABLE
            for key in moves
            if not path_is_unknown(moves[key])
        } | {key: ErrorCode.LOG_DIR_NOT_FOUND for key in moves if path_is_unknown(moves[key])}

    def replica_log_dirs(
        self, replicas: Iterable[tuple[TP, int]]
    ) -> dict[tuple[TP, int], tuple[str | None, str | None]]:
        dirs = getattr(self, "dirs", {})
        return {key: dirs[key] for key in replicas if key in dirs}


def path_is_unknown(path: str) -> bool:
    return path.startswith("/nowhere")


def test_execute_moves_log_dirs_retrying_replicas_not_yet_hosted() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2]})
    moves = {(TP("foo", 0), 1): "/data/b", (TP("foo", 0), 3): "/data/c"}
    lines, ok = tool.execute(admin, {TP("foo", 0): [1, 3]}, moves=moves, log_dir_throttle=700)
    assert ok
    assert lines[5:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed.",
        "The replica-alter-dir throttle limit was set to 700 B/s",
        "Successfully started partition reassignment for foo-0",
        "Successfully started log directory move for: foo-0-1",
        "Successfully started log directory move for: foo-0-3",
    ]
    assert admin.configs[(1, None)] == {"replica.alter.log.dirs.io.max.bytes.per.second": "700"}
    assert admin.configs[(3, None)] == {"replica.alter.log.dirs.io.max.bytes.per.second": "700"}
    assert (2, None) not in admin.configs


def test_log_dir_moves_fail_on_an_unknown_dir_and_time_out_on_a_replica_never_hosted() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2]})
    with pytest.raises(ReassignCommandError, match="Failed to move replica foo-0-1 to /nowhere: LOG_DIR_NOT_FOUND"):
        tool.execute_log_dir_moves(admin, {(TP("foo", 0), 1): "/nowhere"})
    with pytest.raises(ReassignCommandError) as caught:
        tool.execute_log_dir_moves(admin, {(TP("foo", 0), 7): "/data/b"}, timeout_s=0.0, sleep=lambda s: None)
    assert str(caught.value) == "Timed out before log directory move could be started for: foo-0-7"


def test_execute_prints_rollback_throttle_and_started_partitions() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3]})
    lines, ok = tool.execute(admin, {TP("foo", 1): [3, 1], TP("foo", 0): [1, 3]}, throttle=5000)
    assert ok
    assert lines[:5] == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
    ]
    assert lines[5:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed.",
        "The inter-broker throttle limit was set to 5000 B/s",
        "Successfully started partition reassignments for foo-0,foo-1",
    ]
    assert admin.configs[(None, "foo")] == {
        "leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
        "follower.replication.throttled.replicas": "0:3,1:1",
    }
    assert admin.configs[(2, None)]["follower.replication.throttled.rate"] == "5000"
    with pytest.raises(ReassignCommandError, match="Cannot execute because there is an existing partition"):
        tool.execute(admin, {TP("foo", 0): [1, 2]})
    lines, ok = tool.execute(admin, {TP("foo", 0): [2, 1]}, additional=True)
    assert lines[-1] == "Successfully started partition reassignment for foo-0"


def test_additional_execute_throttles_running_moves_too() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3]}, brokers=(1, 2, 3, 4))
    tool.execute(admin, {TP("foo", 0): [1, 3]})
    admin.assignment[TP("foo", 0)] = [1, 3, 2]
    _, ok = tool.execute(admin, {TP("foo", 1): [4, 3]}, throttle=10, additional=True)
    assert ok
    assert admin.configs[(None, "foo")] == {
        "leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
        "follower.replication.throttled.replicas": "0:3,1:4",
    }
    assert sorted(b for b, t in admin.configs if t is None) == [1, 2, 3, 4]


def test_execute_errors() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2]})
    with pytest.raises(ReassignCommandError, match="Unable to find partition: foo-4"):
        tool.execute(admin, {TP("foo", 4): [1, 2]})
    with pytest.raises(ReassignCommandError, match="Unknown broker id 7"):
        tool.execute(admin, {TP("foo", 0): [1, 7]})
    admin.refuse[TP("foo", 0)] = ReassignmentResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "bad list")
    lines, ok = tool.execute(admin, {TP("foo", 0): [2, 1]})
    assert not ok
    assert lines[-2:] == ["Error reassigning partition(s):", "foo-0: bad list"]


@pytest.mark.parametrize(
    ("status", "line"),
    [
        (PartitionStatus(TP("foo", 0), "complete", (5, 6), (5, 6)), "Reassignment of partition foo-0 is complete."),
        (
            PartitionStatus(TP("foo", 1), "in_progress", (5, 6, 1), (5, 6)),
            "Reassignment of partition foo-1 is still in progress.",
        ),
        (
            PartitionStatus(TP("foo", 2), "different", (1, 2), (5, 6)),
            "There is no active reassignment of partition foo-2, but replica set is 1,2 rather than 5,6.",
        ),
    ],
)
def test_verify_line_for_each_state(status: PartitionStatus, line: str) -> None:
    assert tool.status_line(status) == line


def test_verify_waits_for_ongoing_then_clears_throttles() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3], TP("bar", 0): [3]})
    target = {TP("foo", 1): [3, 1], TP("foo", 0): [1, 2], TP("bar", 0): [1]}
    tool.execute(admin, {TP("foo", 1): [3, 1]}, throttle=100)
    lines, ok = tool.verify(admin, target)
    assert not ok
    assert lines == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition bar-0, but replica set is 3 rather than 1.",
        "Reassignment of partition foo-0 is complete.",
        "Reassignment of partition foo-1 is still in progress.",
    ]
    admin.moving.clear()
    admin.assignment[TP("foo", 1)] = [3, 1]
    lines, ok = tool.verify(admin, target)
    assert not ok
    assert lines[-3:] == [
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic bar",
        "Clearing topic-level throttles on topic foo",
    ]
    assert all(config == {} for config in admin.configs.values())
    admin.set_configs(1, None, {"leader.replication.throttled.rate": "9"})
    lines, _ = tool.verify(admin, {TP("foo", 1): [3, 1]}, preserve_throttles=True)
    assert lines == ["Status of partition reassignment:", "Reassignment of partition foo-1 is complete."]
    assert admin.configs[(1, None)] == {"leader.replication.throttled.rate": "9"}


def test_cancel_and_list() -> None:
    admin = FakeAdmin({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3]})
    assert tool.list_lines(admin.ongoing()) == ["No partition reassignments found."]
    tool.execute(admin, {TP("foo", 0): [2, 3]})
    assert tool.list_lines(admin.ongoing()) == [
        "Current partition reassignments:",
        "foo-0: replicas: 2,3,1. adding: 3. removing: 1.",
    ]
    target = {TP("foo", 0): [2, 3], TP("foo", 1): [1, 2]}
    lines, ok = tool.cancel(admin, target, preserve_throttles=True)
    assert (lines, ok) == (["Successfully cancelled partition reassignments for: foo-0"], True)
    lines, ok = tool.cancel(admin, target)
    assert lines[0] == "None of the specified partition reassignments are active."
    assert lines[1] == "Clearing broker-level throttles on brokers 1,2,3"
    admin.refuse[TP("foo", 1)] = ReassignmentResult(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    )
    lines, ok = tool.cancel(admin, target)
    assert (lines, ok) == (
        ["Error cancelling partition reassignment for:", "foo-1: The partition does not exist."],
        False,
    )


# --- command line ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Command must include exactly one action: --generate, --execute, --verify, --cancel, or --list"),
        (["--verify", "--execute"], "Command must include exactly one action"),
        (["--verify"], "Please specify --bootstrap-server"),
        (["--verify", "--zookeeper", "z"], 'Missing required argument "[reassignment-json-file]"'),
        (["--generate", "--zookeeper", "z", "--broker-list", "1"], '"[topics-to-move-json-file]"'),
        (
            ["--list", "--bootstrap-server", "b", "--throttle", "10"],
            'Option "[throttle]" can\'t be used with action "[list]"',
        ),
        (["--list", "--zookeeper", "z"], 'Option "[zookeeper]" can\'t be used with action "[list]"'),
        (
            ["--execute", "--zookeeper", "z", "--reassignment-json-file", "f", "--preserve-throttles"],
            'Option "[preserve-throttles]" can\'t be used with action "[execute]"',
        ),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["reassign-partitions", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_zk_generate_reads_the_topics_and_racks() -> None:
    zk = _zk((1, 2, 3, 4))
    lines = tool.zk_generate(zk, ["foo"], [3, 4], rack_aware=True)
    assert lines[1] == tool.format_reassignment({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3]})
    proposed = tool.parse_reassignment(lines[4])
    assert sorted(map(sorted, proposed.values())) == [[3, 4], [3, 4]]
    assert {r[0] for r in proposed.values()} == {3, 4}


def test_live_table_shows_each_partition_state() -> None:
    from rich.console import Console

    from mq.cli.reassign_partitions import _table

    items = tool.progress_of(
        {TP("a", 0): [2, 3], TP("a", 1): [3], TP("a", 2): [1, 4]},
        {TP("a", 0): [1], TP("a", 1): [1], TP("a", 2): [1, 2]},
        {
            TP("a", 0): tool.LiveState((2, 3, 1), (1, 2), 1),
            TP("a", 1): tool.LiveState((3,), (3,), 3),
            TP("a", 2): tool.LiveState((1, 4, 2), (1, 2, 4), 1),
        },
        [TP("a", 0), TP("a", 2)],
        {(1, TP("a", 0)): 100, (2, TP("a", 0)): 100, (3, TP("a", 0)): 40, (3, TP("a", 1)): 7},
    )
    console = Console(width=160, record=True)
    console.print(_table(items, 4.0, 10.0))
    rows = {line.split()[1]: line for line in console.export_text().splitlines() if line.startswith("│ a-")}
    assert "catching up" in rows["a-0"] and "1/2" in rows["a-0"] and "140/200 B" in rows["a-0"]
    assert "done" in rows["a-1"]
    assert "moving leadership" in rows["a-2"] and "1/1" in rows["a-2"] and "?" in rows["a-2"]


def test_log_dir_move_states_in_kafkas_words() -> None:
    a, b = TP("a", 0), TP("b", 1)
    moves = {(b, 1): "/d2", (a, 2): "/d2", (a, 1): "/d2", (b, 2): "/d1", (a, 3): "/d1"}
    dirs = {(a, 1): ("/d1", "/d2"), (a, 2): ("/d2", None), (b, 1): ("/d1", "/d3"), (b, 2): ("/d2", None)}
    lines, running = tool.log_dir_move_lines(moves, dirs)
    assert running
    assert lines == [
        "Reassignment of replica a-0-1 is still in progress.",
        "Partition b-1 on broker 1 is being moved to log dir /d3 instead of /d2.",
        "Reassignment of replica a-0-2 completed successfully.",
        "Partition b-1 on broker 2 is not being moved from log dir /d2 to /d1.",
        "Partition a-0 cannot be found in any live log directory on broker 3.",
    ]


def test_verify_keeps_throttles_while_a_log_dir_move_runs() -> None:
    admin = FakeAdmin({TP("foo", 0): [1]})
    admin.set_configs(1, None, {"replica.alter.log.dirs.io.max.bytes.per.second": "10"})
    moves = {(TP("foo", 0), 1): "/d2"}
    admin.dirs = {(TP("foo", 0), 1): ("/d1", "/d2")}
    lines, ok = tool.verify(admin, {TP("foo", 0): [1]}, moves=moves)
    assert ok and lines[-1] == "Reassignment of replica foo-0-1 is still in progress."
    assert admin.configs[(1, None)]
    admin.dirs = {(TP("foo", 0), 1): ("/d2", None)}
    lines, ok = tool.verify(admin, {TP("foo", 0): [1]}, moves=moves)
    assert "Reassignment of replica foo-0-1 completed successfully." in lines
    assert lines[-2:] == [
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic foo",
    ]
    assert admin.configs[(1, None)] == {}
