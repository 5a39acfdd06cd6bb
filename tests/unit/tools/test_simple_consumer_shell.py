"""Kafka 0.8's SimpleConsumerShell: its checks before reading and its output lines."""

from __future__ import annotations

import pytest

from mq.client.cluster import PartitionMetadata
from mq.tools.simple_consumer_shell import (
    ShellError,
    check_start_offset,
    end_of_log_line,
    fetch_broker,
    next_offset_line,
    prints_messages,
)

PARTITIONS = (PartitionMetadata("t", 0, 2, 0, (2, 1), (2, 1)), PartitionMetadata("t", 1, -1, 0, (1,), ()))


def test_lines_as_kafka_prints_them() -> None:
    assert next_offset_line(41) == "next offset = 42\n"
    assert end_of_log_line("t", 3, 17) == "Terminating. Reached the end of partition (t, 3) at offset 17\n"


def test_the_leader_or_a_named_replica_that_leads_is_read() -> None:
    assert fetch_broker("t", 0, -1, PARTITIONS) == 2
    assert fetch_broker("t", 0, 2, PARTITIONS) == 2


@pytest.mark.parametrize(
    ("partition", "replica", "message"),
    [
        (5, -1, "partition 5 does not exist for topic t"),
        (1, -1, "user specifies to fetch from leader for partition (t, 1) which has not been elected yet"),
        (0, 7, "replica 7 does not exist for partition (t, 0)"),
        (0, 1, "replica 1 of partition (t, 0) is not its leader (2), and mq's brokers serve fetches from the leader"),
    ],
)
def test_refusals_in_kafkas_words(partition: int, replica: int, message: str) -> None:
    with pytest.raises(ShellError) as raised:
        fetch_broker("t", partition, replica, PARTITIONS)
    assert str(raised.value).startswith(message)


def test_start_offsets() -> None:
    for offset in (-2, -1, 0, 10):
        check_start_offset(offset)
    with pytest.raises(ShellError, match=r"^Invalid starting offset: -3$"):
        check_start_offset(-3)


def test_formatters() -> None:
    assert prints_messages("kafka.tools.DefaultMessageFormatter")
    assert prints_messages("kafka.tools.ConsoleConsumer$DefaultMessageFormatter")
    assert not prints_messages("kafka.tools.NoOpMessageFormatter")
    with pytest.raises(ValueError, match="cannot load formatter class com.example.Mine"):
        prints_messages("com.example.Mine")
