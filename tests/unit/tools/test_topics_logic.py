from __future__ import annotations

import pytest

from mq.tools.topics import (
    PartitionDescription,
    TopicCommandError,
    TopicDescription,
    created_lines,
    describe_lines,
    list_topic_lines,
    parse_configs,
    parse_replica_assignment,
    select,
    validate_options,
)

TOPIC = TopicDescription(
    "my-topic",
    "q9VbNPbiRcWKHgG8QVq8Pw",
    [
        PartitionDescription(0, 1, (1, 2), (1, 2)),
        PartitionDescription(1, 2, (2, 3), (2,)),
        PartitionDescription(2, -1, (3, 1), ()),
    ],
    {"cleanup.policy": "compact"},
)


def test_describe_lines_as_kafka_2_8() -> None:
    assert describe_lines(TOPIC, live_brokers={1, 2}) == [
        "Topic: my-topic\tTopicId: q9VbNPbiRcWKHgG8QVq8Pw\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: cleanup.policy=compact",
        "\tTopic: my-topic\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: my-topic\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2",
        "\tTopic: my-topic\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: ",
    ]


def test_report_flags() -> None:
    under = describe_lines(TOPIC, live_brokers={1, 2}, under_replicated=True)
    assert [line.split("\t")[2] for line in under] == ["Partition: 1", "Partition: 2"]
    unavailable = describe_lines(TOPIC, live_brokers={1}, unavailable=True)
    assert [line.split("\t")[2] for line in unavailable] == ["Partition: 1", "Partition: 2"]
    assert describe_lines(TOPIC, live_brokers=set(), with_overrides=True) == [
        describe_lines(TOPIC, live_brokers=set())[0]
    ]
    plain = TopicDescription("p", None, [PartitionDescription(0, 0, (0,), (0,))])
    assert describe_lines(plain, live_brokers={0}, with_overrides=True) == []
    assert describe_lines(plain, live_brokers={0})[0] == "Topic: p\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "


def test_topic_regex_selection() -> None:
    names = ["a", "b", "foo.bar", "fooXbar", "__consumer_offsets"]
    assert select(names, "a,b") == ["a", "b"]
    assert select(names, " 'foo.bar' ") == ["foo.bar", "fooXbar"]
    assert select(names, None, exclude_internal=True) == ["a", "b", "foo.bar", "fooXbar"]
    assert select(names, "fo") == []


def test_replica_assignment_and_configs() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    with pytest.raises(TopicCommandError, match="duplicate entries: 1"):
        parse_replica_assignment("1:1")
    assert parse_configs(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(TopicCommandError):
        parse_configs(["novalue"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one action"),
        ({"list": True, "describe": True}, "exactly one action"),
        ({"create": True}, 'Missing required argument "[topic]"'),
        ({"list": True, "config": ["a=b"]}, 'Option "[config]" can\'t be used with option "[list]"'),
        ({"describe": True, "replication_factor": 2}, "[replication-factor]"),
        ({"describe": True, "under_replicated_partitions": True, "unavailable_partitions": True}, "Only one of"),
        ({"create": True, "topic": "t", "replica_assignment": "1:2", "partitions": 3}, "[replica-assignment]"),
        ({"alter": True, "topic": "t"}, 'Missing required argument "[partitions]"'),
        (
            {"alter": True, "topic": "t", "config": ["retention.ms=1"]},
            'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]" (the kafka-configs'
            " CLI supports altering topic configs with a --bootstrap-server option)",
        ),
        (
            {"alter": True, "topic": "t", "delete_config": ["retention.ms"]},
            'Option "[delete-config]" can\'t be used with option "[bootstrap-server]"',
        ),
    ],
)
def test_option_rules(options: dict[str, object], message: str) -> None:
    with pytest.raises(TopicCommandError) as info:
        validate_options(None, options)
    assert message in str(info.value) and info.value.usage


def test_created_lines() -> None:
    assert created_lines("plain") == ["Created topic plain."]
    assert created_lines("a.b")[0].startswith("WARNING: Due to limitations in metric names")


class ListedTopics:
    """The part of TopicAdmin that list-topic reads: topics, their descriptions and the live brokers."""

    def __init__(self, topics: list[TopicDescription], live: set[int]) -> None:
        self.topics = {t.name: t for t in topics}
        self.live = live

    def list_topic_names(self) -> list[str]:
        return list(self.topics)

    def describe_topics(self, names: list[str]) -> list[TopicDescription]:
        return [self.topics[n] for n in names if n in self.topics]

    def live_brokers(self) -> set[int]:
        return self.live


def test_list_topic_lines_as_kafka_0_8_0() -> None:
    other = TopicDescription("a-topic", None, [PartitionDescription(0, None, (1,), ())])
    admin = ListedTopics([TOPIC, other], {1, 2})
    assert list_topic_lines(admin, None) == [  # type: ignore[arg-type]
        "topic: a-topic\tpartition: 0\tleader: none\treplicas: 1\tisr: ",
        "topic: my-topic\tpartition: 0\tleader: 1\treplicas: 1,2\tisr: 1,2",
        "topic: my-topic\tpartition: 1\tleader: 2\treplicas: 2,3\tisr: 2",
        "topic: my-topic\tpartition: 2\tleader: -1\treplicas: 3,1\tisr: ",
    ]
    assert list_topic_lines(admin, "nope") == ["topic nope doesn't exist!"]  # type: ignore[arg-type]
    assert list_topic_lines(ListedTopics([], set()), None) == ["no topics exist!"]  # type: ignore[arg-type]
    under = list_topic_lines(admin, "my-topic", under_replicated=True)  # type: ignore[arg-type]
    assert [line.split("\t")[1] for line in under] == ["partition: 1", "partition: 2"]
    unavailable = list_topic_lines(admin, None, unavailable=True)  # type: ignore[arg-type]
    assert [line.split("\t")[:2] for line in unavailable] == [
        ["topic: a-topic", "partition: 0"],
        ["topic: my-topic", "partition: 2"],
    ]
    either = list_topic_lines(admin, "my-topic", under_replicated=True, unavailable=True)  # type: ignore[arg-type]
    assert either == under
