"""The client's view of a cluster: bootstrap, metadata, leaders, one connection per broker, retries.

``Cluster`` owns every ``BrokerConnection`` the admin client, producer and consumer use. Metadata is refreshed on
demand (unknown topic, retriable error); ``with_retries`` repeats an operation after a retriable ``KafkaError`` with
exponential backoff and a metadata refresh in between. Each request is bounded by the request timeout and the
retries by their count; ``bounded`` puts one deadline over a whole operation (Kafka's ``default.api.timeout.ms``)
and names what the client was still waiting for when it passed. Metadata requests for named topics ask the broker
to create missing ones when ``allow_auto_topic_creation`` is set (a producer's cluster; a consumer's with
``allow.auto.create.topics``); an admin client never does.
"""

from __future__ import annotations

import asyncio
import base64
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mq.client.connection import DEFAULT_CLIENT_ID, BrokerConnection, BrokerConnectionError
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError, exception_for
from mq.protocol.api_keys import ApiKey
from mq.topic_partition import TopicPartition

T = TypeVar("T")
MAX_BACKOFF_MS = 1000


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    """Broker id of the leader; -1 when there is none."""
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: str | None
    """Kafka's text form of the topic id (base64url without padding), when the broker sends one."""
    is_internal: bool
    partitions: tuple[PartitionMetadata, ...]
    error: ErrorCode = ErrorCode.NONE


def kafka_error(code: int, message: str | None, context: str) -> KafkaError:
    """A KafkaError for a response's error code: the broker's error message when it sent one (as Kafka's tools
    print it), else the code's name with what was being done."""
    return exception_for(code, message or f"{context}: {ErrorCode(code).name}")


