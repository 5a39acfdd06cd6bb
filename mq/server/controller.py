"""The controller: turns the metadata tree into leadership decisions and tells brokers about them.

One broker at a time is the controller: it owns ``/controller`` (ephemeral) and bumps ``/controller_epoch``.
Watches on the tree post events to one queue, processed in order on the broker's event loop:
new topics and partitions get a state znode (leader = first live replica, ISR = live replicas, leader epoch 0)
followed by LeaderAndIsr to their replicas and UpdateMetadata to every live broker; a deletion marker stops and
deletes the replicas, then removes the topic's znodes. Brokers learn everything through ``ControllerChannel``:
in standalone mode it calls into the same process, in cluster mode it sends Kafka's inter-broker requests.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.codecs import BrokerRegistration, ControllerInfo, PartitionState, TopicAssignment, decode_partition_list
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2
"""The leader UpdateMetadata carries for a partition whose topic is being deleted (brokers drop it)."""


@dataclass(frozen=True)
class PartitionStateInfo:
    """What LeaderAndIsr and UpdateMetadata carry for one partition."""

    tp: TopicPartition
    topic_id: str | None
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


class ControllerChannel(Protocol):
    def leader_and_isr(self, broker_id: int, partitions: list[PartitionStateInfo]) -> None: ...

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None: ...

    def stop_replica(self, broker_id: int, partitions: list[TopicPartition], delete: bool) -> None: ...


@dataclass
class ControllerContext:
    epoch: int = 0
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, tuple[PartitionState, int]] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)

    def info(self, tp: TopicPartition) -> PartitionStateInfo:
        state, version = self.states[tp]
        assignment = self.assignments[tp.topic]
        return PartitionStateInfo(
            tp,
            assignment.topic_id,
            state.leader,
            state.leader_epoch,
            tuple(state.isr),
            tuple(assignment.partitions[tp.partition]),
            version,
            state.controller_epoch,
        )


class Controller:
    """Runs on the event loop; ``post`` hands a callable to that loop (from any thread)."""

    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        channel: ControllerChannel,
        post: Callable[[Callable[[], None]], None],
        unclean_election: Callable[[str], bool] = lambda topic: False,
    ) -> None:
        self.zk = zk
        self.unclean_election = unclean_election
        self.broker_id = broker_id
        self.channel = channel
        self._post = post
        self.context = ControllerContext()
        self.active = False
        self._events: deque[Callable[[], None]] = deque()
        self._draining = False

    # --- event queue -------------------------------------------------------------------------------------------

    def _enqueue(self, event: Callable[[], None]) -> bool:
        """Queue ``event`` on the loop; returns True so it can serve as a watch callback that stays registered."""
        self._post(lambda: self._run(event))
        return True

    def _run(self, event: Callable[[], None]) -> None:
        self._events.append(event)
        if self._draining:
            return
        self._draining = True
        try:
            while self._events:
                try:
                    self._events.popleft()()
                except Exception:
                    log.exception("controller event failed")
        finally:
            self._draining = False

    # --- election ----------------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Watch ``/controller`` and take the role whenever it is free."""
        self.zk.store.watch_data(paths.CONTROLLER, lambda data, stat: self._enqueue(self._elect))

    def _elect(self) -> None:
        if self.active:
            return
        try:
            self.zk.store.create(
                paths.CONTROLLER, ControllerInfo(self.broker_id, int(time.time() * 1000)).encode(), ephemeral=True
            )
        except NodeExistsError:
            return
        self.context.epoch = self._bump_epoch()
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.context.epoch)
        self._on_failover()

    def _bump_epoch(self) -> int:
        store = self.zk.store
        try:
            data, stat = store.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            store.create(paths.CONTROLLER_EPOCH, b"1")
            return 1
        epoch = int(data.decode()) + 1
        store.set(paths.CONTROLLER_EPOCH, str(epoch).encode(), stat.version)
        return epoch

    def _on_failover(self) -> None:
        store = self.zk.store
        self.context.live_brokers = self.zk.get_all_brokers()
        for topic in self.zk.get_all_topics():
            self._load_topic(topic)
        store.watch_children(paths.BROKER_IDS, lambda _: self._enqueue(self._on_broker_change))
        store.watch_children(paths.BROKER_TOPICS, lambda _: self._enqueue(self._on_topics_change))
        store.watch_children(paths.DELETE_TOPICS, lambda _: self._enqueue(self._on_delete_markers))
        store.watch_children(paths.ISR_CHANGE_NOTIFICATION, lambda _: self._enqueue(self._on_isr_changes))
        store.watch_data(
            paths.PREFERRED_REPLICA_ELECTION, lambda data, stat: self._enqueue(self._on_preferred_election)
        )
        self._start_new_partitions(self._partitions_without_state())
        live = set(self.context.live_brokers)
        elected = self._elect_leaders(lambda state: state.leader not in live or not set(state.isr) <= live)
        self._announce_leadership([tp for tp in self.context.states if tp not in elected])
        self._send_update_metadata(list(self.context.states), self.context.live_brokers)

    # --- events ------------------------------------------------------------------------------------------------

    def _load_topic(self, topic: str) -> None:
        assignment = self.zk.get_topic_assignment(topic)
        if assignment is None:
            return
        self.context.assignments[topic] = assignment
        for partition in assignment.partitions:
            found = self.zk.get_partition_state(topic, partition)
            if found is not None:
                self.context.states[TopicPartition(topic, partition)] = found

    def _watch_topic(self, topic: str) -> None:
        def on_change(data: bytes | None, stat: object) -> bool:
            if data is None:
                return False
            return self._enqueue(lambda: self._on_assignment_change(topic))

        self.zk.store.watch_data(paths.topic(topic), on_change)

    def _on_topics_change(self) -> None:
        current = set(self.zk.get_all_topics())
        for topic in sorted(current - set(self.context.assignments)):
            self._load_topic(topic)
            self._watch_topic(topic)
        for topic in set(self.context.assignments) - current:
            self._forget_topic(topic)
        self._start_new_partitions(self._partitions_without_state())

    def _on_assignment_change(self, topic: str) -> None:
        if topic in self.context.deleting:
            return
        assignment = self.zk.get_topic_assignment(topic)
        if assignment is None:
            return
        self.context.assignments[topic] = assignment
        self._start_new_partitions(self._partitions_without_state())

    def _on_broker_change(self) -> None:
        previous = set(self.context.live_brokers)
        self.context.live_brokers = self.zk.get_all_brokers()
        live = set(self.context.live_brokers)
        dead, born = previous - live, live - previous
        changed = self._elect_leaders(lambda state: bool(dead & ({state.leader} | set(state.isr))) or state.leader < 0)
        if born:
            restarted = [
                tp
                for tp in self.context.states
                if born & set(self.context.assignments[tp.topic].partitions[tp.partition]) and tp not in changed
            ]
            self._announce_leadership(restarted)
        self._send_update_metadata(list(self.context.states), self.context.live_brokers)
        if dead or born:
            log.info("live brokers now %s (gone %s, back %s)", sorted(live), sorted(dead), sorted(born))

    def _elect_leaders(self, affected: Callable[[PartitionState], bool]) -> list[TopicPartition]:
        """OfflinePartition -> OnlinePartition for every affected partition: the first live in-sync replica in
        assignment order leads (any live replica when ``unclean.leader.election.enable``), dead brokers leave the
        ISR, the leader epoch grows, and the state znode is written conditionally on its version."""
        live = set(self.context.live_brokers)
        changed = []
        for tp, (state, version) in list(self.context.states.items()):
            if tp.topic in self.context.deleting or not affected(state):
                continue
            replicas = self.context.assignments[tp.topic].partitions[tp.partition]
            isr = [b for b in state.isr if b in live]
            candidates = [b for b in replicas if b in isr]
            if not candidates and self.unclean_election(tp.topic):
                candidates = [b for b in replicas if b in live]
                isr = candidates[:1]
            leader = candidates[0] if candidates else -1
            if leader == state.leader and isr == state.isr:
                continue
            new_state = PartitionState(leader, state.leader_epoch + 1, isr or state.isr[-1:], self.context.epoch)
            try:
                version = self.zk.set_partition_state(tp.topic, tp.partition, new_state, version)
            except BadVersionError:
                found = self.zk.get_partition_state(tp.topic, tp.partition)
                if found is None:
                    continue
                self.context.states[tp] = found
                continue
            self.context.states[tp] = (new_state, version)
            changed.append(tp)
        if changed:
            self._announce_leadership(changed)
        return changed

    def _on_isr_changes(self) -> None:
        """Leaders changed ISRs: reread those states, tell every broker, remove the notifications."""
        changed: list[TopicPartition] = []
        store = self.zk.store
        for child in store.get_children(paths.ISR_CHANGE_NOTIFICATION):
            path = f"{paths.ISR_CHANGE_NOTIFICATION}/{child}"
            data = store.get_or_none(path)
            for topic, partition in decode_partition_list(data) if data else []:
                tp = TopicPartition(topic, partition)
                found = self.zk.get_partition_state(topic, partition)
                if found is not None and tp in self.context.states:
                    self.context.states[tp] = found
                    changed.append(tp)
            with contextlib.suppress(NoNodeError):
                store.delete(path)
        if changed:
            self._send_update_metadata(changed, self.context.live_brokers)

    def _on_preferred_election(self) -> None:
        """``/admin/preferred_replica_election``: make each listed partition's first replica its leader where it is
        alive and in the ISR, then remove the znode."""
        data = self.zk.store.get_or_none(paths.PREFERRED_REPLICA_ELECTION)
        if data is None:
            return
        wanted = {TopicPartition(t, p) for t, p in decode_partition_list(data)}
        live = set(self.context.live_brokers)
        moved = []
        for tp in sorted(wanted):
            if tp not in self.context.states:
                continue
            state, version = self.context.states[tp]
            preferred = self.context.assignments[tp.topic].partitions[tp.partition][0]
            if preferred == state.leader:
                continue
            if preferred not in live or preferred not in state.isr:
                log.info("Preferred replica %d for partition %s is either not alive or not in the isr", preferred, tp)
                continue
            new_state = PartitionState(preferred, state.leader_epoch + 1, state.isr, self.context.epoch)
            try:
                self.context.states[tp] = (
                    new_state,
                    self.zk.set_partition_state(tp.topic, tp.partition, new_state, version),
                )
            except BadVersionError:
                continue
            moved.append(tp)
        if moved:
            self._announce_leadership(moved)
            self._send_update_metadata(moved, self.context.live_brokers)
        with contextlib.suppress(NoNodeError):
            self.zk.store.delete(paths.PREFERRED_REPLICA_ELECTION)

    def _on_delete_markers(self) -> None:
        for topic in self.zk.get_topics_marked_for_deletion():
            if topic in self.context.deleting:
                continue
            if topic not in self.context.assignments:
                self.zk.delete_topic_nodes(topic)
                continue
            self.context.deleting.add(topic)
            self._delete_topic(topic)

    # --- actions -----------------------------------------------------------------------------------------------

    def _partitions_without_state(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, p)
            for topic, assignment in sorted(self.context.assignments.items())
            for p in sorted(assignment.partitions)
            if TopicPartition(topic, p) not in self.context.states and topic not in self.context.deleting
        ]

    def _start_new_partitions(self, partitions: list[TopicPartition]) -> None:
        """NewPartition -> OnlinePartition: leader = first live replica, ISR = live replicas."""
        started = []
        for tp in partitions:
            replicas = self.context.assignments[tp.topic].partitions[tp.partition]
            live = [b for b in replicas if b in self.context.live_brokers]
            state = PartitionState(live[0] if live else -1, 0, live, self.context.epoch)
            try:
                self.zk.create_partition_state(tp.topic, tp.partition, state)
                self.context.states[tp] = (state, 0)
            except NodeExistsError:
                found = self.zk.get_partition_state(tp.topic, tp.partition)
                if found is None:
                    continue
                self.context.states[tp] = found
            started.append(tp)
        if started:
            self._announce_leadership(started)
            self._send_update_metadata(started, self.context.live_brokers)

    def _announce_leadership(self, partitions: list[TopicPartition]) -> None:
        by_broker: dict[int, list[PartitionStateInfo]] = {}
        for tp in partitions:
            info = self.context.info(tp)
            for broker_id in info.replicas:
                if broker_id in self.context.live_brokers:
                    by_broker.setdefault(broker_id, []).append(info)
        for broker_id, infos in sorted(by_broker.items()):
            self.channel.leader_and_isr(broker_id, infos)

    def _send_update_metadata(self, partitions: list[TopicPartition], brokers: dict[int, BrokerRegistration]) -> None:
        infos = [self.context.info(tp) for tp in partitions if tp in self.context.states]
        for broker_id in sorted(brokers):
            self.channel.update_metadata(broker_id, infos, list(brokers.values()), self.broker_id)

    def _delete_topic(self, topic: str) -> None:
        partitions = [tp for tp in self.context.states if tp.topic == topic]
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            for broker_id in self.context.assignments[topic].partitions[tp.partition]:
                by_broker.setdefault(broker_id, []).append(tp)
        for broker_id, tps in sorted(by_broker.items()):
            if broker_id in self.context.live_brokers:
                self.channel.stop_replica(broker_id, tps, delete=True)
        deleted = [
            PartitionStateInfo(tp, None, LEADER_DURING_DELETE, -1, (), (), -1, self.context.epoch) for tp in partitions
        ]
        for broker_id in sorted(self.context.live_brokers):
            self.channel.update_metadata(broker_id, deleted, list(self.context.live_brokers.values()), self.broker_id)
        self.zk.delete_topic_nodes(topic)
        self._forget_topic(topic)

    def _forget_topic(self, topic: str) -> None:
        self.context.assignments.pop(topic, None)
        for tp in [tp for tp in self.context.states if tp.topic == topic]:
            del self.context.states[tp]
        self.context.deleting.discard(topic)
