"""A consumer's side of the classic group protocol: coordinator discovery, join, sync, heartbeats, leave, offsets.

``ConsumerCoordinator`` talks to the group's coordinator over a connection of its own (so a long JoinGroup or a
heartbeat never queues behind a Fetch to the same broker). ``join_group`` runs one rebalance to completion:

  FindCoordinator -> JoinGroup (member_id "" first; v4+ answers MEMBER_ID_REQUIRED with the id to rejoin with)
  -> the leader runs the assignor the group chose over every member's Subscription -> SyncGroup -> Assignment

and retries inside the rebalance as Kafka's clients do: REBALANCE_IN_PROGRESS and COORDINATOR_LOAD_IN_PROGRESS
rejoin after a backoff, UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION rejoin as a new member, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE and connection failures rediscover the coordinator first. Other errors are raised.

While a generation is current, a background task heartbeats every ``heartbeat_interval_ms``. A heartbeat answered
with REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_INSTANCE_ID stops it and sets
``rejoin_needed`` (the last three also forget the generation); a consumer that has not polled within
``max_poll_interval_ms`` (the rebalance timeout) leaves the group and rejoins on its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mq.client.assignors import GroupMember, PartitionAssignor
from mq.client.cluster import Cluster, kafka_error
from mq.client.connection import BrokerConnection
from mq.client.group_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

JOIN_TIMEOUT_MARGIN_MS = 5000
"""JoinGroup waits up to the rebalance timeout on the broker; the client allows this much more."""

_COORDINATOR_GONE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_MEMBER_GONE = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID})


class CommitFailedError(KafkaError):
    """The group rebalanced (or forgot this member) before the commit; the partitions may belong to another member."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


@dataclass(frozen=True, slots=True)
class Generation:
    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)


@dataclass(frozen=True, slots=True)
class JoinResult:
    generation: Generation
    assignment: Assignment
    leader: bool
    group_topics: frozenset[str]
    """For the leader: every topic some member subscribed to (empty for the other members)."""
    group_partition_counts: Mapping[str, int]
    """For the leader: the partition counts the assignment saw, of the group's topics that existed."""


