"""Metadata before and after the broker's first UpdateMetadata."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from mq.protocol.codec import RequestHeader
from mq.server.api_dispatch import RequestContext
from mq.server.handlers import metadata
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache
from mq.server.network import ClientAddress


def context(version: int = 9) -> RequestContext:
    return RequestContext(RequestHeader(3, version, 1, "t", 0), ClientAddress("127.0.0.1", 5555, 1))


def request() -> Any:
    return SimpleNamespace(
        topics=[],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def test_a_request_before_the_first_update_waits_for_it() -> None:
    cache = MetadataCache(1, "cluster")
    api = metadata.metadata_api(cache, None)

    async def run() -> Any:
        answer = asyncio.ensure_future(api.handle(context(), request()))
        await asyncio.sleep(0.05)
        assert not answer.done()
        cache.update_brokers([BrokerEndpoint(2, "127.0.0.1", 9093)], 2)
        return await answer

    response = asyncio.run(run())
    assert response["controller_id"] == 2
    assert [b["node_id"] for b in response["brokers"]] == [2]


def test_a_broker_that_never_hears_answers_after_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "FIRST_UPDATE_WAIT_S", 0.05)
    response = asyncio.run(metadata.metadata_api(MetadataCache(1, "cluster"), None).handle(context(), request()))
    assert response["controller_id"] == -1 and response["brokers"] == []
