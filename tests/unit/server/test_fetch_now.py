"""The Fetch API's immediate path against its general path and against kio's encoding of the same answer: answered
at once, parked then woken by an append, parked then expired on the driven clock. From v13 topics go by id (the
metadata cache knows ``t`` as ``T_ID``)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import (
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
    request_schema,
    response_schema,
)
from mq.protocol.entities import build
from mq.server.api_dispatch import LATER, ApiDispatcher
from mq.server.clock import ManualClock
from mq.server.handlers.fetch import fetch_api
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.server.network import ClientAddress, Response
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_segment import FileSlice
from mq.topic_partition import TopicPartition
from tests.unit.server.test_replica_manager_fetch import manager
from tests.unit.storage.storage_batches import v2_batch

CLIENT = ClientAddress("127.0.0.1", 5000, 1)
T_ID = uuid.UUID(int=0xABC)
VERSIONS = [4, 7, 11, 12, 13, 15, 16, 17, 18]


def stored(topic_id: uuid.UUID) -> str:
    """A topic id as the metadata tree stores it."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def metadata_cache(partitions: int = 2, leader: int = 1, epoch: int = 0) -> MetadataCache:
    """Brokers 1 and 2; ``t`` (id ``T_ID``) with ``partitions`` partitions led by ``leader`` at ``epoch``."""
    cache = MetadataCache(1, "cluster")
    cache.update_brokers([BrokerEndpoint(1, "127.0.0.1", 9092), BrokerEndpoint(2, "127.0.0.2", 9093, "r2")], 1)
    for p in range(partitions):
        cache.update_partition("t", stored(T_ID), p, PartitionInfo(leader, epoch, (1, 2), (1, 2)))
    return cache


def fetch_dispatcher(rm: ReplicaManager, cache: MetadataCache | None = None) -> ApiDispatcher:
    known = metadata_cache() if cache is None else cache
    rm.known_partition = lambda tp: known.partition(tp) is not None  # as the broker wires it
    return ApiDispatcher([fetch_api(rm, None, known)])


