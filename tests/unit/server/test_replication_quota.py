"""Replication quotas: the sliding-window rate, the exceeded check, throttled-replica lists and config wiring."""

from __future__ import annotations

import pytest

from mq.config import LONG_MAX, BrokerConfig, TopicConfig, parse_throttled_replicas
from mq.errors import ConfigError
from mq.server.replication_quota import (
    ReplicationQuotaManager,
    ReplicationQuotas,
    ThrottledPartitions,
    throttled_partitions,
)
from mq.topic_partition import TopicPartition


def no_throttle(topic: str) -> str:
    return ""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_window_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.replication_quota_window_num == 11
    assert config.replication_quota_window_size_seconds == 1
    loaded = BrokerConfig.load(None, ["replication.quota.window.num=3", "replication.quota.window.size.seconds=2"])
    assert (loaded.replication_quota_window_num, loaded.replication_quota_window_size_seconds) == (3, 2)
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, ["replication.quota.window.num=0"])


def test_default_rate_is_unlimited() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(11, 1, 1, no_throttle, clock)
    assert quota.rate_limit == LONG_MAX
    quota.record(10**15)
    assert not quota.is_quota_exceeded()


def test_a_fresh_window_spans_at_least_num_minus_one_samples() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(11, 1, 1, no_throttle, clock)
    quota.record(1000)
    assert quota.measured_rate() == pytest.approx(100.0)  # 1000 bytes over the minimum span of 10 s
    clock.now += 0.5
    assert quota.measured_rate() == pytest.approx(1000 / 10.5)
    clock.now += 3.0  # 3.5 s elapsed: 3 full samples, padded with 7 more
    assert quota.measured_rate() == pytest.approx(1000 / 10.5)


def test_span_is_the_real_elapsed_time_once_enough_samples_passed() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(3, 1, 1, no_throttle, clock)
    for _ in range(3):
        quota.record(300)
        clock.now += 1.0
    # Samples began at 0, 1, 2 s; now = 3 s: the oldest expires exactly now (it began 3 samples ago).
    assert quota.measured_rate() == pytest.approx(600 / 2.0)
    clock.now += 0.5
    assert quota.measured_rate() == pytest.approx(600 / 2.5)


def test_old_samples_expire() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(2, 1, 1, no_throttle, clock)
    quota.record(5000)
    clock.now += 2.0
    assert quota.measured_rate() == 0.0
    quota.update_quota(1)
    assert not quota.is_quota_exceeded()


def test_samples_roll_and_keep_at_most_window_num() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(2, 1, 1, no_throttle, clock)
    quota.record(100)
    clock.now += 0.4
    quota.record(100)  # same sample
    clock.now += 0.7
    quota.record(50)  # new sample at 1.1 s
    assert quota.measured_rate() == pytest.approx(250 / 1.1)
    clock.now += 1.0
    quota.record(10)  # 2.1 s: the first sample (0 s) is gone
    assert quota.measured_rate() == pytest.approx(60 / 1.0)


def test_quota_exceeded_only_above_the_rate() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(2, 1, 1, no_throttle, clock)
    quota.update_quota(1000)
    quota.record(1000)
    assert not quota.is_quota_exceeded()  # exactly the rate is acceptable
    quota.record(1)
    assert quota.is_quota_exceeded()
    clock.now += 0.5
    assert not quota.is_quota_exceeded()  # 1001 bytes over 1.5 s
    quota.update_quota(0)
    assert quota.is_quota_exceeded()


def test_steady_traffic_under_the_quota_averages_the_rate() -> None:
    """A sender that sends a chunk whenever the quota is not exceeded moves about rate * time bytes."""
    clock = Clock()
    quota = ReplicationQuotaManager(11, 1, 1, no_throttle, clock)
    quota.update_quota(100_000)
    sent = 0
    for _ in range(6000):  # 60 s in steps of 10 ms
        if not quota.is_quota_exceeded():
            quota.record(10_000)
            sent += 10_000
        clock.now += 0.01
    burst = 10 * 100_000  # the minimum span lets (window.num - 1) * window.size * rate through at first
    assert 60 * 100_000 * 0.9 <= sent - burst <= 60 * 100_000 * 1.1