class ConsumerCoordinator:
    """Group membership and offset storage for one consumer in group ``group_id``."""

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        assignors: Sequence[PartitionAssignor],
        *,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45_000,
        rebalance_timeout_ms: int = 300_000,
        heartbeat_interval_ms: int = 3_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        if not assignors:
            raise ValueError("at least one partition assignment strategy is required")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.cluster = cluster
        self.group_id = group_id
        self.assignors = list(assignors)
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.generation = NO_GENERATION
        self.rejoin_needed = True
        self.fatal_error: KafkaError | None = None
        """Set when the coordinator fenced this static member; the consumer raises it."""
        self.last_poll = 0.0
        """Event-loop time of the consumer's last poll; the heartbeat task compares it with the rebalance timeout."""
        self._connection: BrokerConnection | None = None
        self._find_lock = asyncio.Lock()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    # -- coordinator ------------------------------------------------------------------------------------------------

    @property
    def coordinator_id(self) -> int | None:
        """Broker id of the group's coordinator as last found (None while unknown)."""
        return None if self._connection is None else self._connection.node_id

    async def ensure_coordinator(self) -> BrokerConnection:
        """The connection to the group's coordinator, found with FindCoordinator when unknown; retriable failures are
        retried for up to the cluster's request timeout, then raised."""
        async with self._find_lock:
            loop = asyncio.get_running_loop()
            give_up = loop.time() + self.cluster.request_timeout_ms / 1000
            while self._connection is None:
                try:
                    self._connection = await self._find_coordinator()
                except KafkaError as exc:
                    if not exc.code.retriable or loop.time() >= give_up:
                        raise
                    log.debug("group %s: coordinator lookup failed: %s", self.group_id, exc)
                    await self._backoff()
                    with contextlib.suppress(KafkaError):
                        await self.cluster.refresh_metadata([])
            return self._connection

    async def _find_coordinator(self) -> BrokerConnection:
        body = {"key": self.group_id, "key_type": 0, "coordinator_keys": [self.group_id]}
        response = await self.cluster.send(None, ApiKey.FIND_COORDINATOR, body)
        found = response.coordinators[0] if hasattr(response, "coordinators") else response
        if found.error_code != ErrorCode.NONE:
            raise kafka_error(found.error_code, found.error_message, f"find coordinator of group {self.group_id}")
        log.debug("group %s: coordinator is broker %s at %s:%s", self.group_id, found.node_id, found.host, found.port)
        return self.cluster.new_connection(int(found.node_id), found.host, int(found.port))

    def coordinator_dead(self, reason: str) -> None:
        """Forget the coordinator; the next request looks it up again."""
        connection, self._connection = self._connection, None
        if connection is not None:
            log.info("group %s: coordinator %s marked dead: %s", self.group_id, connection, reason)
            task = asyncio.get_running_loop().create_task(connection.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _send(self, api_key: ApiKey, body: Mapping[str, Any], timeout_ms: int | None = None) -> Any:
        connection = await self.ensure_coordinator()
        try:
            return await connection.send(api_key, body, timeout_ms=timeout_ms)
        except KafkaError as exc:
            if exc.code in _COORDINATOR_GONE:
                self.coordinator_dead(str(exc))
            raise

    def _check(self, code: int, message: str | None, context: str) -> None:
        """Raise the KafkaError for ``code`` (after forgetting a coordinator that is gone)."""
        if code == ErrorCode.NONE:
            return
        if code in _COORDINATOR_GONE:
            self.coordinator_dead(ErrorCode(code).name)
        raise kafka_error(code, message, f"{context} in group {self.group_id}")

    async def _backoff(self) -> None:
        await asyncio.sleep(self.retry_backoff_ms / 1000)

    # -- membership -------------------------------------------------------------------------------------------------

    def reset_generation(self) -> None:
        """Forget the member id and generation: the next JoinGroup joins as a new member."""
        self.generation = NO_GENERATION
        self.rejoin_needed = True

    async def join_group(self, topics: Iterable[str], owned: Iterable[TopicPartition] = ()) -> JoinResult:
        """Join (or rejoin) the group subscribed to ``topics`` and return this member's assignment."""
        self.stop_heartbeat()
        subscription = Subscription(tuple(sorted(set(topics))), owned_partitions=tuple(owned))
        metadata = encode_subscription(subscription)
        while True:
            if self.fatal_error is not None:
                raise self.fatal_error
            await self.ensure_coordinator()  # a coordinator that stays unavailable is raised from here
            try:
                result = await self._join_and_sync(metadata)
            except KafkaError as exc:
                if exc.code == ErrorCode.FENCED_INSTANCE_ID:
                    self.fatal_error = exc
                    raise
                if exc.code in _MEMBER_GONE:
                    log.info("group %s: %s; rejoining as a new member", self.group_id, exc.code.name)
                    self.generation = NO_GENERATION
                elif exc.code in _COORDINATOR_GONE or exc.code in (
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ):
                    log.debug("group %s: rejoining after %s", self.group_id, exc.code.name)
                    await self._backoff()
                else:
                    raise
                continue
            self.generation = result.generation
            self.rejoin_needed = False
            log.info(
                "group %s: joined generation %d as %s%s with %s",
                self.group_id,
                result.generation.generation_id,
                result.generation.member_id,
                " (leader)" if result.leader else "",
                sorted(result.assignment.partitions),
            )
            return result

    async def _join_and_sync(self, metadata: bytes) -> JoinResult:
        response = await self._join(metadata)
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.generation = Generation(-1, response.member_id, None)
            response = await self._join(metadata)
        self._check(response.error_code, None, "join")
        generation = Generation(int(response.generation_id), response.member_id, response.protocol_name)
        self.generation = Generation(-1, response.member_id, None)
        leader = response.leader == response.member_id
        topics: frozenset[str] = frozenset()
        counts: dict[str, int] = {}
        assignments: list[dict[str, Any]] = []
        if leader:
            skip = bool(getattr(response, "skip_assignment", False))
            topics, counts, assignments = await self._perform_assignment(response.protocol_name, response.members)
            if skip:  # a static leader rejoined a stable group: the members keep their assignments
                assignments = []
        body = {
            "group_id": self.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": generation.protocol,
            "assignments": assignments,
        }
        sync = await self._send(ApiKey.SYNC_GROUP, body)
        self._check(sync.error_code, None, "sync")
        return JoinResult(generation, decode_assignment(sync.assignment), leader, topics, counts)

    async def _join(self, metadata: bytes) -> Any:
        body = {
            "group_id": self.group_id,
            "session_timeout": self.session_timeout_ms,
            "rebalance_timeout": self.rebalance_timeout_ms,
            "member_id": self.generation.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": a.name, "metadata": metadata} for a in self.assignors],
            "reason": None,
        }
        timeout_ms = max(self.cluster.request_timeout_ms, self.rebalance_timeout_ms + JOIN_TIMEOUT_MARGIN_MS)
        return await self._send(ApiKey.JOIN_GROUP, body, timeout_ms)

    async def _perform_assignment(
        self, protocol: str | None, members: Sequence[Any]
    ) -> tuple[frozenset[str], dict[str, int], list[dict[str, Any]]]:
        """The leader's part: run the group's assignor over every member's subscription."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise KafkaError(
                f"group {self.group_id} chose assignor {protocol!r}, which this consumer does not have",
                code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            )
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        group_members = [
            GroupMember(
                m.member_id, frozenset(subscriptions[m.member_id].topics), getattr(m, "group_instance_id", None)
            )
            for m in members
        ]
        topics = frozenset(t for s in subscriptions.values() for t in s.topics)
        metadata = await self.cluster.refresh_metadata(topics) if topics else {}
        counts = {name: len(t.partitions) for name, t in metadata.items() if t.error == ErrorCode.NONE}
        assigned = assignor.assign(counts, group_members)
        log.debug("group %s: %s assignment %s", self.group_id, assignor.name, assigned)
        return (
            topics,
            counts,
            [
                {"member_id": member_id, "assignment": encode_assignment(Assignment(tuple(partitions)))}
                for member_id, partitions in assigned.items()
            ],
        )

    # -- heartbeats -------------------------------------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    def stop_heartbeat(self) -> None:
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.rejoin_needed:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            if (loop.time() - self.last_poll) * 1000 > self.rebalance_timeout_ms:
                log.warning(
                    "group %s: no poll within max.poll.interval.ms (%d ms); leaving the group",
                    self.group_id,
                    self.rebalance_timeout_ms,
                )
                await self.maybe_leave_group("consumer poll timeout has expired")
                return
            try:
                await self.heartbeat()
            except KafkaError as exc:
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)

    async def heartbeat(self) -> None:
        """One Heartbeat; an answer that ends this generation sets ``rejoin_needed`` (and is raised)."""
        generation = self.generation
        body = {
            "group_id": self.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": self.group_instance_id,
        }
        response = await self._send(ApiKey.HEARTBEAT, body)
        code = ErrorCode(response.error_code)
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin_needed = True
        elif code in _MEMBER_GONE:
            if self.generation == generation:
                self.reset_generation()
            if code == ErrorCode.FENCED_INSTANCE_ID:
                self.fatal_error = kafka_error(code, None, f"heartbeat in group {self.group_id}")
        self._check(code, None, "heartbeat")

    async def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup for a dynamic member with a member id (a static member stays until its session expires);
        the generation is forgotten either way."""
        self.stop_heartbeat()
        generation = self.generation
        self.reset_generation()
        if self.group_instance_id is not None or not generation.member_id or self._connection is None:
            return
        body = {
            "group_id": self.group_id,
            "member_id": generation.member_id,
            "members": [{"member_id": generation.member_id, "group_instance_id": None, "reason": reason}],
        }
        log.info("group %s: member %s leaving: %s", self.group_id, generation.member_id, reason)
        try:
            response = await self._send(ApiKey.LEAVE_GROUP, body)
            self._check(response.error_code, None, "leave")
        except KafkaError as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)

    # -- offsets ----------------------------------------------------------------------------------------------------

    async def commit_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit of ``offsets`` under the current generation; retriable failures are retried (with backoff and
        a metadata refresh), a rebalance or a forgotten member raises CommitFailedError."""
        if offsets:
            await self.cluster.with_retries(lambda: self._commit_once(offsets))

    async def _commit_once(self, offsets: Mapping[TopicPartition, int]) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, offset in sorted(offsets.items()):
            by_topic[tp.topic].append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        generation = self.generation
        body = {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": self.group_instance_id,
            "retention_time": -1,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        }
        response = await self._send(ApiKey.OFFSET_COMMIT, body)
        for topic in response.topics:
            for part in topic.partitions:
                code = ErrorCode(part.error_code)
                if code == ErrorCode.NONE:
                    continue
                context = f"commit of {TopicPartition(topic.name, int(part.partition_index))}"
                if code == ErrorCode.REBALANCE_IN_PROGRESS or code in _MEMBER_GONE:
                    if code in _MEMBER_GONE and self.generation == generation:
                        self.reset_generation()
                    self.rejoin_needed = True
                    raise CommitFailedError(
                        f"{context} in group {self.group_id} failed with {code.name}: the group has rebalanced "
                        "and the partitions may be assigned to another member"
                    )
                self._check(code, None, context)
        log.debug("group %s: committed %s", self.group_id, dict(offsets))

    async def fetch_committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The committed offset of each partition (None where the group has none), with retries."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        return await self.cluster.with_retries(lambda: self._fetch_committed_once(wanted))

    async def _fetch_committed_once(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        topics = [{"name": name, "partition_indexes": ids} for name, ids in by_topic.items()]
        body = {
            "group_id": self.group_id,
            "topics": topics,
            "groups": [{"group_id": self.group_id, "topics": topics}],
            "require_stable": False,
        }
        response = await self._send(ApiKey.OFFSET_FETCH, body)
        answer = response.groups[0] if hasattr(response, "groups") else response
        self._check(getattr(answer, "error_code", ErrorCode.NONE), None, "offset fetch")
        result: dict[TopicPartition, int | None] = dict.fromkeys(partitions)
        for topic in answer.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, int(part.partition_index))
                self._check(part.error_code, None, f"offset fetch of {tp}")
                offset = int(part.committed_offset)
                result[tp] = offset if offset >= 0 else None
        return result

    async def close(self) -> None:
        """Stop heartbeating, leave the group (a dynamic member), close the coordinator connection."""
        await self.maybe_leave_group("the consumer is being closed")
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