def topic_id_string(topic_id: uuid.UUID | None) -> str | None:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding."""
    if topic_id is None:
        return None
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``host:port,host:port`` (or a list of them; ``[v6]:port`` allowed) as (host, port) pairs."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"invalid bootstrap server {item!r}: expected host:port")
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise ValueError("no bootstrap servers given")
    return result


class ApiTimeoutError(KafkaError):
    """An operation did not finish within its overall deadline (Kafka's ``TimeoutException``; not retried)."""

    code = ErrorCode.REQUEST_TIMED_OUT


class Cluster:
    """Metadata and connections for one cluster, shared by every client object built on it."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = DEFAULT_CLIENT_ID,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retries: int = 5,
        allow_auto_topic_creation: bool = False,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retries = retries
        self.allow_auto_topic_creation = allow_auto_topic_creation
        """The default of ``refresh_metadata``'s flag of the same name."""
        self.security = security
        """TLS and SASL of every connection to this cluster's brokers."""
        self.last_error: KafkaError | None = None
        """The last retriable error ``with_retries`` retried after."""
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_connections = [self.new_connection(-1 - i, h, p) for i, (h, p) in enumerate(self.bootstrap)]

    def new_connection(self, node_id: int, host: str, port: int) -> BrokerConnection:
        """A connection to one of this cluster's brokers with the cluster's client id, timeout and security."""
        return BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            security=self.security,
        )

    def connection(self, node_id: int) -> BrokerConnection:
        """The connection to broker ``node_id`` (known from metadata); created on first use."""
        broker = self.brokers.get(node_id)
        if broker is None:
            raise KafkaError(f"broker {node_id} is not in the cluster metadata", code=ErrorCode.BROKER_NOT_AVAILABLE)
        conn = self._connections.get(node_id)
        if conn is None or (conn.host, conn.port) != (broker.host, broker.port):
            conn = self._connections[node_id] = self.new_connection(node_id, broker.host, broker.port)
        return conn

    async def send(self, node_id: int | None, api_key: int, body: Mapping[str, Any], version: int | None = None) -> Any:
        """Send to broker ``node_id``, or to any reachable broker when it is None."""
        if node_id is not None:
            return await self.connection(node_id).send(api_key, body, version)
        candidates = [self.connection(n) for n in random.sample(list(self.brokers), len(self.brokers))]
        candidates += self._bootstrap_connections
        error: KafkaError | None = None
        for conn in candidates:
            try:
                return await conn.send(api_key, body, version)
            except BrokerConnectionError as exc:
                error = exc
        assert error is not None
        raise error

    async def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_topic_creation: bool | None = None
    ) -> dict[str, TopicMetadata]:
        """Fetch metadata for ``topics`` (None: every topic) and return it; brokers and controller are updated.
        ``allow_auto_topic_creation`` defaults to the cluster's setting."""
        names = None if topics is None else sorted(set(topics))
        if allow_auto_topic_creation is None:
            allow_auto_topic_creation = self.allow_auto_topic_creation
        body: dict[str, Any] = {
            "allow_auto_topic_creation": allow_auto_topic_creation,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        if names is not None:  # left out, the nullable field is null: every topic
            body["topics"] = [{"name": n} for n in names]
        response = await self.send(None, ApiKey.METADATA, body)
        self.brokers = {
            int(b.node_id): BrokerMetadata(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers
        }
        self.controller_id = int(getattr(response, "controller_id", -1))
        self.cluster_id = getattr(response, "cluster_id", None)
        result = {t.name: _topic_metadata(t) for t in response.topics if t.name is not None}
        if names is None:
            self.topics = dict(result)
        else:
            self.topics.update(result)
        return result

    async def topic(
        self, name: str, *, refresh: bool = False, allow_auto_topic_creation: bool | None = None
    ) -> TopicMetadata:
        """Metadata of one topic, fetched when unknown (or ``refresh``); raises KafkaError for a topic error."""
        metadata = None if refresh else self.topics.get(name)
        if metadata is None or metadata.error != ErrorCode.NONE:
            metadata = (await self.refresh_metadata([name], allow_auto_topic_creation=allow_auto_topic_creation)).get(
                name
            )
        if metadata is None:
            raise KafkaError(f"no metadata for topic {name!r}", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if metadata.error != ErrorCode.NONE:
            raise kafka_error(metadata.error, None, f"topic {name!r}")
        return metadata

    async def topic_ready(
        self, name: str, *, max_wait_ms: int, allow_auto_topic_creation: bool | None = None
    ) -> TopicMetadata:
        """Metadata of a topic a client is about to use: a retriable error is retried ``retries`` times, and
        LEADER_NOT_AVAILABLE (the answer while the topic is being created, as after an auto-creation) until
        ``max_wait_ms`` has passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        attempt = 0
        while True:
            try:
                return await self.topic(name, refresh=attempt > 0, allow_auto_topic_creation=allow_auto_topic_creation)
            except KafkaError as exc:
                creating = exc.code == ErrorCode.LEADER_NOT_AVAILABLE and loop.time() < deadline
                if not creating and not (exc.code.retriable and attempt < self.retries):
                    raise
            attempt += 1
            await asyncio.sleep(min(self.retry_backoff_ms * 2 ** min(attempt - 1, 10), MAX_BACKOFF_MS) / 1000)

    async def leader_for(self, tp: TopicPartition) -> int:
        """The leader's broker id; raises a retriable KafkaError when the partition has none."""
        metadata = await self.topic(tp.topic)
        for partition in metadata.partitions:
            if partition.partition == tp.partition:
                if partition.leader < 0 or partition.leader not in self.brokers:
                    raise KafkaError(f"{tp} has no leader", code=ErrorCode.LEADER_NOT_AVAILABLE)
                return partition.leader
        raise KafkaError(f"{tp} does not exist", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    async def with_retries(self, operation: Callable[[], Awaitable[T]], topics: Iterable[str] | None = ()) -> T:
        """Run ``operation``; after a retriable KafkaError back off, refresh metadata for ``topics``, try again."""
        refresh = None if topics is None else list(topics)
        attempt = 0
        while True:
            try:
                return await operation()
            except KafkaError as exc:
                if not exc.code.retriable or attempt >= self.retries:
                    raise
                self.last_error = exc
            attempt += 1
            await asyncio.sleep(min(self.retry_backoff_ms * 2 ** (attempt - 1), MAX_BACKOFF_MS) / 1000)
            try:
                await self.refresh_metadata(refresh)
            except KafkaError as exc:
                if not exc.code.retriable:
                    raise

    async def bounded(self, operation: Awaitable[T], timeout_ms: int) -> T:
        """Await ``operation`` for at most ``timeout_ms``; past that it is cancelled and ApiTimeoutError says what
        the client was waiting for (a broker's answer, a connection, or a retry after the last error)."""
        task = asyncio.ensure_future(operation)
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout_ms / 1000)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if done:
            return task.result()
        waiting = self.waiting_for()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise ApiTimeoutError(f"timed out after {timeout_ms / 1000:g} s waiting for {waiting}")

    def waiting_for(self) -> str:
        """The requests and connections in progress, else the brokers and the last retried error."""
        connections = [*self._connections.values(), *self._bootstrap_connections]
        pending = [w for w in (c.waiting_for() for c in connections) if w is not None]
        if pending:
            return ", ".join(dict.fromkeys(pending))
        brokers = ",".join(f"{b.host}:{b.port}" for b in self.brokers.values()) or ",".join(
            f"{host}:{port}" for host, port in self.bootstrap
        )
        return brokers if self.last_error is None else f"{brokers} (last error: {self.last_error})"

    async def close(self) -> None:
        connections = [*self._connections.values(), *self._bootstrap_connections]
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections))


def _topic_metadata(topic: Any) -> TopicMetadata:
    partitions = tuple(
        sorted(
            (
                PartitionMetadata(
                    topic=topic.name,
                    partition=int(p.partition_index),
                    leader=int(p.leader_id),
                    leader_epoch=int(getattr(p, "leader_epoch", -1)),
                    replicas=tuple(int(r) for r in p.replica_nodes),
                    isr=tuple(int(r) for r in p.isr_nodes),
                    offline_replicas=tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                    error=ErrorCode(p.error_code),
                )
                for p in topic.partitions
            ),
            key=lambda p: p.partition,
        )
    )
    return TopicMetadata(
        name=topic.name,
        topic_id=topic_id_string(getattr(topic, "topic_id", None)),
        is_internal=bool(getattr(topic, "is_internal", False)),
        partitions=partitions,
        error=ErrorCode(topic.error_code),
    )