def frame(
    version: int,
    partitions: list[tuple[str, int, int]],
    *,
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    replica_id: int = -1,
    isolation_level: int = 0,
    correlation_id: int = 7,
    ids: dict[str, uuid.UUID] | None = None,
    leader_epoch: int = -1,
    high_watermark: int | None = None,
) -> bytearray:
    """A Fetch request frame of (topic, partition, fetch_offset)s, in kio's encoding; from v13 each topic goes by its
    id in ``ids`` (``t``: ``T_ID``)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, offset in partitions:
        entry = {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
        entry["current_leader_epoch"] = leader_epoch
        if high_watermark is not None:
            entry["high_watermark"] = high_watermark
        topics.setdefault(topic, []).append(entry)
    known = {"t": T_ID, **(ids or {})}
    body = {
        "replica_id": replica_id,
        "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
        "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "topic_id": known.get(t), "partitions": p} for t, p in topics.items()],
        "forgotten_topics_data": [],
    }
    header = RequestHeader(ApiKey.FETCH, version, correlation_id, "client", 0)
    return bytearray(encode_request(header, build(request_schema(ApiKey.FETCH, version), body))[4:])


def wire(response: Response | None) -> bytes:
    """The bytes a response puts on the wire (file regions read from their files)."""
    assert response is not None
    if isinstance(response, bytes):
        return response
    return b"".join(p if isinstance(p, bytes) else FileSlice(p.fd, p.position, p.length).read() for p in response)


def kio_response(
    version: int,
    correlation_id: int,
    partitions: list[dict[str, Any]],
    topic: str = "t",
    topic_id: uuid.UUID | None = None,
    node_endpoints: tuple[dict[str, Any], ...] = (),
) -> bytes:
    """kio's encoding of a response with ``partitions`` of one topic (records given as bytes; from v13 the topic
    goes by id: ``T_ID`` for ``t``)."""
    body = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": topic, "topic_id": T_ID if topic == "t" else topic_id, "partitions": partitions}],
        "node_endpoints": node_endpoints,
    }
    return encode_response(correlation_id, build(response_schema(ApiKey.FETCH, version), body))


def empty(partition: int, high_watermark: int, version: int, isolation_level: int = 0) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": 0,
        "high_watermark": high_watermark,
        "last_stable_offset": high_watermark,
        "log_start_offset": 0,
        "aborted_transactions": [] if isolation_level == 1 else None,
        "preferred_read_replica": -1,
        "records": b"",
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_records_ready_are_answered_at_once_as_the_general_path_answers(
    tmp_path: Path, version: int, isolation_level: int
) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 2, ManualClock())
        batch = v2_batch(count=2)
        await rm.append_records({TopicPartition("t", 0): batch}, 1, 1000)
        dispatcher = fetch_dispatcher(rm)
        request = frame(version, [("t", 0, 0), ("t", 1, 0)], isolation_level=isolation_level)
        now = dispatcher.now(bytearray(request), CLIENT)
        assert isinstance(now, list)  # answered now, with a file region for the records
        general = await dispatcher(bytearray(request), CLIENT)
        assert wire(now) == wire(general)
        with_records = dict(empty(0, 2, version, isolation_level), records=bytes(batch))
        expected = kio_response(version, 7, [with_records, empty(1, 0, version, isolation_level)])
        assert wire(now) == expected

    asyncio.run(run())


@pytest.mark.parametrize("version", [4, 12, 13, 18])
def test_a_long_poll_parks_until_an_append_to_its_partition(tmp_path: Path, version: int) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 2, ManualClock())
        dispatcher = fetch_dispatcher(rm)
        parked = dispatcher.now(frame(version, [("t", 0, 0)]), CLIENT)
        assert isinstance(parked, asyncio.Future) and not parked.done()
        assert rm.fetch_purgatory.watched(TopicPartition("t", 0)) == 1
        await rm.append_records({TopicPartition("t", 1): v2_batch()}, 1, 1000)
        assert not parked.done()  # another partition's append
        batch = v2_batch(count=3)
        await rm.append_records({TopicPartition("t", 0): batch}, 1, 1000)
        assert parked.done() and len(rm.fetch_purgatory) == 0
        expected = kio_response(version, 7, [dict(empty(0, 3, version), records=bytes(batch))])
        assert wire(parked.result()) == expected

    asyncio.run(run())


@pytest.mark.parametrize("version", [5, 12, 16])
def test_a_long_poll_expires_on_the_clock_with_the_general_paths_answer(tmp_path: Path, version: int) -> None:
    clock = ManualClock()

    async def run() -> None:
        rm = manager(tmp_path, 1, clock)
        dispatcher = fetch_dispatcher(rm)
        request = frame(version, [("t", 0, 0)])
        parked = dispatcher.now(bytearray(request), CLIENT)
        general = asyncio.create_task(dispatcher(bytearray(request), CLIENT))
        await asyncio.sleep(0)
        assert isinstance(parked, asyncio.Future) and len(rm.fetch_purgatory) == 2
        clock.advance(499)
        assert not parked.done()
        clock.advance(1)
        assert parked.done() and len(rm.fetch_purgatory) == 0 and clock.pending == 0
        assert wire(parked.result()) == wire(await general) == kio_response(version, 7, [empty(0, 0, version)])

    asyncio.run(run())


def test_no_wait_errors_and_followers(tmp_path: Path) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 1, ManualClock())
        dispatcher = fetch_dispatcher(rm)
        no_wait = dispatcher.now(frame(12, [("t", 0, 0)], max_wait_ms=0), CLIENT)
        assert wire(no_wait) == kio_response(12, 7, [empty(0, 0, 12)])  # type: ignore[arg-type]
        unknown = dispatcher.now(frame(12, [("t", 5, 0)]), CLIENT)  # an error answers at once
        error = {"partition_index": 5, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "high_watermark": -1}
        assert wire(unknown) == kio_response(12, 7, [dict(error, records=b"")])  # type: ignore[arg-type]
        assert dispatcher.now(frame(12, [("t", 0, 0)], replica_id=2), CLIENT) is LATER
        assert len(rm.fetch_purgatory) == 0

    asyncio.run(run())


def test_a_failure_is_answered_with_its_error_code(tmp_path: Path) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 1, ManualClock())

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("defect")

        rm._read = broken  # type: ignore[assignment,method-assign]
        dispatcher = fetch_dispatcher(rm)
        request = frame(12, [("t", 0, 0)])
        now = dispatcher.now(bytearray(request), CLIENT)
        error = {"partition_index": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "high_watermark": -1}
        assert wire(now) == wire(await dispatcher(bytearray(request), CLIENT))  # type: ignore[arg-type]
        assert wire(now) == kio_response(12, 7, [dict(error, records=b"")])  # type: ignore[arg-type]

    asyncio.run(run())


@pytest.mark.parametrize("version", [13, 16, 18])
def test_an_id_no_topic_has_answers_unknown_topic_id_at_once(tmp_path: Path, version: int) -> None:
    async def run() -> None:
        """Alone it is answered at once; beside a partition to wait for it waits with it, as Kafka's do."""
        rm = manager(tmp_path, 1, ManualClock())
        other = uuid.UUID(int=0xDEF)
        dispatcher = fetch_dispatcher(rm)
        alone = dispatcher.now(frame(version, [("gone", 0, 0)], ids={"gone": other}), CLIENT)
        assert isinstance(alone, bytes)  # nothing to wait for
        request = frame(version, [("t", 0, 0), ("gone", 0, 0)], ids={"gone": other}, max_wait_ms=0)
        now = dispatcher.now(bytearray(request), CLIENT)
        assert isinstance(now, bytes)
        assert wire(now) == wire(await dispatcher(bytearray(request), CLIENT))
        _, body = decode_response(now[4:], response_schema(ApiKey.FETCH, version))
        found = [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in body.responses]
        assert found == [(T_ID, [(0, ErrorCode.NONE)]), (other, [(0, ErrorCode.UNKNOWN_TOPIC_ID)])]

    asyncio.run(run())


