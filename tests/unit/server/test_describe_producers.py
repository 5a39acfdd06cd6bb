"""DescribeProducers over a broker's partitions: each active producer with its epoch, last sequence, last batch
timestamp, coordinator epoch and open transaction's first offset; Kafka's errors for topics and partitions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.records import RecordBatchBuilder
from mq.security.acl import AclOperation, ResourceType
from mq.server.api_dispatch import ApiDispatcher
from mq.server.clock import ManualClock
from mq.server.handlers.producers import producers_api
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.topic_partition import TopicPartition
from tests.unit.server.test_authorization_checks import ALICE, acl_cache, allow, decoded, request_frame
from tests.unit.server.test_metadata_handler import context
from tests.unit.server.test_replica_manager_fetch import manager


def batch(producer_id: int, epoch: int, sequence: int, count: int, timestamp: int, transactional: bool) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, is_transactional=transactional
    )
    for i in range(count):
        builder.append(timestamp + i, None, b"v")
    return builder.build()


def test_active_producers_and_their_open_transactions(tmp_path: Path) -> None:
    async def run() -> list[Any]:
        rm = manager(tmp_path, 1, ManualClock())
        cache = MetadataCache(1, "cluster")
        cache.update_brokers([BrokerEndpoint(1, "h", 9092)], 1)
        for p in range(3):  # t-1 and t-2 exist but this broker hosts only t-0
            cache.update_partition("t", None, p, PartitionInfo(1, 0, (1,), (1,)))
        tp = TopicPartition("t", 0)
        await rm.append_records({tp: batch(7, 2, 0, 3, 1_000, False)}, 1, 1000)
        await rm.append_records({tp: batch(9, 0, 0, 2, 2_000, True)}, 1, 1000)
        await rm.append_records({tp: batch(9, 0, 2, 1, 3_000, True)}, 1, 1000)
        dispatcher = ApiDispatcher([producers_api(rm, cache)])
        values = {"topics": [{"name": "t", "partition_indexes": [0, 1, 5]}, {"name": "nope", "partition_indexes": [0]},
                             {"name": "bad/name", "partition_indexes": [0]}]}  # fmt: skip
        wire = await dispatcher(request_frame(ApiKey.DESCRIBE_PRODUCERS, 0, values), context().client)
        return list(decoded(ApiKey.DESCRIBE_PRODUCERS, 0, wire).topics)

    t, nope, bad = asyncio.run(run())
    hosted, elsewhere, unknown = t.partitions
    states = sorted(
        (
            p.producer_id,
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in hosted.active_producers
    )
    assert hosted.error_code == ErrorCode.NONE
    assert states == [(7, 2, 2, 1_002, -1, -1), (9, 0, 2, 3_000, -1, 3)]
    assert (elsewhere.error_code, unknown.error_code) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    assert nope.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert bad.partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION and bad.partitions[0].error_message


def test_describing_producers_needs_read_on_the_topic(tmp_path: Path) -> None:
    async def run() -> list[int]:
        rm = manager(tmp_path, 1, ManualClock())
        cache = MetadataCache(1, "cluster")
        cache.update_partition("t", None, 0, PartitionInfo(1, 0, (1,), (1,)))
        acl = acl_cache()
        dispatcher = ApiDispatcher([producers_api(rm, cache, acl)], acl)
        values = {"topics": [{"name": "t", "partition_indexes": [0]}]}
        codes = []
        for grant in (AclOperation.DESCRIBE, AclOperation.READ):
            wire = await dispatcher(request_frame(ApiKey.DESCRIBE_PRODUCERS, 0, values), ALICE)
            codes.append(decoded(ApiKey.DESCRIBE_PRODUCERS, 0, wire).topics[0].partitions[0].error_code)
            allow(acl, ResourceType.TOPIC, "t", grant)
        wire = await dispatcher(request_frame(ApiKey.DESCRIBE_PRODUCERS, 0, values), ALICE)
        codes.append(decoded(ApiKey.DESCRIBE_PRODUCERS, 0, wire).topics[0].partitions[0].error_code)
        return codes

    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert asyncio.run(run()) == [refused, refused, ErrorCode.NONE]  # DESCRIBE is not enough
