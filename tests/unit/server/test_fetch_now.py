"""The Fetch API's immediate path against its general path and against kio's encoding of the same answer: answered
at once, parked then woken by an append, parked then expired on the driven clock."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import pytest

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, encode_request, encode_response, request_schema, response_schema
from mq.protocol.entities import build
from mq.server.api_dispatch import LATER, ApiDispatcher
from mq.server.clock import ManualClock
from mq.server.handlers.fetch import fetch_api
from mq.server.network import ClientAddress, Response
from mq.storage.log_segment import FileSlice
from mq.topic_partition import TopicPartition
from tests.unit.server.test_replica_manager_fetch import manager
from tests.unit.storage.storage_batches import v2_batch

CLIENT = ClientAddress("127.0.0.1", 5000, 1)


def frame(
    version: int,
    partitions: list[tuple[str, int, int]],
    *,
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    replica_id: int = -1,
    isolation_level: int = 0,
    correlation_id: int = 7,
) -> bytearray:
    """A Fetch request frame of (topic, partition, fetch_offset)s, in kio's encoding."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append(
            {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
        )
    body = {
        "replica_id": replica_id,
        "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
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


def kio_response(version: int, correlation_id: int, partitions: list[dict[str, Any]], topic: str = "t") -> bytes:
    """kio's encoding of a response with ``partitions`` of one topic (records given as bytes)."""
    body = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": topic, "partitions": partitions}],
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


@pytest.mark.parametrize("version", [4, 7, 11, 12])
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_records_ready_are_answered_at_once_as_the_general_path_answers(
    tmp_path: Path, version: int, isolation_level: int
) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 2, ManualClock())
        batch = v2_batch(count=2)
        await rm.append_records({TopicPartition("t", 0): batch}, 1, 1000)
        dispatcher = ApiDispatcher([fetch_api(rm)])
        request = frame(version, [("t", 0, 0), ("t", 1, 0)], isolation_level=isolation_level)
        now = dispatcher.now(bytearray(request), CLIENT)
        assert isinstance(now, list)  # answered now, with a file region for the records
        general = await dispatcher(bytearray(request), CLIENT)
        assert wire(now) == wire(general)
        with_records = dict(empty(0, 2, version, isolation_level), records=bytes(batch))
        expected = kio_response(version, 7, [with_records, empty(1, 0, version, isolation_level)])
        assert wire(now) == expected

    asyncio.run(run())


@pytest.mark.parametrize("version", [4, 12])
def test_a_long_poll_parks_until_an_append_to_its_partition(tmp_path: Path, version: int) -> None:
    async def run() -> None:
        rm = manager(tmp_path, 2, ManualClock())
        dispatcher = ApiDispatcher([fetch_api(rm)])
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


@pytest.mark.parametrize("version", [5, 12])
def test_a_long_poll_expires_on_the_clock_with_the_general_paths_answer(tmp_path: Path, version: int) -> None:
    clock = ManualClock()

    async def run() -> None:
        rm = manager(tmp_path, 1, clock)
        dispatcher = ApiDispatcher([fetch_api(rm)])
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
        dispatcher = ApiDispatcher([fetch_api(rm)])
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
        dispatcher = ApiDispatcher([fetch_api(rm)])
        request = frame(12, [("t", 0, 0)])
        now = dispatcher.now(bytearray(request), CLIENT)
        error = {"partition_index": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "high_watermark": -1}
        assert wire(now) == wire(await dispatcher(bytearray(request), CLIENT))  # type: ignore[arg-type]
        assert wire(now) == kio_response(12, 7, [dict(error, records=b"")])  # type: ignore[arg-type]

    asyncio.run(run())
