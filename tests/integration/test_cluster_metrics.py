"""The leader's scrape in a 3-broker cluster on a real ZooKeeper: a killed follower raises UnderReplicatedPartitions
and IsrShrinks; once it is back and caught up, UnderReplicatedPartitions returns to 0 and IsrExpands counts it."""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from waiting import wait_for

from mq.zk.zk_store import ZooKeeperStore
from tests.integration.conftest import BrokerProcess, ZooKeeperProcess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def value(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found is not None, name
    return float(found.group(1))


def test_follower_kill_shows_under_replication_on_the_leader(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> None:
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {
        i: broker_factory(
            f"broker{i}",
            [
                f"zookeeper.connect={connect}",
                f"broker.id={i}",
                "zookeeper.session.timeout.ms=4000",
                "replica.lag.time.max.ms=2000",
                f"metrics.listener=http://127.0.0.1:{ports[i]}",
            ],
        ).start()
        for i in (1, 2, 3)
    }
    admin = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap)
    admin.create_topics([NewTopic("replicated", -1, -1, replica_assignments={0: [1, 2, 3]})])
    admin.close()
    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    assert wait_for(lambda: value(ports[1], "kafka_server_replicamanager_leadercount") >= 1)
    assert wait_for(lambda: value(ports[1], urp) == 0)
    brokers[3].kill()
    assert wait_for(lambda: value(ports[1], urp) == 1, timeout=60)
    assert wait_for(lambda: value(ports[1], "kafka_server_replicamanager_isrshrinks_total") >= 1)
    store = ZooKeeperStore(connect)
    try:  # as Kafka, a broker refuses to start while its killed predecessor's registration lives (its session)
        assert wait_for(lambda: store.get_or_none("/brokers/ids/3") is None, timeout=30)
    finally:
        store.close()
    brokers[3].start()
    # a restarted follower catches up and rejoins the ISR; on a loaded machine its start alone takes seconds
    caught_up = wait_for(lambda: value(ports[1], urp) == 0, timeout=90)
    assert caught_up, f"still under-replicated; the follower's log:\n{brokers[3].stderr()[-3000:]}"
    assert wait_for(lambda: value(ports[1], "kafka_server_replicamanager_isrexpands_total") >= 1)
