"""MirrorMaker (v1): copy topics from one or more source clusters to a target cluster without losing records.

Each ``--consumer.config`` names a source cluster; ``num_streams`` group consumers per source subscribe to the topic
pattern (whitelist minus blacklist, matched against whole names, new topics picked up every ``metadata.max.age.ms``).
A config naming ``zookeeper.connect`` and no ``bootstrap.servers`` (Kafka 0.8's consumer.properties) makes the source
one ZooKeeper-coordinated consumer instead, as Kafka 0.8's MirrorMaker ran it: registered in
``/consumers/<group>/ids`` with the whitelist or blacklist regex (both: a whitelist of the topics the first matches
and the second does not) and ``num_streams`` threads, new topics picked up by its watch on ``/brokers/topics``,
offsets kept where its ``offsets.storage`` says (ZooKeeper by default); its fetcher resets an out-of-range position
by ``auto.offset.reset`` without a GAP report. All streams share one producer to the target. A stream polls, passes
each record through the message handler (default: the record unchanged) and queues it on the producer without waiting
for the acknowledgement; the producer batches per partition.

Invariant (no loss): a stream commits a source offset only after every record before it was acknowledged by the
target (``acks=all`` by default). Commits happen every ``offset_commit_interval_ms``, when partitions are revoked by
a rebalance (a ZooKeeper consumer's rebalance waits for it before releasing them), and at shutdown; a crash therefore
re-sends records (duplicates) but never skips one. A failed send (after the producer's retries) stops the mirror
without committing when ``abort_on_send_failure``.

Exactly once (``exactly_once``, group sources only): each source partition is copied in transactions of its own
transactional producer that also record its position on the target (``mq.tools.copy_transactions``); an assigned
partition starts from that position (else the source group's committed offset, else the reset policy), a commit
every ``offset_commit_interval_ms`` ends the transactions, a revoked partition commits and closes its producer, and
an aborted transaction rewinds its partition to the last recorded position. The source group still gets the
committed positions, for its lag.

Placement: the target partition is the source partition number when the target topic has that partition, else the
producer's partitioner (by key). Key, value, headers and timestamp are copied. Without a message handler, a group
stream's fetched batches are not decoded where they need not be: a batch bound for the same partition number that the
producer can take as it is (``AsyncProducer.reuses``: v2, CreateTime, no offset gaps, at least half a producer batch)
is sent with its records area unchanged, under the producer's own header (producer id, sequence, transaction,
compression); other batches are decoded and copied record by record, in order. Missing target topics are created
with the source's partition count (unless ``create_topics`` is off).

Gaps: a source position below the log start offset (retention, DeleteRecords) or above the log end offset
(truncated or recreated topic) is reported once per occurrence with the offsets lost, counted, and the stream
resumes at the log start offset; it is never skipped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import itertools
import re
import signal
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol, TypeVar

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.consumer import ConsumerRecord, FetchedEntries, entry_records, list_offsets
from mq.client.consumer_coordinator import CommitFailedError
from mq.client.group_consumer import AsyncGroupConsumer
from mq.client.producer import AsyncProducer
from mq.client.zk_consumer import ZkConsumerConfig, ZookeeperConsumer
from mq.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.records.batch_header import V2_HEADER_SIZE, BatchHeader
from mq.tools.client_properties import consumer_settings, producer_settings
from mq.tools.copy_transactions import PartitionTransactions
from mq.tools.old_client_keys import current_consumer_keys, current_producer_keys
from mq.tools.record_copy import copy_rows, record_size, send_copies, target_partition
from mq.topic_partition import TopicFilter, TopicPartition, java_topic_regex
from mq.zk.store import StoreError

_T = TypeVar("_T")

Handler = Callable[[ConsumerRecord], Iterable[ConsumerRecord]]
Report = Callable[[str], None]

UNCHECKED_SENDS = 10_000
"""A stream drops its answered sends from its list once it holds this many (bounds memory between commits)."""

RETRY_BACKOFF_S = 0.1
"""Pause before polling again after a retriable error or an out-of-range fetch that no position change explains."""

_PLACE = attrgetter("topic", "partition")

MIRROR_CONSUMER_KEYS = frozenset({"max.poll.records", "enable.auto.commit", "auto.offset.reset"})
"""Consumer keys the mirror interprets itself instead of passing them to the group consumer."""

NO_DATA_LOSS_CONSUMER = {"enable.auto.commit": "false"}
NO_DATA_LOSS_ZK_CONSUMER = {"auto.commit.enable": "false"}
NO_DATA_LOSS_PRODUCER = {
    "acks": "all",
    "max.in.flight.requests.per.connection": "1",
    "retries": str(2**31 - 1),
    "delivery.timeout.ms": str(2**31 - 1),
    "max.block.ms": str(2**63 - 1),
}
"""Kafka's forced "no data loss" settings; a config file may override them (with a warning line)."""


