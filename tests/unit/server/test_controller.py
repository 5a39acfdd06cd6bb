"""The controller on the in-process metadata tree, with a channel that records what brokers are told."""

from __future__ import annotations

from dataclasses import dataclass, field

from mq.server.controller import LEADER_DURING_DELETE, Controller, PartitionStateInfo
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import BrokerRegistration, ControllerInfo, PartitionState
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore


@dataclass
class Recorder:
    leader_and_isr: list[tuple[int, list[PartitionStateInfo]]] = field(default_factory=list)
    update_metadata: list[tuple[int, list[PartitionStateInfo]]] = field(default_factory=list)
    stop_replica: list[tuple[int, list[TopicPartition], bool]] = field(default_factory=list)


class Channel:
    def __init__(self, recorder: Recorder) -> None:
        self.r = recorder

    def leader_and_isr(self, broker_id: int, partitions: list[PartitionStateInfo]) -> None:
        self.r.leader_and_isr.append((broker_id, partitions))

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None:
        self.r.update_metadata.append((broker_id, partitions))

    def stop_replica(self, broker_id: int, partitions: list[TopicPartition], delete: bool) -> None:
        self.r.stop_replica.append((broker_id, partitions, delete))


def setup(brokers: list[int]) -> tuple[KafkaZkClient, Controller, Recorder]:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    for b in brokers:
        zk.register_broker(BrokerRegistration(b, [f"PLAINTEXT://127.0.0.1:{9092 + b}"]))
    recorder = Recorder()
    controller = Controller(zk, brokers[0], Channel(recorder), lambda fn: fn())
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
