"""Answers that follow Kafka 2.8: Metadata's replica error only for v0, DeleteRecords to a non-leader, the topic
keys 2.x clients expect, and ListOffsets' max-timestamp spec."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mq.config import BrokerConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.list_offsets import MAX_TIMESTAMP
from mq.records import RecordBatchBuilder, iter_headers, iter_records
from mq.records.legacy import encode_message
from mq.server.api_dispatch import ApiDispatcher
from mq.server.clock import ManualClock
from mq.server.handlers.configs import describe_topic_configs
from mq.server.handlers.fetch import fetch_api
from mq.server.handlers.metadata import metadata_api
from mq.server.handlers.offsets import legacy_offsets, offsets_apis
from mq.server.handlers.produce import produce_api
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.topic_partition import TopicPartition
from tests.unit.server.test_authorization_checks import decoded, request_frame
from tests.unit.server.test_metadata_handler import context
from tests.unit.server.test_replica_manager_fetch import manager


def metadata(version: int, topics: list[str] | None) -> Any:
    cache = MetadataCache(1, "cluster")
    cache.update_brokers([BrokerEndpoint(1, "127.0.0.1", 9092)], 1)
    cache.update_partition("t", None, 0, PartitionInfo(1, 0, (1, 2), (1, 2), offline_replicas=(2,)))
    request = SimpleNamespace(
        topics=None if topics is None else [SimpleNamespace(name=name) for name in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return asyncio.run(metadata_api(cache, None).handle(context(version), request))


def test_only_metadata_v0_marks_a_replica_on_an_unregistered_broker() -> None:
    (v0,) = metadata(0, [])["topics"]  # v0's empty list: every topic
    assert v0["partitions"][0]["error_code"] == ErrorCode.REPLICA_NOT_AVAILABLE
    assert (v0["partitions"][0]["replica_nodes"], v0["partitions"][0]["isr_nodes"]) == ([1], [1])
    for version in (1, 9):
        (topic,) = metadata(version, ["t"])["topics"]
        partition = topic["partitions"][0]
        assert partition["error_code"] == ErrorCode.NONE
        assert (partition["replica_nodes"], partition["isr_nodes"], partition["leader_id"]) == ([1, 2], [1, 2], 1)


def test_delete_records_answers_not_leader_for_a_known_partition_hosted_elsewhere(tmp_path: Path) -> None:
    async def run() -> list[int]:
        rm = manager(tmp_path, 1, ManualClock())
        cache = MetadataCache(1, "cluster")
        cache.update_partition("t", None, 5, PartitionInfo(2, 0, (2,), (2,)))
        rm.known_partition = lambda tp: cache.partition(tp) is not None  # as the broker wires it
        dispatcher = ApiDispatcher(offsets_apis(rm))
        values = {
            "topics": [{"name": "t", "partitions": [{"partition_index": 5, "offset": 0}]},
                       {"name": "u", "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout": 0,
        }  # fmt: skip
        wire = await dispatcher(request_frame(ApiKey.DELETE_RECORDS, 2, values), context().client)
        answer = decoded(ApiKey.DELETE_RECORDS, 2, wire)
        return [t.partitions[0].error_code for t in answer.topics]

    assert asyncio.run(run()) == [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_topic_configs_describe_the_keys_of_kafka_2x_with_its_defaults() -> None:
    entries = {e["name"]: e for e in describe_topic_configs(BrokerConfig(), {})}
    assert entries["message.format.version"]["value"] == "2.8-IV1"
    assert entries["message.downconversion.enable"]["value"] == "true"
    assert entries["message.format.version"]["synonyms"][0]["name"] == "log.message.format.version"
    overridden = {e["name"]: e for e in describe_topic_configs(BrokerConfig(), {"message.format.version": "0.10.0"})}
    assert overridden["message.format.version"]["value"] == "0.10.0"
    assert [e["name"] for e in describe_topic_configs(BrokerConfig(), {})].count("message.format.version") == 1


def batch(timestamps: list[int]) -> bytes:
    builder = RecordBatchBuilder()
    for ts in timestamps:
        builder.append(ts, None, b"v")
    return builder.build()


def test_list_offsets_max_timestamp_finds_the_record_holding_the_largest_timestamp(tmp_path: Path) -> None:
    async def run() -> tuple[int, int]:
        rm = manager(tmp_path, 1, ManualClock())
        tp = TopicPartition("t", 0)
        for timestamps in ([1000, 1001], [1002, 5000, 1003], [1004]):
            await rm.append_records({tp: batch(timestamps)}, 1, 1000)
        rm.partitions[tp].log.roll()
        await rm.append_records({tp: batch([1005, 4000])}, 1, 1000)
        dispatcher = ApiDispatcher(offsets_apis(rm))
        values = {"replica_id": -1, "isolation_level": 0,
                  "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": MAX_TIMESTAMP}]}]}  # fmt: skip
        answer = decoded(
            ApiKey.LIST_OFFSETS, 7, await dispatcher(request_frame(ApiKey.LIST_OFFSETS, 7, values), context().client)
        )
        partition = answer.topics[0].partitions[0]
        return partition.offset, partition.timestamp

    assert asyncio.run(run()) == (3, 5000)


def test_legacy_offsets_choose_from_segment_bases_as_kafka_does() -> None:
    candidates = [(0, 100), (10, 200), (20, 300), (25, 400)]  # the last: the log end, stamped now
    assert legacy_offsets(candidates, -1, 1, None) == [25]
    assert legacy_offsets(candidates, -1, 10, None) == [25, 20, 10, 0]
    assert legacy_offsets(candidates, -2, 5, None) == [0]
    assert legacy_offsets(candidates, 250, 2, None) == [10, 0]
    assert legacy_offsets(candidates, 50, 2, None) == []
    assert legacy_offsets(candidates, -1, 3, 22) == [22, 20, 10]  # a consumer never sees past the high watermark


def test_list_offsets_v0_answers_old_style_offsets(tmp_path: Path) -> None:
    async def run() -> list[tuple[int, list[int]]]:
        rm = manager(tmp_path, 1, ManualClock())
        tp = TopicPartition("t", 0)
        await rm.append_records({tp: batch([1, 2, 3])}, 1, 1000)
        rm.partitions[tp].log.roll()
        await rm.append_records({tp: batch([4])}, 1, 1000)
        dispatcher = ApiDispatcher(offsets_apis(rm))
        specs = [(-1, 1), (-2, 1), (-1, 10), (0, 5)]
        values = {
            "replica_id": -1,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "timestamp": ts, "max_num_offsets": n} for ts, n in specs]},
                       {"name": "zz", "partitions": [{"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}],
        }  # fmt: skip
        answer = decoded(
            ApiKey.LIST_OFFSETS, 0, await dispatcher(request_frame(ApiKey.LIST_OFFSETS, 0, values), context().client)
        )
        return [(p.error_code, list(p.old_style_offsets)) for t in answer.topics for p in t.partitions]

    assert asyncio.run(run()) == [
        (0, [4]),
        (0, [0]),
        (0, [4, 3, 0]),
        (0, []),  # both segment files were modified after the epoch
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
    ]


def test_produce_v0_to_v2_store_v2_batches_and_fetch_v0_to_v3_read_them_down_converted(tmp_path: Path) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 1, ManualClock())
        dispatcher = ApiDispatcher([produce_api(rm), fetch_api(rm)])
        client = context().client
        offsets = []
        for version, magic in ((0, 0), (1, 0), (2, 1)):
            message_set = encode_message(0, magic, 0, 2000 + version, b"k", b"v%d" % version)
            values = {"acks": 1, "timeout": datetime.timedelta(seconds=1),
                      "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": message_set}]}]}  # fmt: skip
            answer = decoded(
                ApiKey.PRODUCE, version, await dispatcher(request_frame(ApiKey.PRODUCE, version, values), client)
            )
            (partition,) = answer.responses[0].partition_responses
            offsets.append((partition.error_code, partition.base_offset))
        assert offsets == [(0, 0), (0, 1), (0, 2)]
        log = rm.partitions[TopicPartition("t", 0)].log
        assert {h.magic for h in iter_headers(log.active.read(0, 1 << 20, None, True).read())} == {2}
        for version in range(4):
            values = {"replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 0, "max_bytes": 1 << 20,
                      "topics": [{"topic": "t", "partitions": [
                          {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20}]}]}  # fmt: skip
            wire = await dispatcher(request_frame(ApiKey.FETCH, version, values), client)
            frame = b"".join(piece if isinstance(piece, bytes) else piece.read() for piece in wire)  # type: ignore[union-attr]
            answer = decoded(ApiKey.FETCH, version, frame)
            partition = answer.responses[0].partitions[0]
            assert (partition.error_code, partition.high_watermark) == (0, 3)
            records = bytes(partition.records)
            magic = 0 if version < 2 else 1
            assert [h.magic for h in iter_headers(records)] == [magic, magic]
            read = [(r.offset, r.timestamp, r.value) for h in iter_headers(records) for r in iter_records(records, h)]
            assert read == [(1, -1, b"v1"), (2, 2002 if magic else -1, b"v2")]  # Produce v1 sent magic 0

    asyncio.run(run())


def test_old_fetches_cut_each_set_to_the_fetch_size_and_v3_to_the_response_limit(tmp_path: Path) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 2, ManualClock())
        for p in range(2):
            await rm.append_records({TopicPartition("t", p): batch([1, 2, 3])}, 1, 1000)
        dispatcher = ApiDispatcher([fetch_api(rm)])
        message = 34 + 1  # a magic-1 message with a null key and a one-byte value

        async def sets(version: int, partition_max_bytes: int, max_bytes: int) -> list[bytes]:
            values = {"replica_id": -1, "max_wait": datetime.timedelta(0), "min_bytes": 0, "max_bytes": max_bytes,
                      "topics": [{"topic": "t", "partitions": [
                          {"partition": p, "fetch_offset": 0, "partition_max_bytes": partition_max_bytes}
                          for p in range(2)]}]}  # fmt: skip
            wire = await dispatcher(request_frame(ApiKey.FETCH, version, values), context().client)
            frame = b"".join(piece if isinstance(piece, bytes) else piece.read() for piece in wire)  # type: ignore[union-attr]
            return [bytes(p.records) for p in decoded(ApiKey.FETCH, version, frame).responses[0].partitions]

        whole = await sets(2, 1 << 20, 1 << 20)
        assert [len(s) for s in whole] == [3 * message, 3 * message]
        assert await sets(2, 2 * message + 10, 1 << 20) == [whole[0][: 2 * message], whole[1][: 2 * message]]
        assert await sets(2, 20, 1 << 20) == [whole[0][:20], whole[1][:20]]  # a partial message: too large
        assert await sets(3, 1 << 20, 4 * message) == [whole[0], whole[1][:message]]

    asyncio.run(run())
