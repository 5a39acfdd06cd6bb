"""Blocking facade for tools: each object runs its async client on a private event loop in a daemon thread.

``SyncAdmin(...).call(AsyncAdmin.create_topics, [...])`` (any coroutine method of the async client, named on its
class, with that method's own argument and result types) and the named methods below block until it finishes;
``SyncProducer.send`` returns a ``concurrent.futures.Future`` of ``RecordMetadata``. Close each object when done.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar

from mq.client.admin import (
    AbortTransactionSpec,
    AsyncAdmin,
    ClientQuotaEntry,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from mq.client.cluster import TopicMetadata
from mq.client.consumer import AsyncConsumer, ConsumerRecord
from mq.client.group_consumer import AsyncGroupConsumer, RebalanceListener
from mq.client.producer import AsyncProducer, Headers, RecordMetadata
from mq.errors import KafkaError
from mq.topic_partition import TopicPartition

T = TypeVar("T")
P = ParamSpec("P")


class _AsyncClient(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_AsyncClient)


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="mq-client", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class _Sync(Generic[C]):
    """Owns a loop thread and one async client built on it."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._loop = _LoopThread()

        async def create() -> C:
            return factory()

        self._client = self._loop.run(create())

    def call(self, method: Callable[Concatenate[C, P], Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run the async client's coroutine ``method`` to completion and return its result."""
        return self._loop.run(method(self._client, *args, **kwargs))

    def close(self) -> None:
        try:
            self._loop.run(self._client.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncAdmin(_Sync[AsyncAdmin]):
    """AsyncAdmin's methods, blocking: ``admin.call(AsyncAdmin.describe_topics, ["t"])`` or the shortcuts below.

    Each call ends within ``api_timeout_ms`` (Kafka's ``default.api.timeout.ms``), retries included: past it the call
    raises ``ApiTimeoutError`` naming what it waited for.
    """

    def __init__(self, bootstrap_servers: str, *, api_timeout_ms: int = 60_000, **config: Any) -> None:
        self.api_timeout_ms = api_timeout_ms
        super().__init__(lambda: AsyncAdmin(bootstrap_servers, **config))

    def call(
        self, method: Callable[Concatenate[AsyncAdmin, P], Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        return self._loop.run(self._client.cluster.bounded(method(self._client, *args, **kwargs), self.api_timeout_ms))

    @property
    def admin(self) -> AsyncAdmin:
        return self._client

    def list_topics(self, include_internal: bool = True) -> list[str]:
        return self.call(AsyncAdmin.list_topics, include_internal)

    def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicMetadata]:
        return self.call(AsyncAdmin.describe_topics, None if names is None else list(names))

    def describe_client_quotas(
        self, components: Sequence[tuple[str, int, str | None]], strict: bool = False
    ) -> list[ClientQuotaEntry]:
        return self.call(AsyncAdmin.describe_client_quotas, components, strict)

    def alter_client_quotas(
        self,
        entity: Mapping[str, str | None],
        add: Mapping[str, float],
        remove: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        self.call(AsyncAdmin.alter_client_quotas, entity, add, remove, validate_only)

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> dict[int, list[TransactionListing]]:
        return self.call(AsyncAdmin.list_transactions, list(states), list(producer_ids), duration_ms)

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription | KafkaError]:
        return self.call(AsyncAdmin.describe_transactions, list(transactional_ids))

    def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, tuple[ProducerState, ...]]:
        return self.call(AsyncAdmin.describe_producers, list(partitions), broker_id)

    def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        self.call(AsyncAdmin.abort_transaction, spec)


class SyncProducer(_Sync[AsyncProducer]):
    def __init__(self, bootstrap_servers: str, **config: Any) -> None:
        super().__init__(lambda: AsyncProducer(bootstrap_servers, **config))

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record (blocking only for metadata); the future completes when the broker acknowledged it."""
        result: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        queued = self.call(AsyncProducer.send, topic, value, key, headers, partition, timestamp_ms)

        def relay(done: asyncio.Future[RecordMetadata]) -> None:
            error = done.exception()
            if error is not None:
                result.set_exception(error)
            else:
                result.set_result(done.result())

        self._loop.loop.call_soon_threadsafe(queued.add_done_callback, relay)
        return result

    def flush(self) -> None:
        self.call(AsyncProducer.flush)


Consuming = TypeVar("Consuming", AsyncConsumer, AsyncGroupConsumer)


class _SyncConsuming(_Sync[Consuming]):
    """What both consumers offer: positions, seeks and polls."""

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._client.seek(tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._client.seek_to_beginning(*partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._client.seek_to_end(*partitions)

    def position(self, tp: TopicPartition) -> int:
        return self._loop.run(self._client.position(tp))

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> list[ConsumerRecord]:
        return self._loop.run(self._client.poll(timeout_ms, max_records))


class SyncConsumer(_SyncConsuming[AsyncConsumer]):
    def __init__(self, bootstrap_servers: str, **config: Any) -> None:
        super().__init__(lambda: AsyncConsumer(bootstrap_servers, **config))

    @property
    def consumer(self) -> AsyncConsumer:
        return self._client

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.consumer.assign(list(partitions))


class SyncGroupConsumer(_SyncConsuming[AsyncGroupConsumer]):
    """AsyncGroupConsumer, blocking; a rebalance listener's callbacks run on the client's loop thread."""

    def __init__(self, bootstrap_servers: str, *, group_id: str, **config: Any) -> None:
        super().__init__(lambda: AsyncGroupConsumer(bootstrap_servers, group_id=group_id, **config))

    @property
    def consumer(self) -> AsyncGroupConsumer:
        return self._client

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        self.consumer.subscribe(topics, pattern=pattern, listener=listener)

    def unsubscribe(self) -> None:
        self.call(AsyncGroupConsumer.unsubscribe)

    def assignment(self) -> list[TopicPartition]:
        return self.consumer.assignment()

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        self.call(AsyncGroupConsumer.commit, offsets)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self.call(AsyncGroupConsumer.committed, list(partitions))
