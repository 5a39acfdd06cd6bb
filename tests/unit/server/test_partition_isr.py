"""The leader's ISR rules on a real partition log: when a follower counts as caught up, when it joins or leaves."""

from __future__ import annotations

from pathlib import Path

from mq.config import TopicConfig
from mq.server.partition import Partition, ReplicaState
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import v2_batch

LEADER, FOLLOWER = 1, 2
LAG_MAX_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def leader(tmp_path: Path, clock: Clock) -> Partition:
    tp = TopicPartition("t", 0)
    partition = Partition(tp, Log(tmp_path / "t-0", TopicConfig()), LEADER, time_ms=clock)
    partition.leader_id, partition.leader_epoch = LEADER, 0
    partition.replicas = (LEADER, FOLLOWER)
    partition.isr = frozenset({LEADER, FOLLOWER})
    partition.remote_replicas = {FOLLOWER: ReplicaState(last_caught_up_ms=clock.now)}
    return partition


def append(partition: Partition) -> None:
    partition.append_records_to_leader(v2_batch(count=2), 1, 1)


def test_a_follower_trailing_a_steady_stream_by_one_fetch_stays_in_sync(tmp_path: Path) -> None:
    clock = Clock()
    partition = leader(tmp_path, clock)
    for _ in range(10):  # every fetch lands just after another append: never level, always one fetch behind
        append(partition)
        partition.update_follower_fetch(FOLLOWER, partition.log_end_offset - 2)
        clock.now += 4_000
    assert partition.isr_to_shrink(LAG_MAX_MS) is None


def test_a_follower_that_falls_behind_or_stops_fetching_leaves_the_isr(tmp_path: Path) -> None:
    clock = Clock()
    partition = leader(tmp_path, clock)
    append(partition)
    partition.update_follower_fetch(FOLLOWER, 0)
    for _ in range(4):  # it fetches, but never gets as far as the leader was at its previous fetch
        append(partition)
        append(partition)
        partition.update_follower_fetch(FOLLOWER, partition.remote_replicas[FOLLOWER].log_end_offset + 1)
        clock.now += 4_000
    assert partition.isr_to_shrink(LAG_MAX_MS) == frozenset({LEADER})
    partition.isr = frozenset({LEADER})
    partition.maybe_increment_high_watermark()
    assert partition.isr_to_expand(FOLLOWER) is None
    partition.update_follower_fetch(FOLLOWER, partition.log_end_offset)
    assert partition.isr_to_expand(FOLLOWER) == frozenset({LEADER, FOLLOWER})
