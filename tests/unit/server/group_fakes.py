"""A group coordinator over a fake ``__consumer_offsets`` writer, for the coordinator and handler tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import OffsetCommitValue
from mq.server.clock import SystemClock
from mq.server.group_coordinator import GroupCoordinator
from mq.server.group_metadata import GroupMetadata
from mq.server.group_metadata_manager import LoadedPartition
from mq.server.purgatory import settled
from mq.topic_partition import TopicPartition

T = TypeVar("T")


class FakeManager:
    """Records what the coordinator writes; ``error`` is what every write answers."""

    def __init__(self) -> None:
        self.error = ErrorCode.NONE
        self.groups: list[tuple[str, int, dict[str, bytes]]] = []
        self.offsets: list[dict[TopicPartition, OffsetCommitValue]] = []
        self.tombstones: list[tuple[str, list[TopicPartition], bool]] = []
        self.records: list[tuple[bytes, bytes | None]] = []
        self.loaded = LoadedPartition()

    def partition_count(self) -> int:
        return 1

    def load(self, partition: int) -> LoadedPartition:
        return self.loaded

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode:
        self.groups.append((group.group_id, group.generation_id, dict(assignment)))
        return self.error

    async def store_records(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        self.records.extend(records)
        return self.error

    def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetCommitValue], answer: Callable[[ErrorCode], T]
    ) -> T:
        self.offsets.append(dict(offsets))
        return answer(self.error)

    async def write_tombstones(
        self, partition: int, group_id: str, offsets: list[TopicPartition], group_too: bool
    ) -> ErrorCode:
        self.tombstones.append((group_id, list(offsets), group_too))
        return self.error


class Clock(SystemClock):
    """Wall time that tests set; timers are the running loop's."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_000_000

    def time_ms(self) -> int:
        return self.now


def make(**overrides: Any) -> tuple[GroupCoordinator, FakeManager, Clock]:
    config = BrokerConfig(
        **{
            "group_min_session_timeout_ms": 10,
            "group_initial_rebalance_delay_ms": 0,
            **overrides,
        }
    )
    manager = FakeManager()
    clock = Clock()
    coordinator = GroupCoordinator(config, manager, clock)  # type: ignore[arg-type]
    coordinator.owned_partitions[0] = 0
    return coordinator, manager, clock


async def committed(
    coordinator: GroupCoordinator,
    group_id: str,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
    offsets: dict[TopicPartition, OffsetCommitValue],
) -> ErrorCode:
    """The error of a commit, once it is written."""
    found = coordinator.commit_offsets(group_id, member_id, group_instance_id, generation_id, offsets, lambda e: e)
    return await settled(found)
