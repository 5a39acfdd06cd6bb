"""Topic deletion (``/admin/delete_topics/<t>``): brokers drop the topic from their metadata, live replicas are
stopped and deleted, and the znodes go once every broker holding a replica confirmed; a deletion waiting for a
broker that is down resumes when it returns, and a new controller resumes what its predecessor left."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mq.server.controller_base import ControllerBase
from mq.server.partition_state import LEADER_DURING_DELETE, PartitionStateInfo
from mq.topic_partition import TopicPartition

log = logging.getLogger("kafka.controller")


class TopicDeletion(ControllerBase):
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
