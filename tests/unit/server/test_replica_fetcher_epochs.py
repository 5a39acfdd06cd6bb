"""Follower truncation by leader epoch in the replica fetcher, on real logs; the leader is a fake connection that
answers OffsetForLeaderEpoch from a real leader log through the broker's handler."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.records.batch_header import set_offset, set_partition_leader_epoch
from mq.server.api_dispatch import ApiDispatcher
from mq.server.handlers.leader_epoch import leader_epoch_apis
from mq.server.network import ClientAddress
from mq.server.partition import Partition
from mq.server.replica_fetcher import ReplicaFetcher
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.unit.storage.storage_batches import v2_batch

TP = TopicPartition("t", 0)
LEADER, FOLLOWER = 1, 2


def batch_at(offset: int, epoch: int, count: int) -> bytes:
    data = bytearray(v2_batch(count))
    set_offset(data, 0, offset)
    set_partition_leader_epoch(data, 0, epoch)
    return bytes(data)


def log_with(directory: Path, epochs: list[tuple[int, int]], log_end: int) -> Log:
    """A log whose batches were written by ``epochs`` (epoch, start offset), up to ``log_end``."""
    log = Log(directory, TopicConfig())
    bounds = [start for _, start in epochs[1:]] + [log_end]
    for (epoch, start), end in zip(epochs, bounds, strict=True):
        log.append_as_follower(batch_at(start, epoch, end - start))
    return log


def partition_of(log: Log, broker_id: int, leader_epoch: int) -> Partition:
    partition = Partition(TP, log, broker_id)
    partition.leader_id = LEADER
    partition.leader_epoch = leader_epoch
    return partition


class LeaderConnection:
    """Answers OffsetForLeaderEpoch as the broker's handler does for ``leader``; records what was asked."""

    def __init__(self, leader: Partition) -> None:
        manager = ReplicaManager(BrokerConfig(), LEADER, LogManager([], TopicConfig()), lambda topic: TopicConfig())
        manager.partitions[TP] = leader
        (self.api,) = leader_epoch_apis(manager)
        self.asked: list[int] = []

    async def send(self, api_key: int, body: dict[str, Any], version: int) -> Any:
        assert api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH and body["replica_id"] == FOLLOWER
        request = build(request_schema(api_key, version), body)
        self.asked += [p.leader_epoch for t in request.topics for p in t.partitions]
        answer = await self.api.handle(None, request)  # type: ignore[arg-type]  # the handler needs no context
        return build(response_schema(api_key, version), answer)


