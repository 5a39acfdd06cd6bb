"""The controller on the in-process metadata tree, with a channel that records what brokers are told."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from mq.errors import ErrorCode
from mq.server import logging_config
from mq.server.controller import Controller
from mq.server.partition_state import LEADER_DURING_DELETE, PartitionStateInfo
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import (
    BrokerRegistration,
    ControllerInfo,
    PartitionState,
    encode_partition_list,
    encode_reassignment,
)
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore


@dataclass
class Recorder:
    leader_and_isr: list[tuple[int, list[PartitionStateInfo]]] = field(default_factory=list)
    update_metadata: list[tuple[int, list[PartitionStateInfo]]] = field(default_factory=list)
    stop_replica: list[tuple[int, list[TopicPartition], bool]] = field(default_factory=list)


class Channel:
    """Brokers answer StopReplica at once with ``answer`` (True: deleted), or, with ``answer`` None, only when the
    test calls the callbacks kept in ``unanswered``."""

    def __init__(self, recorder: Recorder, answer: bool | None = True) -> None:
        self.r = recorder
        self.answer = answer
        self.unanswered: list[Callable[[bool], None]] = []
        self.offline: dict[int, set[TopicPartition]] = {}
        """Per broker, the partitions it answers LeaderAndIsr for with KAFKA_STORAGE_ERROR."""

    def leader_and_isr(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        on_storage_errors: Callable[[list[TopicPartition]], None] | None = None,
    ) -> None:
        self.r.leader_and_isr.append((broker_id, partitions))
        if on_storage_errors is not None:
            on_storage_errors([i.tp for i in partitions if i.tp in self.offline.get(broker_id, set())])

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None:
        self.r.update_metadata.append((broker_id, partitions))

    def stop_replica(
        self,
        broker_id: int,
        partitions: list[TopicPartition],
        delete: bool,
        on_response: Callable[[bool], None] | None = None,
    ) -> None:
        self.r.stop_replica.append((broker_id, partitions, delete))
        if on_response is not None:
            if self.answer is None:
                self.unanswered.append(on_response)
            else:
                on_response(self.answer)


def setup(brokers: list[int], channel: Channel | None = None) -> tuple[KafkaZkClient, Controller, Recorder]:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    for b in brokers:
        zk.register_broker(BrokerRegistration(b, [f"PLAINTEXT://127.0.0.1:{9092 + b}"]))
    channel = channel or Channel(Recorder())
    recorder = channel.r
    controller = Controller(zk, brokers[0], channel, lambda fn: fn())
    controller.startup()
    return zk, controller, recorder


def test_elected_with_epoch_one() -> None:
    zk, controller, _ = setup([0])
    assert controller.active and controller.context.epoch == 1
    assert ControllerInfo.decode(zk.store.get(paths.CONTROLLER)[0]).broker_id == 0
    assert zk.store.get(paths.CONTROLLER_EPOCH)[0] == b"1"


def test_second_candidate_stays_passive() -> None:
    zk, _, _ = setup([0])
    other = Controller(zk, 1, Channel(Recorder()), lambda fn: fn())
    other.startup()
    assert not other.active


def test_new_topic_gets_state_leadership_and_metadata() -> None:
    zk, _, recorder = setup([0, 1])
    AdminZkClient(zk).create_topic("orders", 0, 0, replica_assignment={0: [1, 0], 1: [0, 1]})
    assert zk.get_partition_state("orders", 0) == (PartitionState(1, 0, [1, 0], 1), 0)
    assert zk.get_partition_state("orders", 1) == (PartitionState(0, 0, [0, 1], 1), 0)
    told = {b: sorted(i.tp.partition for i in infos) for b, infos in recorder.leader_and_isr}
    assert told == {0: [0, 1], 1: [0, 1]}
    assert {b for b, _ in recorder.update_metadata} == {0, 1}


def test_dead_replicas_are_left_out_of_the_isr() -> None:
    zk, _, _ = setup([0])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [5, 0]})
    assert zk.get_partition_state("t", 0) == (PartitionState(0, 0, [0], 1), 0)


def test_added_partitions_start() -> None:
    zk, _, recorder = setup([0])
    admin = AdminZkClient(zk)
    admin.create_topic("t", 1, 1)
    recorder.leader_and_isr.clear()
    admin.add_partitions("t", 3)
    assert [sorted(i.tp.partition for i in infos) for _, infos in recorder.leader_and_isr] == [[1, 2]]
    assert zk.get_partition_state("t", 2) is not None


def test_deletion_stops_replicas_and_removes_nodes() -> None:
    zk, controller, recorder = setup([0])
    admin = AdminZkClient(zk)
    admin.create_topic("t", 2, 1)
    recorder.update_metadata.clear()
    admin.delete_topic("t")
    assert recorder.stop_replica == [(0, [TopicPartition("t", 0), TopicPartition("t", 1)], True)]
    assert all(i.leader == LEADER_DURING_DELETE for _, infos in recorder.update_metadata for i in infos)
    assert zk.get_all_topics() == [] and zk.get_topics_marked_for_deletion() == []
    assert not controller.context.states


def test_restarted_controller_keeps_existing_state() -> None:
    zk, _, _ = setup([0])
    AdminZkClient(zk).create_topic("t", 1, 1)
    zk.set_partition_state("t", 0, PartitionState(0, 4, [0], 1), 0)
    zk.store.delete(paths.CONTROLLER)
    recorder = Recorder()
    controller = Controller(zk, 0, Channel(recorder), lambda fn: fn())
    controller.startup()
    assert controller.context.epoch == 2
    assert [i.leader_epoch for _, infos in recorder.leader_and_isr for i in infos] == [4]


def isr_change(zk: KafkaZkClient, topic: str, partition: int, isr: list[int]) -> None:
    """What a leader does when followers catch up: write the state, then an ISR change notification."""
    state, version = zk.get_partition_state(topic, partition)  # type: ignore[misc]
    zk.set_partition_state(topic, partition, PartitionState(state.leader, state.leader_epoch, isr, 1), version)
    zk.store.create(paths.ISR_CHANGE_PREFIX, encode_partition_list([(topic, partition)]), sequence=True)


def test_reassignment_grows_waits_for_the_isr_then_shrinks() -> None:
    zk, controller, recorder = setup([1, 2, 3])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    recorder.leader_and_isr.clear()
    zk.store.create(paths.REASSIGN_PARTITIONS, encode_reassignment([("t", 0, [2, 3])]))
    grown = zk.get_topic_assignment("t")
    assert grown is not None
    assert (grown.partitions[0], grown.adding_replicas, grown.removing_replicas) == ([2, 3, 1], {0: [3]}, {0: [1]})
    assert {b for b, _ in recorder.leader_and_isr} == {1, 2, 3}
    assert zk.store.exists(paths.REASSIGN_PARTITIONS) is not None
    state, _ = zk.get_partition_state("t", 0)  # type: ignore[misc]
    assert (state.leader, state.leader_epoch) == (1, 1)

    recorder.stop_replica.clear()
    isr_change(zk, "t", 0, [1, 2, 3])
    done = zk.get_topic_assignment("t")
    assert done is not None
    assert (done.partitions[0], done.adding_replicas, done.removing_replicas) == ([2, 3], {}, {})
    state, _ = zk.get_partition_state("t", 0)  # type: ignore[misc]
    assert (state.leader, state.isr, state.leader_epoch) == (2, [2, 3], 2)
    assert recorder.stop_replica == [(1, [TopicPartition("t", 0)], True)]
    assert zk.store.exists(paths.REASSIGN_PARTITIONS) is None
    assert not controller.context.reassigning


def test_reassignment_resumes_after_controller_failover() -> None:
    zk, old, _ = setup([1, 2, 3])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    zk.store.create(paths.REASSIGN_PARTITIONS, encode_reassignment([("t", 0, [3, 2])]))
    old.active = False  # the old controller is gone; it had started the move
    old.startup = old._elect = lambda: None  # type: ignore[method-assign]
    zk.store.delete(paths.CONTROLLER)
    successor = Controller(zk, 2, Channel(Recorder()), lambda fn: fn())
    successor.startup()
    assert successor.context.reassigning == {TopicPartition("t", 0): [3, 2]}
    isr_change(zk, "t", 0, [1, 2, 3])
    done = zk.get_topic_assignment("t")
    assert done is not None and done.partitions[0] == [3, 2]
    state = zk.get_partition_state("t", 0)[0]  # type: ignore[index]
    assert (state.leader, state.isr, state.controller_epoch) == (3, [2, 3], 2)  # first live target replica in the ISR


def test_reassignment_of_unknown_partition_is_dropped() -> None:
    zk, _, _ = setup([1])
    AdminZkClient(zk).create_topic("t", 1, 1)
    zk.store.create(paths.REASSIGN_PARTITIONS, encode_reassignment([("t", 7, [1]), ("nope", 0, [1])]))
    assert zk.store.exists(paths.REASSIGN_PARTITIONS) is None


def test_controlled_shutdown_moves_leadership_and_shrinks_isrs() -> None:
    zk, controller, _ = setup([1, 2, 3])
    admin = AdminZkClient(zk)
    admin.create_topic("t", 0, 0, replica_assignment={0: [1, 2], 1: [2, 1]})
    admin.create_topic("single", 0, 0, replica_assignment={0: [1]})  # nothing can take it over: not waited for
    admin.create_topic("stuck", 0, 0, replica_assignment={0: [1, 4]})  # broker 4 is down, so not in the ISR
    remaining = controller.controlled_shutdown(1)
    assert remaining == [TopicPartition("stuck", 0)]
    assert zk.get_partition_state("t", 0)[0] == PartitionState(2, 1, [2], 1)  # type: ignore[index]
    assert zk.get_partition_state("t", 1)[0] == PartitionState(2, 1, [2], 1)  # type: ignore[index]
    # A broker in controlled shutdown is not elected when another leader fails.
    zk.store.delete(paths.broker(2))
    assert zk.get_partition_state("t", 0)[0].leader == -1  # type: ignore[index]


def test_preferred_and_unclean_elections_report_per_partition() -> None:
    zk, controller, _ = setup([1, 2])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2], 1: [2, 1]})
    zk.set_partition_state("t", 0, PartitionState(2, 3, [2, 1], 1), 0)
    controller._load_topic("t")
    results = controller.elect_leaders([TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 9)], 0)
    assert results[TopicPartition("t", 0)] == (ErrorCode.NONE, None)
    assert results[TopicPartition("t", 1)][0] == ErrorCode.ELECTION_NOT_NEEDED
    assert results[TopicPartition("t", 9)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert zk.get_partition_state("t", 0)[0] == PartitionState(1, 4, [2, 1], 1)  # type: ignore[index]
    assert controller.elect_leaders([TopicPartition("t", 0)], 1)[TopicPartition("t", 0)][0] == (
        ErrorCode.ELECTION_NOT_NEEDED
    )


def test_unclean_election_picks_a_live_replica_outside_the_isr() -> None:
    zk, controller, _ = setup([1, 2])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    zk.set_partition_state("t", 0, PartitionState(-1, 5, [3], 1), 0)
    controller._load_topic("t")
    assert controller.elect_leaders([TopicPartition("t", 0)], 1) == {TopicPartition("t", 0): (ErrorCode.NONE, None)}
    assert zk.get_partition_state("t", 0)[0] == PartitionState(1, 6, [1], 1)  # type: ignore[index]


def test_auto_rebalance_moves_leadership_back_to_preferred_replicas() -> None:
    zk, controller, _ = setup([1, 2])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2], 1: [2, 1]})
    zk.set_partition_state("t", 0, PartitionState(2, 1, [1, 2], 1), 0)
    controller._load_topic("t")
    controller.check_leader_imbalance(10)
    assert zk.get_partition_state("t", 0)[0].leader == 1  # type: ignore[index]


def test_resigned_controller_ignores_events_until_elected_again() -> None:
    zk, controller, _ = setup([1])
    controller.active = False
    AdminZkClient(zk).create_topic("t", 1, 1)
    assert zk.get_partition_state("t", 0) is None
    zk.store.delete(paths.CONTROLLER)
    assert controller.active and zk.get_partition_state("t", 0) is not None


def test_deletion_waits_for_replicas_on_brokers_that_are_down() -> None:
    zk, controller, recorder = setup([1, 2])
    admin = AdminZkClient(zk)
    admin.create_topic("t", 0, 0, replica_assignment={0: [1, 2, 3]})
    admin.delete_topic("t")
    assert recorder.stop_replica == [(1, [TopicPartition("t", 0)], True), (2, [TopicPartition("t", 0)], True)]
    assert zk.get_all_topics() == ["t"] and zk.get_topics_marked_for_deletion() == ["t"]
    recorder.stop_replica.clear()
    recorder.leader_and_isr.clear()
    zk.register_broker(BrokerRegistration(3, ["PLAINTEXT://127.0.0.1:9095"]))
    assert recorder.stop_replica == [(3, [TopicPartition("t", 0)], True)]
    assert recorder.leader_and_isr == []
    assert zk.get_all_topics() == [] and zk.get_topics_marked_for_deletion() == []
    assert not controller.context.deleting


def test_deletion_completes_only_when_every_broker_confirmed_it() -> None:
    channel = Channel(Recorder(), answer=None)
    zk, controller, recorder = setup([1, 2], channel)
    admin = AdminZkClient(zk)
    admin.create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    admin.delete_topic("t")
    assert [b for b, _, _ in recorder.stop_replica] == [1, 2]
    first, second = channel.unanswered
    first(True)
    assert zk.get_topics_marked_for_deletion() == ["t"]  # broker 2 has not answered
    second(True)
    assert zk.get_all_topics() == [] and zk.get_topics_marked_for_deletion() == []
    assert not controller.context.deleting


def test_a_failed_deletion_is_retried_when_the_broker_returns() -> None:
    channel = Channel(Recorder(), answer=None)
    zk, _, recorder = setup([1, 2], channel)
    admin = AdminZkClient(zk)
    admin.create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    admin.delete_topic("t")
    first, second = channel.unanswered
    first(True)
    second(False)  # broker 2 went away before it answered
    assert zk.get_topics_marked_for_deletion() == ["t"]
    recorder.stop_replica.clear()
    channel.answer = True
    zk.store.delete(paths.broker(2))
    zk.register_broker(BrokerRegistration(2, ["PLAINTEXT://127.0.0.1:9094"]))
    assert recorder.stop_replica == [(2, [TopicPartition("t", 0)], True)]
    assert zk.get_all_topics() == [] and zk.get_topics_marked_for_deletion() == []


def test_replicas_in_a_failed_log_dir_lose_leadership_and_leave_the_isr() -> None:
    channel = Channel(Recorder())
    zk, controller, _ = setup([1, 2, 3], channel)
    admin = AdminZkClient(zk)
    admin.create_topic("t", 0, 0, replica_assignment={0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2, 1]})
    admin.create_topic("single", 0, 0, replica_assignment={0: [1]})
    t = [TopicPartition("t", p) for p in range(3)]
    channel.offline[1] = {t[0], t[1], TopicPartition("single", 0)}
    zk.propagate_log_dir_event(1)
    assert zk.store.get_children(paths.LOG_DIR_EVENT_NOTIFICATION) == []  # consumed
    assert zk.get_partition_state("t", 0)[0] == PartitionState(2, 1, [2, 3], 1)  # type: ignore[index]
    assert zk.get_partition_state("t", 1)[0] == PartitionState(2, 1, [2, 3], 1)  # type: ignore[index]
    assert zk.get_partition_state("t", 2)[0] == PartitionState(3, 0, [3, 2, 1], 1)  # type: ignore[index]
    assert zk.get_partition_state("single", 0)[0] == PartitionState(-1, 1, [1], 1)  # type: ignore[index]
    assert controller.context.offline_on(t[0]) == {1}
    zk.store.delete(paths.broker(2))  # the next election still passes over the offline replica
    assert zk.get_partition_state("t", 0)[0].leader == 3  # type: ignore[index]
    zk.register_broker(BrokerRegistration(2, ["PLAINTEXT://127.0.0.1:9094"]))
    zk.store.delete(paths.broker(1))
    zk.register_broker(BrokerRegistration(1, ["PLAINTEXT://127.0.0.1:9093"]))  # restarted: its dirs were reloaded
    assert controller.context.offline_on(t[0]) == set()


def test_elections_pass_over_a_replica_in_a_failed_log_dir() -> None:
    channel = Channel(Recorder())
    zk, controller, _ = setup([1, 2], channel)
    AdminZkClient(zk).create_topic("single", 0, 0, replica_assignment={0: [1]})
    single = TopicPartition("single", 0)
    channel.offline[1] = {single}
    zk.propagate_log_dir_event(1)
    assert zk.get_partition_state("single", 0)[0].leader == -1  # type: ignore[index]
    assert controller.elect_leaders([single], 0)[single][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert controller.elect_leaders([single], 1)[single][0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert zk.get_partition_state("single", 0)[0].leader == -1  # type: ignore[index]


def test_partition_state_changes_are_logged_in_kafka_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="state.change.logger")
    zk, controller, _ = setup([1, 2])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    controller.controlled_shutdown(1)
    zk.store.delete(paths.broker(2))
    prefix = "[Controller id=1 epoch=1] "
    assert [r.getMessage() for r in caplog.records if r.name == "state.change.logger"] == [
        f"{prefix}Changed partition t-0 from NewPartition to OnlinePartition with state "
        "LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0)",
        f"{prefix}Sending LeaderAndIsr request to broker 1 with 1 become-leader and 0 become-follower partitions",
        f"{prefix}Sending LeaderAndIsr request to broker 2 with 0 become-leader and 1 become-follower partitions",
        f"{prefix}Changed partition t-0 from OnlinePartition to OnlinePartition with state "
        "LeaderAndIsr(leader=2, leaderEpoch=1, isr=List(2), zkVersion=1)",
        f"{prefix}Sending LeaderAndIsr request to broker 1 with 0 become-leader and 1 become-follower partitions",
        f"{prefix}Sending LeaderAndIsr request to broker 2 with 1 become-leader and 0 become-follower partitions",
        f"{prefix}Changed partition t-0 from OnlinePartition to OfflinePartition with state "
        "LeaderAndIsr(leader=-1, leaderEpoch=2, isr=List(2), zkVersion=2)",
        f"{prefix}Sending LeaderAndIsr request to broker 1 with 0 become-leader and 1 become-follower partitions",
    ]


def test_replicas_of_a_broker_that_dies_or_returns_are_traced(caplog: pytest.LogCaptureFixture) -> None:
    zk, _, _ = setup([1, 2])
    AdminZkClient(zk).create_topic("t", 0, 0, replica_assignment={0: [1, 2]})
    AdminZkClient(zk).create_topic("u", 0, 0, replica_assignment={0: [1]})  # no replica on broker 2
    caplog.set_level(logging_config.TRACE, logger="state.change.logger")
    zk.store.delete(paths.broker(2))
    zk.register_broker(BrokerRegistration(2, ["PLAINTEXT://127.0.0.1:9094"]))
    traced = [r.getMessage() for r in caplog.records if r.levelno == logging_config.TRACE]
    assert traced == [
        "[Controller id=1 epoch=1] Changed state of replica 2 for partition t-0 from OnlineReplica to OfflineReplica",
        "[Controller id=1 epoch=1] Changed state of replica 2 for partition t-0 from OfflineReplica to OnlineReplica",
    ]
