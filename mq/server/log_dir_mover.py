"""Moving replicas between the log dirs of this broker (AlterReplicaLogDirs), Kafka's ReplicaAlterLogDirsThread.

One task on the loop copies each future log (``LogManager.future_logs``) from its partition's current log: whole
batches from the future log's end, at most ``chunk_bytes`` a step, appended as a follower appends (offsets, epochs
and bytes kept) while the current log goes on taking appends. A future log whose current log was truncated below it
(a new leader) or whose start moved beyond it (retention) starts again from the current log start. When the future
log's end reaches the current log's end, the swap (``LogManager.replace_current_with_future``) runs in the same loop
step, so no append lands in between, and the partition serves from the new dir.

``replica.alter.log.dirs.io.max.bytes.per.second`` (a dynamic broker config; Long.MAX_VALUE, the default, means
unlimited) limits the bytes copied per second through a token bucket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from mq.config import LONG_MAX
from mq.errors import KafkaError
from mq.records.batch_header import Codec, parse_header
from mq.server.partition import Partition
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.storage.token_bucket import TokenBucket
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

CHUNK_BYTES = 1024 * 1024
IDLE_WAIT_S = 0.05
"""How long the task waits before looking again when no future log had anything to copy."""


class LogDirMover:
    """Copies future logs from their current logs on the loop and swaps each in once caught up; ``partition(tp)``
    gives the hosted partition (None when this broker does not host it, yet or any more)."""

    def __init__(
        self,
        log_manager: LogManager,
        partition: Callable[[TopicPartition], Partition | None],
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.log_manager = log_manager
        self.partition = partition
        self.chunk_bytes = chunk_bytes
        self.rate = LONG_MAX
        self._bucket: TokenBucket | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def update_rate(self, rate: int) -> None:
        """Bytes per second the copies may read (LONG_MAX: unlimited); a copy waiting on the old rate goes on at
        once under the new one."""
        if rate != self.rate:
            self.rate = rate
            self._bucket = None if rate >= LONG_MAX else TokenBucket(max(rate, 1))
            self._wakeup.set()
            log.info("replica log dir move rate: %s B/s", "unlimited" if rate >= LONG_MAX else rate)

    @property
    def _chunk(self) -> int:
        """Bytes read per step: at most a tenth of a second's worth under a limit (a read still returns at least
        one whole batch)."""
        return self.chunk_bytes if self._bucket is None else max(1, min(self.chunk_bytes, self.rate // 10))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-dir-mover")

    def wake(self) -> None:
        """A future log was created: look at once."""
        self._wakeup.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            if not self.log_manager.future_logs:
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            copied = sum(self.step(tp) for tp in list(self.log_manager.future_logs))
            bucket = self._bucket
            if copied and bucket is not None:
                await self._pause(bucket.reserve(copied))
            elif copied:
                await asyncio.sleep(0)
            else:
                await self._pause(IDLE_WAIT_S)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when woken (a new future log, a new rate)."""
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wakeup.wait()

    def step(self, tp: TopicPartition) -> int:
        """Copy one chunk into the future log of ``tp``, or swap it in when caught up; returns the bytes copied."""
        manager = self.log_manager
        future = manager.future_logs.get(tp)
        partition = self.partition(tp)
        if future is None or partition is None:
            return 0
        current = partition.log
        if not manager.is_online(current) or not manager.is_online(future):
            return 0
        try:
            if future.log_end_offset > current.log_end_offset or future.log_end_offset < current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
            if future.log_end_offset == current.log_end_offset:
                partition.log = manager.replace_current_with_future(tp)
                return 0
            try:
                found = current.read(future.log_end_offset, self._chunk)
                data = b"" if found.records is None else found.records.read()
            except OSError as exc:
                manager.mark_offline(current.dir.parent, exc)
                return 0
            if not data:
                return 0
            try:
                self._append(future, data, current.log_start_offset)
            except OSError as exc:
                manager.mark_offline(future.dir.parent, exc)
                return 0
            return len(data)
        except KafkaError as exc:
            log.warning("moving the replica of %s to %s: %s; the copy starts again", tp, future.dir.parent, exc)
            future.truncate_fully_and_start_at(current.log_start_offset)
            return 0
        except OSError as exc:  # truncating the future log or swapping it in
            manager.mark_offline(future.dir.parent, exc)
            return 0

    @staticmethod
    def _append(future: Log, data: bytes, log_start_offset: int) -> None:
        """Append whole batches read from the current log; an empty future log first moves to the first batch's
        offset, and its start follows the current log's start."""
        header = parse_header(data, 0, complete=False)
        if header is not None and future.log_end_offset == future.log_start_offset and future.size_in_bytes == 0:
            first = header.offset if header.magic >= 2 or header.codec == Codec.NONE else header.last_offset
            if first != future.log_end_offset:
                future.truncate_fully_and_start_at(first)
        future.append_as_follower(data)
        future.maybe_increment_log_start_offset(log_start_offset)
