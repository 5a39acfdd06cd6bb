"""Wildcard subscriptions of the ZooKeeper-coordinated consumer as Kafka 0.8.2 writes and reads them: the topic
filter's normalisation and matching, the registration JSON, its expansion over the existing topics, and a consumer
over the in-process metadata store that follows topics created and deleted after it joined."""

from __future__ import annotations

import pytest

from mq.client.zk_consumer import ZkConsumerConfig, ZookeeperConsumer
from mq.tools.verify_consumer_rebalance import SUCCESS, verify
from mq.topic_partition import TopicFilter, TopicPartition, java_topic_regex
from mq.zk.codecs import BrokerRegistration, ConsumerRegistration, TopicAssignment
from mq.zk.consumer_groups import ZkConsumerGroups, registration_filter, topic_streams
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore

TOPICS = ["__consumer_offsets", "logs-app", "logs-db", "metrics"]


@pytest.mark.parametrize(
    ("raw", "regex"),
    [
        (" logs.*, metrics ", "logs.*|metrics"),
        ("'logs.*'", "logs.*"),
        ('"a, b"', "a|b"),
        # Kafka drops spaces before it strips the quotes, so a quote left after a space goes too.
        ('"a" "', "a"),
        ("a|b", "a|b"),
    ],
)
def test_filters_normalise_their_regex_as_kafka_0_8(raw: str, regex: str) -> None:
    assert java_topic_regex(raw) == regex
    assert TopicFilter(raw).regex == regex


def test_whitelist_and_blacklist_match_whole_names_and_skip_internal_topics_unless_asked() -> None:
    white, black = TopicFilter("logs.*"), TopicFilter("logs.*", blacklist=True)
    assert [t for t in TOPICS if white.allows(t)] == ["logs-app", "logs-db"]
    assert [t for t in TOPICS if black.allows(t)] == ["metrics"]
    assert [t for t in TOPICS if black.allows(t, exclude_internal=False)] == ["__consumer_offsets", "metrics"]
    assert not TopicFilter("logs").allows("logs-app")  # String.matches: the whole name
    assert (white.pattern, black.pattern) == ("white_list", "black_list")
    with pytest.raises(ValueError, match=r"^a\( is an invalid regex\.$"):
        TopicFilter("a(")


def test_a_wildcard_registration_is_written_as_kafka_0_8_2_writes_it() -> None:
    topic_filter = TopicFilter(" 'logs.*, metrics' ")
    registration = ConsumerRegistration({topic_filter.regex: 2}, topic_filter.pattern, 1700000000123)
    assert registration.encode() == (
        b'{"version":1,"subscription":{"logs.*|metrics":2},"pattern":"white_list","timestamp":"1700000000123"}'
    )


def test_registrations_written_by_kafka_expand_over_the_existing_topics() -> None:
    # Kafka escapes "/" in the regex (Utils.JSONEscapeString); the JSON reader undoes it.
    black = ConsumerRegistration.decode(
        b'{"version":1,"subscription":{"logs.*|a\\/b":3},"pattern":"black_list","timestamp":"1700000000123"}'
    )
    assert registration_filter(black) == TopicFilter("logs.*|a/b", blacklist=True)
    assert topic_streams(black, TOPICS) == {"metrics": 3}
    assert topic_streams(black, TOPICS, exclude_internal=False) == {"__consumer_offsets": 3, "metrics": 3}
    static = ConsumerRegistration.decode(
        b'{"version":1,"subscription":{"logs.*":1},"pattern":"static","timestamp":"1700000000123"}'
    )
    assert registration_filter(static) is None
    assert topic_streams(static, TOPICS) == {"logs.*": 1}


@pytest.fixture
def store() -> LocalStore:
    store = LocalStore(None)
    zk = KafkaZkClient(store)
    # Never contacted: the consumer below only registers, rebalances and claims.
    zk.register_broker(BrokerRegistration(1, ["PLAINTEXT://127.0.0.1:1"]))
    for topic, partitions in (("logs-app", 2), ("logs-db", 1), ("metrics", 1)):
        zk.create_topic(topic, TopicAssignment({p: [1] for p in range(partitions)}), {})
    return store


def wait_for(condition, consumer: ZookeeperConsumer) -> None:  # type: ignore[no-untyped-def]
    """Give the consumer's rebalance thread time to act on the watch (bounded; asserts the outcome)."""
    for _ in range(200):
        if condition():
            return
        consumer._closed.wait(0.05)
    assert condition()


def test_a_wildcard_consumer_registers_owns_matching_topics_and_follows_new_and_deleted_ones(store: LocalStore) -> None:
    groups = ZkConsumerGroups(store)
    zk = KafkaZkClient(store)
    config = ZkConsumerConfig("unused", "g", consumer_id="c1", auto_commit_enable=False, rebalance_backoff_ms=50)
    consumer = ZookeeperConsumer(config, TopicFilter("logs.*"), streams=2, store=store)
    try:
        registration = groups.registrations("g")["g_c1"]
        assert (registration.subscription, registration.pattern) == ({"logs.*": 2}, "white_list")
        logs = [TopicPartition("logs-app", 0), TopicPartition("logs-app", 1), TopicPartition("logs-db", 0)]
        assert consumer.owned() == logs
        assert groups.owners("g") == {
            TopicPartition("logs-app", 0): "g_c1-0",
            TopicPartition("logs-app", 1): "g_c1-1",
            TopicPartition("logs-db", 0): "g_c1-0",
        }
        assert verify(groups, zk, "g").verdict == SUCCESS

        zk.create_topic("logs-web", TopicAssignment({0: [1]}), {})
        zk.create_topic("other", TopicAssignment({0: [1]}), {})
        wait_for(lambda: TopicPartition("logs-web", 0) in consumer.owned(), consumer)
        assert consumer.topics == ["logs-app", "logs-db", "logs-web"]
        assert verify(groups, zk, "g").verdict == SUCCESS

        store.delete("/brokers/topics/logs-db", recursive=True)
        wait_for(lambda: TopicPartition("logs-db", 0) not in consumer.owned(), consumer)
        assert consumer.topics == ["logs-app", "logs-web"]
    finally:
        consumer.close()


def test_the_assignment_counts_the_other_members_wildcard_registrations(store: LocalStore) -> None:
    groups = ZkConsumerGroups(store)
    groups.register("g", "g_c0", ConsumerRegistration({"logs.*": 1}, "white_list"))
    config = ZkConsumerConfig("unused", "g", consumer_id="c1", auto_commit_enable=False)
    with ZookeeperConsumer(config, TopicFilter("logs.*"), streams=2, store=store) as consumer:
        # range per topic over g_c0-0, g_c1-0, g_c1-1: logs-app-0 and logs-db-0 go to g_c0-0.
        assert consumer.owned() == [TopicPartition("logs-app", 1)]
        assert groups.owners("g") == {TopicPartition("logs-app", 1): "g_c1-0"}
