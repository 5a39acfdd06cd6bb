from __future__ import annotations

import pytest

from mq.client.admin import ElectionResult
from mq.errors import ErrorCode
from mq.tools.preferred_election import (
    ElectionCommandError,
    parse_election_json,
    render_admin_election,
    start_preferred_election,
)
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import BrokerRegistration, decode_partition_list
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore


def test_json_rules() -> None:
    assert parse_election_json('{"version":1,"partitions":[{"topic":"a","partition":1}]}') == [TopicPartition("a", 1)]
    with pytest.raises(ElectionCommandError, match="Preferred replica election data is empty"):
        parse_election_json("{}")
    with pytest.raises(ElectionCommandError, match=r"duplicate partitions: \[a,1\]"):
        parse_election_json('{"partitions":[{"topic":"a","partition":1},{"topic":"a","partition":1}]}')


def test_all_partitions_and_in_progress() -> None:
    zk = KafkaZkClient(LocalStore(None))
    zk.create_top_level_paths()
    zk.register_broker(BrokerRegistration(0, ["PLAINTEXT://h:1"]))
    AdminZkClient(zk).create_topic("t", 2, 1)
    outcome = start_preferred_election(zk, None)
    assert outcome.started == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert outcome.lines[-1] == "Successfully started preferred replica election for partitions Set([t,0], [t,1])"
    assert decode_partition_list(zk.store.get(paths.PREFERRED_REPLICA_ELECTION)[0]) == [("t", 0), ("t", 1)]
    with pytest.raises(ElectionCommandError, match="currently in progress"):
        start_preferred_election(zk, None)


def test_admin_election_lines_name_each_outcome() -> None:
    results = {
        TopicPartition("b", 0): ElectionResult(ErrorCode.NONE),
        TopicPartition("a", 1): ElectionResult(ErrorCode.NONE),
        TopicPartition("a", 0): ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed"),
        TopicPartition("c", 0): ElectionResult(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "not in the isr"),
    }
    lines, failed = render_admin_election(results)
    assert lines == [
        "Successfully completed preferred leader election for partitions a-1, b-0",
        "Preferred replica already elected for partitions a-0",
        "Error completing preferred leader election for partition: c-0: PREFERRED_LEADER_NOT_AVAILABLE: not in the isr",
    ]
    assert failed == 1
