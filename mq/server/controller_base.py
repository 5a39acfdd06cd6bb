"""What the controller knows, how it reaches brokers, and the actions every part of it shares.

``ControllerBase`` holds the controller's state (``ControllerContext``: live brokers, assignments, partition states and
the work under way), its single event queue (run on the thread ``post`` hands callables to, one event at a time;
``call`` returns a future of an event's result to other threads) and the actions its parts share: conditional state
writes, leadership changes, and LeaderAndIsr / UpdateMetadata / StopReplica through the ``ControllerChannel``. The
parts are the controller's own election and broker/topic events (``controller``), reassignment
(``controller_reassignment``) and topic deletion (``controller_deletion``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from mq.errors import ErrorCode
from mq.server import state_change_log as state_change
from mq.server.event_thread import call_through
from mq.server.logging_config import TRACE
from mq.server.metrics import ControllerStats
from mq.server.partition_state import PartitionStateInfo
from mq.topic_partition import TopicPartition
from mq.zk.codecs import (
    BrokerRegistration,
    PartitionState,
    TopicAssignment,
)
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, NodeExistsError

log = logging.getLogger("kafka.controller")

T = TypeVar("T")


class ControllerChannel(Protocol):
    def leader_and_isr(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        on_storage_errors: Callable[[list[TopicPartition]], None] | None = None,
    ) -> None:
        """Send leadership decisions; ``on_storage_errors`` (any thread) is told the partitions the broker answered
        KAFKA_STORAGE_ERROR for (its replicas in offline log dirs)."""

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
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """Per broker, its replicas in failed log dirs: never chosen as leaders until it re-registers."""

    def offline_on(self, tp: TopicPartition) -> set[int]:
        """The brokers whose replica of ``tp`` is offline."""
        return {broker for broker, tps in self.offline_replicas.items() if tp in tps}

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


class ControllerBase:
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
        self.stats = ControllerStats()
        """Leader elections timed and unclean ones counted here, on the controller thread."""
        self._watching = False
        self._watched_topics: set[str] = set()
        self._watched_brokers: set[int] = set()
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

    # --- shared actions ----------------------------------------------------------------------------------------

    def _change_leadership(self, partitions: list[TopicPartition], select: Selector) -> list[TopicPartition]:
        """Apply ``select`` to each partition; a new leader or ISR bumps the leader epoch, is written conditionally on
        the state znode's version, and is sent to the replicas. Returns the partitions that changed."""
        changed = []
        for tp in partitions:
            if tp not in self.context.states or tp.topic in self.context.deleting:
                continue
            started = time.monotonic()
            state, version = self.context.states[tp]
            chosen = select(tp, state, self.context.replicas(tp))
            if chosen is None or chosen == (state.leader, state.isr):
                continue
            leader, isr = chosen
            if self._write_state(tp, PartitionState(leader, state.leader_epoch + 1, isr, self.context.epoch), version):
                changed.append(tp)
                if leader != state.leader:
                    self.stats.leader_election.time_since(started)
                    if leader >= 0 and leader not in state.isr:
                        self.stats.unclean_elections += 1
        if changed:
            self._announce_leadership(changed)
        return changed

    def _write_state(self, tp: TopicPartition, state: PartitionState, version: int) -> bool:
        """Conditional write of a partition's state (logged to the state-change log); on a lost race the cached state
        is refreshed instead."""
        before = self.context.states.get(tp)
        try:
            self.context.states[tp] = (state, self.zk.set_partition_state(tp.topic, tp.partition, state, version))
            self._log_state_change(tp, "OnlinePartition" if before and before[0].leader >= 0 else "OfflinePartition")
            return True
        except BadVersionError:
            found = self.zk.get_partition_state(tp.topic, tp.partition)
            if found is not None:
                self.context.states[tp] = found
            return False

    def _log_state_change(self, tp: TopicPartition, from_state: str) -> None:
        """The state-change line of a partition whose state was just written (Online with a leader, else Offline)."""
        state, version = self.context.states[tp]
        text = state_change.leader_and_isr(state.leader, state.leader_epoch, state.isr, version)
        to_state = "OnlinePartition" if state.leader >= 0 else "OfflinePartition"
        state_change.controller_changed(self.broker_id, self.context.epoch, tp, from_state, to_state, text)

    def _log_replica_changes(self, brokers: set[int], from_state: str, to_state: str) -> None:
        """The replica state changes (TRACE) of every replica on ``brokers``."""
        if not brokers or not state_change.state_change_log.isEnabledFor(TRACE):
            return
        for tp in self.context.states:
            for replica in sorted(brokers & set(self.context.replicas(tp))):
                state_change.controller_replica_changed(
                    self.broker_id, self.context.epoch, replica, tp, from_state, to_state
                )

    def _stop_replicas(self, brokers: list[int], partitions: list[TopicPartition]) -> None:
        for broker_id in brokers:
            if broker_id in self.context.live_brokers:
                self.channel.stop_replica(broker_id, partitions, delete=True)

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
                self._log_state_change(tp, "NewPartition")
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
            leaders = sum(1 for info in infos if info.leader == broker_id)
            state_change.controller_sending(
                self.broker_id, self.context.epoch, broker_id, leaders, len(infos) - leaders
            )
            self.channel.leader_and_isr(broker_id, infos)

    def _send_update_metadata(self, partitions: list[TopicPartition], brokers: dict[int, BrokerRegistration]) -> None:
        infos = [
            self.context.info(tp)
            for tp in partitions
            if tp in self.context.states and tp.topic not in self.context.deleting
        ]
        for broker_id in sorted(brokers):
            self.channel.update_metadata(broker_id, infos, list(brokers.values()), self.broker_id)

    def _forget_topic(self, topic: str) -> None:
        self.context.assignments.pop(topic, None)
        for tp in [tp for tp in self.context.states if tp.topic == topic]:
            del self.context.states[tp]
            self.context.reassigning.pop(tp, None)
        self.context.deleting.discard(topic)
        self.context.deleting_on.pop(topic, None)
        self.context.deletion_started.pop(topic, None)
