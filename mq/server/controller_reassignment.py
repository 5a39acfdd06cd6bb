"""Partition reassignment (``/admin/reassign_partitions``), Kafka's ZooKeeper-era way: the replica set grows to
target + original (adding/removing recorded in the topic znode), the leader epoch grows so every replica hears of
it; once every target replica is in the ISR, leadership moves into the target set, the ISR shrinks to it, the target
becomes the assignment (the last durable write), the removed replicas are deleted and the request entry dropped."""

from __future__ import annotations

import logging

from mq.server import election
from mq.server.controller_base import ControllerBase
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.codecs import (
    PartitionState,
    TopicAssignment,
    decode_reassignment,
    encode_reassignment,
)
from mq.zk.store import BadVersionError, NoNodeError

log = logging.getLogger("kafka.controller")


class Reassignments(ControllerBase):
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


def _with(by_partition: dict[int, list[int]], partition: int, replicas: list[int]) -> dict[int, list[int]]:
    """``by_partition`` with ``partition`` set to ``replicas`` (removed when empty)."""
    updated = {p: r for p, r in by_partition.items() if p != partition}
    if replicas:
        updated[partition] = replicas
    return updated
