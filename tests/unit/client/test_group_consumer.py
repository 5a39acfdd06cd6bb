"""Group consumer against a scripted coordinator: joining, rebalances, offsets, heartbeats, leaving."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from client_fakes import BROKER_VERSIONS, FakeBroker, metadata_handler, run
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from mq.client.consumer_coordinator import CommitFailedError
from mq.client.group_consumer import AsyncGroupConsumer
from mq.client.group_protocol import Assignment, decode_assignment, decode_subscription, encode_assignment
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.topic_partition import TopicPartition as TP

NEWEST = {
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
}
OLDEST = {
    ApiKey.FIND_COORDINATOR: (0, 0),
    ApiKey.JOIN_GROUP: (0, 0),
    ApiKey.SYNC_GROUP: (0, 0),
    ApiKey.HEARTBEAT: (0, 0),
    ApiKey.LEAVE_GROUP: (0, 0),
    ApiKey.OFFSET_COMMIT: (2, 2),
    ApiKey.OFFSET_FETCH: (1, 1),
}


class FakeGroup:
    """One group on one fake broker. This consumer is the leader unless ``follower_assignment`` is set; other members
    (``others``: member id -> subscription bytes) are listed to the leader. ``errors[api]`` queues error codes to
    answer the next requests of that API with."""

    def __init__(self, broker: FakeBroker, topics: dict[str, int], versions: dict[int, tuple[int, int]]) -> None:
        self.broker = broker
        self.topics = topics
        broker.versions.update(versions)
        self.generation = 0
        self.protocol = "range"
        self.others: dict[str, bytes] = {}
        self.follower_assignment: Assignment | None = None
        self.skip_assignment = False
        self.kept: dict[str, Assignment] = {}
        self.committed: dict[TP, int] = {}
        self.errors: dict[int, list[int]] = defaultdict(list)
        self.synced: list[dict[str, Assignment]] = []
        self.fetch_offsets: dict[TP, int] = {}
        self.new_members = 0
        handlers: dict[int, Callable[[RequestHeader, Any], Any]] = {
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.JOIN_GROUP: self.join,
            ApiKey.SYNC_GROUP: self.sync,
            ApiKey.HEARTBEAT: lambda h, b: {"error_code": self.error(ApiKey.HEARTBEAT)},
            ApiKey.LEAVE_GROUP: self.leave,
            ApiKey.OFFSET_COMMIT: self.commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
        }
        broker.handlers.update(handlers)
        self.set_topics(topics)

    def set_topics(self, topics: dict[str, int]) -> None:
        self.topics = topics
        leaders = {name: [0] * count for name, count in topics.items()}
        self.broker.handlers[ApiKey.METADATA] = metadata_handler([self.broker], leaders)

    def error(self, api: int) -> int:
        return self.errors[api].pop(0) if self.errors[api] else 0

    def find_coordinator(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        found = {"error_code": self.error(ApiKey.FIND_COORDINATOR), "node_id": 0, "host": "127.0.0.1"}
        found["port"] = self.broker.port
        if header.api_version >= 4:
            return {"coordinators": [{"key": body.coordinator_keys[0], **found}]}
        return found

    def join(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        code = self.error(ApiKey.JOIN_GROUP)
        member_id = body.member_id
        if not code and not member_id and header.api_version >= 4:
            self.new_members += 1
            return {"error_code": ErrorCode.MEMBER_ID_REQUIRED, "member_id": f"mq-{self.new_members}", "leader": ""}
        if code:
            return {"error_code": code, "member_id": member_id, "leader": ""}
        if not member_id:
            self.new_members += 1
            member_id = f"mq-{self.new_members}"
        self.generation += 1
        [metadata] = [p.metadata for p in body.protocols if p.name == self.protocol]
        leader = member_id if self.follower_assignment is None else "other-leader"
        members = [{"member_id": member_id, "metadata": metadata}]
        members += [{"member_id": m, "metadata": data} for m, data in self.others.items()]
        return {
            "error_code": 0,
            "generation_id": self.generation,
            "protocol_type": "consumer",
            "protocol_name": self.protocol,
            "leader": leader,
            "skip_assignment": self.skip_assignment,
            "member_id": member_id,
            "members": members if leader == member_id else [],
        }

    def sync(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        code = self.error(ApiKey.SYNC_GROUP)
        if code:
            return {"error_code": code, "assignment": b""}
        assert body.generation_id == self.generation
        sent = {a.member_id: decode_assignment(a.assignment) for a in body.assignments}
        self.synced.append(sent)
        if self.skip_assignment:
            sent = self.kept
        self.kept = sent
        mine = self.follower_assignment if self.follower_assignment is not None else sent[body.member_id]
        return {
            "error_code": 0,
            "protocol_type": "consumer",
            "protocol_name": self.protocol,
            "assignment": encode_assignment(mine),
        }

    def leave(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        return {"error_code": 0, "members": []}

    def commit(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        code = self.error(ApiKey.OFFSET_COMMIT)
        topics = []
        for topic in body.topics:
            for part in topic.partitions:
                if not code:
                    self.committed[TP(topic.name, part.partition_index)] = part.committed_offset
            topics.append(
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": code} for p in topic.partitions
                    ],
                }
            )
        return {"topics": topics}

    def offset_fetch(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        asked = body.groups[0].topics if header.api_version >= 8 else body.topics
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": self.committed.get(TP(t.name, p), -1),
                        "metadata": "",
                        "error_code": 0,
                    }
                    for p in t.partition_indexes
                ],
            }
            for t in asked
        ]
        if header.api_version >= 8:
            return {"groups": [{"group_id": body.groups[0].group_id, "topics": topics}]}
        return {"topics": topics}

    def fetch(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        responses = []
        for topic in body.topics:
            parts = []
            for p in topic.partitions:
                self.fetch_offsets[TP(topic.topic, p.partition)] = p.fetch_offset
                parts.append({"partition_index": p.partition, "high_watermark": 100, "records": b""})
            responses.append({"topic": topic.topic, "partitions": parts})
        return {"responses": responses}

    def list_offsets(self, header: RequestHeader, body: Any) -> dict[str, Any]:
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "offset": 0 if p.timestamp == -2 else 100, "timestamp": -1}
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ]
        return {"topics": topics}

    def requests(self, api: int) -> list[tuple[RequestHeader, Any]]:
        return self.broker.of(api)


Test = Callable[[AsyncGroupConsumer, FakeGroup], Awaitable[None]]


def with_group(test: Test, versions: dict[int, tuple[int, int]] = NEWEST, **config: Any) -> None:
    async def main() -> None:
        broker = await FakeBroker(versions=dict(BROKER_VERSIONS)).start()
        group = FakeGroup(broker, {"t": 3}, versions)
        settings: dict[str, Any] = {"fetch_max_wait_ms": 20, "heartbeat_interval_ms": 50, "retry_backoff_ms": 10}
        consumer = AsyncGroupConsumer(f"127.0.0.1:{broker.port}", group_id="g", **(settings | config))
        try:
            await test(consumer, group)
        finally:
            await consumer.close()
            await broker.stop()

    run(main())


async def until(condition: Callable[[], bool], consumer: AsyncGroupConsumer | None = None) -> None:
    """Poll (or sleep) until ``condition`` holds."""
    for _ in range(200):
        if condition():
            return
        if consumer is not None:
            await consumer.poll(10)
        else:
            await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


@pytest.mark.parametrize("versions", [NEWEST, OLDEST], ids=["newest", "oldest"])
def test_joins_assigns_everything_and_starts_at_committed_offsets(versions: dict[int, tuple[int, int]]) -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        group.committed[TP("t", 1)] = 42
        consumer.subscribe(["t"])
        await consumer.poll(0)
        joins = group.requests(ApiKey.JOIN_GROUP)
        if versions is NEWEST:
            assert [j.member_id for _, j in joins] == ["", "mq-1"]
            assert joins[0][1].rebalance_timeout.total_seconds() == 300
            assert joins[0][1].session_timeout.total_seconds() == 45
        else:
            assert [j.member_id for _, j in joins] == [""]
        assert [p.name for p in joins[-1][1].protocols] == ["range", "roundrobin"]
        assert decode_subscription(joins[-1][1].protocols[0].metadata).topics == ("t",)
        assert consumer.member_id == "mq-1" and consumer.generation_id == 1
        assert sorted(consumer.assignment()) == [TP("t", 0), TP("t", 1), TP("t", 2)]
        assert await consumer.committed([TP("t", 1), TP("t", 2)]) == {TP("t", 1): 42, TP("t", 2): None}
        assert await consumer.position(TP("t", 1)) == 42
        assert await consumer.position(TP("t", 0)) == 100  # auto_offset_reset=latest
        await until(lambda: group.fetch_offsets.get(TP("t", 1)) == 42, consumer)
        consumer.seek(TP("t", 2), 7)
        await consumer.commit()
        assert group.committed == {TP("t", 0): 100, TP("t", 1): 42, TP("t", 2): 7}
        await consumer.commit({TP("t", 0): 5})
        assert group.committed[TP("t", 0)] == 5
        await until(lambda: len(group.requests(ApiKey.HEARTBEAT)) >= 2, consumer)

    with_group(test, versions, enable_auto_commit=False)


def test_close_commits_and_leaves_the_group() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        await consumer.close()
        assert group.committed == {TP("t", p): 0 for p in range(3)}
        [(header, leave)] = group.requests(ApiKey.LEAVE_GROUP)
        assert header.api_version == 5
        assert [m.member_id for m in leave.members] == ["mq-1"]

    with_group(test, auto_offset_reset="earliest")


def test_a_static_member_sends_its_instance_id_and_does_not_leave() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        await until(lambda: bool(group.requests(ApiKey.HEARTBEAT)), consumer)
        await consumer.close()
        assert {b.group_instance_id for _, b in group.requests(ApiKey.JOIN_GROUP)} == {"instance-1"}
        assert group.requests(ApiKey.HEARTBEAT)[0][1].group_instance_id == "instance-1"
        assert group.requests(ApiKey.LEAVE_GROUP) == []

    with_group(test, group_instance_id="instance-1")


def test_the_leader_assigns_with_the_groups_protocol_across_members_of_other_clients() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        group.protocol = "roundrobin"
        group.set_topics({"t": 3, "u": 2})
        group.others["kafka-python-x"] = ConsumerProtocolSubscription(
            version=0, topics=["t", "u"], user_data=b""
        ).encode()
        consumer.subscribe(["t"])
        await consumer.poll(0)
        # members sorted: kafka-python-x, mq-1; partitions t0 t1 t2 u0 u1; mq-1 takes only t.
        assert group.synced[-1] == {
            "kafka-python-x": Assignment((TP("t", 0), TP("t", 2), TP("u", 0), TP("u", 1))),
            "mq-1": Assignment((TP("t", 1),)),
        }
        assert consumer.assignment() == [TP("t", 1)]

    with_group(test)


def test_a_follower_takes_the_assignment_from_sync_group() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        group.follower_assignment = Assignment((TP("t", 2),))
        consumer.subscribe(["t"])
        await consumer.poll(0)
        assert consumer.assignment() == [TP("t", 2)]
        assert group.synced == [{}]

    with_group(test)


def test_rebalance_in_progress_commits_revokes_and_rejoins_with_the_same_member_id() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        events: list[tuple[str, list[TP]]] = []

        class Listener:
            async def on_partitions_revoked(self, revoked: list[TP]) -> None:
                events.append(("revoked", sorted(revoked)))
                positions.append(await consumer.position(TP("t", 0)))  # still assigned while the listener runs

            async def on_partitions_assigned(self, assigned: list[TP]) -> None:
                events.append(("assigned", sorted(assigned)))

        positions: list[int] = []
        consumer.subscribe(["t"], listener=Listener())
        await consumer.poll(0)
        consumer.seek(TP("t", 0), 9)
        group.follower_assignment = Assignment((TP("t", 0),))
        group.errors[ApiKey.HEARTBEAT].append(ErrorCode.REBALANCE_IN_PROGRESS)
        await until(lambda: consumer.generation_id == 2, consumer)
        assert group.committed[TP("t", 0)] == 9  # committed before the revocation
        assert [j.member_id for _, j in group.requests(ApiKey.JOIN_GROUP)] == ["", "mq-1", "mq-1"]
        everything = [TP("t", 0), TP("t", 1), TP("t", 2)]
        assert events == [("assigned", everything), ("revoked", everything), ("assigned", [TP("t", 0)])]
        assert positions == [9]
        assert await consumer.position(TP("t", 0)) == 9

    with_group(test)


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION])
def test_a_forgotten_member_rejoins_as_a_new_member(code: ErrorCode) -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        group.errors[ApiKey.HEARTBEAT].append(code)
        await until(lambda: consumer.generation_id == 2, consumer)
        assert [j.member_id for _, j in group.requests(ApiKey.JOIN_GROUP)] == ["", "mq-1", "", "mq-2"]
        assert consumer.member_id == "mq-2"

    with_group(test)


def test_coordinator_errors_lead_to_a_new_lookup() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        group.errors[ApiKey.FIND_COORDINATOR].append(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        group.errors[ApiKey.JOIN_GROUP] += [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        group.errors[ApiKey.SYNC_GROUP].append(ErrorCode.REBALANCE_IN_PROGRESS)
        consumer.subscribe(["t"])
        await consumer.poll(0)
        assert len(group.requests(ApiKey.FIND_COORDINATOR)) == 3
        assert consumer.generation_id >= 1 and len(consumer.assignment()) == 3
        group.errors[ApiKey.HEARTBEAT].append(ErrorCode.NOT_COORDINATOR)
        await until(lambda: len(group.requests(ApiKey.FIND_COORDINATOR)) == 4, consumer)
        assert consumer.generation_id == group.generation  # the generation survives a coordinator move

    with_group(test)


def test_commit_after_the_group_moved_on_fails_and_the_member_rejoins() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        group.errors[ApiKey.OFFSET_COMMIT].append(ErrorCode.ILLEGAL_GENERATION)
        with pytest.raises(CommitFailedError):
            await consumer.commit({TP("t", 0): 1})
        assert consumer.generation_id == -1
        await consumer.poll(0)
        assert consumer.generation_id == 2
        group.errors[ApiKey.OFFSET_COMMIT].append(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        await consumer.commit({TP("t", 0): 3})
        assert group.committed[TP("t", 0)] == 3

    with_group(test, enable_auto_commit=False)


def test_auto_commit_runs_from_poll_every_interval() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        consumer.seek(TP("t", 1), 11)
        await until(lambda: group.committed.get(TP("t", 1)) == 11, consumer)

    with_group(test, auto_commit_interval_ms=50, auto_offset_reset="earliest")


def test_a_pattern_subscription_follows_new_topics() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        group.set_topics({"a1": 1, "b1": 1, "__consumer_offsets": 1})
        consumer.subscribe(pattern=r"a.*|__.*")
        await consumer.poll(0)
        assert consumer.subscription() == {"a1"}
        assert consumer.assignment() == [TP("a1", 0)]
        group.set_topics({"a1": 1, "a2": 2, "b1": 1})
        await until(lambda: len(consumer.assignment()) == 3, consumer)
        assert consumer.subscription() == {"a1", "a2"}
        assert decode_subscription(group.requests(ApiKey.JOIN_GROUP)[-1][1].protocols[0].metadata).topics == (
            "a1",
            "a2",
        )

    with_group(test, metadata_max_age_ms=50)


def test_the_leader_rebalances_when_partitions_are_added() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t", "later"])
        await consumer.poll(0)
        assert len(consumer.assignment()) == 3
        group.set_topics({"t": 4, "later": 1})
        await until(lambda: len(consumer.assignment()) == 5, consumer)

    with_group(test, metadata_max_age_ms=50)


def test_a_consumer_that_stops_polling_leaves_and_rejoins_on_its_next_poll() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        await until(lambda: bool(group.requests(ApiKey.LEAVE_GROUP)))
        assert consumer.generation_id == -1
        await consumer.poll(0)
        assert consumer.generation_id == 2 and len(consumer.assignment()) == 3

    with_group(test, max_poll_interval_ms=200, session_timeout_ms=1000)


def test_fatal_join_errors_and_misuse_are_raised() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        with pytest.raises(RuntimeError, match="not subscribed"):
            await consumer.poll(0)
        with pytest.raises(ValueError):
            consumer.subscribe(["t"], pattern="t.*")
        group.errors[ApiKey.JOIN_GROUP].append(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        consumer.subscribe(["t"])
        with pytest.raises(KafkaError) as raised:
            await consumer.poll(0)
        assert raised.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    with_group(test)


def test_a_static_leader_told_to_skip_the_assignment_keeps_the_groups_assignment() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        group.skip_assignment = True
        group.errors[ApiKey.HEARTBEAT].append(ErrorCode.REBALANCE_IN_PROGRESS)
        await until(lambda: consumer.generation_id == 2, consumer)
        assert group.synced[-1] == {}
        assert sorted(consumer.assignment()) == [TP("t", 0), TP("t", 1), TP("t", 2)]

    with_group(test, group_instance_id="static-leader")


def test_unsubscribe_commits_revokes_and_leaves() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        consumer.subscribe(["t"])
        await consumer.poll(0)
        consumer.seek(TP("t", 0), 4)
        await consumer.unsubscribe()
        assert group.committed[TP("t", 0)] == 4
        assert consumer.assignment() == [] and consumer.subscription() == frozenset()
        assert [m.member_id for _, b in group.requests(ApiKey.LEAVE_GROUP) for m in b.members] == ["mq-1"]
        with pytest.raises(RuntimeError, match="not subscribed"):
            await consumer.poll(0)

    with_group(test)


def test_a_coordinator_that_stays_unavailable_is_reported_after_the_request_timeout() -> None:
    async def test(consumer: AsyncGroupConsumer, group: FakeGroup) -> None:
        group.errors[ApiKey.FIND_COORDINATOR] += [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 10_000
        consumer.subscribe(["t"])
        with pytest.raises(KafkaError) as raised:
            await consumer.poll(0)
        assert raised.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert len(group.requests(ApiKey.FIND_COORDINATOR)) > 1

    with_group(test, request_timeout_ms=300)
