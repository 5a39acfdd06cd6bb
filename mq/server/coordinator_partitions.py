"""The partitions of an internal topic a coordinator owns (``__consumer_offsets`` for the group coordinator,
``__transaction_state`` for the transaction coordinator): Kafka's load-on-election, unload-on-resignation cycle, and
(``InternalTopicLogs``) where each partition's log is.

A partition this broker comes to lead is loading (COORDINATOR_LOAD_IN_PROGRESS) while its log is read off the loop
(``_read_partition``, blocking), then installed on the loop (``_install``) and owned with the leader epoch of its
election (the coordinator epoch); a load that a resignation or a newer election superseded installs nothing. A
partition this broker no longer leads is unloaded at once (``_uninstall``), a load in progress cancelled. Tasks the
coordinator spawns are cancelled by ``shutdown``. Everything runs on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.server.replica_manager import ReplicaManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Loaded = TypeVar("Loaded")


class InternalTopicLogs:
    """The logs of ``topic``'s partitions this broker hosts, for a coordinator's state manager to read and append."""

    topic: str

    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        partition_count: Callable[[], int],
        time_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.partition_count = partition_count
        """Partitions of ``topic``: the topic's own count once it exists, else the configured one."""
        self.time_ms = time_ms

    def log_of(self, partition: int) -> Log | None:
        """The log of ``topic``-``partition`` (None when this broker hosts no replica of it)."""
        hosted = self.replica_manager.partitions.get(TopicPartition(self.topic, partition))
        if hosted is None:
            return None
        log_: Log = hosted.log
        return log_


class CoordinatorPartitions(ABC, Generic[Loaded]):
    """Ownership of ``topic``'s partitions; subclasses read, install and uninstall a partition's state."""

    topic: str

    def __init__(self) -> None:
        self.owned_partitions: dict[int, int] = {}
        """Owned partition -> the leader epoch it was loaded (or last re-elected) at."""
        self.loading_partitions: set[int] = set()
        self.active = True
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loads: dict[int, asyncio.Task[Any]] = {}
        """Partition -> its running load."""

    @abstractmethod
    def _read_partition(self, partition: int) -> Loaded:
        """The state ``partition``'s log holds (blocking: runs on a worker thread)."""

    @abstractmethod
    def _install(self, partition: int, loaded: Loaded) -> None:
        """Take ``loaded`` as the state of ``partition``, now owned (on the loop)."""

    @abstractmethod
    def _uninstall(self, partition: int) -> None:
        """Drop the state of ``partition``, no longer owned (on the loop)."""

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def partition_status(self, partition: int) -> ErrorCode:
        """Whether this coordinator may act on keys of ``partition`` now."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def on_leadership_change(self, tp: TopicPartition, is_leader: bool, leader_epoch: int = -1) -> None:
        """The replica manager's hook: load a partition of ``topic`` this broker now leads (a re-election of an owned
        one only updates its epoch), unload one it no longer leads."""
        if tp.topic != self.topic:
            return
        if not is_leader:
            self._unload(tp.partition)
        elif tp.partition in self.owned_partitions:
            self.owned_partitions[tp.partition] = leader_epoch
        elif tp.partition not in self.loading_partitions:
            self.loading_partitions.add(tp.partition)
            self._loads[tp.partition] = self._spawn(self._load(tp.partition, leader_epoch))

    async def _load(self, partition: int, leader_epoch: int) -> None:
        started = asyncio.get_running_loop().time()
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(None, self._read_partition, partition)
        except Exception:
            log.exception("loading %s-%d failed", self.topic, partition)
            loaded = None
        if self._loads.get(partition) is not asyncio.current_task():
            return  # superseded by a newer election
        del self._loads[partition]
        self.loading_partitions.discard(partition)
        if loaded is None:
            return
        self.owned_partitions[partition] = leader_epoch
        self._install(partition, loaded)
        elapsed_ms = int((asyncio.get_running_loop().time() - started) * 1000)
        log.info("Finished loading %s-%d in %d milliseconds", self.topic, partition, elapsed_ms)

    def _unload(self, partition: int) -> None:
        self.loading_partitions.discard(partition)
        load = self._loads.pop(partition, None)
        if load is not None:
            load.cancel()  # resigned while loading: what it read is dropped
        if self.owned_partitions.pop(partition, None) is None:
            return
        self._uninstall(partition)
        log.info("Unloaded %s-%d", self.topic, partition)

    def shutdown(self) -> None:
        self.active = False
        for partition in list(self.owned_partitions):
            self._unload(partition)
        for task in self._tasks:
            task.cancel()
