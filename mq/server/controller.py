"""The controller: turns the metadata tree into leadership decisions and tells brokers about them.

One broker at a time is the controller: it owns ``/controller`` (ephemeral) and bumps ``/controller_epoch``.
Watches on the tree post events to one queue, processed in order on the controller's own thread (``post`` hands
them to it; the broker's event loop never runs controller work and reaches it only through ``call``):
new topics and partitions get a state znode (leader = first live replica, ISR = live replicas, leader epoch 0)
followed by LeaderAndIsr to their replicas and UpdateMetadata to every live broker; a deletion marker stops and
deletes the replicas, then removes the topic's znodes; a reassignment grows the replica set to old + new, waits
until every new replica is in the ISR, moves leadership into the new set and drops the old replicas; elections
(broker failure, preferred, unclean, controlled shutdown, automatic rebalance) follow ``mq.server.election``.
Brokers learn everything through ``ControllerChannel``: in standalone mode it calls into the same process, in cluster
mode it sends Kafka's inter-broker requests. A controller that loses its session resigns; its watches stay
registered but do nothing until it is elected again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from mq.errors import ErrorCode
from mq.server import election
from mq.server.event_thread import call_through
from mq.server.partition_state import LEADER_DURING_DELETE, PartitionStateInfo
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.codecs import (
    BrokerRegistration,
    ControllerInfo,
    PartitionState,
    TopicAssignment,
    decode_partition_list,
    decode_reassignment,
    encode_reassignment,
)
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger(__name__)

PREFERRED, UNCLEAN = 0, 1
"""ElectLeaders election types."""


class ControllerChannel(Protocol):
    def leader_and_isr(self, broker_id: int, partitions: list[PartitionStateInfo]) -> None: ...

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None: ...

    def stop_replica(
        self,
        broker_id: int,
        partitions: list[TopicPartition],
        delete: bool,
        on_response: Callable[[bool], None] | None = None,
    ) -> None:
        """Stop (and with ``delete`` remove) replicas; ``on_response`` is told whether the broker confirmed it, or
        False when the broker could not be reached."""


T = TypeVar("T")
ElectionResult = tuple[ErrorCode, str | None]
Selector = Callable[[TopicPartition, PartitionState, list[int]], "tuple[int, list[int]] | None"]


@dataclass
class ControllerContext:
    epoch: int = 0
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, tuple[PartitionState, int]] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    deleting_on: dict[str, set[int]] = field(default_factory=dict)
    """Per topic being deleted, the brokers that have not confirmed the deletion of their replicas yet."""
    deletion_started: dict[str, set[int]] = field(default_factory=dict)
    """Per topic being deleted, the brokers asked to delete whose answer has not come yet."""
    reassigning: dict[TopicPartition, list[int]] = field(default_factory=dict)
    """Target replicas of the partitions being reassigned."""
    shutting_down: set[int] = field(default_factory=set)
    """Brokers in controlled shutdown: never chosen as leaders until they re-register."""

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments[tp.topic].partitions[tp.partition]

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
    """Runs on the thread ``post`` hands callables to (from any thread), one event at a time."""

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
        self._watching = False
        self._watched_topics: set[str] = set()
        self._events: deque[Callable[[], None]] = deque()
        self._draining = False
        self._retired = False

    # --- event queue -------------------------------------------------------------------------------------------

    def _enqueue(self, event: Callable[[], None]) -> bool:
        """Queue ``event`` on the loop; returns True so it can serve as a watch callback that stays registered."""
        self._post(lambda: self._run(event))
        return True

    def call(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` as a controller event (after those queued before it); its result goes to the future."""
        return call_through(self._enqueue, fn)

    def _when_active(self, event: Callable[[], None]) -> bool:
        """Queue ``event`` to run only if this broker is the controller when its turn comes."""
        return self._enqueue(lambda: event() if self.active else None)

    def _run(self, event: Callable[[], None]) -> None:
        self._events.append(event)
        if self._draining:
            return
        self._draining = True
        try:
            while self._events:
                try:
                    with self.zk.store.batch():  # a local tree is written once per event
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
        if self.active or self._retired:
            return
        try:
            self.zk.store.create(
                paths.CONTROLLER, ControllerInfo(self.broker_id, int(time.time() * 1000)).encode(), ephemeral=True
            )
        except NodeExistsError:
            return
        self.context = ControllerContext(epoch=self._bump_epoch())
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.context.epoch)
        self._on_failover()

    def resign(self) -> None:
        """The session that held ``/controller`` is gone: stop acting, then compete again (as a controller event)."""
        self._enqueue(self._resign)

    def _resign(self) -> None:
        if self.active:
            log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.context.epoch)
        self.active = False
        self._elect()

    def retire(self) -> None:
        """This broker is stopping: stop acting as controller, delete ``/controller`` if this broker holds it (the
        other brokers' watches elect a successor at once) and never compete for it again."""
        self.active, self._retired = False, True
        with contextlib.suppress(NoNodeError, BadVersionError):
            data, stat = self.zk.store.get(paths.CONTROLLER)
            if ControllerInfo.decode(data).broker_id == self.broker_id:
                self.zk.store.delete(paths.CONTROLLER, stat.version)
                log.info("broker %d hands over the controller role (epoch %d)", self.broker_id, self.context.epoch)

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
        self.context.live_brokers = self.zk.get_all_brokers()
        for topic in self.zk.get_all_topics():
            self._load_topic(topic)
        self._watch()
        for topic in self.context.assignments:
            self._watch_topic(topic)
        self._start_new_partitions(self._partitions_without_state())
        live = set(self.context.live_brokers)
        elected = self._elect_leaders(lambda state: state.leader not in live or not set(state.isr) <= live)
        self._announce_leadership([tp for tp in self.context.states if tp not in elected])
        self._send_update_metadata(list(self.context.states), self.context.live_brokers)
        for tp in list(self.context.reassigning):
            self._maybe_complete_reassignment(tp)
        self._on_reassignment_request()
        self._on_delete_markers()

    def _watch(self) -> None:
        """Register the controller's watches once per process; they act only while this broker is the controller."""
        if self._watching:
            return
        self._watching = True
        store = self.zk.store
        store.watch_children(paths.BROKER_IDS, lambda _: self._when_active(self._on_broker_change))
        store.watch_children(paths.BROKER_TOPICS, lambda _: self._when_active(self._on_topics_change))
        store.watch_children(paths.DELETE_TOPICS, lambda _: self._when_active(self._on_delete_markers))
        store.watch_children(paths.ISR_CHANGE_NOTIFICATION, lambda _: self._when_active(self._on_isr_changes))
        store.watch_data(
            paths.PREFERRED_REPLICA_ELECTION, lambda data, stat: self._when_active(self._on_preferred_election)
        )
        store.watch_data(paths.REASSIGN_PARTITIONS, lambda data, stat: self._when_active(self._on_reassignment_request))

    # --- events ------------------------------------------------------------------------------------------------

    def _load_topic(self, topic: str) -> None:
        assignment = self.zk.get_topic_assignment(topic)
        if assignment is None:
            return
        self.context.assignments[topic] = assignment
        for partition, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, partition)
            found = self.zk.get_partition_state(topic, partition)
            if found is not None:
                self.context.states[tp] = found
            removing = assignment.removing_replicas.get(partition)
            if removing or assignment.adding_replicas.get(partition):
                self.context.reassigning[tp] = [b for b in replicas if b not in (removing or [])]

    def _watch_topic(self, topic: str) -> None:
        """Watch a topic's assignment (partition additions) until the topic znode goes away."""
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def on_change(data: bytes | None, stat: object) -> bool:
            if data is None:
                self._watched_topics.discard(topic)
                return False
            return self._when_active(lambda: self._on_assignment_change(topic))

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
        self.context.shutting_down &= live - born
        changed = self._elect_leaders(lambda state: bool(dead & ({state.leader} | set(state.isr))) or state.leader < 0)
        if born:
            self._resume_deletions()
            restarted = [
                tp for tp in self.context.states if born & set(self.context.replicas(tp)) and tp not in changed
            ]
            self._announce_leadership(restarted)
        self._send_update_metadata(list(self.context.states), self.context.live_brokers)
        if dead or born:
            log.info("live brokers now %s (gone %s, back %s)", sorted(live), sorted(dead), sorted(born))

    def _elect_leaders(self, affected: Callable[[PartitionState], bool]) -> list[TopicPartition]:
        """OfflinePartition -> OnlinePartition for every affected partition (``election.offline_leader``); without an
        eligible replica the partition gets leader -1 and keeps its last ISR member, so that replica can lead again
        when it returns."""
        live = set(self.context.live_brokers) - self.context.shutting_down

        def select(tp: TopicPartition, state: PartitionState, replicas: list[int]) -> tuple[int, list[int]]:
            chosen = election.offline_leader(replicas, state.isr, live, unclean=self.unclean_election(tp.topic))
            if chosen is not None:
                return chosen
            return -1, [b for b in state.isr if b in live] or state.isr[-1:]

        affected_tps = [tp for tp, (state, _) in self.context.states.items() if affected(state)]
        return self._change_leadership(affected_tps, select)

    def _change_leadership(self, partitions: list[TopicPartition], select: Selector) -> list[TopicPartition]:
        """Apply ``select`` to each partition; a new leader or ISR bumps the leader epoch, is written conditionally on
        the state znode's version, and is sent to the replicas. Returns the partitions that changed."""
        changed = []
        for tp in partitions:
            if tp not in self.context.states or tp.topic in self.context.deleting:
                continue
            state, version = self.context.states[tp]
            chosen = select(tp, state, self.context.replicas(tp))
            if chosen is None or chosen == (state.leader, state.isr):
                continue
            leader, isr = chosen
            if self._write_state(tp, PartitionState(leader, state.leader_epoch + 1, isr, self.context.epoch), version):
                changed.append(tp)
        if changed:
            self._announce_leadership(changed)
        return changed

    def _write_state(self, tp: TopicPartition, state: PartitionState, version: int) -> bool:
        """Conditional write of a partition's state; on a lost race the cached state is refreshed instead."""
        try:
            self.context.states[tp] = (state, self.zk.set_partition_state(tp.topic, tp.partition, state, version))
            return True
        except BadVersionError:
            found = self.zk.get_partition_state(tp.topic, tp.partition)
            if found is not None:
                self.context.states[tp] = found
            return False

    def _on_isr_changes(self) -> None:
        """Leaders changed ISRs: reread those states, tell every broker, remove the notifications, and finish the
        reassignments whose new replicas have all joined the ISR."""
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
        for tp in changed:
            if tp in self.context.reassigning:
                self._maybe_complete_reassignment(tp)

    # --- preferred, unclean and automatic elections ------------------------------------------------------------

    def _on_preferred_election(self) -> None:
        """``/admin/preferred_replica_election``: elect the preferred replica of each listed partition where it is
        alive and in the ISR, then remove the znode."""
        data = self.zk.store.get_or_none(paths.PREFERRED_REPLICA_ELECTION)
        if data is None:
            return
        wanted = sorted({TopicPartition(t, p) for t, p in decode_partition_list(data)})
        results = self.elect_leaders(wanted, PREFERRED)
        for tp, (code, _) in results.items():
            if code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE:
                log.info(
                    "Preferred replica %d for partition %s is either not alive or not in the isr",
                    self.context.replicas(tp)[0],
                    tp,
                )
        with contextlib.suppress(NoNodeError):
            self.zk.store.delete(paths.PREFERRED_REPLICA_ELECTION)

    def elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, ElectionResult]:
        """ElectLeaders: a preferred (0) or unclean (1) election of each partition (every partition for None), with
        Kafka's per-partition outcome. Unclean elections only act on partitions without a live leader."""
        live = set(self.context.live_brokers) - self.context.shutting_down
        results: dict[TopicPartition, ElectionResult] = {}
        eligible = []
        for tp in sorted(self.context.states) if partitions is None else partitions:
            if tp not in self.context.states or tp.topic in self.context.deleting:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            state, _ = self.context.states[tp]
            replicas = self.context.replicas(tp)
            if election_type == PREFERRED:
                if state.leader == replicas[0]:
                    results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                elif election.preferred_leader(replicas, state.isr, live) is None:
                    results[tp] = (
                        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                        f"Failed to elect leader for partition {tp} under strategy PreferredReplicaPartitionLeaderElectionStrategy",
                    )
                else:
                    eligible.append(tp)
            elif state.leader in live:
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            elif election.offline_leader(replicas, state.isr, live, unclean=True) is None:
                results[tp] = (
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {tp} under strategy UncleanLeaderElectionStrategy",
                )
            else:
                eligible.append(tp)

        def select(tp: TopicPartition, state: PartitionState, replicas: list[int]) -> tuple[int, list[int]] | None:
            if election_type == PREFERRED:
                return election.preferred_leader(replicas, state.isr, live)
            return election.offline_leader(replicas, state.isr, live, unclean=True)

        changed = set(self._change_leadership(eligible, select))
        for tp in eligible:
            if tp in changed:
                results[tp] = (ErrorCode.NONE, None)
            else:
                results[tp] = (ErrorCode.NOT_CONTROLLER, f"The state of {tp} changed during the election; retry")
        if changed:
            self._send_update_metadata(sorted(changed), self.context.live_brokers)
        return results

    def check_leader_imbalance(self, threshold_percent: int) -> None:
        """``auto.leader.rebalance.enable``: preferred elections for the brokers whose share of partitions they
        should lead but do not exceeds ``threshold_percent``; skipped while reassignments or deletions run."""
        if not self.active or self.context.reassigning or self.context.deleting:
            return
        preferred: dict[object, int] = {tp: self.context.replicas(tp)[0] for tp in self.context.states}
        leaders: dict[object, int] = {tp: state.leader for tp, (state, _) in self.context.states.items()}
        imbalanced = election.imbalanced_partitions(preferred, leaders, threshold_percent)
        live = set(self.context.live_brokers) - self.context.shutting_down
        for broker, keys in sorted(imbalanced.items()):
            if broker not in live:
                continue
            log.info("leader imbalance of broker %d: electing preferred leaders of %d partitions", broker, len(keys))
            self.elect_leaders(sorted(k for k in keys if isinstance(k, TopicPartition)), PREFERRED)

    # --- controlled shutdown -----------------------------------------------------------------------------------

    def controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        """Move leadership off ``broker_id`` and take it out of every ISR; returns the replicated partitions it still
        leads (those without another live in-sync replica). As in Kafka, partitions with a single replica and topics
        being deleted are left alone: nothing can take them over, so they never hold a shutdown up."""
        self.context.shutting_down.add(broker_id)
        live = set(self.context.live_brokers)
        hosted = [
            tp
            for tp in self.context.states
            if broker_id in self.context.replicas(tp)
            and len(self.context.replicas(tp)) > 1
            and tp.topic not in self.context.deleting
        ]

        def select(tp: TopicPartition, state: PartitionState, replicas: list[int]) -> tuple[int, list[int]] | None:
            if state.leader == broker_id:
                return election.controlled_shutdown_leader(replicas, state.isr, live, self.context.shutting_down)
            if broker_id in state.isr and len(state.isr) > 1:
                return state.leader, [b for b in state.isr if b != broker_id]
            return None

        changed = self._change_leadership(hosted, select)
        if changed:
            self._send_update_metadata(changed, self.context.live_brokers)
        remaining = [tp for tp in hosted if self.context.states[tp][0].leader == broker_id]
        log.info(
            "controlled shutdown of broker %d: moved %d partitions, %d remain", broker_id, len(changed), len(remaining)
        )
        return remaining

    # --- reassignment ------------------------------------------------------------------------------------------

    def _on_reassignment_request(self) -> None:
        """``/admin/reassign_partitions``: start each listed move that is not already under way; entries for unknown
        partitions or topics being deleted, and moves to the current replicas, are removed at once."""
        data = self.zk.store.get_or_none(paths.REASSIGN_PARTITIONS)
        if data is None:
            return
        finished = []
        for topic, partition, target in decode_reassignment(data):
            tp = TopicPartition(topic, partition)
            assignment = self.context.assignments.get(topic)
            if assignment is None or partition not in assignment.partitions or topic in self.context.deleting:
                log.error("Skipping reassignment of partition %s since it doesn't exist", tp)
                finished.append(tp)
            elif self.context.reassigning.get(tp) == target:
                continue
            elif tp not in self.context.reassigning and assignment.partitions[partition] == target:
                finished.append(tp)
            else:
                self._start_reassignment(tp, target)
                if self._maybe_complete_reassignment(tp, remove_request=False):
                    finished.append(tp)
        self._remove_reassignment_requests(finished)

    def _start_reassignment(self, tp: TopicPartition, target: list[int]) -> None:
        """Replicas become target + the original ones not in it (adding/removing recorded in the topic znode); the
        leader epoch grows so every replica, new ones included, hears of the enlarged set."""
        assignment = self.context.assignments[tp.topic]
        current = assignment.partitions[tp.partition]
        adding_before = assignment.adding_replicas.get(tp.partition, [])
        original = [b for b in current if b not in adding_before]
        grown = target + [b for b in original if b not in target]
        updated = TopicAssignment(
            {**assignment.partitions, tp.partition: grown},
            assignment.topic_id,
            _with(assignment.adding_replicas, tp.partition, [b for b in target if b not in original]),
            _with(assignment.removing_replicas, tp.partition, [b for b in original if b not in target]),
        )
        self.zk.set_topic_assignment(tp.topic, updated)
        self.context.assignments[tp.topic] = updated
        self.context.reassigning[tp] = target
        log.info("reassignment of %s: replicas %s -> %s (now %s)", tp, original, target, grown)
        self._stop_replicas([b for b in current if b not in grown], [tp])
        state, version = self.context.states[tp]
        self._write_state(
            tp, PartitionState(state.leader, state.leader_epoch + 1, state.isr, self.context.epoch), version
        )
        self._announce_leadership([tp])
        self._send_update_metadata([tp], self.context.live_brokers)

    def _maybe_complete_reassignment(self, tp: TopicPartition, *, remove_request: bool = True) -> bool:
        """When every target replica is in the ISR: lead from the target set, shrink the ISR to it, record the target
        as the assignment (the last durable write), delete the removed replicas, drop the request entry."""
        target = self.context.reassigning.get(tp)
        if target is None or tp not in self.context.states:
            return False
        state, version = self.context.states[tp]
        if not set(target) <= set(state.isr):
            return False
        live = set(self.context.live_brokers) - self.context.shutting_down
        chosen = election.reassigned_leader(target, state.leader, state.isr, live)
        if chosen is None:
            return False
        leader, isr = chosen
        if not self._write_state(tp, PartitionState(leader, state.leader_epoch + 1, isr, self.context.epoch), version):
            return False
        assignment = self.context.assignments[tp.topic]
        removed = [b for b in assignment.partitions[tp.partition] if b not in target]
        updated = TopicAssignment(
            {**assignment.partitions, tp.partition: list(target)},
            assignment.topic_id,
            _with(assignment.adding_replicas, tp.partition, []),
            _with(assignment.removing_replicas, tp.partition, []),
        )
        self.context.assignments[tp.topic] = updated
        del self.context.reassigning[tp]
        self._announce_leadership([tp])
        self._stop_replicas(removed, [tp])
        self.zk.set_topic_assignment(tp.topic, updated)
        self._send_update_metadata([tp], self.context.live_brokers)
        if remove_request:
            self._remove_reassignment_requests([tp])
        log.info("reassignment of %s completed: replicas %s, leader %d", tp, target, leader)
        return True

    def _stop_replicas(self, brokers: list[int], partitions: list[TopicPartition]) -> None:
        for broker_id in brokers:
            if broker_id in self.context.live_brokers:
                self.channel.stop_replica(broker_id, partitions, delete=True)

    def _remove_reassignment_requests(self, done: list[TopicPartition]) -> None:
        """Rewrite ``/admin/reassign_partitions`` without ``done`` (conditionally; deleted when empty)."""
        if not done:
            return
        store = self.zk.store
        while True:
            try:
                data, stat = store.get(paths.REASSIGN_PARTITIONS)
            except NoNodeError:
                return
            remaining = [m for m in decode_reassignment(data) if TopicPartition(m[0], m[1]) not in done]
            try:
                if remaining:
                    store.set(paths.REASSIGN_PARTITIONS, encode_reassignment(remaining), stat.version)
                else:
                    store.delete(paths.REASSIGN_PARTITIONS, stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue

    # --- topic deletion ----------------------------------------------------------------------------------------

    def _on_delete_markers(self) -> None:
        for topic in self.zk.get_topics_marked_for_deletion():
            if topic in self.context.deleting:
                continue
            if topic not in self.context.assignments:
                self.zk.delete_topic_nodes(topic)
                continue
            self.context.deleting.add(topic)
            self._delete_topic(topic)

    def _resume_deletions(self) -> None:
        for topic in sorted(self.context.deleting):
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
            live = [b for b in self.context.replicas(tp) if b in self.context.live_brokers]
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
            if tp.topic in self.context.deleting:
                continue
            info = self.context.info(tp)
            for broker_id in info.replicas:
                if broker_id in self.context.live_brokers:
                    by_broker.setdefault(broker_id, []).append(info)
        for broker_id, infos in sorted(by_broker.items()):
            self.channel.leader_and_isr(broker_id, infos)

    def _send_update_metadata(self, partitions: list[TopicPartition], brokers: dict[int, BrokerRegistration]) -> None:
        infos = [
            self.context.info(tp)
            for tp in partitions
            if tp in self.context.states and tp.topic not in self.context.deleting
        ]
        for broker_id in sorted(brokers):
            self.channel.update_metadata(broker_id, infos, list(brokers.values()), self.broker_id)

    def _delete_topic(self, topic: str) -> None:
        """Brokers drop the topic from their metadata, live replicas are stopped and deleted; the znodes go once
        every broker holding a replica has confirmed its deletion (StopReplica answered without error), so a replica
        on a broker that is down, or that failed to answer, is deleted when that broker returns (the deletion stays
        pending, and a new controller resumes it)."""
        partitions = [tp for tp in self.context.states if tp.topic == topic]
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            for broker_id in self.context.replicas(tp):
                by_broker.setdefault(broker_id, []).append(tp)
        pending = self.context.deleting_on.setdefault(topic, set(by_broker))
        started = self.context.deletion_started.setdefault(topic, set())
        for broker_id, tps in sorted(by_broker.items()):
            if broker_id in self.context.live_brokers and broker_id in pending and broker_id not in started:
                started.add(broker_id)
                self.channel.stop_replica(broker_id, tps, True, self._deletion_answer(topic, broker_id))
        deleted = [
            PartitionStateInfo(tp, None, LEADER_DURING_DELETE, -1, (), (), -1, self.context.epoch) for tp in partitions
        ]
        for broker_id in sorted(self.context.live_brokers):
            self.channel.update_metadata(broker_id, deleted, list(self.context.live_brokers.values()), self.broker_id)
        self._maybe_finish_deletion(topic)

    def _deletion_answer(self, topic: str, broker_id: int) -> Callable[[bool], None]:
        """The callback for ``broker_id``'s StopReplica answer: it joins the controller's event queue."""
        epoch = self.context.epoch

        def answered(ok: bool) -> None:
            if not self.active or self.context.epoch != epoch or topic not in self.context.deleting:
                return  # a later controller term resends what is still pending
            self.context.deletion_started.get(topic, set()).discard(broker_id)
            if ok:
                self.context.deleting_on[topic].discard(broker_id)
                self._maybe_finish_deletion(topic)
            else:
                log.warning("broker %d did not delete its replicas of %s; retried when it returns", broker_id, topic)

        def on_response(ok: bool) -> None:
            self._enqueue(lambda: answered(ok))

        return on_response

    def _maybe_finish_deletion(self, topic: str) -> None:
        pending = self.context.deleting_on[topic]
        if pending:
            log.info("deletion of topic %s waits for brokers %s", topic, sorted(pending))
            return
        self.zk.delete_topic_nodes(topic)
        self._forget_topic(topic)

    def _forget_topic(self, topic: str) -> None:
        self.context.assignments.pop(topic, None)
        for tp in [tp for tp in self.context.states if tp.topic == topic]:
            del self.context.states[tp]
            self.context.reassigning.pop(tp, None)
        self.context.deleting.discard(topic)
        self.context.deleting_on.pop(topic, None)
        self.context.deletion_started.pop(topic, None)


def _with(by_partition: dict[int, list[int]], partition: int, replicas: list[int]) -> dict[int, list[int]]:
    """``by_partition`` with ``partition`` set to ``replicas`` (removed when empty)."""
    updated = {p: r for p, r in by_partition.items() if p != partition}
    if replicas:
        updated[partition] = replicas
    return updated
