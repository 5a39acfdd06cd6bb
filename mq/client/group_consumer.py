"""Asyncio consumer that is a member of a consumer group: subscriptions, rebalances, committed offsets.

``AsyncGroupConsumer`` subscribes to topics (a list, or a regular expression matched against every non-internal
topic), joins group ``group_id`` through ``ConsumerCoordinator`` and consumes the partitions the group's leader
assigns it with an ``AsyncConsumer``. Every ``poll`` first completes a pending rebalance:

- eager protocol: before rejoining, every owned partition is revoked; with ``enable_auto_commit`` the current
  positions are committed first, then the listener's ``on_partitions_revoked`` runs;
- after SyncGroup the committed offsets of the new assignment (OffsetFetch) become the positions; a partition with
  none starts where ``auto_offset_reset`` says (earliest, latest, or none: ``poll`` raises);
- with ``enable_auto_commit`` the positions are committed every ``auto_commit_interval_ms`` from ``poll`` and on
  ``close``.

Every ``metadata_max_age_ms`` the consumer refreshes metadata: a pattern subscription picks up (or drops) matching
topics, and the leader notices partition-count changes of the group's topics; either triggers a rejoin. ``close``
leaves the group (a static member, with ``group_instance_id``, stays until its session times out).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from mq.client.assignors import assignor_named
from mq.client.cluster import Cluster
from mq.client.connection import DEFAULT_CLIENT_ID
from mq.client.consumer import AsyncConsumer, ConsumerRecord, FetchedEntries
from mq.client.consumer_coordinator import CommitFailedError, ConsumerCoordinator, JoinResult
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition

_T = TypeVar("_T")

log = logging.getLogger(__name__)

DEFAULT_ASSIGNORS = ("range", "roundrobin")


class RebalanceListener(Protocol):
    """Called from ``poll`` (on the consumer's event loop) around each rebalance."""

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None: ...


class AsyncGroupConsumer:
    """A group member; call ``subscribe``, then ``poll`` in a loop, and ``close`` at the end."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        group_id: str,
        cluster: Cluster | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: Sequence[str] = DEFAULT_ASSIGNORS,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        auto_offset_reset: str = "latest",
        metadata_max_age_ms: int = 300_000,
        exclude_internal_topics: bool = True,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 1024 * 1024,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        allow_auto_create_topics: bool = True,
        security: ClientSecurity = PLAINTEXT,
        decode_records: bool = True,
    ) -> None:
        if not group_id:
            raise ValueError("group_id is required")
        self.fetcher = AsyncConsumer(
            bootstrap_servers,
            cluster=cluster,
            client_id=client_id,
            auto_offset_reset=auto_offset_reset,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            isolation_level=isolation_level,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            allow_auto_create_topics=allow_auto_create_topics,
            security=security,
            decode_records=decode_records,
        )
        """Fetches the assigned partitions; it owns the cluster connections unless ``cluster`` was given."""
        self.cluster = self.fetcher.cluster
        self.group_id = group_id
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.exclude_internal_topics = exclude_internal_topics
        self.coordinator = ConsumerCoordinator(
            self.cluster,
            group_id,
            [assignor_named(name) for name in partition_assignment_strategy],
            group_instance_id=group_instance_id,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=max_poll_interval_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._listener: RebalanceListener | None = None
        self._joined: JoinResult | None = None
        self._unpositioned: list[TopicPartition] | None = None
        self._next_auto_commit = 0.0
        self._next_metadata_refresh = 0.0
        self._closed = False

    async def __aenter__(self) -> AsyncGroupConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def member_id(self) -> str:
        return self.coordinator.generation.member_id

    @property
    def generation_id(self) -> int:
        return self.coordinator.generation.generation_id

    # -- subscription -----------------------------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Subscribe to ``topics`` or to every topic whose whole name matches ``pattern``; replaces an earlier
        subscription (the group rebalances on the next poll)."""
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe to either a list of topics or a pattern")
        if pattern is not None:
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._topics = frozenset()
            self._next_metadata_refresh = 0.0
        else:
            assert topics is not None
            names = [topics] if isinstance(topics, str) else list(topics)
            if not names or not all(names):
                raise ValueError("subscribe needs at least one topic name, and no empty names")
            self._pattern = None
            self._topics = frozenset(names)
        self._listener = listener
        self.coordinator.rejoin_needed = True

    async def unsubscribe(self) -> None:
        """Give up the assignment (committing first with auto commit) and leave the group."""
        await self._revoke()
        await self.coordinator.maybe_leave_group("the consumer unsubscribed")
        self._topics = frozenset()
        self._pattern = None

    def subscription(self) -> frozenset[str]:
        """The topics subscribed to (for a pattern: the matching topics found so far)."""
        return self._topics

    def assignment(self) -> list[TopicPartition]:
        return self.fetcher.assignment()

    def _matching(self, topics: Iterable[str]) -> frozenset[str]:
        assert self._pattern is not None
        return frozenset(
            t
            for t in topics
            if self._pattern.fullmatch(t) and not (self.exclude_internal_topics and t in INTERNAL_TOPICS)
        )

    async def _maybe_refresh_metadata(self) -> None:
        """Pattern subscriptions and the leader's partition counts follow the cluster every metadata_max_age_ms."""
        loop = asyncio.get_running_loop()
        leader = self._joined is not None and self._joined.leader
        if loop.time() < self._next_metadata_refresh or not (self._pattern is not None or leader):
            return
        self._next_metadata_refresh = loop.time() + self.metadata_max_age_ms / 1000
        watched = None if self._pattern is not None else self._joined.group_topics if self._joined else frozenset()
        try:
            metadata = await self.cluster.refresh_metadata(None if watched is None else list(watched))
        except KafkaError as exc:
            if not exc.code.retriable:
                raise
            log.debug("group %s: metadata refresh failed: %s", self.group_id, exc)
            return
        if self._pattern is not None:
            matching = self._matching(metadata)
            if matching != self._topics:
                log.info("group %s: pattern now matches %s", self.group_id, sorted(matching))
                self._topics = matching
                self.coordinator.rejoin_needed = True
        if self._joined is not None and self._joined.leader:
            counts = {n: len(t.partitions) for n, t in metadata.items() if t.error == ErrorCode.NONE}
            assigned = self._joined.group_partition_counts
            if any(counts.get(topic) != assigned.get(topic) for topic in self._joined.group_topics):
                log.info("group %s: partitions of the group's topics changed; rebalancing", self.group_id)
                self.coordinator.rejoin_needed = True
            elif any(topic not in counts for topic in self._joined.group_topics):
                # a topic still being created (LEADER_NOT_AVAILABLE): look again soon, not after metadata_max_age_ms
                self._next_metadata_refresh = loop.time() + self.fetcher.retry_backoff_ms / 1000

    # -- rebalances -------------------------------------------------------------------------------------------------

    async def _ensure_active_group(self) -> None:
        coordinator = self.coordinator
        if coordinator.fatal_error is not None:
            raise coordinator.fatal_error
        if not coordinator.rejoin_needed:
            coordinator.start_heartbeat()
            return
        await self._revoke()
        result = await coordinator.join_group(self._topics)
        self._joined = result
        self.fetcher.assign(result.assignment.partitions)
        self._unpositioned = list(result.assignment.partitions)
        coordinator.start_heartbeat()

    async def _revoke(self) -> None:
        """Eager protocol: give up every partition before rejoining, committing first with auto commit. The listener
        hears of the revocation while the partitions are still assigned, as in Kafka, so it can read their positions
        and commit them."""
        revoked = self.fetcher.assignment()
        if self.enable_auto_commit:
            await self._commit_quietly()
        if revoked and self._listener is not None:
            await self._listener.on_partitions_revoked(revoked)
        self.fetcher.assign([])
        self._joined = None
        self._unpositioned = None

    async def _position_assigned(self) -> None:
        """Once per assignment: committed offsets become positions (the rest follow auto_offset_reset), then the
        listener hears of the partitions. Retried on the next poll when the OffsetFetch fails."""
        partitions = self._unpositioned
        if partitions is None:
            return
        committed = await self.coordinator.fetch_committed(partitions)
        self._unpositioned = None
        for tp, offset in committed.items():
            if offset is not None:
                self.fetcher.seek(tp, offset)
        self._next_auto_commit = asyncio.get_running_loop().time() + self.auto_commit_interval_ms / 1000
        if self._listener is not None:
            await self._listener.on_partitions_assigned(list(partitions))

    # -- consuming --------------------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records of the assigned partitions, waiting at most ``timeout_ms`` for some (a
        rebalance in progress is completed first, which may take longer)."""
        return await self._polled(timeout_ms, lambda wait_ms: self.fetcher.poll(wait_ms, max_records))

    async def poll_entries(self, timeout_ms: int = 0) -> list[FetchedEntries]:
        """``poll`` of a consumer made with ``decode_records=False``: each partition's fetched batches, undecoded
        (``AsyncConsumer.poll_entries``)."""
        return await self._polled(timeout_ms, self.fetcher.poll_entries)

    async def _polled(self, timeout_ms: int, fetch: Callable[[int], Awaitable[list[_T]]]) -> list[_T]:
        """What ``fetch(wait_ms)`` gives once there is some or ``timeout_ms`` passed, keeping the group membership
        (rebalances, metadata, auto-commits) on the way."""
        if self._closed:
            raise RuntimeError("the consumer is closed")
        if self._pattern is None and not self._topics:
            raise RuntimeError("the consumer is not subscribed to any topic")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            self.coordinator.last_poll = loop.time()
            await self._maybe_refresh_metadata()
            await self._ensure_active_group()
            self.coordinator.last_poll = loop.time()
            await self._position_assigned()
            await self._maybe_auto_commit()
            remaining_ms = max(0, int((deadline - loop.time()) * 1000))
            found = await fetch(min(remaining_ms, self.fetcher.fetch_max_wait_ms))
            if found or loop.time() >= deadline:
                return found

    async def _maybe_auto_commit(self) -> None:
        if not self.enable_auto_commit:
            return
        now = asyncio.get_running_loop().time()
        if now >= self._next_auto_commit:
            self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
            await self._commit_quietly()

    async def _commit_quietly(self) -> None:
        try:
            await self.commit()
        except KafkaError as exc:
            log.warning("group %s: offset commit failed: %s", self.group_id, exc)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.fetcher.seek(tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self.fetcher.seek_to_beginning(*partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self.fetcher.seek_to_end(*partitions)

    async def position(self, tp: TopicPartition) -> int:
        return await self.fetcher.position(tp)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.fetcher.highwater(tp)

    # -- offsets ----------------------------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (the next offset to consume per partition), by default the current positions of every
        assigned partition. Raises CommitFailedError when the group has rebalanced since the assignment."""
        if offsets is None:
            offsets = self.fetcher.known_positions()
        if not offsets:
            return
        if self.coordinator.generation.generation_id < 0:
            raise CommitFailedError(f"group {self.group_id}: this consumer is not in a generation of the group")
        await self.coordinator.commit_offsets(offsets)

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where there is none)."""
        return await self.coordinator.fetch_committed(partitions)

    async def close(self) -> None:
        """Commit (with auto commit), leave the group and close the connections this consumer opened."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.enable_auto_commit and self._joined is not None:
                await self._commit_quietly()
            assigned = self.fetcher.assignment()
            if assigned and self._listener is not None:
                await self._listener.on_partitions_revoked(assigned)
            await self.coordinator.close()
        finally:
            await self.fetcher.close()
