"""The leader side of replication throttling in ReplicaManager.fetch, on real partition logs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode
from mq.server.partition import Partition, ReplicaState
from mq.server.replica_manager import FetchRequestPartition, FetchResult, ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import v2_batch

LEADER, OUT_OF_SYNC, IN_SYNC = 1, 2, 3


def leader_partition(tmp_path: Path, tp: TopicPartition) -> Partition:
    partition = Partition(tp, Log(tmp_path / str(tp), TopicConfig()), LEADER)
    partition.leader_id = LEADER
    partition.leader_epoch = 0
    partition.replicas = (LEADER, OUT_OF_SYNC, IN_SYNC)
    partition.isr = frozenset({LEADER, IN_SYNC})
    partition.remote_replicas = {OUT_OF_SYNC: ReplicaState(), IN_SYNC: ReplicaState()}
    for _ in range(4):
        partition.append_records_to_leader(v2_batch(count=5, value_size=200), 1, 1)
    partition.update_follower_fetch(IN_SYNC, partition.log_end_offset)  # the in-sync follower has everything
    assert partition.high_watermark == partition.log_end_offset
    return partition


THROTTLED = TopicConfig(leader_replication_throttled_replicas="*")


def manager(tmp_path: Path, *tps: TopicPartition) -> ReplicaManager:
    """Partitions led here; topic ``t`` is throttled on the leader side (``leader.replication.throttled.replicas=*``)."""
    config = BrokerConfig(replication_quota_window_num=2)
    rm = ReplicaManager(
        config, LEADER, LogManager([], TopicConfig()), lambda topic: THROTTLED if topic == "t" else TopicConfig()
    )
    for tp in tps:
        rm.partitions[tp] = leader_partition(tmp_path, tp)
    return rm


def fetch(rm: ReplicaManager, tp: TopicPartition, replica_id: int) -> FetchResult:
    async def run() -> dict[TopicPartition, FetchResult]:
        request = FetchRequestPartition(tp, 0, 1 << 20)
        return await rm.fetch([request], replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)

    return asyncio.run(run())[tp]


def length(result: FetchResult) -> int:
    records: Any = result.records
    return 0 if records is None else int(records.length)


def test_unthrottled_followers_always_get_records(tmp_path: Path) -> None:
    tp = TopicPartition("u", 0)
    rm = manager(tmp_path, tp)
    rm.quotas.leader.update_quota(1)
    for _ in range(3):
        assert length(fetch(rm, tp, OUT_OF_SYNC)) > 0
    assert rm.quotas.leader.measured_rate() == 0.0  # only throttled partitions are counted


def test_throttled_partition_gets_nothing_while_the_leader_quota_is_exceeded(tmp_path: Path) -> None:
    tp, other = TopicPartition("t", 0), TopicPartition("u", 0)
    rm = manager(tmp_path, tp, other)
    rm.quotas.leader.update_quota(1000)
    first = fetch(rm, tp, OUT_OF_SYNC)
    size = length(first)
    assert size > 1000
    assert rm.quotas.leader.measured_rate() == pytest.approx(size, rel=0.05)  # over the minimum span of 1 sample
    assert rm.quotas.leader.is_quota_exceeded()
    throttled = fetch(rm, tp, OUT_OF_SYNC)
    partition = rm.partitions[tp]
    assert throttled == FetchResult(ErrorCode.NONE, partition.high_watermark, partition.high_watermark, 0, None)
    assert length(fetch(rm, tp, -1)) == size  # consumers are never throttled
    assert length(fetch(rm, tp, IN_SYNC)) == size  # nor in-sync followers (their bytes still count)
    assert length(fetch(rm, other, OUT_OF_SYNC)) > 0  # nor partitions of other topics
    rm.quotas.leader.update_quota(10**9)
    assert length(fetch(rm, tp, OUT_OF_SYNC)) == size  # a raised rate lets it through again


def test_a_parked_follower_fetch_woken_by_an_append_is_still_throttled(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)
    rm = manager(tmp_path, tp)
    rm.quotas.leader.update_quota(1000)
    assert length(fetch(rm, tp, OUT_OF_SYNC)) > 1000 and rm.quotas.leader.is_quota_exceeded()

    async def run() -> dict[TopicPartition, FetchResult]:
        end = rm.partitions[tp].log_end_offset
        request = FetchRequestPartition(tp, end, 1 << 20)
        waiting = asyncio.create_task(
            rm.fetch([request], replica_id=OUT_OF_SYNC, max_wait_ms=300, min_bytes=1, max_bytes=1 << 20)
        )
        await asyncio.sleep(0.05)
        await rm.append_records({tp: v2_batch(count=5, value_size=200)}, 1, 1000)  # wakes the parked fetch
        return await waiting

    assert length(asyncio.run(run())[tp]) == 0
