"""``mq mirror --check``: compare each partition of the mirrored topics in the source and the target cluster.

A partition's digest covers every committed record (read_committed: no aborted transaction's records, no control
records) from its log start offset to its last stable offset, in offset order:
``count`` records and ``sha256`` over, per record, the key then the value, each as a 4-byte big-endian signed length
(-1 for null, no bytes follow) and the bytes. Timestamps, headers and offsets are not part of it, so a faithful
mirror has the same digest even though its offsets differ. Partition ``p`` of a source topic is compared with
partition ``p`` of the same-named target topic; a partition missing in the target is a difference.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any

from mq.client.admin import AsyncAdmin
from mq.client.consumer import ISOLATION_LEVELS, AsyncConsumer, ConsumerRecord, list_offsets
from mq.client.security import PLAINTEXT
from mq.protocol.list_offsets import LATEST
from mq.topic_partition import INTERNAL_TOPICS, TopicPartition

_NULL = (-1).to_bytes(4, "big", signed=True)


class PartitionDigest:
    """Record count and sha256 over length-prefixed key and value, fed records in offset order."""

    def __init__(self) -> None:
        self.count = 0
        self._hash = hashlib.sha256()

    def update(self, records: Iterable[ConsumerRecord]) -> None:
        update = self._hash.update
        for record in records:
            for data in (record.key, record.value):
                if data is None:
                    update(_NULL)
                else:
                    update(len(data).to_bytes(4, "big", signed=True))
                    update(data)
            self.count += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True)
class PartitionComparison:
    tp: TopicPartition
    source_count: int
    source_sha256: str
    target_count: int | None
    """None: the target has no such partition."""
    target_sha256: str | None

    @property
    def same(self) -> bool:
        return self.source_count == self.target_count and self.source_sha256 == self.target_sha256

    def line(self) -> str:
        target = "missing" if self.target_count is None else f"{self.target_count} {self.target_sha256}"
        verdict = "OK" if self.same else "DIFFERENT"
        return f"{self.tp}\tsource: {self.source_count} {self.source_sha256}\ttarget: {target}\t{verdict}"


async def digests(
    client: Mapping[str, Any], pattern: re.Pattern[str], only: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, PartitionDigest]:
    """Digest of every partition of every non-internal topic matching ``pattern`` (or of ``only`` where present)."""
    security = client.get("security", PLAINTEXT)
    async with AsyncAdmin(client["bootstrap_servers"], security=security) as admin:
        topics = await admin.describe_topics()
    present = {
        TopicPartition(t.name, p.partition)
        for t in topics
        if pattern.fullmatch(t.name) and t.name not in INTERNAL_TOPICS
        for p in t.partitions
    }
    wanted = sorted(present if only is None else present & set(only))
    result = {tp: PartitionDigest() for tp in wanted}
    if not wanted:
        return result
    async with AsyncConsumer(
        client["bootstrap_servers"],
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        isolation_level="read_committed",
        security=security,
    ) as c:
        stable = await list_offsets(c.cluster, dict.fromkeys(wanted, LATEST), ISOLATION_LEVELS["read_committed"])
        ends = {tp: offset for tp, (offset, _) in stable.items()}
        c.assign(wanted)
        c.seek_to_beginning()
        remaining = [tp for tp in wanted if await c.position(tp) < ends[tp]]
        while remaining:
            c.assign(remaining)
            for (topic, partition), run in groupby(await c.poll(1000, 10_000), key=attrgetter("topic", "partition")):
                tp = TopicPartition(topic, partition)
                result[tp].update(r for r in run if r.offset < ends[tp])
            remaining = [tp for tp in remaining if await c.position(tp) < ends[tp]]
    return result


async def compare(
    source: Mapping[str, Any], target: Mapping[str, Any], pattern: re.Pattern[str]
) -> list[PartitionComparison]:
    """One comparison per source partition, sorted by topic and partition."""
    at_source = await digests(source, pattern)
    names = sorted({tp.topic for tp in at_source})
    at_target = await digests(target, re.compile("|".join(map(re.escape, names)) or "(?!)"), at_source)
    return [
        PartitionComparison(
            tp,
            digest.count,
            digest.hexdigest(),
            at_target[tp].count if tp in at_target else None,
            at_target[tp].hexdigest() if tp in at_target else None,
        )
        for tp, digest in at_source.items()
    ]
