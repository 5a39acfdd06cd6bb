"""The versions Kafka 4.1 added to the APIs mq serves, through the dispatcher and kio's encoding of each version."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.list_offsets import EARLIEST_LOCAL, LATEST_TIERED, MAX_TIMESTAMP
from mq.server.api_dispatch import ApiDispatcher
from mq.server.clock import ManualClock
from mq.server.handlers.metadata import metadata_api
from mq.server.handlers.offsets import offsets_apis
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.topic_partition import TopicPartition
from tests.unit.server.test_authorization_checks import decoded, request_frame
from tests.unit.server.test_kafka28_answers import batch
from tests.unit.server.test_metadata_handler import context
from tests.unit.server.test_replica_manager_fetch import manager


def list_offsets(tmp_path: Path, version: int, timestamp: int) -> tuple[int, int, int, int]:
    """(error_code, offset, timestamp, leader_epoch) of ListOffsets ``version`` for ``timestamp`` on a partition
    whose records below offset 2 were deleted."""

    async def run() -> Any:
        rm = manager(tmp_path, 1, ManualClock())
        tp = TopicPartition("t", 0)
        await rm.append_records({tp: batch([1000, 1001, 1002, 1003])}, 1, 1000)
        rm.partitions[tp].log.maybe_increment_log_start_offset(2)
        values: dict[str, Any] = {"replica_id": -1, "isolation_level": 0, "timeout": 5000,
                  "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}  # fmt: skip
        dispatcher = ApiDispatcher(offsets_apis(rm))
        frame = request_frame(ApiKey.LIST_OFFSETS, version, values)
        return decoded(ApiKey.LIST_OFFSETS, version, await dispatcher(frame, context().client)).topics[0].partitions[0]

    p = asyncio.run(run())
    return p.error_code, p.offset, p.timestamp, getattr(p, "leader_epoch", -1)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_list_offsets_earliest_local_is_the_log_start_without_remote_storage(tmp_path: Path, version: int) -> None:
    assert list_offsets(tmp_path, version, EARLIEST_LOCAL) == (ErrorCode.NONE, 2, -1, 0)


@pytest.mark.parametrize("version", [9, 10])
def test_list_offsets_latest_tiered_is_none_without_remote_storage(tmp_path: Path, version: int) -> None:
    assert list_offsets(tmp_path, version, LATEST_TIERED) == (ErrorCode.NONE, -1, -1, -1)


@pytest.mark.parametrize(
    ("version", "timestamp"), [(6, MAX_TIMESTAMP), (7, EARLIEST_LOCAL), (8, LATEST_TIERED), (10, -6), (1, -7)]
)
def test_list_offsets_refuses_a_special_timestamp_before_its_version(
    tmp_path: Path, version: int, timestamp: int
) -> None:
    assert list_offsets(tmp_path, version, timestamp)[0] == ErrorCode.UNSUPPORTED_VERSION


def test_list_offsets_v10_answers_by_timestamp_and_latest(tmp_path: Path) -> None:
    assert list_offsets(tmp_path / "by-time", 10, 1003)[:3] == (ErrorCode.NONE, 3, 1003)
    assert list_offsets(tmp_path / "latest", 10, -1)[:2] == (ErrorCode.NONE, 4)


TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
"""The topic id of ``t`` in ``cache()``, as stored (unpadded URL-safe base64)."""
TOPIC_UUID = uuid.UUID(int=1)


def cache() -> MetadataCache:
    """Brokers 1 (this one, rack r1) and 2; ``t`` with partition 0 led by 1 (epoch 3) and partition 1 led by 2
    (epoch 5)."""
    found = MetadataCache(1, "cluster")
    found.update_brokers([BrokerEndpoint(1, "127.0.0.1", 9092, "r1"), BrokerEndpoint(2, "127.0.0.2", 9093)], 1)
    found.update_partition("t", TOPIC_ID, 0, PartitionInfo(1, 3, (1, 2), (1, 2)))
    found.update_partition("t", TOPIC_ID, 1, PartitionInfo(2, 5, (2, 1), (2, 1)))
    return found


def test_metadata_v13_answers_a_top_level_error_code_and_topics_by_id() -> None:
    values = {"topics": [{"topic_id": TOPIC_UUID, "name": None}, {"topic_id": None, "name": "t"}],
              "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}  # fmt: skip
    dispatcher = ApiDispatcher([metadata_api(cache(), None)])
    frame = request_frame(ApiKey.METADATA, 13, values)
    answer = decoded(ApiKey.METADATA, 13, asyncio.run(dispatcher(frame, context().client)))
    assert answer.error_code == ErrorCode.NONE
    assert [(t.name, t.topic_id, len(t.partitions)) for t in answer.topics] == [("t", TOPIC_UUID, 2)] * 2
