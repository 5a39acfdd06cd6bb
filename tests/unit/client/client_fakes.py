"""A scriptable fake broker for the client's unit tests: an asyncio server on 127.0.0.1 speaking the wire protocol."""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from scramp import ScramException, ScramMechanism

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_request, encode_response, response_schema
from mq.protocol.entities import build
from mq.protocol.framing import FrameDecoder

BROKER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
}

SASL_PASSWORD = "alice-secret"
SASL_VERSIONS = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}

Handler = Callable[[RequestHeader, Any], Any]
"""Returns a response dict (built for the request's version), None for no response, or an awaitable of either."""


class FakeBroker:
    """Answers ApiVersions itself (error 35 with a v0 body above ``api_versions_max``) and delegates the rest; speaks
    TLS with ``ssl_context`` (a server context) when given."""

    def __init__(
        self,
        node_id: int = 0,
        versions: dict[int, tuple[int, int]] | None = None,
        *,
        host: str = "127.0.0.1",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.node_id = node_id
        self.versions = dict(BROKER_VERSIONS if versions is None else versions)
        self.handlers: dict[int, Handler] = {}
        self.requests: list[tuple[RequestHeader, Any]] = []
        self.connections = 0
        self.host = host
        self.port = 0
        self.ssl_context = ssl_context
        self.peer_certificates: list[dict[str, Any] | None] = []
        """The client certificate of each TLS connection (None when the client sent none)."""
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._serve, self.host, 0, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.drop_connections()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def drop_connections(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers.clear()

    def of(self, api_key: int) -> list[tuple[RequestHeader, Any]]:
        return [(h, b) for h, b in self.requests if h.api_key == api_key]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        if self.ssl_context is not None:
            self.peer_certificates.append(writer.get_extra_info("peercert"))
        decoder = FrameDecoder(1 << 28)
        try:
            while data := await reader.read(65536):
                for payload in decoder.feed(data):
                    header, body = decode_request(payload)
                    self.requests.append((header, body))
                    response = await self._answer(header, body)
                    if response is not None:
                        writer.write(response)
                        await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _answer(self, header: RequestHeader, body: Any) -> bytes | None:
        if header.api_key == ApiKey.API_VERSIONS and ApiKey.API_VERSIONS not in self.handlers:
            return self._api_versions(header)
        result = self.handlers[header.api_key](header, body)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return None
        if isinstance(result, bytes):
            return result
        return encode_response(
            header.correlation_id, build(response_schema(header.api_key, header.api_version), result)
        )

    def _api_versions(self, header: RequestHeader) -> bytes:
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in self.versions.items()]
        low, high = self.versions[ApiKey.API_VERSIONS]
        if not low <= header.api_version <= high:
            body = build(response_schema(ApiKey.API_VERSIONS, 0), {"error_code": 35, "api_keys": keys})
            return encode_response(header.correlation_id, body)
        schema = response_schema(ApiKey.API_VERSIONS, header.api_version)
        return encode_response(header.correlation_id, build(schema, {"error_code": 0, "api_keys": keys}))


def metadata_handler(
    brokers: list[FakeBroker], topics: dict[str, list[int]], controller_id: int = 0
) -> Callable[[RequestHeader, Any], dict[str, Any]]:
    """Metadata answers for ``topics``: name -> leader broker id per partition (replicas = [leader])."""

    def handle(header: RequestHeader, body: Any) -> dict[str, Any]:
        wanted = list(topics) if body.topics is None else [t.name for t in body.topics]
        return {
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port} for b in brokers],
            "cluster_id": "fake-cluster",
            "controller_id": controller_id,
            "topics": [
                {
                    "error_code": 0 if name in topics else 3,
                    "name": name,
                    "partitions": [
                        {"partition_index": i, "leader_id": leader, "replica_nodes": [leader], "isr_nodes": [leader]}
                        for i, leader in enumerate(topics.get(name, []))
                    ],
                }
                for name in wanted
            ],
        }

    return handle


