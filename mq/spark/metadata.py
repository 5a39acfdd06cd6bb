"""The driver's questions to the cluster: which partitions a read covers, where offset specs point, group commits.

``ClusterView`` runs mq's async admin client on a private event loop owned by the calling thread; it is opened on
first use and never pickled (readers drop it before Spark ships them).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from mq.client.admin import AsyncAdmin
from mq.errors import ErrorCode
from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.spark.offsets import OffsetMap, OffsetSpec, check_specified, option_name
from mq.spark.options import ClientOptions, ReadOptions
from mq.topic_partition import TopicPartition

T = TypeVar("T")


class ClusterView:
    """Metadata and ListOffsets lookups for one cluster; ``close`` when done."""

    def __init__(self, client: ClientOptions) -> None:
        self._loop = asyncio.new_event_loop()
        self._admin = self._run(self._connect(client))

    @staticmethod
    async def _connect(client: ClientOptions) -> AsyncAdmin:
        return AsyncAdmin(
            client.bootstrap_servers, client_id=client.client_id, request_timeout_ms=client.request_timeout_ms
        )

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        try:
            self._run(self._admin.close())
        finally:
            self._loop.close()

    def partitions(self, read: ReadOptions) -> list[TopicPartition]:
        """The partitions a read covers now: ``assign`` as given; every partition of the subscribed topics that exist;
        or of every non-internal topic the whole of whose name matches ``subscribePattern``."""
        if read.assign is not None:
            return sorted(read.assign)
        topics = self._run(self._admin.cluster.with_retries(lambda: self._admin.cluster.refresh_metadata(None)))
        if read.subscribe is not None:
            wanted = set(read.subscribe)
            names = [n for n in topics if n in wanted]
        else:
            pattern = re.compile(read.subscribe_pattern or "")
            names = [n for n, t in topics.items() if not t.is_internal and pattern.fullmatch(n)]
        return sorted(
            TopicPartition(name, p.partition)
            for name in names
            if topics[name].error == ErrorCode.NONE
            for p in topics[name].partitions
        )

    def list_offsets(self, timestamps: Mapping[TopicPartition, int], isolation_level: str) -> dict[TopicPartition, int]:
        """ListOffsets per partition: -2 earliest, -1 latest, else the first offset whose time is at or after the
        given ms (-1 when there is none)."""
        if not timestamps:
            return {}
        found = self._run(self._admin.list_offsets(timestamps, isolation_level))
        return {tp: found[tp].offset for tp in timestamps}

    def earliest(self, partitions: Iterable[TopicPartition], isolation_level: str) -> dict[TopicPartition, int]:
        return self.list_offsets(dict.fromkeys(partitions, EARLIEST), isolation_level)

    def latest(self, partitions: Iterable[TopicPartition], isolation_level: str) -> dict[TopicPartition, int]:
        return self.list_offsets(dict.fromkeys(partitions, LATEST), isolation_level)

    def resolve(
        self, spec: OffsetSpec, partitions: Iterable[TopicPartition], read: ReadOptions, which: str
    ) -> OffsetMap:
        """Offsets of ``partitions`` where ``spec`` points. A time with no record at or after it gives the latest
        offset when ending, and when starting fails or gives the latest (``startingOffsetsByTimestampStrategy``)."""
        tps = list(partitions)
        option = option_name(spec, which)
        check_specified(spec, tps, option)
        if spec.kind in ("earliest", "latest"):
            return self.list_offsets(
                dict.fromkeys(tps, EARLIEST if spec.kind == "earliest" else LATEST), read.isolation_level
            )
        given = spec.as_map()
        if spec.kind == "offsets":
            special = {tp: given[tp] for tp in tps if given[tp] in (EARLIEST, LATEST)}
            return {tp: given[tp] for tp in tps} | self.list_offsets(special, read.isolation_level)
        times = {tp: spec.timestamp_ms if spec.timestamp_ms is not None else given[tp] for tp in tps}
        found = self.list_offsets(times, read.isolation_level)
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing and which == "starting" and read.timestamp_strategy == "error":
            tp = missing[0]
            raise ValueError(
                f"{option}: no offset of {tp} has a record at or after time {times[tp]} "
                "(set startingOffsetsByTimestampStrategy=latest to start at the latest offset instead)"
            )
        return found | self.latest(missing, read.isolation_level)

    def commit_group(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group_id`` as an admin does (generation -1); the group must have no members."""
        if offsets:
            self._run(self._admin.alter_group_offsets(group_id, offsets))
