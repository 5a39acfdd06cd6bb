"""The broker's ACL cache on a local metadata tree: loaded at start, changes made by another writer followed
through the change notifications, its own changes in force when they return; the ACL APIs' cluster permission."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from mq.security.acl import (
    ANY_BINDING,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from mq.security.authorizer import AclAuthorizer
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import ApiDispatcher
from mq.server.handlers.acls import acl_apis
from mq.server.network import ClientAddress
from mq.zk import acl_store
from mq.zk.local_store import LocalStore

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
T = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
G = ResourcePattern(ResourceType.GROUP, "g-", PatternType.PREFIXED)


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(1)
    yield pool
    pool.shutdown()


def settled(executor: ThreadPoolExecutor) -> None:
    """Wait until the work queued on the one metadata thread so far is done."""
    executor.submit(lambda: None).result(5)


def test_loads_and_follows_changes_of_other_writers(executor: ThreadPoolExecutor) -> None:
    store = LocalStore(None)
    acl_store.create_acls(store, [AclBinding(T, READ)])
    posted: list[Callable[[], None]] = []
    cache = AclCache(store, AclAuthorizer(), executor, posted.append)
    executor.submit(cache.start).result(5)
    settled(executor)
    for fn in posted:
        fn()
    assert cache.authorizer.get_acls(T) == {READ}
    posted.clear()
    acl_store.create_acls(store, [AclBinding(G, READ)])  # as another broker or mq acls would
    acl_store.delete_acls(store, [ANY_BINDING], [T])
    settled(executor)
    for fn in posted:
        fn()
    assert cache.authorizer.patterns == {G}
    assert cache.authorizer.authorize("User:alice", "h", AclOperation.READ, ResourceType.GROUP, "g-1")


def test_own_changes_are_in_force_when_they_return(executor: ThreadPoolExecutor) -> None:
    store = LocalStore(None)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        cache = AclCache(store, AclAuthorizer(), executor, loop.call_soon_threadsafe)
        await loop.run_in_executor(executor, cache.start)
        outcome = await cache.create_acls([AclBinding(T, READ)])
        assert outcome == {T: {READ}}
        assert cache.authorizer.get_acls(T) == {READ}
        deleted = await cache.delete_acls([ANY_BINDING])
        assert deleted == [[(AclBinding(T, READ), None)]]
        assert cache.authorizer.patterns == frozenset()
        cache.stop()

    asyncio.run(run())


def test_acl_apis_need_the_cluster_permission(executor: ThreadPoolExecutor) -> None:
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    describe = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
    create = {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                             "principal": "User:a", "host": "*", "operation": 3, "permission_type": 3}]}  # fmt: skip

    def frame(key: ApiKey, values: dict[str, object]) -> bytearray:
        body = build(request_schema(key, 3), values)  # type: ignore[arg-type]
        return bytearray(encode_request(RequestHeader(key, 3, 1, "c", 0), body)[4:])

    async def run() -> dict[str, object]:
        loop = asyncio.get_running_loop()
        cache = AclCache(LocalStore(None), AclAuthorizer(), executor, loop.call_soon_threadsafe)
        await loop.run_in_executor(executor, cache.start)
        cache.authorizer.set_acls(
            cluster, [AccessControlEntry("User:ops", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
        )
        dispatcher = ApiDispatcher(acl_apis(cache), cache)
        answers: dict[str, object] = {}
        for principal in ("User:ops", "User:dev"):
            wire = await dispatcher(frame(ApiKey.DESCRIBE_ACLS, describe), ClientAddress("10.0.0.1", 1, 1, principal))
            assert isinstance(wire, bytes)
            answers[principal] = decode_response(wire[4:], response_schema(ApiKey.DESCRIBE_ACLS, 3))[1].error_code
        wire = await dispatcher(frame(ApiKey.CREATE_ACLS, create), ClientAddress("10.0.0.1", 1, 1, "User:ops"))
        assert isinstance(wire, bytes)
        answers["create"] = decode_response(wire[4:], response_schema(ApiKey.CREATE_ACLS, 3))[1].results[0].error_code
        assert cache.authorizer.patterns == {cluster}  # nothing was created
        return answers

    answers = asyncio.run(run())
    assert answers == {
        "User:ops": ErrorCode.NONE,
        "User:dev": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "create": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,  # DESCRIBE does not give ALTER
    }