def sasl_broker(*, enabled: tuple[str, ...] = ("PLAIN",), lifetime_ms: int = 0, **kwargs: Any) -> FakeBroker:
    """A broker (no topics) accepting the user alice with ``SASL_PASSWORD`` through the ``enabled`` mechanisms
    (SCRAM answered by scramp's server side); ``lifetime_ms`` is the session lifetime it gives."""
    broker = FakeBroker(**kwargs)
    broker.versions.update(SASL_VERSIONS)
    broker.handlers[ApiKey.METADATA] = metadata_handler([broker], {})
    state: dict[str, Any] = {}

    def handshake(header: RequestHeader, body: Any) -> dict[str, Any]:
        state["mechanism"] = body.mechanism
        if body.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            scram = ScramMechanism(body.mechanism)
            auth = scram.make_auth_info(SASL_PASSWORD, iteration_count=4096)
            state["scram"] = scram.make_server(lambda username: auth)
        code = 0 if body.mechanism in enabled else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        return {"error_code": code, "mechanisms": list(enabled)}

    def authenticate(header: RequestHeader, body: Any) -> dict[str, Any]:
        done = {"error_code": 0, "auth_bytes": b"", "session_lifetime": lifetime_ms}
        failed = {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "auth_bytes": b""}
        if state["mechanism"] == "PLAIN":
            if body.auth_bytes == f"\0alice\0{SASL_PASSWORD}".encode():
                return done
            return {**failed, "error_message": "Authentication failed: Invalid username or password"}
        server = state["scram"]
        try:
            if "client_first" not in state:
                state["client_first"] = body.auth_bytes
                server.set_client_first(body.auth_bytes.decode())
                return {**done, "auth_bytes": server.get_server_first().encode(), "session_lifetime": 0}
            del state["client_first"]
            server.set_client_final(body.auth_bytes.decode())
            return {**done, "auth_bytes": server.get_server_final().encode()}
        except ScramException:
            state.pop("client_first", None)
            message = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {state['mechanism']}"
            return {**failed, "error_message": message}

    broker.handlers[ApiKey.SASL_HANDSHAKE] = handshake
    broker.handlers[ApiKey.SASL_AUTHENTICATE] = authenticate
    return broker


async def start_cluster(topics: dict[str, list[int]], count: int = 1) -> list[FakeBroker]:
    """``count`` fake brokers (ids 0..count-1) all answering Metadata for ``topics``."""
    brokers = [await FakeBroker(node_id=i).start() for i in range(count)]
    for broker in brokers:
        broker.handlers[ApiKey.METADATA] = metadata_handler(brokers, topics)
    return brokers


async def stop_all(brokers: list[FakeBroker]) -> None:
    for broker in brokers:
        await broker.stop()


def with_coordinator(
    test: Callable[[Any, list[FakeBroker]], Awaitable[None]], versions: dict[int, tuple[int, int]]
) -> None:
    """Run ``test(admin, brokers)``: an AsyncAdmin bootstrapped from broker 0 of two fake brokers that also answer
    ``versions``, t-0 led by broker 0 and t-1 by broker 1, broker 1 coordinating every group and transactional id."""
    from mq.client.admin import AsyncAdmin

    async def main() -> None:
        brokers = await start_cluster({"t": [0, 1]}, count=2)
        for broker in brokers:
            broker.versions.update(versions)

            def find(header: RequestHeader, body: Any, b: list[FakeBroker] = brokers) -> dict[str, Any]:
                entry = {"node_id": 1, "host": b[1].host, "port": b[1].port, "error_code": 0}
                keys = getattr(body, "coordinator_keys", None) or [getattr(body, "key", "")]
                return {**entry, "coordinators": [{"key": k, **entry} for k in keys]}

            broker.handlers[ApiKey.FIND_COORDINATOR] = find
        admin = AsyncAdmin(f"127.0.0.1:{brokers[0].port}")
        admin.cluster.retry_backoff_ms = 1
        try:
            await test(admin, brokers)
        finally:
            await admin.close()
            await stop_all(brokers)

    run(main())


def run(coro: Awaitable[Any]) -> Any:
    """Run a test coroutine with an overall time limit."""

    async def limited() -> Any:
        return await asyncio.wait_for(coro, 20)

    return asyncio.run(limited())