@pytest.mark.parametrize(
    ("value", "broker", "expected"),
    [
        ("*", 1, ThrottledPartitions(every=True)),
        (" * ", 7, ThrottledPartitions(every=True)),
        ("", 1, ThrottledPartitions(every=False)),
        ("0:1,0:2,1:2,1:3", 2, ThrottledPartitions(False, frozenset({0, 1}))),
        ("0:1,0:2,1:2,1:3", 1, ThrottledPartitions(False, frozenset({0}))),
        ("0:1, 3:1 ,", 1, ThrottledPartitions(False, frozenset({0, 3}))),
        ("0:1", 5, ThrottledPartitions(False, frozenset())),
    ],
)
def test_throttled_partitions_filter_this_broker(value: str, broker: int, expected: ThrottledPartitions) -> None:
    assert throttled_partitions(value, broker) == expected


@pytest.mark.parametrize("value", ["0", "a:1", "0:1:2", "*,0:1", "0-1", "-1:2"])
def test_malformed_throttled_replica_lists_are_rejected(value: str) -> None:
    with pytest.raises(ValueError):
        parse_throttled_replicas(value)
    with pytest.raises(ConfigError, match="leader.replication.throttled.replicas"):
        TopicConfig().with_overrides({"leader.replication.throttled.replicas": value})


def test_is_throttled_follows_the_topics_current_list() -> None:
    lists = {"a": "1:7,2:8", "b": "*", "c": ""}
    quota = ReplicationQuotaManager(11, 1, 7, lambda topic: lists.get(topic, ""))
    assert quota.is_throttled(TopicPartition("a", 1))
    assert not quota.is_throttled(TopicPartition("a", 2))  # throttled on broker 8, not here
    assert quota.is_throttled(TopicPartition("b", 41))
    assert not quota.is_throttled(TopicPartition("c", 0))
    assert not quota.is_throttled(TopicPartition("d", 0))
    lists["b"] = "0:7"
    assert not quota.is_throttled(TopicPartition("b", 41))
    lists["b"] = "garbage"
    assert not quota.is_throttled(TopicPartition("b", 0))


def test_quotas_take_per_broker_rates_over_the_default() -> None:
    quotas = ReplicationQuotas(BrokerConfig(), 2, lambda topic: TopicConfig())
    quotas.update_rates({}, {"leader.replication.throttled.rate": "500", "follower.replication.throttled.rate": "600"})
    assert (quotas.leader.rate_limit, quotas.follower.rate_limit) == (500, 600)
    quotas.update_rates({"leader.replication.throttled.rate": "70"}, {"leader.replication.throttled.rate": "500"})
    assert (quotas.leader.rate_limit, quotas.follower.rate_limit) == (70, LONG_MAX)
    quotas.update_rates({"follower.replication.throttled.rate": "-3", "some.other.key": "1"}, {})
    assert (quotas.leader.rate_limit, quotas.follower.rate_limit) == (LONG_MAX, LONG_MAX)


def test_quotas_use_each_sides_topic_list_for_this_broker() -> None:
    config = TopicConfig().with_overrides(
        {"leader.replication.throttled.replicas": "0:2,1:3", "follower.replication.throttled.replicas": "*"}
    )
    quotas = ReplicationQuotas(BrokerConfig(), 2, lambda topic: config if topic == "t" else TopicConfig())
    assert quotas.leader.is_throttled(TopicPartition("t", 0))
    assert not quotas.leader.is_throttled(TopicPartition("t", 1))
    assert quotas.follower.is_throttled(TopicPartition("t", 1))
    assert not quotas.follower.is_throttled(TopicPartition("u", 1))
