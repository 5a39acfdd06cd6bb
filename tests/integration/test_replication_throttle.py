"""Replication throttling on a real ZooKeeper with three broker processes: a follower that fell out of the ISR
catches up no faster than the leader's ``leader.replication.throttled.rate`` (or its own
``follower.replication.throttled.rate``), and removing the throttle lets it finish at once. The follower is stopped (so the controller takes it out of the ISR: in-sync followers are never
throttled, as in Kafka) while an acks=1 producer writes a few MB, then started again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from waiting import wait_for

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.protocol.configs import AlterConfigOp, ResourceType
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import ControllerInfo
from mq.zk.kafka_zk_client import KafkaZkClient

pytestmark = pytest.mark.slow

TOPIC = "throttled"
RATE = 1_000_000
"""Bytes/s; with ``replication.quota.window.num=2`` the leader lets about one second's worth through at first."""
RECORD = b"x" * 100_000


def log_bytes(broker) -> int:
    directory: Path = broker.log_dir / f"{TOPIC}-0"
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.exists() else 0


def isr(zk: KafkaZkClient) -> list[int]:
    found = zk.get_partition_state(TOPIC, 0)
    return [] if found is None else found[0].isr


def produce_while_down(follower, leader, leader_id: int, zk: KafkaZkClient, n_bytes: int) -> int:
    """Stop the follower, write ``n_bytes`` with acks=1 once the controller has taken it out of the ISR, and start
    it again; returns the size of the leader's log, which the follower must reach."""
    follower.stop()
    assert wait_for(lambda: isr(zk) == [leader_id]), isr(zk)
    producer = KafkaProducer(bootstrap_servers=leader.bootstrap, acks=1, linger_ms=5)
    futures = [producer.send(TOPIC, RECORD) for _ in range(n_bytes // len(RECORD))]
    producer.flush(60)
    for future in futures:
        future.get(10)
    producer.close()
    follower.start()
    return log_bytes(leader)


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_lagging_follower_catches_up_at_the_throttled_rate(throttled_cluster, side: str) -> None:
    """``side`` = which broker throttles: the leader (sends nothing while its quota is exceeded) or the follower
    (leaves the partition out of its fetches while its quota is exceeded)."""
    brokers, zk = throttled_cluster
    controller = ControllerInfo.decode(zk.store.get("/controller")[0]).broker_id
    leader_id, follower_id = [i for i in (1, 2, 3) if i != controller][:2]
    leader, follower = brokers[leader_id - 1], brokers[follower_id - 1]
    throttler_id, throttler = (leader_id, leader) if side == "leader" else (follower_id, follower)
    rate_key = f"{side}.replication.throttled.rate"
    kafka_admin = KafkaAdminClient(bootstrap_servers=leader.bootstrap, request_timeout_ms=15000)
    kafka_admin.create_topics(
        [
            NewTopic(
                TOPIC,
                replica_assignments={0: [leader_id, follower_id]},
                topic_configs={f"{side}.replication.throttled.replicas": "*"},
            )
        ]
    )
    kafka_admin.close()
    assert wait_for(lambda: sorted(isr(zk)) == sorted([leader_id, follower_id]))
    # The rate is set the ZooKeeper way (as `kafka-configs --zookeeper` and `reassign-partitions --throttle` do).
    AdminZkClient(zk).change_broker_config(throttler_id, {rate_key: str(RATE)})
    assert wait_for(lambda: f"{side} {RATE} B/s" in throttler.stderr(), 10)

    target = produce_while_down(follower, leader, leader_id, zk, 6_000_000)
    assert target >= 6_000_000
    assert wait_for(lambda: log_bytes(follower) > 0, 30)
    started, first = time.monotonic(), log_bytes(follower)  # the first fetch may bring up to 1 MiB at once
    assert wait_for(lambda: log_bytes(follower) == target, 60), (log_bytes(follower), target)
    took = time.monotonic() - started
    rest = target - first
    assert rest >= 3_000_000, f"the follower had {first} of {target} bytes on its first look"
    assert took >= 0.6 * rest / RATE, f"fetched {rest} bytes in {took:.1f}s at a {RATE} B/s throttle"
    assert wait_for(lambda: sorted(isr(zk)) == sorted([leader_id, follower_id]))  # caught up: back in the ISR

    # A much lower rate holds the follower back until the throttle is removed through the admin API.
    slow = 50_000
    AdminZkClient(zk).change_broker_config(throttler_id, {rate_key: str(slow)})
    assert wait_for(lambda: f"{side} {slow} B/s" in throttler.stderr(), 10)
    before = log_bytes(follower)
    target = produce_while_down(follower, leader, leader_id, zk, 8_000_000)
    time.sleep(3)
    assert log_bytes(follower) < before + 4_000_000  # unthrottled, all 8 MB would be there by now
    with SyncAdmin(leader.bootstrap) as admin:
        changes = {rate_key: (AlterConfigOp.DELETE, None)}
        admin.call(AsyncAdmin.incremental_alter_configs, ResourceType.BROKER, str(throttler_id), changes)
    # At the throttled rate the remaining 4+ MB would take over 80 s.
    assert wait_for(lambda: log_bytes(follower) == target, 30), (log_bytes(follower), target)