def truncate(follower: Partition, leader: Partition) -> tuple[ReplicaFetcher, LeaderConnection]:
    fetcher = ReplicaFetcher(FOLLOWER, LEADER, lambda _: None, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    fetcher.add(follower)
    connection = LeaderConnection(leader)
    asyncio.run(fetcher._truncate(connection))  # type: ignore[arg-type]
    return fetcher, connection


def test_follower_walks_back_through_epochs_the_leader_never_had(tmp_path: Path) -> None:
    leader = partition_of(log_with(tmp_path / "leader", [(0, 0), (2, 12), (4, 30)], 40), LEADER, 4)
    follower_log = log_with(tmp_path / "follower", [(0, 0), (1, 10), (3, 20)], 25)
    follower = partition_of(follower_log, FOLLOWER, 4)
    follower.high_watermark = 25
    fetcher, connection = truncate(follower, leader)
    # Epoch 3: the leader knows 2 up to 30; the follower's epoch 2 does not exist, so it cuts at the end of its
    # epoch 1 (20) and asks about 1: the leader's epoch 0 ends at 12, the follower's at 10.
    assert connection.asked == [3, 1]
    assert follower_log.log_end_offset == 10 and follower.high_watermark == 10
    assert follower_log.leader_epoch_cache.entries == [(0, 0)]
    assert TP not in fetcher.truncating and TP in fetcher.partitions


def test_follower_keeps_everything_it_shares_with_the_leader(tmp_path: Path) -> None:
    leader = partition_of(log_with(tmp_path / "leader", [(0, 0), (1, 10)], 30), LEADER, 2)
    follower_log = log_with(tmp_path / "follower", [(0, 0), (1, 10)], 20)
    follower = partition_of(follower_log, FOLLOWER, 2)  # its high watermark (0) lags: nothing is lost to it
    truncate(follower, leader)
    assert follower_log.log_end_offset == 20 and follower_log.leader_epoch_cache.entries == [(0, 0), (1, 10)]


def test_follower_without_epochs_truncates_to_its_high_watermark(tmp_path: Path) -> None:
    leader = partition_of(log_with(tmp_path / "leader", [(0, 0)], 30), LEADER, 1)
    follower_log = Log(tmp_path / "follower", TopicConfig())
    for start in range(0, 20, 5):
        follower_log.append_as_follower(batch_at(start, 0, 5))
    follower_log.leader_epoch_cache.clear()
    follower = partition_of(follower_log, FOLLOWER, 1)
    follower.high_watermark = 10
    _, connection = truncate(follower, leader)
    assert connection.asked == [] and follower_log.log_end_offset == 10


def test_epoch_errors_fence_or_retry(tmp_path: Path) -> None:
    leader = partition_of(log_with(tmp_path / "leader", [(0, 0)], 10), LEADER, 3)
    stale = partition_of(log_with(tmp_path / "stale", [(0, 0)], 10), FOLLOWER, 2)
    fetcher, _ = truncate(stale, leader)
    assert TP not in fetcher.partitions and TP not in fetcher.truncating  # fenced: waits for LeaderAndIsr
    ahead = partition_of(log_with(tmp_path / "ahead", [(0, 0)], 10), FOLLOWER, 4)
    fetcher, _ = truncate(ahead, leader)
    assert TP in fetcher.truncating and ahead.log_end_offset == 10  # the leader has not heard of epoch 4 yet


def test_fetch_checks_the_requesters_leader_epoch(tmp_path: Path) -> None:
    leader = partition_of(log_with(tmp_path / "leader", [(0, 0)], 10), LEADER, 3)
    assert leader.read(0, 1 << 20, from_follower=True, min_one_message=True, current_leader_epoch=3).records
    assert leader.read(0, 1 << 20, from_follower=False, min_one_message=True).fetch_offset == 0
    for epoch, code in ((2, ErrorCode.FENCED_LEADER_EPOCH), (4, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        with pytest.raises(KafkaError) as refused:
            leader.read(0, 1 << 20, from_follower=True, min_one_message=True, current_leader_epoch=epoch)
        assert refused.value.code == code


def ask_over_the_wire(manager: ReplicaManager, version: int, replica_id: int, current: int, epoch: int) -> Any:
    dispatcher = ApiDispatcher(leader_epoch_apis(manager))
    fields: dict[str, Any] = {
        "topics": [
            {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}
        ]
    }
    if version >= 3:
        fields["replica_id"] = replica_id
    request = build(request_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, version), fields)
    header = RequestHeader(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, 9, "test", 0)
    frame = encode_request(header, request)[4:]
    wire = asyncio.run(dispatcher(frame, ClientAddress("127.0.0.1", 1, 1)))
    assert isinstance(wire, bytes)
    correlation_id, body = decode_response(wire[4:], response_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, version))
    assert correlation_id == 9
    return body.topics[0].partitions[0]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_over_the_wire(tmp_path: Path, version: int) -> None:
    leader_manager = ReplicaManager(BrokerConfig(), LEADER, LogManager([], TopicConfig()), lambda topic: TopicConfig())
    leader_manager.partitions[TP] = partition_of(log_with(tmp_path / "l", [(0, 0), (2, 12)], 20), LEADER, 2)
    answer = ask_over_the_wire(leader_manager, version, FOLLOWER, 2, 1)
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, 0, 12)
    answer = ask_over_the_wire(leader_manager, version, FOLLOWER, -1, 2)  # no current epoch: not checked
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, 2, 20)
    answer = ask_over_the_wire(leader_manager, version, FOLLOWER, 2, 5)  # above the latest epoch
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, -1, -1)
    assert ask_over_the_wire(leader_manager, version, FOLLOWER, 1, 1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    follower_manager = ReplicaManager(
        BrokerConfig(), FOLLOWER, LogManager([], TopicConfig()), lambda topic: TopicConfig()
    )
    follower_manager.partitions[TP] = partition_of(log_with(tmp_path / "f", [(0, 0)], 10), FOLLOWER, 2)
    assert ask_over_the_wire(follower_manager, version, -1, 2, 0).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    if version >= 3:  # a debugging requester may ask any replica
        answer = ask_over_the_wire(follower_manager, version, -2, 2, 0)
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.NONE, 0, 10)
    del follower_manager.partitions[TP]
    assert ask_over_the_wire(follower_manager, version, -1, 2, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def fetch_answer(code: int, records: bytes = b"", high_watermark: int = -1) -> Any:
    data = SimpleNamespace(partition_index=0, error_code=code, records=records, high_watermark=high_watermark)
    return SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[data])])


def test_fetch_answers_fence_retry_or_are_ignored_while_truncating(tmp_path: Path) -> None:
    follower = partition_of(log_with(tmp_path / "f", [(0, 0)], 10), FOLLOWER, 3)
    fetcher = ReplicaFetcher(FOLLOWER, LEADER, lambda _: None, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    fetcher.partitions[TP] = follower
    sent: dict[TopicPartition, tuple[int, int]] = {}
    assert fetcher._request(sent)["topics"][0]["partitions"][0]["current_leader_epoch"] == 3
    assert sent == {TP: (10, 3)}
    assert not fetcher._apply(fetch_answer(ErrorCode.UNKNOWN_LEADER_EPOCH), sent)
    assert TP in fetcher.partitions  # the leader has not caught up with epoch 3: retried
    fetcher.add(follower)  # followed again: truncating, so an answer still in flight is dropped
    assert not fetcher._apply(fetch_answer(ErrorCode.NONE, batch_at(10, 3, 2), 12), sent)
    assert follower.log_end_offset == 10
    fetcher.truncating.clear()
    assert fetcher._apply(fetch_answer(ErrorCode.NONE, batch_at(10, 3, 2), 12), sent)
    assert follower.log_end_offset == 12 and follower.log.leader_epoch_cache.entries == [(0, 0), (3, 10)]
    assert not fetcher._apply(fetch_answer(ErrorCode.FENCED_LEADER_EPOCH), {TP: (12, 3)})
    assert TP not in fetcher.partitions  # fenced at the epoch it still has: wait for LeaderAndIsr
