"""Leader epochs on a 3-broker cluster (real ZooKeeper, real broker processes): every replica's
leader-epoch-checkpoint, OffsetForLeaderEpoch answers, and a returning replica that held divergent data ending up
byte-identical to the new leader."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from waiting import wait_for

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow


@pytest.fixture
def zk(cluster) -> Iterator[KafkaZkClient]:
    store = ZooKeeperStore(cluster[0])
    yield KafkaZkClient(store)
    store.close()


def state(zk: KafkaZkClient, topic: str) -> Any:
    found = zk.get_partition_state(topic, 0)
    return None if found is None else found[0]


def checkpoint(broker, topic: str) -> str:
    path = broker.log_dir / f"{topic}-0" / "leader-epoch-checkpoint"
    return path.read_text() if path.exists() else ""


def segment(broker, topic: str) -> bytes:
    path = broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else b""


def produce(bootstrap: str, topic: str, values: list[bytes], acks: Any) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=10, retry_backoff_ms=300)
    offsets = [producer.send(topic, value).get(30).offset for value in values]
    producer.close()
    return offsets


def create(admin_bootstrap: str, topic: str, **configs: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=admin_bootstrap)
    admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: [1, 2, 3]}, topic_configs=configs)])
    admin.close()


def offsets_for_epoch(broker, topic: str, current_epoch: int, epoch: int) -> tuple[int, int, int]:
    """(error code, leader epoch, end offset) of OffsetForLeaderEpoch v4 sent by a consumer to ``broker``."""

    async def ask() -> Any:
        connection = BrokerConnection("127.0.0.1", broker.port, node_id=-1, client_id="epoch-test")
        try:
            request = {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [{"partition": 0, "current_leader_epoch": current_epoch, "leader_epoch": epoch}],
                    }
                ],
            }
            return await connection.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, request, 4)
        finally:
            await connection.close()

    answer = asyncio.run(ask()).topics[0].partitions[0]
    return int(answer.error_code), int(answer.leader_epoch), int(answer.end_offset)


def test_every_replica_checkpoints_the_epochs_of_its_log(cluster, zk: KafkaZkClient) -> None:
    _, brokers = cluster
    bootstrap = ",".join(b.bootstrap for b in brokers)
    create(bootstrap, "epochs", **{"min.insync.replicas": "2"})
    assert wait_for(lambda: state(zk, "epochs") is not None and sorted(state(zk, "epochs").isr) == [1, 2, 3])
    assert produce(bootstrap, "epochs", [b"a%d" % i for i in range(10)], "all") == list(range(10))
    assert wait_for(lambda: len({segment(b, "epochs") for b in brokers}) == 1)
    assert [checkpoint(b, "epochs") for b in brokers] == ["0\n1\n0 0\n"] * 3

    assert offsets_for_epoch(brokers[0], "epochs", 0, 0) == (ErrorCode.NONE, 0, 10)  # latest epoch: the log end
    assert offsets_for_epoch(brokers[1], "epochs", 0, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert offsets_for_epoch(brokers[0], "epochs", 1, 0)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH

    brokers[0].kill()
    assert wait_for(lambda: state(zk, "epochs").leader in (2, 3))
    moved = state(zk, "epochs")
    assert moved.leader_epoch == 1
    survivors = ",".join(b.bootstrap for b in brokers[1:])
    assert produce(survivors, "epochs", [b"b%d" % i for i in range(5)], "all") == list(range(10, 15))
    leader = brokers[moved.leader - 1]
    assert offsets_for_epoch(leader, "epochs", 1, 0) == (ErrorCode.NONE, 0, 10)  # where epoch 0 ended
    assert offsets_for_epoch(leader, "epochs", 0, 0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    brokers[0].start()
    assert wait_for(lambda: sorted(state(zk, "epochs").isr) == [1, 2, 3], timeout=60)
    assert wait_for(lambda: len({segment(b, "epochs") for b in brokers}) == 1)
    assert wait_for(lambda: [checkpoint(b, "epochs") for b in brokers] == ["0\n2\n0 0\n1 10\n"] * 3)


def test_a_returning_replica_drops_its_divergent_suffix_and_keeps_the_shared_prefix(cluster, zk: KafkaZkClient) -> None:
    _, brokers = cluster
    one, two, three = brokers
    bootstrap = ",".join(b.bootstrap for b in brokers)
    create(bootstrap, "diverge", **{"unclean.leader.election.enable": "true"})
    assert wait_for(lambda: state(zk, "diverge") is not None and sorted(state(zk, "diverge").isr) == [1, 2, 3])
    assert produce(bootstrap, "diverge", [b"shared-%d" % i for i in range(10)], "all") == list(range(10))
    assert wait_for(lambda: len({segment(b, "diverge") for b in brokers}) == 1)
    shared = segment(one, "diverge")

    # Broker 1 leads alone and takes writes nobody else has.
    two.kill()
    three.kill()
    assert wait_for(lambda: state(zk, "diverge").isr == [1])
    alone_epoch = state(zk, "diverge").leader_epoch
    assert produce(one.bootstrap, "diverge", [b"lost-%d" % i for i in range(5)], 1) == list(range(10, 15))
    assert checkpoint(one, "diverge") == f"0\n2\n0 0\n{alone_epoch} 10\n"
    # Its high watermark covers them too, so truncating to the high watermark would keep them.
    high_watermarks = one.log_dir / "replication-offset-checkpoint"
    assert wait_for(lambda: high_watermarks.exists() and "diverge 0 15\n" in high_watermarks.read_text(), timeout=30)
    one.kill()
    divergent = segment(one, "diverge")
    assert divergent.startswith(shared) and len(divergent) > len(shared)

    # The others come back; one of them leads uncleanly and takes different writes.
    two.start()
    three.start()
    assert wait_for(lambda: state(zk, "diverge").leader in (2, 3), timeout=60)
    new_epoch = state(zk, "diverge").leader_epoch
    assert new_epoch > alone_epoch
    values = [b"new-value-%d" % i for i in range(7)]
    survivors = f"{two.bootstrap},{three.bootstrap}"
    assert produce(survivors, "diverge", values, "all") == list(range(10, 17))
    leader = brokers[state(zk, "diverge").leader - 1]
    assert segment(leader, "diverge")[: len(shared)] == shared

    one.start()
    assert wait_for(lambda: sorted(state(zk, "diverge").isr) == [1, 2, 3], timeout=60)
    assert wait_for(lambda: len({segment(b, "diverge") for b in brokers}) == 1)
    final = segment(one, "diverge")
    assert final == segment(leader, "diverge") and final.startswith(shared) and final != divergent
    assert b"lost-" not in final and b"new-value-6" in final
    expected = f"0\n2\n0 0\n{new_epoch} 10\n"
    assert wait_for(lambda: [checkpoint(b, "diverge") for b in brokers] == [expected] * 3)
