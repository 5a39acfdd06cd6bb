"""Long-poll fetches in the ReplicaManager: parked per partition in the purgatory, woken only by their own
partitions' appends, answered at their timeout on the driven clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode
from mq.server.clock import ManualClock
from mq.server.partition import Partition
from mq.server.replica_manager import FetchRequestPartition, FetchResult, ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import v2_batch

BROKER = 1


def manager(tmp_path: Path, partitions: int, clock: ManualClock) -> ReplicaManager:
    """Broker 1 alone leads ``t-0`` .. ``t-<n-1>``."""
    config = TopicConfig()
    rm = ReplicaManager(BrokerConfig(), BROKER, LogManager([], TopicConfig()), lambda topic: config, clock=clock)
    for p in range(partitions):
        tp = TopicPartition("t", p)
        partition = Partition(tp, Log(tmp_path / str(tp), config), BROKER, time_ms=clock.time_ms)
        partition.leader_id, partition.leader_epoch, partition.replicas = BROKER, 0, (BROKER,)
        partition.isr = frozenset({BROKER})
        rm.partitions[tp] = partition
    return rm


async def long_poll(
    rm: ReplicaManager, tp: TopicPartition, max_wait_ms: int = 500
) -> dict[TopicPartition, FetchResult]:
    return await rm.fetch(
        [FetchRequestPartition(tp, 0, 1 << 20)], replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20
    )


def test_an_append_wakes_only_the_fetches_of_its_partition(tmp_path: Path) -> None:
    clock = ManualClock()

    async def run() -> None:
        rm = manager(tmp_path, 101, clock)
        reads = 0
        real_read = rm._read

        def counting_read(*args: object, **kwargs: object) -> dict[TopicPartition, FetchResult]:
            nonlocal reads
            reads += 1
            return real_read(*args, **kwargs)  # type: ignore[arg-type]

        rm._read = counting_read  # type: ignore[method-assign]
        busy = TopicPartition("t", 100)
        idle = [asyncio.create_task(long_poll(rm, TopicPartition("t", p))) for p in range(100)]
        waiting = asyncio.create_task(long_poll(rm, busy))
        await asyncio.sleep(0)
        assert len(rm.fetch_purgatory) == 101 and reads == 101
        for _ in range(10):
            await rm.append_records({TopicPartition("t", 100): v2_batch(count=2)}, 1, 1000)
        result = await asyncio.wait_for(waiting, 1)
        assert result[busy].records is not None and result[busy].high_watermark == 2
        assert reads == 102  # one re-read, of the woken fetch; the 100 idle fetches were not touched
        clock.advance(500)
        answers = await asyncio.gather(*idle)
        assert all(a[TopicPartition("t", p)].records is None for p, a in enumerate(answers))
        assert len(rm.fetch_purgatory) == 0

    asyncio.run(run())


def test_a_fetch_with_no_wait_answers_at_once(tmp_path: Path) -> None:
    async def run() -> FetchResult:
        rm = manager(tmp_path, 1, ManualClock())
        return (await long_poll(rm, TopicPartition("t", 0), max_wait_ms=0))[TopicPartition("t", 0)]

    result = asyncio.run(run())
    assert result.records is None and result.high_watermark == 0


def test_a_follower_answers_only_a_fetch_that_may_read_it_up_to_its_high_watermark(tmp_path: Path) -> None:
    rm = manager(tmp_path, 1, ManualClock())
    tp = TopicPartition("t", 0)
    follower = rm.partitions[tp]
    follower.leader_id, follower.leader_epoch, follower.replicas = 2, 1, (2, BROKER)
    follower.log.append_as_follower(v2_batch(3))
    follower.high_watermark = 2  # the leader has told it so far
    wanted = [FetchRequestPartition(tp, 0, 1 << 20)]

    def read(leader_only: bool, fetch_offset: int = 0) -> FetchResult:
        request = [FetchRequestPartition(tp, fetch_offset, 1 << 20)] if fetch_offset else wanted
        return rm.fetch_or_park(
            request, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, answer=lambda r: r[tp],
            leader_only=leader_only,
        )  # fmt: skip

    assert read(leader_only=True).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answered = read(leader_only=False)
    assert (answered.error, answered.high_watermark, answered.records) == (ErrorCode.NONE, 2, None)  # batch ends past
    follower.high_watermark = 3
    answered = read(leader_only=False)
    assert answered.error == ErrorCode.NONE and answered.records is not None and answered.records.length > 0
    assert read(leader_only=False, fetch_offset=4).error == ErrorCode.OFFSET_OUT_OF_RANGE
