"""``__consumer_offsets`` writes through a real replica manager and log, and the replay that loads them back."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode
from mq.protocol.consumer_offsets import OffsetCommitValue, decode_key
from mq.records.batch_header import iter_headers
from mq.records.default_batch import iter_batch_records
from mq.server.group_coordinator import GroupCoordinator
from mq.server.group_metadata import GroupMetadata, GroupState, MemberMetadata
from mq.server.group_metadata_manager import (
    GroupMetadataManager,
    LoadedPartition,
    group_append_error,
    offset_append_error,
)
from mq.server.partition import Partition
from mq.server.purgatory import settled
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition

BROKER = 1
OFFSETS_TP = TopicPartition("__consumer_offsets", 0)


def setup(tmp_path: Path) -> tuple[GroupMetadataManager, Partition]:
    config = TopicConfig(cleanup_policy="compact")
    rm = ReplicaManager(BrokerConfig(), BROKER, LogManager([], TopicConfig()), lambda topic: config)
    partition = Partition(OFFSETS_TP, Log(tmp_path / str(OFFSETS_TP), config), BROKER)
    partition.leader_id, partition.leader_epoch = BROKER, 0
    partition.replicas, partition.isr = (BROKER,), frozenset({BROKER})
    rm.partitions[OFFSETS_TP] = partition
    return GroupMetadataManager(BrokerConfig(), rm, lambda: 1, lambda: 5000), partition


def stable_group() -> GroupMetadata:
    group = GroupMetadata("g", 0, state_timestamp_ms=4000)
    member = MemberMetadata("m-1", "i-1", "client", "/10.0.0.1", 300, 100, "consumer", [("range", b"sub")])
    group.add(member, None)
    group.generation_id, group.protocol_name, group.state = 3, "range", GroupState.STABLE
    return group


async def stored(
    manager: GroupMetadataManager, group: GroupMetadata, offsets: dict[TopicPartition, OffsetCommitValue]
) -> ErrorCode:
    return await settled(manager.store_offsets(group, offsets, lambda code: code))


def test_writes_replay_with_last_value_winning_and_tombstones_removing(tmp_path: Path) -> None:
    manager, partition = setup(tmp_path)
    group = stable_group()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)

    async def write() -> list[ErrorCode]:
        return [
            await manager.store_group(group, {"m-1": b"assignment"}),
            await settled(
                manager.store_offsets(
                    group, {a: OffsetCommitValue(1, "", 5000), b: OffsetCommitValue(2, "", 5000)}, lambda e: e
                )
            ),
            await settled(
                manager.store_offsets(group, {a: OffsetCommitValue(7, "m", 5000, leader_epoch=2)}, lambda e: e)
            ),
            await manager.write_tombstones(0, "g", [b], False),
            await manager.write_tombstones(0, "gone", [], True),
        ]

    assert asyncio.run(write()) == [ErrorCode.NONE] * 5
    assert partition.log_end_offset == 6  # 1 + 2 + 1 + 1 + 1 records
    loaded = manager.load(0)
    assert loaded.offsets == {"g": {a: OffsetCommitValue(7, "m", 5000, leader_epoch=2)}}
    value = loaded.groups["g"]
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", 3, "range", "m-1")
    assert value.current_state_timestamp == 4000
    (member,) = value.members
    assert (member.member_id, member.group_instance_id, member.client_host) == ("m-1", "i-1", "/10.0.0.1")
    assert (member.rebalance_timeout, member.session_timeout) == (300, 100)
    assert (member.subscription, member.assignment) == (b"sub", b"assignment")

    asyncio.run(manager.write_tombstones(0, "g", [a], True))
    loaded = manager.load(0)
    assert loaded.groups == {} and loaded.offsets == {}


def test_records_are_keyed_in_kafkas_format_with_log_append_semantics(tmp_path: Path) -> None:
    manager, partition = setup(tmp_path)
    group = stable_group()
    asyncio.run(stored(manager, group, {TopicPartition("t", 4): OffsetCommitValue(9, "", 5000)}))
    info = partition.log.read(0, 1 << 20)
    data = info.records.read()
    (header,) = list(iter_headers(data))
    (record,) = list(iter_batch_records(data, header))
    assert record.key is not None and record.key[:2] == b"\x00\x01"  # offset commit key version 1
    assert decode_key(record.key).partition == 4  # type: ignore[union-attr]
    assert record.value is not None and record.value[:2] == b"\x00\x03"  # offset commit value version 3
    assert record.timestamp == 5000


def test_a_partition_this_broker_no_longer_leads_answers_not_coordinator(tmp_path: Path) -> None:
    manager, partition = setup(tmp_path)
    partition.leader_id = 2
    code = asyncio.run(stored(manager, stable_group(), {TopicPartition("t", 0): OffsetCommitValue(1, "", 1)}))
    assert code == ErrorCode.NOT_COORDINATOR
    manager.replica_manager.partitions.clear()
    assert asyncio.run(manager.store_group(stable_group(), {})) == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_append_errors_map_as_kafkas_coordinator_maps_them() -> None:
    assert group_append_error(ErrorCode.REQUEST_TIMED_OUT) == ErrorCode.REBALANCE_IN_PROGRESS
    assert group_append_error(ErrorCode.MESSAGE_TOO_LARGE) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert offset_append_error(ErrorCode.RECORD_LIST_TOO_LARGE) == ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    assert offset_append_error(ErrorCode.NOT_ENOUGH_REPLICAS) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert offset_append_error(ErrorCode.REQUEST_TIMED_OUT) == ErrorCode.REQUEST_TIMED_OUT


def test_a_commit_marker_written_while_the_partition_loads_settles_the_transactions_offsets(tmp_path: Path) -> None:
    """A new leader loads its partition off the loop; a COMMIT marker written there after that read of the log ended
    (the transaction coordinator does not wait for the load) still makes the transaction's offsets the group's."""
    manager, partition = setup(tmp_path)
    coordinator = GroupCoordinator(BrokerConfig(), manager)
    tp, producer_id = TopicPartition("t", 0), 7
    read_done, marker_written = threading.Event(), threading.Event()
    read = manager.load

    def load_that_waits_for_the_marker(index: int) -> LoadedPartition:
        loaded = read(index)
        read_done.set()
        marker_written.wait(10)
        return loaded

    async def scenario() -> tuple[ErrorCode, dict[TopicPartition, OffsetCommitValue | None], set[TopicPartition]]:
        coordinator.on_leadership_change(OFFSETS_TP, True, 0)
        await asyncio.gather(*coordinator._loads.values())
        offsets = {tp: OffsetCommitValue(42, "", 1)}
        assert await settled(coordinator.commit_txn_offsets("g", producer_id, 0, offsets, lambda c: c)) == 0
        coordinator.on_leadership_change(OFFSETS_TP, False)  # another broker leads, then this one again
        manager.load = load_that_waits_for_the_marker  # type: ignore[method-assign]
        coordinator.on_leadership_change(OFFSETS_TP, True, 1)
        assert await asyncio.to_thread(read_done.wait, 10)
        partition.write_txn_marker(producer_id, 0, 0, commit=True)
        coordinator.complete_txn(OFFSETS_TP.partition, producer_id, commit=True)
        marker_written.set()
        await asyncio.gather(*coordinator._loads.values())
        error, found = coordinator.fetch_offsets("g", [tp])
        return error, found, coordinator.pending_txn_partitions("g")

    error, found, pending = asyncio.run(scenario())
    assert (error, pending) == (ErrorCode.NONE, set())
    assert found[tp] is not None and found[tp].offset == 42
