"""The ZooKeeper offset tools over the in-process metadata store: export lines, the import file's parsing and
checks, update-offsets-in-zk's lines and verify-consumer-rebalance's verdicts."""

from __future__ import annotations

import pytest

from mq.protocol.list_offsets import EARLIEST
from mq.tools.export_zk_offsets import export_lines
from mq.tools.import_zk_offsets import OffsetsFileError, import_offsets, parse_offsets
from mq.tools.update_offsets_in_zk import UpdateOffsetsError, update_offsets
from mq.tools.verify_consumer_rebalance import FAILURE, SUCCESS, verify
from mq.topic_partition import TopicPartition
from mq.zk.codecs import ConsumerRegistration, PartitionState, TopicAssignment
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore


@pytest.fixture
def tree() -> tuple[ZkConsumerGroups, KafkaZkClient]:
    store = LocalStore(None)
    zk = KafkaZkClient(store)
    zk.create_topic("t", TopicAssignment({0: [1], 1: [1]}), {})
    return ZkConsumerGroups(store), zk


def test_export_writes_a_line_per_partition_with_an_offset(tree) -> None:
    groups, _ = tree
    groups.set_offset("g2", TopicPartition("t", 1), 7)
    groups.set_offset("g1", TopicPartition("t", 10), 3)
    groups.set_offset("g1", TopicPartition("t", 2), 5)
    groups.store.create("/consumers/g1/offsets/t/4", b"")
    assert export_lines(groups) == [
        "/consumers/g1/offsets/t/2:5",
        "/consumers/g1/offsets/t/10:3",
        "/consumers/g2/offsets/t/1:7",
    ]
    assert export_lines(groups, ["g2"]) == ["/consumers/g2/offsets/t/1:7"]


def test_parse_stops_at_the_first_empty_line() -> None:
    entries = parse_offsets("/consumers/g/offsets/t/0:286894308\n/consumers/g/offsets/t/1:12\n\n/garbage\n")
    assert [(e.group, e.tp, e.offset) for e in entries] == [
        ("g", TopicPartition("t", 0), 286894308),
        ("g", TopicPartition("t", 1), 12),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "/consumers/g/offsets/t/1:x",
        "/consumers/g/offsets/t/1-0:5",
        "consumers/g/offsets/t/1:5",
        "/consumers/g/owners/t/1:5",
        "/consumers/g/offsets/t/1",
    ],
)
def test_a_malformed_line_is_named_by_number(bad: str) -> None:
    with pytest.raises(OffsetsFileError, match="^line 2 is not"):
        parse_offsets(f"/consumers/g/offsets/t/0:1\n{bad}\n")


def test_import_writes_nothing_when_a_partition_does_not_exist(tree) -> None:
    groups, zk = tree
    with pytest.raises(OffsetsFileError, match="partition t-5, u-0 does not exist; nothing was imported"):
        import_offsets(groups, zk, "/consumers/g/offsets/t/0:1\n/consumers/g/offsets/t/5:2\n/consumers/g/offsets/u/0:3")
    assert groups.offsets("g") == {}
    with pytest.raises(OffsetsFileError, match="line 2"):
        import_offsets(groups, zk, "/consumers/g/offsets/t/0:1\nnot a line\n")
    assert groups.offsets("g") == {}
    import_offsets(groups, zk, "/consumers/g/offsets/t/0:1\n/consumers/g/offsets/t/1:2\n")
    import_offsets(groups, zk, "/consumers/g/offsets/t/1:9\n")
    assert groups.offsets("g") == {TopicPartition("t", 0): 1, TopicPartition("t", 1): 9}


def test_update_offsets_writes_each_partition_and_counts_them(tree) -> None:
    groups, zk = tree
    asked = {}

    def list_offsets(timestamps):
        asked.update(timestamps)
        return {tp: 40 + tp.partition for tp in timestamps}

    with pytest.raises(UpdateOffsetsError, match="Broker None is unavailable"):
        update_offsets(groups, zk, "g", "t", "earliest", list_offsets)
    for p in (0, 1):
        zk.create_partition_state("t", p, PartitionState(1, 0, [1], 1))
    lines = update_offsets(groups, zk, "g", "t", "earliest", list_offsets)
    assert lines == [
        "updating partition 0 with new offset: 40",
        "updating partition 1 with new offset: 41",
        "updated the offset for 2 partitions",
    ]
    assert set(asked.values()) == {EARLIEST}
    assert groups.offsets("g") == {TopicPartition("t", 0): 40, TopicPartition("t", 1): 41}
    with pytest.raises(UpdateOffsetsError, match="topic nope does not exist"):
        update_offsets(groups, zk, "g", "nope", "latest", list_offsets)


def test_verify_wants_every_partition_owned_by_a_registered_thread(tree) -> None:
    groups, zk = tree
    groups.register("g", "g_a", ConsumerRegistration({"t": 1}))
    assert groups.owner("g", TopicPartition("t", 0)) is None
    check = verify(groups, zk, "g")
    assert check.verdict == FAILURE and check.problems == [
        "No owner for partition [t,0]",
        "No owner for partition [t,1]",
    ]
    assert groups.claim("g", TopicPartition("t", 0), "g_a-0")
    assert groups.claim("g", TopicPartition("t", 1), "g_gone-0")
    assert not groups.claim("g", TopicPartition("t", 1), "g_a-0")
    assert verify(groups, zk, "g").problems == [
        "Owner g_gone-0 for partition [t,1] is not a valid member of consumer group g"
    ]
    groups.release("g", TopicPartition("t", 1))
    assert groups.claim("g", TopicPartition("t", 1), "g_a-0")
    assert verify(groups, zk, "g").verdict == SUCCESS
