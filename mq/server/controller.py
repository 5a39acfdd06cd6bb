"""The controller: turns the metadata tree into leadership decisions and tells brokers about them.

One broker at a time is the controller: it owns ``/controller`` (ephemeral) and bumps ``/controller_epoch``.
Watches on the tree post events to one queue, processed in order on the controller's own thread (``post`` hands
them to it; the broker's event loop never runs controller work and reaches it only through ``call``):
new topics and partitions get a state znode (leader = first live replica, ISR = live replicas, leader epoch 0)
followed by LeaderAndIsr to their replicas and UpdateMetadata to every live broker; a deletion marker stops and
deletes the replicas, then removes the topic's znodes; a reassignment grows the replica set to old + new, waits
until every new replica is in the ISR, moves leadership into the new set and drops the old replicas; elections
(broker failure, preferred, unclean, controlled shutdown, automatic rebalance) follow ``mq.server.election``; a
``/log_dir_event_notification`` node (a broker's log dir failed) makes the controller send that broker LeaderAndIsr
for all its replicas, and those it answers KAFKA_STORAGE_ERROR for go offline: they lose leadership and leave the
ISR, and are not chosen again until the broker re-registers. A live broker that rewrites its registration (a
dynamic ``advertised.listeners``) has its new endpoints sent to every broker in UpdateMetadata.
Brokers learn everything through ``ControllerChannel``: in standalone mode it calls into the same process, in cluster
mode it sends Kafka's inter-broker requests. A controller that loses its session resigns; its watches stay
registered but do nothing until it is elected again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from mq.errors import ErrorCode
from mq.server import election
from mq.server.controller_base import ControllerContext, ElectionResult
from mq.server.controller_deletion import TopicDeletion
from mq.server.controller_reassignment import Reassignments
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.codecs import (
    ControllerInfo,
    PartitionState,
    decode_log_dir_event,
    decode_partition_list,
)
from mq.zk.store import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger("kafka.controller")

PREFERRED, UNCLEAN = 0, 1
"""ElectLeaders election types."""


class Controller(Reassignments, TopicDeletion):
    """The controller: its election, failover, watches, broker and topic events, elections and controlled shutdown."""

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
        self._watch_brokers()
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
        self._on_log_dir_events()

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
        store.watch_children(paths.LOG_DIR_EVENT_NOTIFICATION, lambda _: self._when_active(self._on_log_dir_events))
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

    def _watch_brokers(self) -> None:
        """Watch the registration of every live broker (once per process while it stays registered): a broker that
        rewrites its endpoints (a dynamic ``advertised.listeners``) is ``_on_broker_modification``."""
        for broker in set(self.context.live_brokers) - self._watched_brokers:
            self._watched_brokers.add(broker)

            def on_change(data: bytes | None, stat: object, broker: int = broker) -> bool:
                if data is None:
                    self._watched_brokers.discard(broker)
                    return False
                return self._when_active(self._on_broker_modification)

            self.zk.store.watch_data(paths.broker(broker), on_change)

    def _on_broker_modification(self) -> None:
        """Live brokers whose registered endpoints changed: every broker gets the new ones in UpdateMetadata."""
        registered = self.zk.get_all_brokers()
        live = self.context.live_brokers
        changed = [b for b, r in registered.items() if b in live and r.endpoints != live[b].endpoints]
        if not changed:
            return
        for broker in changed:
            live[broker] = registered[broker]
            log.info("broker %d now registers %s", broker, ",".join(registered[broker].endpoints))
        self._send_update_metadata(list(self.context.states), live)

    def _on_broker_change(self) -> None:
        previous = set(self.context.live_brokers)
        self.context.live_brokers = self.zk.get_all_brokers()
        self._watch_brokers()
        live = set(self.context.live_brokers)
        dead, born = previous - live, live - previous
        self.context.shutting_down &= live - born
        for broker in born | dead:
            self.context.offline_replicas.pop(broker, None)  # a restarted broker reloads its log dirs
        self._log_replica_changes(dead, "OnlineReplica", "OfflineReplica")
        self._log_replica_changes(born, "OfflineReplica", "OnlineReplica")
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
            online = live - self.context.offline_on(tp)
            chosen = election.offline_leader(replicas, state.isr, online, unclean=self.unclean_election(tp.topic))
            if chosen is not None:
                return chosen
            return -1, [b for b in state.isr if b in live] or state.isr[-1:]

        affected_tps = [tp for tp, (state, _) in self.context.states.items() if affected(state)]
        return self._change_leadership(affected_tps, select)

    def _on_log_dir_events(self) -> None:
        """Brokers whose log dirs failed: remove the notifications and send each live one LeaderAndIsr for all its
        replicas; the partitions it answers KAFKA_STORAGE_ERROR for come back as an event (``_on_replicas_offline``)."""
        store = self.zk.store
        brokers: set[int] = set()
        for child in store.get_children(paths.LOG_DIR_EVENT_NOTIFICATION):
            path = f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{child}"
            data = store.get_or_none(path)
            if data is not None:
                try:
                    brokers.add(decode_log_dir_event(data))
                except ValueError as exc:
                    log.warning("ignoring log dir event %s: %s", path, exc)
            with contextlib.suppress(NoNodeError):
                store.delete(path)
        for broker in sorted(brokers & set(self.context.live_brokers)):
            hosted = [tp for tp in self.context.states if broker in self.context.replicas(tp)]

            def offline(tps: list[TopicPartition], broker: int = broker) -> None:
                self._when_active(lambda: self._on_replicas_offline(broker, tps))

            self.channel.leader_and_isr(broker, [self.context.info(tp) for tp in hosted], offline)

    def _on_replicas_offline(self, broker: int, partitions: list[TopicPartition]) -> None:
        """Kafka's OnlineReplica -> OfflineReplica for ``broker``'s replicas of ``partitions``: the partitions it
        leads elect a leader among the other live ISR members (leader -1 when there is none), and it leaves the ISR
        of the others."""
        known = [tp for tp in partitions if tp in self.context.states]
        if not known:
            return
        self.context.offline_replicas.setdefault(broker, set()).update(known)
        log.info("replicas of %s on broker %d are in an offline log dir", sorted(map(str, known)), broker)
        live = set(self.context.live_brokers) - self.context.shutting_down

        def select(tp: TopicPartition, state: PartitionState, replicas: list[int]) -> tuple[int, list[int]]:
            online = live - self.context.offline_on(tp)
            isr = [b for b in state.isr if b != broker]
            if state.leader != broker:
                return state.leader, isr or state.isr
            chosen = election.offline_leader(replicas, isr, online, unclean=self.unclean_election(tp.topic))
            if chosen is not None:
                return chosen
            return -1, [b for b in isr if b in online] or state.isr[-1:]

        self._change_leadership(known, select)
        self._send_update_metadata(known, self.context.live_brokers)

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
