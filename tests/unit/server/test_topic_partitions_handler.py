"""DescribeTopicPartitions through the dispatcher with real frames: pages by the partition limit and the cursor, unknown
and invalid topics, refused topics, and the requests Kafka calls invalid."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.security.acl import AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import ApiDispatcher
from mq.server.authorization import SUPPORTED_OPERATIONS
from mq.server.handlers import topic_partitions
from mq.server.handlers.topic_partitions import describe_topic_partitions_api
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from tests.unit.server.test_authorization_checks import acl_cache, decoded, general, request_frame

KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
A_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def cache() -> MetadataCache:
    """Brokers 1 and 2 live (broker 3 is not); topic a: 3 partitions, b: 2, c: 1, __consumer_offsets: 1."""
    metadata = MetadataCache(1, "cluster")
    metadata.update_brokers([BrokerEndpoint(1, "h", 9092), BrokerEndpoint(2, "h", 9093)], 1)
    a_id = base64.urlsafe_b64encode(A_ID.bytes).decode().rstrip("=")
    for p in range(3):
        metadata.update_partition("a", a_id, p, PartitionInfo(1 + p % 2, 4, (1, 2), (1, 2)))
    metadata.update_partition("a", a_id, 2, PartitionInfo(3, 7, (3, 1), (3,)))  # its leader is not live
    for p in range(2):
        metadata.update_partition("b", None, p, PartitionInfo(2, 0, (2,), (2,)))
    metadata.update_partition("c", None, 0, PartitionInfo(1, 0, (1,), (1,)))
    metadata.update_partition("__consumer_offsets", None, 0, PartitionInfo(1, 0, (1,), (1,)))
    return metadata


def ask(names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None, acl: AclCache | None = None) -> Any:
    dispatcher = ApiDispatcher([describe_topic_partitions_api(cache(), acl)], acl)
    values = {
        "topics": [{"name": name} for name in names],
        "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    }
    return decoded(KEY, 0, general(dispatcher, request_frame(KEY, 0, values)))


def pages(answer: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics]


def cursor_of(answer: Any) -> tuple[str, int] | None:
    cursor = answer.next_cursor
    return None if cursor is None else (cursor.topic_name, cursor.partition_index)


def test_every_topic_in_name_order_with_partitions_as_metadata_describes_them() -> None:
    answer = ask([])
    assert pages(answer) == [("__consumer_offsets", [0]), ("a", [0, 1, 2]), ("b", [0, 1]), ("c", [0])]
    assert answer.next_cursor is None
    offsets, a = answer.topics[0], answer.topics[1]
    assert offsets.is_internal and not a.is_internal
    assert a.topic_id == A_ID and a.error_code == ErrorCode.NONE
    assert a.topic_authorized_operations == sum(1 << op for op in SUPPORTED_OPERATIONS[ResourceType.TOPIC])
    leaderless = a.partitions[2]
    assert (leaderless.leader_id, leaderless.leader_epoch, leaderless.replica_nodes, leaderless.isr_nodes) == (
        -1,
        7,
        (3, 1),
        (3,),
    )
    assert leaderless.error_code == ErrorCode.NONE  # Kafka's brokers leave partition errors out of this API
    assert leaderless.eligible_leader_replicas is None and leaderless.last_known_elr is None
    assert [(p.leader_id, p.leader_epoch) for p in a.partitions[:2]] == [(1, 4), (2, 4)]


def test_pages_follow_the_partition_limit_and_the_cursor() -> None:
    first = ask([], limit=2)
    assert pages(first) == [("__consumer_offsets", [0]), ("a", [0])]
    assert cursor_of(first) == ("a", 1)
    second = ask([], limit=2, cursor=("a", 1))
    assert pages(second) == [("a", [1, 2])]
    assert cursor_of(second) == ("b", 0)  # a ended exactly at the limit: the next page starts at b
    third = ask([], limit=2, cursor=("b", 0))
    assert pages(third) == [("b", [0, 1])]
    assert cursor_of(third) == ("c", 0)
    last = ask([], limit=2, cursor=("c", 0))
    assert pages(last) == [("c", [0])]
    assert last.next_cursor is None


def test_a_limit_below_one_answers_one_partition_and_above_the_broker_maximum_is_capped(monkeypatch: Any) -> None:
    assert pages(ask(["a"], limit=0)) == [("a", [0])]
    monkeypatch.setattr(topic_partitions, "MAX_PARTITIONS_PER_RESPONSE", 2)
    answer = ask(["a", "b"], limit=100)
    assert pages(answer) == [("a", [0, 1])] and cursor_of(answer) == ("a", 2)


def test_named_topics_answer_unknown_and_invalid_names_and_the_cursor_skips_earlier_names() -> None:
    answer = ask(["c", "zz", "a", "bad/name", "a"])
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("a", ErrorCode.NONE),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("c", ErrorCode.NONE),
        ("zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert answer.topics[3].topic_id is None and answer.topics[3].partitions == ()
    assert pages(ask(["a", "c", "b"], cursor=("b", 1))) == [("b", [1]), ("c", [0])]


def test_a_cursor_outside_the_named_topics_or_with_a_negative_partition_is_an_invalid_request() -> None:
    for names, cursor in ((["a", "b"], ("c", 0)), (["a"], ("a", -1)), ([], ("a", -1))):
        answer = ask(names, cursor=cursor)
        assert [(t.name, t.error_code) for t in answer.topics] == [(name, ErrorCode.INVALID_REQUEST) for name in names]
        assert answer.next_cursor is None


def test_describe_is_needed_on_each_topic() -> None:
    acl = acl_cache((ResourceType.TOPIC, "b", AclOperation.READ), (ResourceType.TOPIC, "c", AclOperation.DESCRIBE))
    assert pages(ask([], acl=acl)) == [("b", [0, 1]), ("c", [0])]  # the others are left out
    named = ask(["a", "c", "missing", "b"], limit=2, acl=acl)
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("b", ErrorCode.NONE),
        ("a", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # after the page, whatever the limit
        ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED),  # refused before anything is said of it
    ]
    assert cursor_of(named) == ("c", 0)
    refused = named.topics[1]
    assert refused.topic_id is None and refused.partitions == () and not refused.is_internal
    assert named.topics[0].topic_authorized_operations == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