class MirrorError(Exception):
    """A mirror failure reported in one line; ``usage`` marks bad flags or config."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class SendFailure(Exception):
    """A record could not be delivered to the target and ``abort_on_send_failure`` is set."""


# -- flags and configs ----------------------------------------------------------------------------------------------


def topic_filter(whitelist: str | None, blacklist: str | None) -> TopicFilter:
    """The mirrored topics as Kafka 0.8's filter: the whitelist or the blacklist; both: a whitelist of the topics
    the first matches and the second does not."""
    if whitelist is None and blacklist is None:
        raise MirrorError("Exactly one of whitelist or blacklist is required.", usage=True)
    try:
        if whitelist is None:
            return TopicFilter(blacklist or "", blacklist=True)
        if blacklist is None:
            return TopicFilter(whitelist)
        return TopicFilter(f"(?!(?:{java_topic_regex(blacklist)})\\Z)(?:{java_topic_regex(whitelist)})")
    except ValueError as exc:
        raise MirrorError(f"invalid topic regex: {exc}", usage=True) from None


def topic_pattern(whitelist: str | None, blacklist: str | None) -> re.Pattern[str]:
    """One pattern a topic name must match entirely: the whitelist (default: every topic) and not the blacklist."""
    found = topic_filter(whitelist, blacklist)
    return re.compile(f"(?!(?:{found.regex})\\Z).*") if found.blacklist else found.compiled


def _load(spec: str, args: str | None, flag: str, what: str) -> Any:
    """The attribute ``module:attribute`` names; with ``args`` the attribute is a factory, called once with them."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise MirrorError(f"{flag} must be module:function, not {spec!r}", usage=True)
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise MirrorError(f"cannot load {what} {spec}: {exc}", usage=True) from None
    return target if args is None else target(args)


def load_handler(spec: str, args: str | None = None) -> Handler:
    """``module:function``, a callable mapping a record to zero or more records. With ``args`` the attribute is a
    factory called once as ``function(args)`` (Kafka's handler constructor argument) that returns that callable."""
    handler = _load(spec, args, "--message.handler", "message handler")
    if not callable(handler):
        raise MirrorError(f"message handler {spec} is not callable", usage=True)
    loaded: Handler = handler
    return loaded


class RebalanceListener(Protocol):
    """A user's listener (``--consumer.rebalance.listener``), called after the mirror's own handling: partitions
    are revoked once everything sent from them was acknowledged and committed."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...


def load_rebalance_listener(spec: str, args: str | None = None) -> RebalanceListener:
    """``module:attribute``: an object with ``on_partitions_revoked`` and ``on_partitions_assigned`` (each given a
    list of TopicPartition), or with ``args`` a factory called once as ``attribute(args)`` that returns one."""
    listener = _load(spec, args, "--consumer.rebalance.listener", "rebalance listener")
    if not all(callable(getattr(listener, name, None)) for name in ("on_partitions_revoked", "on_partitions_assigned")):
        raise MirrorError(
            f"rebalance listener {spec} has no on_partitions_revoked and on_partitions_assigned methods", usage=True
        )
    loaded: RebalanceListener = listener
    return loaded


def forced_settings(properties: Mapping[str, str], forced: Mapping[str, str], report: Report) -> dict[str, str]:
    """``properties`` with Kafka's no-data-loss values filled in; a differing value given by the user wins and is
    reported with Kafka's line."""
    result = dict(properties)
    for key, value in forced.items():
        given = result.get(key)
        if given is None:
            result[key] = value
        elif given.strip() != value:
            report(f"Property {key} is overridden to {given.strip()} - data loss or message reordering is possible.")
    return result


