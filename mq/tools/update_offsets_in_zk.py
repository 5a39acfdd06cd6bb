"""``mq update-offsets-in-zk``: Kafka's UpdateOffsetsInZK, a ZooKeeper group's offsets of a topic set to the earliest
or latest offset of each partition (asked of the brokers), with its lines (``updating partition 0 with new offset:
42`` per partition, ``updated the offset for 3 partitions`` at the end)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient

WHICH = {"earliest": EARLIEST, "latest": LATEST}
USAGE = "USAGE: mq update-offsets-in-zk [earliest | latest] consumer.properties topic"


class UpdateOffsetsError(Exception):
    pass


def update_offsets(
    groups: ZkConsumerGroups,
    zk: KafkaZkClient,
    group: str,
    topic: str,
    which: str,
    list_offsets: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int]],
) -> list[str]:
    """Set the offsets and return the tool's lines; UpdateOffsetsError when the topic does not exist or a
    partition has no leader (nothing is written then)."""
    assignment = zk.get_topic_assignment(topic)
    if assignment is None:
        raise UpdateOffsetsError(f"topic {topic} does not exist")
    partitions = [TopicPartition(topic, p) for p in sorted(assignment.partitions)]
    for tp in partitions:
        state = zk.get_partition_state(topic, tp.partition)
        if state is None or state[0].leader < 0:
            raise UpdateOffsetsError(f"Broker None is unavailable. Cannot issue getOffsetsBefore request ({tp})")
    offsets = list_offsets(dict.fromkeys(partitions, WHICH[which]))
    lines = []
    for tp in partitions:
        groups.set_offset(group, tp, offsets[tp])
        lines.append(f"updating partition {tp.partition} with new offset: {offsets[tp]}")
    lines.append(f"updated the offset for {len(partitions)} partitions")
    return lines
