"""BrokerConnection against a fake broker: negotiation, pipelining, timeouts, reconnects."""

from __future__ import annotations

import asyncio
import gc
import struct
from typing import Any

import pytest
from client_fakes import FakeBroker, run

from mq.client.connection import (
    BrokerConnection,
    BrokerConnectionError,
    RequestTimedOutError,
    UnsupportedVersionError,
    client_versions,
)
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader


def _md(*names: str) -> dict[str, Any]:
    return {
        "topics": [{"name": n} for n in names],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }


def _echo_topics(header: RequestHeader, body: Any) -> dict[str, Any]:
    return {"topics": [{"name": t.name, "error_code": 3} for t in body.topics or ()]}


def test_client_versions_cover_the_apis_it_writes() -> None:
    assert client_versions(ApiKey.FETCH) == (4, 12)
    assert client_versions(ApiKey.METADATA) == (0, 12)
    assert client_versions(ApiKey.API_VERSIONS) == (0, 3)


def test_negotiates_the_highest_common_version() -> None:
    async def main() -> None:
        broker = await FakeBroker(versions={ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (1, 7)}).start()
        broker.handlers[ApiKey.METADATA] = _echo_topics
        conn = BrokerConnection(broker.host, broker.port)
        try:
            response = await conn.send(ApiKey.METADATA, _md("a"))
            assert [t.name for t in response.topics] == ["a"]
            versions = [(h.api_key, h.api_version) for h, _ in broker.requests]
            assert versions == [(ApiKey.API_VERSIONS, 3), (ApiKey.METADATA, 7)]
            with pytest.raises(UnsupportedVersionError) as info:
                await conn.send(ApiKey.PRODUCE, {"acks": 1})
            assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_api_versions_error_35_falls_back_to_v0() -> None:
    async def main() -> None:
        broker = await FakeBroker(versions={ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (1, 5)}).start()
        broker.handlers[ApiKey.METADATA] = _echo_topics
        conn = BrokerConnection(broker.host, broker.port)
        try:
            await conn.connect()
            assert conn.api_versions[ApiKey.METADATA] == (1, 5)
            assert [h.api_version for h, _ in broker.of(ApiKey.API_VERSIONS)] == [3, 0]
            await conn.send(ApiKey.METADATA, _md("a"))
            assert broker.of(ApiKey.METADATA)[0][0].api_version == 5
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_pipelined_requests_each_get_their_own_response() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        delays = {"slow": 0.2, "fast": 0.0, "mid": 0.05}

        async def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
            await asyncio.sleep(delays[body.topics[0].name])
            return _echo_topics(header, body)

        broker.handlers[ApiKey.METADATA] = handle
        conn = BrokerConnection(broker.host, broker.port)
        try:
            await conn.connect()
            names = ["slow", "fast", "mid", "fast", "slow"]
            responses = await asyncio.gather(*(conn.send(ApiKey.METADATA, _md(n)) for n in names))
            assert [r.topics[0].name for r in responses] == names
            assert broker.connections == 1
            ids = [h.correlation_id for h, _ in broker.of(ApiKey.METADATA)]
            assert len(set(ids)) == len(ids)
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_timeout_fails_the_request_then_reconnects() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        silent = {"value": True}

        def handle(header: RequestHeader, body: Any) -> dict[str, Any] | None:
            return None if silent["value"] else _echo_topics(header, body)

        broker.handlers[ApiKey.METADATA] = handle
        conn = BrokerConnection(broker.host, broker.port, request_timeout_ms=200)
        try:
            with pytest.raises(RequestTimedOutError) as info:
                await conn.send(ApiKey.METADATA, _md("a"))
            assert info.value.code.retriable
            assert not conn.connected
            silent["value"] = False
            response = await conn.send(ApiKey.METADATA, _md("b"))
            assert response.topics[0].name == "b"
            assert broker.connections == 2
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_broker_closing_fails_in_flight_and_next_send_reconnects() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        hold = asyncio.Event()

        async def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
            if body.topics[0].name == "hang":
                broker.drop_connections()
                await hold.wait()
            return _echo_topics(header, body)

        broker.handlers[ApiKey.METADATA] = handle
        conn = BrokerConnection(broker.host, broker.port)
        try:
            with pytest.raises(BrokerConnectionError):
                await conn.send(ApiKey.METADATA, _md("hang"))
            response = await conn.send(ApiKey.METADATA, _md("ok"))
            assert response.topics[0].name == "ok"
            assert broker.connections == 2
            assert len(broker.of(ApiKey.API_VERSIONS)) == 2
        finally:
            hold.set()
            await conn.close()
            await broker.stop()

    run(main())


def test_a_cancelled_request_leaves_nothing_unretrieved_when_the_connection_closes() -> None:
    async def main() -> list[dict[str, Any]]:
        unhandled: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
        broker = await FakeBroker().start()
        broker.handlers[ApiKey.METADATA] = lambda header, body: None  # never answers
        conn = BrokerConnection(broker.host, broker.port)
        try:
            request = asyncio.create_task(conn.send(ApiKey.METADATA, _md("a")))
            await asyncio.sleep(0.1)
            assert conn.in_flight_count == 1
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request
        finally:
            await conn.close()
            await broker.stop()
        del request
        gc.collect()
        return unhandled

    assert run(main()) == []


def test_a_request_cancelled_as_its_response_arrives_is_still_cancelled() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def later(header: RequestHeader, body: Any) -> dict[str, Any]:
            await answer
            return _echo_topics(header, body)

        broker.handlers[ApiKey.METADATA] = later
        conn = BrokerConnection(broker.host, broker.port)
        try:
            request = asyncio.create_task(conn.send(ApiKey.METADATA, _md("a")))
            while conn.in_flight_count == 0:
                await asyncio.sleep(0.01)
            # cancel the caller in the very callback that delivers the response, before the caller resumes
            conn._in_flight[0].future.add_done_callback(lambda _: request.cancel())
            answer.set_result(None)
            with pytest.raises(asyncio.CancelledError):
                await request
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_unexpected_correlation_id_closes_the_connection() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        broker.handlers[ApiKey.METADATA] = lambda h, b: struct.pack(">ii", 8, h.correlation_id + 1) + b"\0" * 4
        conn = BrokerConnection(broker.host, broker.port)
        try:
            with pytest.raises(BrokerConnectionError, match="correlation"):
                await conn.send(ApiKey.METADATA, _md("a"))
            assert not conn.connected
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_produce_with_acks_0_expects_no_response() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        broker.handlers[ApiKey.PRODUCE] = lambda h, b: None
        broker.handlers[ApiKey.METADATA] = _echo_topics
        conn = BrokerConnection(broker.host, broker.port, request_timeout_ms=500)
        try:
            assert await conn.send(ApiKey.PRODUCE, {"acks": 0, "timeout": 1000, "topic_data": []}) is None
            response = await conn.send(ApiKey.METADATA, _md("after"))
            assert response.topics[0].name == "after"
            assert broker.of(ApiKey.PRODUCE)[0][0].api_version == 9
        finally:
            await conn.close()
            await broker.stop()

    run(main())


def test_connect_refused_is_a_retriable_error() -> None:
    async def main() -> None:
        broker = await FakeBroker().start()
        port = broker.port
        await broker.stop()
        conn = BrokerConnection("127.0.0.1", port)
        with pytest.raises(BrokerConnectionError) as info:
            await conn.send(ApiKey.METADATA, _md())
        assert info.value.code.retriable

    run(main())