@dataclass(frozen=True)
class SourceConfig:
    """One source cluster: group consumer keyword arguments and the mirror's own consumer keys."""

    consumer: dict[str, Any]
    max_poll_records: int = 500
    auto_offset_reset: str = "latest"


@dataclass(frozen=True)
class ZkSourceConfig:
    """A source cluster named by ``zookeeper.connect``: a ZooKeeper-coordinated consumer, auto commit off."""

    consumer: ZkConsumerConfig
    max_poll_records: int = 500


def source_config(properties: Mapping[str, str], report: Report) -> SourceConfig | ZkSourceConfig:
    """A source cluster's consumer properties: Kafka's no-loss defaults forced, keys mapped onto the group consumer;
    a ZooKeeper consumer's with ``zookeeper.connect`` and no ``bootstrap.servers``."""
    if "bootstrap.servers" not in properties and "zookeeper.connect" in properties:
        try:
            zk_props = forced_settings(properties, NO_DATA_LOSS_ZK_CONSUMER, report)
            return ZkSourceConfig(
                ZkConsumerConfig.from_properties(zk_props), int(zk_props.get("max.poll.records", "500"))
            )
        except ValueError as exc:
            raise MirrorError(str(exc), usage=True) from None
    properties = {k: v for k, v in properties.items() if k != "zookeeper.connect"}
    try:
        props = forced_settings(current_consumer_keys(properties, report), NO_DATA_LOSS_CONSUMER, report)
        settings = consumer_settings(props, report, MIRROR_CONSUMER_KEYS)
        max_poll = int(props.get("max.poll.records", "500"))
        auto_commit = props["enable.auto.commit"].strip().lower() == "true"
    except ValueError as exc:
        raise MirrorError(str(exc), usage=True) from None
    reset = props.get("auto.offset.reset", "latest").strip()
    if reset not in ("earliest", "latest", "none"):
        raise MirrorError(f"invalid value {reset!r} for consumer property auto.offset.reset", usage=True)
    if "bootstrap_servers" not in settings:
        raise MirrorError("bootstrap.servers is missing from a --consumer.config file", usage=True)
    if "group_id" not in settings:
        raise MirrorError("group.id is missing from a --consumer.config file", usage=True)
    # Offsets are reset by the mirror itself so that it can report what a reset skips.
    settings.update(enable_auto_commit=auto_commit, auto_offset_reset="none")
    return SourceConfig(settings, max_poll, reset)


def target_config(properties: Mapping[str, str], report: Report) -> dict[str, Any]:
    """The target's producer keyword arguments, Kafka's no-loss defaults forced."""
    try:
        props = forced_settings(current_producer_keys(properties, report), NO_DATA_LOSS_PRODUCER, report)
        settings = producer_settings(props, report)
    except ValueError as exc:
        raise MirrorError(str(exc), usage=True) from None
    if "bootstrap_servers" not in settings:
        raise MirrorError("bootstrap.servers is missing from the --producer.config file", usage=True)
    return settings


# -- gaps -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    """Source records a stream can no longer read: its position fell outside [log_start, log_end]."""

    tp: TopicPartition
    position: int
    log_start: int
    log_end: int

    @property
    def lost(self) -> int | None:
        """How many offsets were lost (None when the log was truncated or recreated: not knowable)."""
        return self.log_start - self.position if self.position < self.log_start else None

    def describe(self) -> str:
        if self.position < self.log_start:
            return (
                f"GAP in source {self.tp}: offsets {self.position} to {self.log_start - 1} ({self.lost} records) were "
                f"removed before they were mirrored; resuming at the log start offset {self.log_start}"
            )
        return (
            f"GAP in source {self.tp}: position {self.position} is beyond the log end offset {self.log_end} (the "
            f"log was truncated or the topic recreated); records after offset {self.log_end - 1} of the old log "
            f"were not mirrored; resuming at the log start offset {self.log_start}"
        )


