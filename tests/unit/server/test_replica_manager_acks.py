"""acks=all produces in ReplicaManager: they wait for the ISR and end as Kafka's delayed produce ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode
from mq.server.isr_updates import Current, IsrChange
from mq.server.partition import Partition, ReplicaState
from mq.server.partition_state import PartitionStateInfo
from mq.server.replica_manager import FetchRequestPartition, ProduceResult, ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import v2_batch

LEADER, FOLLOWER = 1, 2
TP = TopicPartition("t", 0)


def manager(tmp_path: Path, min_isr: int = 1) -> ReplicaManager:
    """Broker 1 leads ``t-0`` with broker 2 in the ISR."""
    config = TopicConfig(min_insync_replicas=min_isr)
    rm = ReplicaManager(BrokerConfig(), LEADER, LogManager([], TopicConfig()), lambda topic: config)
    partition = Partition(TP, Log(tmp_path / str(TP), config), LEADER)
    partition.leader_id, partition.leader_epoch = LEADER, 0
    partition.replicas = (LEADER, FOLLOWER)
    partition.isr = frozenset({LEADER, FOLLOWER})
    partition.remote_replicas = {FOLLOWER: ReplicaState()}
    rm.partitions[TP] = partition
    return rm


async def follower_fetch(rm: ReplicaManager, offset: int) -> None:
    await rm.fetch(
        [FetchRequestPartition(TP, offset, 1 << 20)], replica_id=FOLLOWER, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20
    )


async def produce(rm: ReplicaManager, timeout_ms: int = 5000) -> ProduceResult:
    results = await rm.append_records({TP: v2_batch(count=3)}, -1, timeout_ms)
    return results[TP]


def test_acks_all_completes_when_the_follower_has_fetched_past_the_batch(tmp_path: Path) -> None:
    async def run() -> ProduceResult:
        rm = manager(tmp_path)
        waiting = asyncio.create_task(produce(rm))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await follower_fetch(rm, 3)  # the follower's position moves the high watermark past the batch
        return await asyncio.wait_for(waiting, 1)

    assert asyncio.run(run()).error == ErrorCode.NONE


def test_acks_all_times_out_without_the_follower(tmp_path: Path) -> None:
    assert asyncio.run(produce(manager(tmp_path), timeout_ms=100)).error == ErrorCode.REQUEST_TIMED_OUT


def test_losing_leadership_ends_a_waiting_produce_at_once_with_not_leader(tmp_path: Path) -> None:
    async def run() -> ProduceResult:
        rm = manager(tmp_path)
        waiting = asyncio.create_task(produce(rm, timeout_ms=30_000))
        await asyncio.sleep(0.05)
        rm.become_leader_or_follower([PartitionStateInfo(TP, None, FOLLOWER, 1, (FOLLOWER,), (LEADER, FOLLOWER), 1, 1)])
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(run()).error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_stopped_replica_ends_a_waiting_produce_with_not_leader(tmp_path: Path) -> None:
    async def run() -> ProduceResult:
        rm = manager(tmp_path)
        waiting = asyncio.create_task(produce(rm, timeout_ms=30_000))
        await asyncio.sleep(0.05)
        rm.stop_replicas([TP], delete=False)
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(run()).error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_isr_below_min_insync_after_the_append_is_not_enough_replicas_after_append(tmp_path: Path) -> None:
    async def run() -> ProduceResult:
        rm = manager(tmp_path, min_isr=2)
        waiting = asyncio.create_task(produce(rm))
        await asyncio.sleep(0.05)
        proposed: list[IsrChange] = []
        rm.isr_submitter = proposed.append
        rm.partitions[TP].remote_replicas[FOLLOWER].last_caught_up_ms = 0  # lagging for decades
        rm.shrink_isrs()
        assert [c.isr for c in proposed] == [frozenset({LEADER})]
        assert rm.partitions[TP].isr == {LEADER, FOLLOWER} and not waiting.done()  # in use only once written
        rm.isr_change_done(proposed[0], 1)  # the follower dropped out: the HW passes the batch with one replica
        return await asyncio.wait_for(waiting, 1)

    assert asyncio.run(run()).error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_change_that_lost_to_the_controller_in_the_same_epoch_takes_the_znodes_isr_and_version(
    tmp_path: Path,
) -> None:
    rm = manager(tmp_path)
    proposed: list[IsrChange] = []
    rm.isr_submitter = proposed.append
    partition = rm.partitions[TP]
    partition.zk_version = 2
    partition.remote_replicas[FOLLOWER].last_caught_up_ms = 0
    rm.shrink_isrs()
    # the controller had written the znode meanwhile (version 3: the follower out, the same leader epoch)
    rm.isr_change_done(proposed[0], None, Current(frozenset({LEADER}), 3))
    assert (partition.isr, partition.zk_version, partition.pending_isr) == ({LEADER}, 3, None)
    partition.remote_replicas[FOLLOWER].last_caught_up_ms = 10**15
    rm.isr_change_done(proposed[0], None, Current(frozenset({LEADER, FOLLOWER}), 9))  # not pending: ignored
    assert partition.zk_version == 3
    without = IsrChange(TP, partition.leader_epoch, frozenset({LEADER}), 3, partition.controller_epoch)
    partition.pending_isr = without.isr
    rm.isr_change_done(without, None, None)  # the metadata tree was unreachable: nothing learned
    assert (partition.isr, partition.zk_version, partition.pending_isr) == ({LEADER}, 3, None)
