"""Long-lived objects leave the garbage collector's reach: a replica manager that took up new partitions freezes
what the collector tracks (so full collections walk only what was made since); one that took up none does not."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mq.config import BrokerConfig, TopicConfig
from mq.server.partition_state import PartitionStateInfo
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_manager import LogManager
from mq.topic_partition import TopicPartition

BROKER = 1


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def leads(*tps: TopicPartition) -> list[PartitionStateInfo]:
    return [PartitionStateInfo(tp, None, BROKER, 0, (BROKER,), (BROKER,), 0, 1) for tp in tps]


def test_new_partitions_are_frozen_and_a_change_of_known_ones_freezes_nothing(tmp_path: Path) -> None:
    manager = ReplicaManager(BrokerConfig(), BROKER, LogManager([tmp_path], TopicConfig()), lambda _: TopicConfig())
    tps = [TopicPartition("t", p) for p in range(3)]
    manager.become_leader_or_follower(leads(*tps))
    frozen = gc.get_freeze_count()
    assert frozen > 0
    collected = {id(o) for o in gc.get_objects()}
    assert all(id(manager.partitions[tp]) not in collected for tp in tps)
    gc.unfreeze()
    manager.become_leader_or_follower(leads(*tps))  # the same partitions again: nothing new to keep
    assert gc.get_freeze_count() == 0