def find_gaps(
    positions: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
) -> list[Gap]:
    """Partitions whose position lies outside their log, in the order of ``positions``."""
    gaps = []
    for tp, position in positions.items():
        start, end = log_starts.get(tp), log_ends.get(tp)
        if start is not None and end is not None and not start <= position <= end:
            gaps.append(Gap(tp, position, start, end))
    return gaps


# -- running --------------------------------------------------------------------------------------------------------


@dataclass
class MirrorStats:
    """Counters read by the progress display and the summary (updated on the mirror's event loop)."""

    started: float = field(default_factory=time.monotonic)
    records: int = 0
    bytes: int = 0
    """Keys and values of the records copied one by one, and the records areas (as fetched) of the batches copied
    whole."""
    gaps: int = 0
    records_lost: int = 0
    send_failures: int = 0
    lag: int = 0

    def summary(self) -> str:
        seconds = max(time.monotonic() - self.started, 1e-9)
        lost = f" ({self.records_lost} records lost)" if self.gaps else ""
        return (
            f"Mirrored {self.records} records ({self.bytes / 1e6:.1f} MB) in {seconds:.1f} s "
            f"({self.records / seconds:.0f} records/s); gaps: {self.gaps}{lost}; send failures: {self.send_failures}"
        )


@dataclass
class MirrorOptions:
    sources: Sequence[SourceConfig | ZkSourceConfig]
    target: Mapping[str, Any]
    pattern: re.Pattern[str]
    num_streams: int = 1
    offset_commit_interval_ms: int = 60_000
    abort_on_send_failure: bool = True
    handler: Handler | None = None
    rebalance_listener: RebalanceListener | None = None
    create_topics: bool = True
    target_replication_factor: int = -1
    """-1: the target broker's default.replication.factor."""
    topic_filter: TopicFilter | None = None
    """What ZooKeeper sources register (the filter ``pattern`` came from); default: a whitelist of ``pattern``."""
    exactly_once: bool = False
    """Copy in transactions that also record the source positions on the target (``copy_transactions``)."""
    transactional_id_prefix: str | None = None
    """Prefix of the per-partition transactional ids; default ``mq-mirror-<group.id>-``."""


class _Targets:
    """Partition counts of target topics, creating a missing topic (source partition count) on first use."""

    def __init__(self, producer: AsyncProducer, admin: AsyncAdmin, options: MirrorOptions) -> None:
        self.producer = producer
        self.admin = admin
        self.options = options
        self.partitions: dict[str, int] = {}
        self._lock = asyncio.Lock()

    async def count(self, topic: str, source_partitions: int) -> int:
        known = self.partitions.get(topic)
        if known is not None:
            return known
        async with self._lock:
            if topic not in self.partitions:
                if self.options.create_topics:
                    await self._create(topic, source_partitions)
                self.partitions[topic] = len(await self.producer.partitions_for(topic))
            return self.partitions[topic]

    async def _create(self, topic: str, partitions: int) -> None:
        try:
            await self.admin.create_topics([NewTopic(topic, partitions, self.options.target_replication_factor)])
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise


class _Forwarder:
    """A source consumer feeding the shared producer; tracks what it may commit."""

    def __init__(self, mirror: MirrorMaker) -> None:
        self.mirror = mirror
        self.positions: dict[TopicPartition, int] = {}
        """Next offset per partition; every record before it has been queued on the producer."""
        self.committed: dict[TopicPartition, int] = {}
        self.sent: list[asyncio.Future[int]] = []
        self._committing = asyncio.Lock()
        """One commit at a time: a later one must not pass an earlier one still waiting for acknowledgements."""
        self.transactions: PartitionTransactions | None = None
        """Exactly once: the per-partition transactions on the target (group sources only)."""

    async def run(self) -> None:
        raise NotImplementedError

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """Commit what was acknowledged from ``revoked`` and forget them, then tell the user's listener."""
        if self.mirror.aborted:
            return
        if self.transactions is not None:
            await self.transactions.release(revoked, self.positions)
        await self.commit(revoked)
        for tp in revoked:
            self.positions.pop(tp, None)
            self.committed.pop(tp, None)
        listener = self.mirror.options.rebalance_listener
        if listener is not None:
            listener.on_partitions_revoked(revoked)

    async def source_partitions(self, topic: str) -> int:
        """How many partitions ``topic`` has in the source."""
        raise NotImplementedError

    async def rewind(self, positions: Mapping[TopicPartition, int]) -> None:
        """Read partitions again from ``positions`` after their transaction aborted."""
        raise NotImplementedError

    async def store(self, offsets: dict[TopicPartition, int]) -> bool:
        """Commit ``offsets`` to the source group; False (reported) when that failed."""
        raise NotImplementedError

    def highwater(self, tp: TopicPartition) -> int | None:
        raise NotImplementedError

    async def forward(self, records: list[ConsumerRecord]) -> None:
        """Queue every record (through the handler) on the producer, one ``send_many`` per run of records bound for
        the same partition (poll returns each partition's records together, in offset order)."""
        mirror = self.mirror
        stats = mirror.stats
        handler = mirror.options.handler
        for (topic, source_partition), group in itertools.groupby(records, key=_PLACE):
            run = list(group)
            stats.records += len(run)
            stats.bytes += sum(map(record_size, run))
            source_count = await self.source_partitions(topic)
            outputs = run if handler is None else [out for record in run for out in handler(record)]
            for (target_topic, partition), out in itertools.groupby(outputs, key=_PLACE):
                count = await mirror.targets.count(target_topic, source_count)
                placed = target_partition(partition, count)
                if self.transactions is not None:
                    source = TopicPartition(topic, source_partition)
                    await self.transactions.send(source, target_topic, copy_rows(out), placed)
                    continue
                future = await send_copies(mirror.producer, target_topic, out, placed)
                future.add_done_callback(mirror.answered)
                self.sent.append(future)

    async def forward_entries(self, entries: list[FetchedEntries]) -> None:
        """``forward`` of undecoded fetched batches (no handler): each run of batches bound for the source's partition
        number that the producer ``reuses`` is sent as it is, the other batches are decoded and forwarded record by
        record, in order. A corrupt batch ends the stream (CorruptFetchedBatchError) after the batches before it."""
        mirror = self.mirror
        producer = mirror.producer
        for entry in entries:
            tp = entry.tp
            placed = None
            if entry.headers:
                count = await mirror.targets.count(tp.topic, await self.source_partitions(tp.topic))
                placed = target_partition(tp.partition, count)

            def whole(header: BatchHeader, entry: FetchedEntries = entry) -> bool:
                return header.offset >= entry.position and producer.reuses(header)

            runs = itertools.groupby(entry.headers, key=whole) if placed is not None else [(False, entry.headers)]
            for reused, group in runs:
                run = list(group)
                if placed is None or not reused:
                    await self.forward(entry_records(dataclasses.replace(entry, headers=run)))
                    continue
                mirror.stats.records += sum(header.records_count for header in run)
                mirror.stats.bytes += sum(header.size - V2_HEADER_SIZE for header in run)
                batches = [(entry.data, header) for header in run]
                if self.transactions is not None:
                    await self.transactions.send_batches(tp, tp.topic, batches, placed)
                    continue
                future = await producer.send_batches(tp.topic, placed, batches)
                future.add_done_callback(mirror.answered)
                self.sent.append(future)
            if entry.corrupt is not None:
                raise entry.corrupt_error()

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Wait until the target acknowledged everything this stream sent, then commit its positions (never after a
        send failed with abort_on_send_failure). Exactly once, the transactions commit first (those aborted rewind
        their partition) and the source group gets the positions they committed, for its lag only."""
        if self.transactions is not None and partitions is None:
            await self.rewind(await self.transactions.commit(self.positions))
        async with self._committing:
            waiting, self.sent = [f for f in self.sent if not f.done()], []
            if waiting:
                await asyncio.wait(waiting)
            if self.mirror.aborted:
                return
            wanted = (
                self.positions
                if partitions is None
                else {tp: self.positions[tp] for tp in partitions if tp in self.positions}
            )
            offsets = {tp: offset for tp, offset in wanted.items() if self.committed.get(tp) != offset}
            if offsets and await self.store(offsets):
                self.committed.update(offsets)


class _Stream(_Forwarder):
    """One group consumer."""

    def __init__(self, mirror: MirrorMaker, source: SourceConfig, index: int) -> None:
        super().__init__(mirror)
        self.source = source
        settings = dict(source.consumer)
        settings["client_id"] = f"{settings['group_id']}-{index}"
        self.whole_batches = mirror.options.handler is None
        """Poll undecoded batches (``forward_entries``): no handler needs the records."""
        self.consumer = AsyncGroupConsumer(**settings, decode_records=not self.whole_batches)
        options = mirror.options
        if options.exactly_once:
            group = settings["group_id"]
            prefix = options.transactional_id_prefix or f"mq-mirror-{group}-"
            self.transactions = PartitionTransactions(mirror.producer.cluster, group, prefix, options.target)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.committed.update(self.consumer.fetcher.known_positions())
        transactions = self.transactions
        if transactions is not None:  # the target's positions rule; the source group's are the fallback
            for tp, offset in (await transactions.own(assigned)).items():
                self.consumer.seek(tp, offset)
        await self.reposition(assigned)
        if transactions is not None:
            fetcher = self.consumer.fetcher
            transactions.start_from({tp: await fetcher.position(tp) for tp in assigned})
        listener = self.mirror.options.rebalance_listener
        if listener is not None:
            listener.on_partitions_assigned(assigned)

    async def reposition(self, partitions: Iterable[TopicPartition]) -> bool:
        """Give each partition a readable position: the reset policy where it has none (no committed offset), the
        log start past a gap. Returns whether any position changed."""
        fetcher = self.consumer.fetcher
        known = fetcher.known_positions()
        unknown = [tp for tp in partitions if tp not in known]
        if unknown:
            reset = self.source.auto_offset_reset
            if reset == "none":
                names = ", ".join(map(str, unknown))
                raise MirrorError(f"no committed offset for {names} and auto.offset.reset is none")
            (fetcher.seek_to_beginning if reset == "earliest" else fetcher.seek_to_end)(*unknown)
        gaps = await self.resolve_gaps({tp: known[tp] for tp in partitions if tp in known})
        return bool(unknown or gaps)

    async def resolve_gaps(self, positions: Mapping[TopicPartition, int]) -> list[Gap]:
        """Report and skip past every position outside its partition's log."""
        if not positions:
            return []
        cluster = self.consumer.cluster
        starts = await list_offsets(cluster, dict.fromkeys(positions, EARLIEST))
        ends = await list_offsets(cluster, dict.fromkeys(positions, LATEST))
        gaps = find_gaps(positions, {tp: o for tp, (o, _) in starts.items()}, {tp: o for tp, (o, _) in ends.items()})
        for gap in gaps:
            self.mirror.gap(gap)
            self.consumer.seek(gap.tp, gap.log_start)
            self.positions[gap.tp] = gap.log_start
        return gaps

    async def run(self) -> None:
        consumer = self.consumer
        consumer.subscribe(pattern=self.mirror.options.pattern, listener=self)
        interval = self.mirror.options.offset_commit_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_commit = loop.time() + interval
        stop = asyncio.create_task(self.mirror.stopping.wait())
        try:
            while not self.mirror.stopping.is_set():
                try:
                    forwarded = await self._forward_next(stop)
                except OffsetOutOfRangeError:
                    if not await self.reposition(consumer.assignment()):
                        await asyncio.sleep(RETRY_BACKOFF_S)  # back in range by now (a log truncated and refilled)
                    continue
                except KafkaError as exc:
                    if not exc.code.retriable:
                        raise
                    self.mirror.report(f"WARNING: polling the source failed ({exc}); retrying")
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                if forwarded:
                    await asyncio.sleep(0)  # let the producer's sender start on these while the next poll runs
                self.positions.update(consumer.fetcher.known_positions())
                if len(self.sent) >= UNCHECKED_SENDS:
                    self.sent = [f for f in self.sent if not f.done()]
                if loop.time() >= next_commit:
                    await self.commit()
                    next_commit = loop.time() + interval
            await self.commit()
            if self.transactions is not None:
                await self.transactions.release(list(self.transactions.producers), self.positions)
        finally:
            stop.cancel()
            if not self.mirror.aborted:
                await consumer.close()

    async def _forward_next(self, stop: asyncio.Task[Any]) -> bool:
        """Poll and forward what came; whether anything did."""
        if self.whole_batches:
            entries = await self._poll(stop, self.consumer.poll_entries(200))
            if entries:
                await self.forward_entries(entries)
            return bool(entries)
        records = await self._poll(stop, self.consumer.poll(200, self.source.max_poll_records))
        if records:
            await self.forward(records)
        return bool(records)

    async def _poll(self, stop: asyncio.Task[Any], polled: Coroutine[Any, Any, list[_T]]) -> list[_T]:
        """What ``polled`` gives; nothing once the mirror is stopping (a poll still waiting, e.g. on an unreachable
        source, is abandoned so that a stop never waits for it)."""
        poll = asyncio.create_task(polled)
        await asyncio.wait((poll, stop), return_when=asyncio.FIRST_COMPLETED)
        if poll.done():
            return poll.result()
        poll.cancel()
        try:
            await poll
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this stream itself is being cancelled, not just its poll
        return []

    async def source_partitions(self, topic: str) -> int:
        return len((await self.consumer.cluster.topic(topic)).partitions)

    async def rewind(self, positions: Mapping[TopicPartition, int]) -> None:
        if not positions:
            return
        self.mirror.report(
            "WARNING: a transaction was aborted; mirroring again from "
            + ", ".join(f"{tp}@{offset}" for tp, offset in sorted(positions.items()))
        )
        for tp, offset in positions.items():
            self.consumer.seek(tp, offset)
            self.positions[tp] = offset

    async def store(self, offsets: dict[TopicPartition, int]) -> bool:
        try:
            await self.consumer.commit(offsets)
        except CommitFailedError as exc:
            self.mirror.report(f"WARNING: offset commit failed ({exc}); the records will be mirrored again")
            return False
        return True

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.consumer.highwater(tp)


