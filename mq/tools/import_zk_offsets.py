"""``mq import-zk-offsets``: Kafka's ImportZkOffsets, offsets lines (``/consumers/<g>/offsets/<t>/<p>:<offset>``,
as ``mq export-zk-offsets`` writes them) written into ZooKeeper.

As Kafka's tool, reading stops at the first empty line and each value is set unconditionally (parents created).
Unlike it, the whole file is checked first and nothing is written when a line is malformed (its number is named) or
names a partition the cluster does not have.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient

_LINE = re.compile(r"(/consumers/([^/]+)/offsets/([^/]+)/(\d+)):(-?\d+)")


class OffsetsFileError(Exception):
    """The offsets file cannot be imported; nothing was written."""


@dataclass(frozen=True)
class OffsetEntry:
    path: str
    group: str
    tp: TopicPartition
    offset: int


def parse_offsets(text: str) -> list[OffsetEntry]:
    """The entries up to the first empty line; OffsetsFileError names the first malformed line."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            break
        match = _LINE.fullmatch(line.strip())
        if match is None:
            raise OffsetsFileError(
                f"line {number} is not /consumers/<group>/offsets/<topic>/<partition>:<offset>: {line.strip()!r}"
            )
        path, group, topic, partition, offset = match.groups()
        entries.append(OffsetEntry(path, group, TopicPartition(topic, int(partition)), int(offset)))
    return entries


def missing_partitions(zk: KafkaZkClient, entries: Sequence[OffsetEntry]) -> list[TopicPartition]:
    """The entries' partitions absent from ``/brokers/topics``, sorted."""
    known: dict[str, set[int]] = {}
    missing = set()
    for entry in entries:
        topic = entry.tp.topic
        if topic not in known:
            assignment = zk.get_topic_assignment(topic)
            known[topic] = set(assignment.partitions) if assignment is not None else set()
        if entry.tp.partition not in known[topic]:
            missing.add(entry.tp)
    return sorted(missing)


def import_offsets(groups: ZkConsumerGroups, zk: KafkaZkClient, text: str) -> list[OffsetEntry]:
    """Write every entry of ``text``; OffsetsFileError (nothing written) for a malformed line or a missing
    partition."""
    entries = parse_offsets(text)
    missing = missing_partitions(zk, entries)
    if missing:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
        raise OffsetsFileError(f"partition {names} does not exist; nothing was imported")
    for entry in entries:
        groups.set_offset_path(entry.path, entry.offset)
    return entries