def test_a_replica_of_another_topic_id_answers_inconsistent_topic_id(tmp_path: Path) -> None:
    rm = manager(tmp_path, 1, ManualClock())
    rm.partitions[TopicPartition("t", 0)].topic_id = stored(uuid.UUID(int=0x999))  # the topic before its recreation
    now = fetch_dispatcher(rm).now(frame(13, [("t", 0, 0)]), CLIENT)
    assert isinstance(now, bytes)
    _, body = decode_response(now[4:], response_schema(ApiKey.FETCH, 13))
    assert body.responses[0].partitions[0].error_code == ErrorCode.INCONSISTENT_TOPIC_ID


@pytest.mark.parametrize("version", [12, 15, 16, 18])
@pytest.mark.parametrize("fault", ["not-leader", "fenced"])
def test_leader_errors_name_the_current_leader_and_its_endpoint_from_v16(
    tmp_path: Path, version: int, fault: str
) -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH partitions name the leader the metadata cache knows,
    and the response its endpoint on the request's listener; t-1 answers normally beside them."""

    async def run() -> bytes:
        rm = manager(tmp_path, 2, ManualClock())
        cache = metadata_cache(epoch=6)
        if fault == "not-leader":  # a broker hosting no replica (a follower answers a consumer's v11+, KIP-392)
            del rm.partitions[TopicPartition("t", 0)]
            rm.known_partition = lambda tp: cache.partition(tp) is not None
            cache.update_partition("t", stored(T_ID), 0, PartitionInfo(2, 6, (2,), (2,)))
            request = frame(version, [("t", 0, 0), ("t", 1, 0)], max_wait_ms=0)
        else:
            request = frame(version, [("t", 0, 0), ("t", 1, 0)], max_wait_ms=0, leader_epoch=5)
            rm.partitions[TopicPartition("t", 1)].leader_epoch = 5
            rm.partitions[TopicPartition("t", 0)].leader_epoch = 6  # the client's epoch 5 is stale
        dispatcher = fetch_dispatcher(rm, cache)
        now = dispatcher.now(bytearray(request), CLIENT)
        assert wire(now) == wire(await dispatcher(bytearray(request), CLIENT))  # type: ignore[arg-type]
        return wire(now)  # type: ignore[arg-type]

    _, body = decode_response(asyncio.run(run())[4:], response_schema(ApiKey.FETCH, version))
    p0, p1 = body.responses[0].partitions
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER if fault == "not-leader" else ErrorCode.FENCED_LEADER_EPOCH
    assert (p0.error_code, p1.error_code) == (code, ErrorCode.NONE)
    named = (p0.current_leader.leader_id, p0.current_leader.leader_epoch)
    leader = 2 if fault == "not-leader" else 1
    if version < 16:
        assert named == (-1, -1) and not getattr(body, "node_endpoints", ())
        return
    assert named == (leader, 6)
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (-1, -1)
    endpoint = ("127.0.0.2", 9093, "r2") if leader == 2 else ("127.0.0.1", 9092, None)
    assert [(e.node_id, e.host, e.port, e.rack) for e in body.node_endpoints] == [(leader, *endpoint)]


