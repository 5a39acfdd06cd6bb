"""Replication throttling: Kafka's replication quotas, one manager for the leader side and one for the follower side.

A manager measures the bytes recorded for throttled replicas as a rate over a sliding window of
``replication.quota.window.num`` samples, each ``replication.quota.window.size.seconds`` long. The rate is the sum
of the retained samples divided by the time they span, where the span counts as at least ``window.num - 1`` whole
samples: a fresh manager therefore lets about ``(window.num - 1) * window.size * rate`` bytes through before the
quota first counts as exceeded, and after that holds the average near the rate. The limit comes from the dynamic
broker configs ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (Long.MAX_VALUE, the
default, means unlimited). Which partitions are throttled comes from the topic's effective config (so a topic
created with a throttle is throttled from the start, and a change notification takes effect on the next fetch):
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``, the ``partition:broker``
pairs naming this broker, or every partition of the topic for ``*``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mq.config import LONG_MAX, BrokerConfig, DynamicBrokerConfig, TopicConfig, parse_throttled_replicas
from mq.errors import ConfigError
from mq.topic_partition import TopicPartition

log = logging.getLogger(__name__)

LEADER_RATE_KEY = "leader.replication.throttled.rate"
FOLLOWER_RATE_KEY = "follower.replication.throttled.rate"
PARSED_LISTS_KEPT = 1024


@dataclass(frozen=True)
class ThrottledPartitions:
    """The partitions of one topic throttled on this broker: all of them, or the listed ones."""

    every: bool
    partitions: frozenset[int] = frozenset()

    def __contains__(self, partition: object) -> bool:
        return self.every or partition in self.partitions


def throttled_partitions(value: str, broker_id: int) -> ThrottledPartitions:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``.

    ``*`` throttles every partition; otherwise the partitions of the ``partition:broker`` pairs whose broker is
    ``broker_id``. Raises ValueError for any other text."""
    pairs = parse_throttled_replicas(value)
    if pairs is None:
        return ThrottledPartitions(every=True)
    return ThrottledPartitions(every=False, partitions=frozenset(p for p, b in pairs if b == broker_id))


@dataclass
class _Sample:
    start: float
    total: float = 0.0


class ReplicationQuotaManager:
    """A byte-rate quota over a sliding window, and the partitions it applies to: ``throttled_replicas(topic)``
    gives the topic's current ``*.replication.throttled.replicas`` value."""

    def __init__(
        self,
        window_num: int,
        window_size_s: float,
        broker_id: int,
        throttled_replicas: Callable[[str], str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_num < 1 or window_size_s <= 0:
            raise ValueError("a quota window needs at least one sample of positive length")
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.broker_id = broker_id
        self.throttled_replicas = throttled_replicas
        self.clock = clock
        self.rate_limit = LONG_MAX
        """Bytes per second; Long.MAX_VALUE = unlimited."""
        self._samples: deque[_Sample] = deque()
        self._parsed: dict[str, ThrottledPartitions] = {}

    # --- the rate ----------------------------------------------------------------------------------------------

    def update_quota(self, rate: int) -> None:
        self.rate_limit = rate

    def record(self, n_bytes: int) -> None:
        """Count ``n_bytes`` sent (leader) or appended (follower) for throttled partitions."""
        now = self.clock()
        self._expire(now)
        if not self._samples or now - self._samples[-1].start >= self.window_size_s:
            self._samples.append(_Sample(now))
            while len(self._samples) > self.window_num:
                self._samples.popleft()
        self._samples[-1].total += n_bytes

    def _expire(self, now: float) -> None:
        """Drop samples that began a whole window (``window_num`` samples) ago or earlier."""
        horizon = now - self.window_num * self.window_size_s
        while self._samples and self._samples[0].start <= horizon:
            self._samples.popleft()

    def measured_rate(self) -> float:
        """Bytes per second over the retained samples, spanning at least ``window_num - 1`` samples' time."""
        now = self.clock()
        self._expire(now)
        elapsed = now - self._samples[0].start if self._samples else 0.0
        minimum = (self.window_num - 1) * self.window_size_s
        full = int(elapsed // self.window_size_s)
        if full < self.window_num - 1:
            elapsed += minimum - full * self.window_size_s
        total = sum(s.total for s in self._samples)
        return total / elapsed if elapsed > 0 else (0.0 if total == 0 else float("inf"))

    def is_quota_exceeded(self) -> bool:
        return self.rate_limit < LONG_MAX and self.measured_rate() > self.rate_limit

    # --- throttled partitions ----------------------------------------------------------------------------------

    def is_throttled(self, tp: TopicPartition) -> bool:
        value = self.throttled_replicas(tp.topic)
        if not value:
            return False
        partitions = self._parsed.get(value)
        if partitions is None:
            if len(self._parsed) >= PARSED_LISTS_KEPT:
                self._parsed.clear()
            try:
                partitions = throttled_partitions(value, self.broker_id)
            except ValueError:
                log.warning(
                    "ignoring throttled replica list %r of topic %s: not * or partition:broker pairs", value, tp.topic
                )
                partitions = ThrottledPartitions(every=False)
            self._parsed[value] = partitions
        return tp.partition in partitions


class ReplicationQuotas:
    """The leader-side and follower-side quota managers of one broker: rates from the dynamic broker configs,
    throttled partitions from ``topic_config`` (the topic's effective config)."""

    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        topic_config: Callable[[str], TopicConfig],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_id = broker_id
        num, size = config.replication_quota_window_num, config.replication_quota_window_size_seconds

        def leader_list(topic: str) -> str:
            return topic_config(topic).leader_replication_throttled_replicas

        def follower_list(topic: str) -> str:
            return topic_config(topic).follower_replication_throttled_replicas

        self.leader = ReplicationQuotaManager(num, size, broker_id, leader_list, clock)
        self.follower = ReplicationQuotaManager(num, size, broker_id, follower_list, clock)

    def update_rates(self, broker_overrides: Mapping[str, str], default_overrides: Mapping[str, str]) -> None:
        """Apply ``/config/brokers/<id>`` over ``/config/brokers/<default>``; a bad stored value is logged and
        skipped (the key keeps its default), and keys mq does not act on are ignored."""
        merged = {**default_overrides, **broker_overrides}
        dynamic = DynamicBrokerConfig()
        for key in (LEADER_RATE_KEY, FOLLOWER_RATE_KEY):
            if key not in merged:
                continue
            try:
                dynamic = dynamic.with_overrides({key: merged[key]}, source="/config/brokers")
            except ConfigError as exc:
                log.warning("ignoring dynamic broker config: %s", exc)
        self.leader.update_quota(dynamic.leader_replication_throttled_rate)
        self.follower.update_quota(dynamic.follower_replication_throttled_rate)
        log.info(
            "replication throttle of broker %d: leader %s B/s, follower %s B/s",
            self.broker_id,
            _rate_text(self.leader.rate_limit),
            _rate_text(self.follower.rate_limit),
        )


def _rate_text(rate: int) -> str:
    return "unlimited" if rate >= LONG_MAX else str(rate)