class _ZkStream(_Forwarder):
    """A ZooKeeper-coordinated source: one ``ZookeeperConsumer`` (``num_streams`` threads) polled on worker threads.
    Its rebalances call back from its own thread and wait here until the partitions they take away are committed;
    the positions are those after the last forwarded record of each partition."""

    def __init__(self, mirror: MirrorMaker, source: ZkSourceConfig) -> None:
        super().__init__(mirror)
        self.source = source
        self.consumer: ZookeeperConsumer | None = None
        self.partition_counts: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        options = self.mirror.options
        consumer = self.consumer = await asyncio.to_thread(
            ZookeeperConsumer,
            self.source.consumer,
            options.topic_filter or TopicFilter(options.pattern.pattern),
            streams=options.num_streams,
            on_revoked=self._revoked,
            on_assigned=self._assigned,
        )
        interval = options.offset_commit_interval_ms / 1000
        next_commit = self._loop.time() + interval
        try:
            while not self.mirror.stopping.is_set():
                records = await asyncio.to_thread(consumer.poll, 200, self.source.max_poll_records)
                if records:
                    await self.forward(records)
                    self.positions.update({TopicPartition(r.topic, r.partition): r.offset + 1 for r in records})
                    await asyncio.sleep(0)
                if len(self.sent) >= UNCHECKED_SENDS:
                    self.sent = [f for f in self.sent if not f.done()]
                if self._loop.time() >= next_commit:
                    await self.commit()
                    next_commit = self._loop.time() + interval
            await self.commit()
        finally:
            await asyncio.to_thread(consumer.close)

    def _revoked(self, partitions: list[TopicPartition]) -> None:
        """The consumer's rebalance thread: commit what was acknowledged from ``partitions`` before they go."""
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self.on_partitions_revoked(partitions), self._loop).result()

    def _assigned(self, partitions: list[TopicPartition]) -> None:
        self.partition_counts.clear()  # a rebalance follows every change of a topic's partitions
        listener = self.mirror.options.rebalance_listener
        if listener is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(listener.on_partitions_assigned, partitions)

    async def source_partitions(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is None:
            assert self.consumer is not None
            assignment = await asyncio.to_thread(self.consumer.zk.get_topic_assignment, topic)
            count = self.partition_counts[topic] = len(assignment.partitions) if assignment is not None else 0
        return count

    async def store(self, offsets: dict[TopicPartition, int]) -> bool:
        assert self.consumer is not None
        try:
            await asyncio.to_thread(self.consumer.commit, offsets)
        except (StoreError, KafkaError, OSError) as exc:
            self.mirror.report(f"WARNING: offset commit failed ({exc}); the records will be mirrored again")
            return False
        return True

    def highwater(self, tp: TopicPartition) -> int | None:
        return None if self.consumer is None else self.consumer.highwater(tp)


class MirrorMaker:
    """Runs every stream until ``stop`` (SIGTERM/SIGINT), a send failure with abort, or a stream's failure."""

    def __init__(self, options: MirrorOptions, report: Report) -> None:
        self.options = options
        self.report = report
        self.stats = MirrorStats()
        self.stopping = asyncio.Event()
        self.aborted = False
        """A send failed with abort_on_send_failure: nothing is committed from then on."""
        self.send_error = ""
        settings = dict(options.target)
        self.producer = AsyncProducer(**settings)
        self.admin = AsyncAdmin(cluster=self.producer.cluster)
        self.targets = _Targets(self.producer, self.admin, options)
        self.streams: list[_Forwarder] = [
            _ZkStream(self, source) if isinstance(source, ZkSourceConfig) else _Stream(self, source, index)
            for source in options.sources
            for index in range(1 if isinstance(source, ZkSourceConfig) else options.num_streams)
        ]

    def stop(self) -> None:
        self.stopping.set()

    def gap(self, gap: Gap) -> None:
        self.stats.gaps += 1
        self.stats.records_lost += gap.lost or 0
        self.report(gap.describe())

    def answered(self, future: asyncio.Future[int]) -> None:
        """Done callback of every send: a failure is counted, and with abort_on_send_failure stops the mirror before
        any further commit (as soon as it is known, not at the next commit)."""
        error = None if future.cancelled() else future.exception()
        if error is None:
            return
        self.stats.send_failures += 1
        if self.options.abort_on_send_failure:
            if not self.aborted:
                self.aborted = True
                self.send_error = str(error)
                self.stop()
        else:
            self.report(f"ERROR: a record was not mirrored and is skipped: {error}")

    def lag(self) -> int:
        """Records in the source not yet mirrored, over the assigned partitions."""
        total = 0
        for stream in self.streams:
            for tp, position in stream.positions.items():
                high = stream.highwater(tp)
                if high is not None and high > position:
                    total += high - position
        return total

    async def _watch_lag(self) -> None:
        while True:
            self.stats.lag = self.lag()
            await asyncio.sleep(0.5)

    async def run(self) -> None:
        """Mirror until stopped. Raises SendFailure (nothing committed after it) or a stream's error."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop)
        await self.producer.start()
        tasks = [asyncio.create_task(stream.run()) for stream in self.streams]
        watcher = asyncio.create_task(self._watch_lag())
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                error = task.exception()
                if error is not None:
                    raise error
            if self.aborted:
                raise SendFailure(self.send_error)
        finally:
            self.stop()
            watcher.cancel()
            for task in tasks:
                if self.aborted:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.stats.lag = self.lag()
            if not self.aborted:
                await self.producer.close()
            else:
                with contextlib.suppress(Exception):
                    await self.producer.cluster.close()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