@pytest.mark.parametrize("version", [15, 18])
def test_a_follower_named_in_replica_state_takes_the_general_path(tmp_path: Path, version: int) -> None:
    rm = manager(tmp_path, 1, ManualClock())
    assert fetch_dispatcher(rm).now(frame(version, [("t", 0, 0)], replica_id=2), CLIENT) is LATER


@pytest.mark.parametrize(("reported", "parked"), [(None, True), (5, True), (4, False), (-1, False)])
def test_a_follower_behind_on_the_high_watermark_is_answered_at_once(
    tmp_path: Path, reported: int | None, parked: bool
) -> None:
    """KIP-1166 (v18): a follower fetch with nothing new to read is answered at once when the high watermark it
    reports is behind the leader's (5), and parked otherwise."""

    async def run() -> bool:
        rm = manager(tmp_path, 1, ManualClock())
        tp = TopicPartition("t", 0)
        await rm.append_records({tp: v2_batch(count=5)}, 1, 1000)
        assert rm.partitions[tp].high_watermark == 5
        request = frame(18, [("t", 0, 5)], replica_id=2, high_watermark=reported)
        answer = asyncio.ensure_future(fetch_dispatcher(rm)(bytearray(request), CLIENT))
        await asyncio.sleep(0.01)
        waiting = not answer.done()
        answer.cancel()
        return waiting

    assert asyncio.run(run()) is parked


@pytest.mark.parametrize("version", [12, 16])
def test_a_known_partition_hosted_elsewhere_is_not_leader_with_its_leader(tmp_path: Path, version: int) -> None:
    """As Kafka answers: NOT_LEADER_OR_FOLLOWER (with the leader from v16), not UNKNOWN_TOPIC_OR_PARTITION, for a
    partition the metadata knows and this broker hosts no replica of."""
    rm = manager(tmp_path, 1, ManualClock())
    cache = metadata_cache(partitions=1)
    cache.update_partition("t", stored(T_ID), 1, PartitionInfo(2, 9, (2,), (2,)))
    now = fetch_dispatcher(rm, cache).now(frame(version, [("t", 1, 0)]), CLIENT)
    assert isinstance(now, bytes | list)  # answered at once
    _, body = decode_response(wire(now)[4:], response_schema(ApiKey.FETCH, version))
    (partition,) = body.responses[0].partitions
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    leader = (partition.current_leader.leader_id, partition.current_leader.leader_epoch)
    assert leader == ((2, 9) if version >= 16 else (-1, -1))
