"""Leaders' ISR changes, written to the metadata tree off the event loop and in batches.

A leader proposes a change (``IsrChange``: the new ISR, based on the state znode version and leader epoch it
knows). The writer queues it; one batch at a time runs on the metadata thread: each change is a write of the
partition's state znode conditional on that version, then one ``/isr_change_notification/isr_change_<seq>`` node
lists every partition whose write succeeded, so the controller rereads them all at once (Kafka's ISR change
propagation). Changes proposed while a batch is under way form the next batch. The outcome of each change goes
back to the loop through ``deliver``: the znode's new version, or None when the write lost a race with the
controller or the metadata tree could not be reached. A write that lost to a controller's write within the same
leader epoch (the controller took a dead broker out of the ISR, or put a returning one back, without electing) also
brings the znode as it now is (``Current``): the leader takes that ISR and version, so its next change is based on
them. Without that, a leader whose cached version the controller had moved on kept failing every ISR change until a
LeaderAndIsr of a new epoch came (Kafka's KAFKA-2729): the ISR never grew back and writes needing
min.insync.replicas waited for ever. Fetches and produces never wait for any of this.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.codecs import PartitionState, encode_partition_list
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, NoNodeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IsrChange:
    tp: TopicPartition
    leader_epoch: int
    isr: frozenset[int]
    zk_version: int
    """The state znode version the change is based on."""
    controller_epoch: int


@dataclass(frozen=True)
class Current:
    """The state znode as the controller left it: its ISR and version (same leader, same leader epoch)."""

    isr: frozenset[int]
    zk_version: int


Outcome = tuple[IsrChange, int | None, Current | None]


class IsrChangeWriter:
    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        executor: Executor,
        post: Callable[[Callable[[], None]], None],
        deliver: Callable[[IsrChange, int | None, Current | None], None],
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._executor = executor
        self._post = post
        self._deliver = deliver
        self._queued: list[IsrChange] = []
        self._writing = False

    def submit(self, change: IsrChange) -> None:
        """Queue ``change`` (on the loop); it is written with the next batch."""
        self._queued.append(change)
        if not self._writing:
            self._start()

    def _start(self) -> None:
        batch, self._queued = self._queued, []
        self._writing = True
        future = self._executor.submit(self.write_batch, batch)
        future.add_done_callback(lambda done: self._post(lambda: self._written(batch, done)))

    def _written(self, batch: list[IsrChange], future: Future[list[Outcome]]) -> None:
        self._writing = False
        error = future.exception()
        if error is not None:
            log.warning("ISR changes of %d partitions could not be written: %s", len(batch), error)
        outcomes = [(change, None, None) for change in batch] if error is not None else future.result()
        for change, version, current in outcomes:
            self._deliver(change, version, current)
        if self._queued:
            self._start()

    def write_batch(self, batch: list[IsrChange]) -> list[Outcome]:
        """On the metadata thread: conditional state writes, then one notification for those that succeeded."""
        outcomes: list[Outcome] = []
        for change in batch:
            tp = change.tp
            state = PartitionState(self.broker_id, change.leader_epoch, sorted(change.isr), change.controller_epoch)
            try:
                version = self.zk.set_partition_state(tp.topic, tp.partition, state, change.zk_version)
            except (BadVersionError, NoNodeError):
                log.info(
                    "Cached zkVersion %d not equal to that in zookeeper, skip updating ISR of %s", change.zk_version, tp
                )
                outcomes.append((change, None, self._current(change)))
                continue
            except Exception as exc:  # the metadata tree is unreachable: the change is proposed again later
                log.warning("ISR change of %s not written: %s", tp, exc)
                outcomes.append((change, None, None))
                continue
            log.info("ISR of %s is now %s", tp, sorted(change.isr))
            outcomes.append((change, version, None))
        written = [(c.tp.topic, c.tp.partition) for c, version, _ in outcomes if version is not None]
        if written:
            try:
                self.zk.store.create(
                    paths.ISR_CHANGE_PREFIX, encode_partition_list(written), sequence=True, makepath=True
                )
            except Exception as exc:  # the states are written; the controller finds them on its next reread
                log.warning("ISR change notification for %d partitions not written: %s", len(written), exc)
        return outcomes

    def _current(self, change: IsrChange) -> Current | None:
        """The state znode of ``change``'s partition when this broker still leads it in the same epoch; else None
        (a new epoch comes with the controller's LeaderAndIsr)."""
        try:
            found = self.zk.get_partition_state(change.tp.topic, change.tp.partition)
        except Exception:
            return None
        if found is None:
            return None
        state, version = found
        if state.leader != self.broker_id or state.leader_epoch != change.leader_epoch:
            return None
        return Current(frozenset(state.isr), version)
