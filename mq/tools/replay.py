"""ReplayLogProducer: copy a window of one topic's records to another topic, at a limited rate, resumably.

Window. Each partition's window is an offset range ``[start, end)``: the start is inclusive, the end exclusive.
A bound is ``earliest`` (start only), ``end`` (the log end offset when the replay starts; the default end),
``none`` (end only: no end, stop once no new record arrived for ``IDLE_TIMEOUT_MS``, Kafka's behaviour), an offset
(the same number for every partition), or a time (epoch milliseconds or an ISO-8601 datetime, which is UTC unless it
names an offset). A time resolves per partition through ListOffsets to the first offset whose record has a
timestamp at or after it; a time after every record resolves to the log end offset. A start below the log start
offset starts at the log start; no bound goes past the log end offset at the start (except ``none``). So a time
window ``[t1, t2)`` copies the records between the first with timestamp >= t1 and the first with timestamp >= t2.

Copies keep key, value, headers and timestamp; output partition = input partition when the output topic has it, else
by key (``mq.tools.record_copy``). ``messages`` (>= 0) caps the records each stream copies.

Resume. The state file holds, per partition, the window and ``next``: the source offset before which every record
of the window was acknowledged by the target (the producer's future completed). It is rewritten atomically (temp
file, fsync, rename) every ``STATE_INTERVAL_S`` and at the end, so after a crash it is behind what was copied, never
ahead. Records the target acknowledged after the last save are copied again by a resumed run unless they can be
recognised: when every input partition has its own output partition, the state also holds ``target_next``, the
output partition's offset after the copy of the record before ``next``. A resumed run compares it with the output
partition's log end offset; the difference is the number of records copied after the save, and that many records
are skipped from ``next``. Resuming is therefore exactly once when input partitions map to output partitions one to
one and nothing else writes the output partitions; with placement by key it is at least once, and so is a partition
whose next records were deleted from the input (retention) before being copied (reported; it continues at the log
start). The producer is idempotent by default (``enable.idempotence=true``, ``acks=all``), so its own retries never
duplicate a record. SIGINT and SIGTERM stop a replay cleanly: the copies in flight are acknowledged and saved.

Transactions (``transactions``): exactly once on every partition mapping. Each input partition is copied by its own
transactional producer (``mq.tools.copy_transactions``, transactional ids ``mq-replay-<in>-<out>-<topic>-<p>``)
whose transactions, committed every ``STATE_INTERVAL_S`` and at the end, also record the partition's position on the
target (under the name ``mq-replay-<in>-<out>``). A new replay first records its window starts there; a resumed one
fences the producers of the crashed run (their open transactions are aborted) and continues from the positions the
target committed, whatever the state file says. Consumers of the output read it with read_committed. A transaction
that has to be aborted stops the replay; ``--resume`` copies the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.cluster import Cluster
from mq.client.consumer import AsyncConsumer, ConsumerRecord, list_offsets
from mq.client.producer import AsyncProducer
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode, KafkaError
from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.storage.token_bucket import TokenBucket
from mq.tools.copy_transactions import PartitionTransactions
from mq.tools.record_copy import copy_rows, record_size, send_copies, target_partition
from mq.topic_partition import TopicPartition

IDLE_TIMEOUT_MS = 10_000
"""Without a window end, the replay stops once no record arrived for this long (Kafka's consumer.timeout.ms)."""
STATE_INTERVAL_S = 1.0
STATE_VERSION = 1
POLL_RECORDS = 500

Report = Callable[[str], None]


class ReplayError(Exception):
    """A replay failure reported in one line; ``usage`` marks bad flags or a state file that does not fit them."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


# -- window ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of the window: ``kind`` is earliest, end, none, offset or time (``value``: offset or epoch ms)."""

    kind: str
    value: int = 0


def parse_bound(text: str, *, is_end: bool) -> Bound:
    """``--from`` / ``--to`` text as a Bound; raises ValueError with a one-line reason."""
    word = text.strip().lower()
    if word == "earliest" and not is_end:
        return Bound("earliest")
    if word in ("end", "latest") and is_end:
        return Bound("end")
    if word == "none" and is_end:
        return Bound("none")
    if word.startswith("@"):
        if not word[1:].isdigit():
            raise ValueError(f"invalid timestamp {text!r}: expected @<epoch milliseconds>")
        return Bound("time", int(word[1:]))
    if word.isdigit():
        return Bound("offset", int(word))
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        words = "an offset, @<epoch ms>, an ISO-8601 datetime, " + ("end or none" if is_end else "or earliest")
        raise ValueError(f"invalid {'--to' if is_end else '--from'} {text!r}: expected {words}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return Bound("time", int(moment.timestamp() * 1000))


@dataclass(frozen=True, slots=True)
class PartitionWindow:
    """Offsets ``[start, end)`` of one partition; ``end`` None: no end."""

    partition: int
    start: int
    end: int | None

    def contains(self, offset: int) -> bool:
        return offset >= self.start and (self.end is None or offset < self.end)


def _offset_of(bound: Bound, log_start: int, log_end: int, by_time: int | None) -> int:
    if bound.kind == "earliest":
        return log_start
    if bound.kind == "end":
        return log_end
    if bound.kind == "offset":
        return bound.value
    if bound.kind == "time":
        return log_end if by_time is None or by_time < 0 else by_time
    raise ValueError(f"bound {bound.kind} has no offset")


def resolve_window(
    start: Bound,
    end: Bound,
    log_starts: Mapping[int, int],
    log_ends: Mapping[int, int],
    start_times: Mapping[int, int] | None = None,
    end_times: Mapping[int, int] | None = None,
) -> dict[int, PartitionWindow]:
    """Per-partition windows from the bounds, the log start/end offsets and (for time bounds) the ListOffsets
    answers by timestamp (-1: no record at or after the time). Offsets are clamped into ``[log start, log end]``."""
    windows: dict[int, PartitionWindow] = {}
    for partition in sorted(log_ends):
        low, high = log_starts[partition], log_ends[partition]
        first = _offset_of(start, low, high, (start_times or {}).get(partition))
        first = min(max(first, low), high)
        last: int | None = None
        if end.kind != "none":
            last = min(max(_offset_of(end, low, high, (end_times or {}).get(partition)), first), high)
        windows[partition] = PartitionWindow(partition, first, last)
    return windows


async def lookup_window(
    cluster: Cluster, topic: str, partitions: Sequence[int], start: Bound, end: Bound
) -> dict[int, PartitionWindow]:
    """Resolve the bounds against the source cluster with ListOffsets (earliest, latest, and by timestamp)."""

    async def offsets(timestamp: int) -> dict[int, int]:
        found = await list_offsets(cluster, {TopicPartition(topic, p): timestamp for p in partitions})
        return {tp.partition: offset for tp, (offset, _) in found.items()}

    log_starts, log_ends = await offsets(EARLIEST), await offsets(LATEST)
    start_times = await offsets(start.value) if start.kind == "time" else None
    end_times = await offsets(end.value) if end.kind == "time" else None
    return resolve_window(start, end, log_starts, log_ends, start_times, end_times)


# -- state file -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class PartitionState:
    """A partition's window and progress: every window record before ``next`` was acknowledged by the target;
    ``target_next`` is the output partition's offset after the copy of the record before ``next`` (None: unknown,
    placement by key)."""

    start: int
    end: int | None
    next: int
    target_next: int | None = None


@dataclass(slots=True)
class ReplayState:
    input_topic: str
    output_topic: str
    partitions: dict[int, PartitionState]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "partitions": {
                str(p): {"start": s.start, "end": s.end, "next": s.next, "target_next": s.target_next}
                for p, s in sorted(self.partitions.items())
            },
        }

    @classmethod
    def from_json(cls, document: Any) -> ReplayState:
        if not isinstance(document, dict) or document.get("version") != STATE_VERSION:
            raise ValueError(f"not a version {STATE_VERSION} replay state")
        partitions = {
            int(p): PartitionState(
                int(s["start"]),
                None if s["end"] is None else int(s["end"]),
                int(s["next"]),
                None if s.get("target_next") is None else int(s["target_next"]),
            )
            for p, s in document["partitions"].items()
        }
        return cls(str(document["input_topic"]), str(document["output_topic"]), partitions)


def default_state_file(input_topic: str, output_topic: str) -> Path:
    """``replay-<input>-<output>.json`` in the working directory."""
    return Path(f"replay-{input_topic}-{output_topic}.json")


def load_state(path: Path) -> ReplayState | None:
    """The saved state, or None when the file does not exist; raises ReplayError when it cannot be used."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReplayError(f"cannot read the state file {path}: {exc.strerror}") from None
    try:
        return ReplayState.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReplayError(f"the state file {path} is not a replay state: {exc}", usage=True) from None


def save_state(path: Path, state: ReplayState) -> None:
    """Write ``state`` atomically: a temporary file beside ``path``, flushed to disk, renamed over it."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        json.dump(state.to_json(), out, indent=1)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


# -- the replay -----------------------------------------------------------------------------------------------------


@dataclass
class ReplayOptions:
    source: str
    target: str
    input_topic: str
    output_topic: str
    start: Bound = Bound("earliest")
    end: Bound = Bound("end")
    messages: int = -1
    """Records each stream copies at most; -1: no limit."""
    threads: int = 1
    rate: float | None = None
    """Records per second over all streams; None: no limit."""
    sync: bool = False
    producer: Mapping[str, Any] = field(default_factory=dict)
    """AsyncProducer keyword arguments."""
    state_file: Path | None = None
    resume: bool = False
    reporting_interval_ms: int = 5000
    transactions: bool = False
    """Copy in transactions that record each partition's position on the target (``copy_transactions``): exactly
    once on every partition mapping."""

    @property
    def source_security(self) -> ClientSecurity:
        """The producer's security when the source is the target cluster, else PLAINTEXT (the replay reads the
        source with no properties of its own)."""
        return self.producer.get("security", PLAINTEXT) if self.source == self.target else PLAINTEXT


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    partition: int
    start: int
    """The window's start; records copied by earlier runs of a resumed replay are not counted below."""
    end: int | None
    first: int | None
    """Offset of the first record this run copied (None: none)."""
    last: int | None
    records: int
    skipped: int
    """Records found already copied when resuming."""


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    input_topic: str
    output_topic: str
    records: int
    bytes: int
    elapsed_s: float
    sent_per_stream: tuple[int, ...]
    partitions: tuple[PartitionSummary, ...]
    exactly_once: bool
    """True when a resumed run can recognise copies made after the last save (one output partition per input)."""
    stopped: bool = False
    """A signal (SIGINT, SIGTERM) stopped the replay before its end; its progress is saved."""

    @property
    def rate(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass(eq=False)
class _Progress:
    """One partition's runs of copies in flight (last source offset, records, acknowledgement of the run) and its
    acknowledged frontier."""

    window: PartitionWindow
    state: PartitionState
    skip: int = 0
    pending: deque[tuple[int, int, asyncio.Future[int]]] = field(default_factory=deque)
    finished_at: int | None = None
    first: int | None = None
    last: int | None = None
    records: int = 0
    skipped: int = 0

    def acknowledge(self) -> None:
        """Advance ``state.next`` past every acknowledged run at the head; a failed run stays at the head and raises
        its error on every call. The output partition (when tracked) got the run's records in order after
        ``target_next``, as it is this partition's alone."""
        state = self.state
        while self.pending and self.pending[0][2].done():
            last, count, future = self.pending[0]
            future.result()
            self.pending.popleft()
            state.next = last + 1
            if state.target_next is not None:
                state.target_next += count
        if not self.pending and self.finished_at is not None:
            state.next = max(state.next, self.finished_at)

    def sent(self, first: int, last: int, count: int, future: asyncio.Future[int]) -> None:
        """A run of ``count`` copies of offsets ``first`` .. ``last`` was queued; ``future`` completes with it."""
        self.pending.append((last, count, future))
        self.queued(first, last, count)

    def queued(self, first: int, last: int, count: int) -> None:
        """Count a run of ``count`` copies of offsets ``first`` .. ``last`` (in a transaction: no future)."""
        if self.first is None:
            self.first = first
        self.last = last
        self.records += count

    def skip_copied(self, offset: int) -> None:
        """Pass over a record a resumed run found in the output partition (copied after the last save)."""
        assert self.state.target_next is not None and not self.pending
        self.skip -= 1
        self.skipped += 1
        self.state.next = offset + 1
        self.state.target_next += 1

    @property
    def done(self) -> bool:
        return self.finished_at is not None or (self.window.end is not None and self.state.next >= self.window.end)


class ReplayLogProducer:
    """Copies the window with ``threads`` streams (each consumes its share of the partitions) and one producer."""

    def __init__(self, options: ReplayOptions, report: Report) -> None:
        self.options = options
        self.report = report
        self.state_file = options.state_file or default_state_file(options.input_topic, options.output_topic)
        self.bucket = TokenBucket(options.rate) if options.rate else None
        self.progress: dict[int, _Progress] = {}
        self.sent: list[int] = []
        self.bytes = 0
        self.exactly_once = False
        self.stopped = False
        self.transactions: PartitionTransactions | None = None
        self.positions: dict[int, int] = {}
        """With transactions: per partition, the source offset after the last record sent in its open transaction."""

    def stop(self) -> None:
        """End the replay early: the streams stop, the producer flushes, the progress is saved."""
        self.stopped = True

    async def run(self) -> ReplaySummary:
        options = self.options
        source = Cluster(options.source, client_id="replay-log-producer", security=options.source_security)
        producer = AsyncProducer(options.target, **{"client_id": "replay-log-producer", **options.producer})
        try:
            input_partitions = await self._input_partitions(source)
            output_count = await self._output_partitions(producer, len(input_partitions))
            self.exactly_once = options.transactions or output_count >= len(input_partitions)
            if options.transactions:
                group = f"mq-replay-{options.input_topic}-{options.output_topic}"
                self.transactions = PartitionTransactions(producer.cluster, group, f"{group}-", options.producer)
            await self._prepare(source, producer, input_partitions)
            began = time.monotonic()
            await producer.start()
            saver = asyncio.create_task(self._save_periodically())
            self._handle_signals(install=True)
            shares = _shares(sorted(self.progress), max(1, min(options.threads, len(self.progress))))
            self.sent = [0] * len(shares)
            try:
                await asyncio.gather(
                    *(self._stream(i, share, producer, output_count) for i, share in enumerate(shares))
                )
                await producer.flush()
            finally:
                self._handle_signals(install=False)
                saver.cancel()
                await asyncio.gather(saver, return_exceptions=True)
                self._acknowledge_all(raise_errors=False)
                self._save()
            self._acknowledge_all(raise_errors=True)
            elapsed = time.monotonic() - began
        finally:
            if self.transactions is not None:
                await self.transactions.release(list(self.transactions.producers), {})
            await producer.close()
            await source.close()
        return self._summary(elapsed)

    def _handle_signals(self, install: bool) -> None:
        """SIGINT and SIGTERM stop the replay cleanly (where the loop can take signals: the main thread)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                if install:
                    loop.add_signal_handler(signum, self.stop)
                else:
                    loop.remove_signal_handler(signum)

    async def _input_partitions(self, source: Cluster) -> list[int]:
        topic = self.options.input_topic
        try:
            metadata = await source.topic(topic, allow_auto_topic_creation=False)
            return [p.partition for p in metadata.partitions]
        except KafkaError as exc:
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise ReplayError(f"the input topic {topic} does not exist") from None
            raise

    async def _output_partitions(self, producer: AsyncProducer, input_count: int) -> int:
        """Partitions of the output topic, created with the input's partition count when missing."""
        topic = self.options.output_topic
        # asked without auto-creation: a missing output topic is created below like the input, not with the broker's
        # num.partitions
        metadata = (await producer.cluster.refresh_metadata([topic], allow_auto_topic_creation=False)).get(topic)
        if metadata is not None and metadata.error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return len(await producer.partitions_for(topic))
        admin = AsyncAdmin(cluster=producer.cluster)
        with contextlib.suppress(KafkaError):
            await admin.create_topics([NewTopic(topic, input_count)])
        self.report(f"Created the output topic {topic} with {input_count} partitions")
        return len(await producer.partitions_for(topic))

    async def _prepare(self, source: Cluster, producer: AsyncProducer, partitions: Sequence[int]) -> None:
        """Windows and positions: from the state file when resuming one, else resolved from the bounds."""
        options = self.options
        saved = load_state(self.state_file) if options.resume else None
        if saved is None:
            if self.state_file.exists():
                self.report(f"Starting a new replay: {self.state_file} is replaced (--resume continues it)")
            windows = await lookup_window(source, options.input_topic, partitions, options.start, options.end)
            by_offsets = self.exactly_once and self.transactions is None
            targets = await self._target_ends(producer.cluster, windows) if by_offsets else {}
            for p, w in windows.items():
                self.progress[p] = _Progress(w, PartitionState(w.start, w.end, w.start, targets.get(p)))
            if self.transactions is not None:  # positions a crashed earlier replay left on the target no longer count
                starts = {TopicPartition(options.input_topic, p): w.start for p, w in windows.items()}
                await self.transactions.own(starts)
                await self.transactions.record(starts)
            self._save()
            return
        if (saved.input_topic, saved.output_topic) != (options.input_topic, options.output_topic):
            raise ReplayError(
                f"the state file {self.state_file} replays {saved.input_topic} to {saved.output_topic}, "
                f"not {options.input_topic} to {options.output_topic}",
                usage=True,
            )
        if sorted(saved.partitions) != sorted(partitions):
            raise ReplayError(f"the state file {self.state_file} does not hold the partitions of {options.input_topic}")
        for p, s in saved.partitions.items():
            self.progress[p] = _Progress(PartitionWindow(p, s.start, s.end), s)
        if self.transactions is not None:  # the target's committed positions are exact; the file's are behind
            tps = [TopicPartition(options.input_topic, p) for p in partitions]
            committed = await self.transactions.own(tps)
            for tp in tps:
                state = self.progress[tp.partition].state
                state.next = committed.get(tp, state.start)
                state.target_next = None
        found = await list_offsets(source, {TopicPartition(options.input_topic, p): EARLIEST for p in partitions})
        deleted = {tp.partition for tp, (start, _) in found.items() if self._deleted(tp.partition, start)}
        if self.transactions is not None:
            return
        tracked = {p: w.window for p, w in self.progress.items() if w.state.target_next is not None}
        if not self.exactly_once or len(tracked) != len(self.progress):
            self.report("Resuming at least once: copies made after the last save are sent again")
            self.exactly_once = False
            for progress in self.progress.values():
                progress.state.target_next = None
            return
        ends = await self._target_ends(producer.cluster, tracked)
        for p, progress in self.progress.items():
            if p not in deleted:
                progress.skip = self._already_copied(p, progress, ends[p])

    def _deleted(self, partition: int, log_start: int) -> bool:
        """Report records of the window deleted from the input (retention) before they were copied; the partition
        continues at the log start, at least once (the copies the target holds can no longer be counted off)."""
        state = self.progress[partition].state
        if self.progress[partition].done or state.next >= log_start:
            return False
        self.report(
            f"Partition {partition}: offsets {state.next} to {log_start - 1} of {self.options.input_topic} were "
            f"deleted before they were copied; continuing at offset {log_start}, at least once"
        )
        return True

    def _already_copied(self, partition: int, progress: _Progress, target_end: int) -> int:
        state = progress.state
        assert state.target_next is not None
        copied = target_end - state.target_next
        remaining = None if state.end is None else state.end - state.next
        if copied < 0 or (remaining is not None and copied > remaining):
            raise ReplayError(
                f"output partition {partition} ends at offset {target_end}, which does not fit the state file "
                f"(saved offset {state.target_next}); it was written or truncated by something else"
            )
        return copied

    async def _target_ends(self, target: Cluster, windows: Mapping[int, PartitionWindow]) -> dict[int, int]:
        found = await list_offsets(target, {TopicPartition(self.options.output_topic, p): LATEST for p in windows})
        return {tp.partition: offset for tp, (offset, _) in found.items()}

    async def _stream(self, index: int, partitions: list[int], producer: AsyncProducer, output_count: int) -> None:
        options = self.options
        consumer = AsyncConsumer(
            options.source,
            client_id="replay-log-producer",
            auto_offset_reset="earliest",
            security=options.source_security,
        )
        progress = {TopicPartition(options.input_topic, p): self.progress[p] for p in partitions}
        active = {tp: p for tp, p in progress.items() if not p.done}
        consumer.assign(active)
        for tp, p in active.items():
            consumer.seek(tp, p.state.next)
        chunk = POLL_RECORDS if self.bucket is None else min(POLL_RECORDS, int(self.bucket.burst))
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        next_commit = loop.time() + STATE_INTERVAL_S
        try:
            while active and not self.stopped and (options.messages < 0 or self.sent[index] < options.messages):
                wanted = chunk if options.messages < 0 else min(chunk, options.messages - self.sent[index])
                records = await consumer.poll(timeout_ms=200, max_records=wanted)
                if records:
                    idle_since = loop.time()
                    await self._copy(index, records, active, producer, output_count)
                elif self._idle(active.values(), loop.time() - idle_since):
                    break
                for tp in list(active):
                    end = active[tp].window.end
                    if end is not None and await consumer.position(tp) >= end:
                        active.pop(tp).finished_at = self.positions[tp.partition] = end
                if len(active) < len(consumer.assignment()):
                    consumer.assign(active)
                for partition in progress.values():
                    partition.acknowledge()  # a failed copy stops the stream
                if self.transactions is not None and loop.time() >= next_commit:
                    await self._commit(partitions)
                    next_commit = loop.time() + STATE_INTERVAL_S
            if self.transactions is not None:
                await self._commit(partitions)
        finally:
            await consumer.close()

    async def _commit(self, partitions: Iterable[int]) -> None:
        """Commit the open transactions of ``partitions`` with their positions; an aborted one stops the replay
        (``--resume`` goes on from the positions the target holds, exactly once)."""
        assert self.transactions is not None
        topic = self.options.input_topic
        positions = {TopicPartition(topic, p): self.positions[p] for p in partitions if p in self.positions}
        aborted = await self.transactions.commit(positions)
        if aborted:
            names = ", ".join(str(tp.partition) for tp in sorted(aborted))
            raise ReplayError(f"the transaction of partition(s) {names} was aborted; --resume copies the rest")
        for tp, offset in positions.items():
            self.progress[tp.partition].state.next = offset

    @staticmethod
    def _idle(active: Iterable[_Progress], idle_s: float) -> bool:
        """Without a window end, no record for IDLE_TIMEOUT_MS ends the stream (Kafka's behaviour)."""
        return all(p.window.end is None for p in active) and idle_s >= IDLE_TIMEOUT_MS / 1000

    async def _copy(
        self,
        index: int,
        records: list[ConsumerRecord],
        active: dict[TopicPartition, _Progress],
        producer: AsyncProducer,
        output_count: int,
    ) -> None:
        """Send the copies of the records inside their window, past those a resumed run found already copied: each
        partition's run in one ``send_copies`` (one record at a time with ``sync``)."""
        runs: dict[int, tuple[_Progress, list[ConsumerRecord]]] = {}
        for record in records:
            progress = active.get(TopicPartition(record.topic, record.partition))
            if progress is None or not progress.window.contains(record.offset):
                continue
            if progress.skip:
                progress.skip_copied(record.offset)
            else:
                runs.setdefault(record.partition, (progress, []))[1].append(record)
        wanted = sum(len(run) for _, run in runs.values())
        if self.bucket is not None and wanted:
            delay = self.bucket.reserve(wanted)
            if delay > 0:
                await asyncio.sleep(delay)
        topic = self.options.output_topic
        for partition, (progress, run) in runs.items():
            placement = target_partition(partition, output_count)
            if self.transactions is not None:
                await self.transactions.send(TopicPartition(run[0].topic, partition), topic, copy_rows(run), placement)
                progress.queued(run[0].offset, run[-1].offset, len(run))
                self.positions[partition] = run[-1].offset + 1
                self.sent[index] += len(run)
                self.bytes += sum(map(record_size, run))
                continue
            for part in [[r] for r in run] if self.options.sync else [run]:
                future = await send_copies(producer, topic, part, placement)
                progress.sent(part[0].offset, part[-1].offset, len(part), future)
                self.sent[index] += len(part)
                self.bytes += sum(map(record_size, part))
                if self.options.sync:
                    await future

    async def _save_periodically(self) -> None:
        reported = time.monotonic()
        while True:
            await asyncio.sleep(STATE_INTERVAL_S)
            self._acknowledge_all(raise_errors=True)
            self._save()
            interval = self.options.reporting_interval_ms / 1000
            if interval > 0 and time.monotonic() - reported >= interval:
                reported = time.monotonic()
                self.report(f"Replayed {sum(self.sent)} messages so far")

    def _acknowledge_all(self, raise_errors: bool) -> None:
        for progress in self.progress.values():
            try:
                progress.acknowledge()
            except (KafkaError, asyncio.CancelledError):
                if raise_errors:
                    raise

    def _save(self) -> None:
        partitions = {p: progress.state for p, progress in self.progress.items()}
        save_state(self.state_file, ReplayState(self.options.input_topic, self.options.output_topic, partitions))

    def _summary(self, elapsed: float) -> ReplaySummary:
        return ReplaySummary(
            self.options.input_topic,
            self.options.output_topic,
            sum(self.sent),
            self.bytes,
            elapsed,
            tuple(self.sent),
            tuple(
                PartitionSummary(p, g.window.start, g.window.end, g.first, g.last, g.records, g.skipped)
                for p, g in sorted(self.progress.items())
            ),
            self.exactly_once,
            self.stopped,
        )


def _shares(partitions: Iterable[int], streams: int) -> list[list[int]]:
    """Partitions dealt round-robin to ``streams`` streams."""
    shares: list[list[int]] = [[] for _ in range(streams)]
    for i, partition in enumerate(partitions):
        shares[i % streams].append(partition)
    return shares
