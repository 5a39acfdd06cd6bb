"""``mq perf producer`` and ``mq perf consumer``: Kafka's producer and consumer perf tests on mq's client or on
librdkafka (confluent-kafka), so the broker can be measured without the Python client's cost.

The producer sends ``num_records`` payloads, rate-limited by ``send_pacer``, and measures each record's latency from
the send call to its acknowledgement (the future's completion, or librdkafka's own per-message latency as its
delivery callback reports it). The consumer
joins a group, subscribes to the topic and counts messages and key + value bytes until it has ``messages`` or no
record arrived for ``timeout_ms``; time spent joining the group is the rebalance time. Report lines come from
mq.tools.perf_stats.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mq.tools.perf_stats import (
    ConsumerTotals,
    ProducerStats,
    consumer_header,
    consumer_progress,
    consumer_summary,
    send_pacer,
)

Out = Callable[[str], None]
Completed = Callable[[int, int, object | None], None]
"""Called once per record: latency in ms, payload bytes, and the error (None when acknowledged)."""
CLIENTS = ("mq", "confluent")
MAX_PENDING = 200_000
"""Records mq's producer may have unacknowledged before the perf producer waits (Kafka's buffer.memory role)."""
JAVA_ONLY_KEYS = frozenset({"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"})
"""Java client keys librdkafka rejects; both perf tools always send and receive byte arrays."""
CONFLUENT_CONSUMER_DEFAULTS = {"client.id": "perf-consumer-client", "fetch.queue.backoff.ms": "0"}
"""librdkafka settings of the perf consumer unless --consumer.config sets them: librdkafka otherwise pauses a
partition's fetching for fetch.queue.backoff.ms (1 s) whenever its local queue passed queued.min.messages, which
would measure that pause instead of the broker; Kafka's Java consumer fetches again as soon as it can."""


class PerfError(Exception):
    """A failed perf run (the client reported an error)."""


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def random_payloads(size: int, count: int = 16, seed: int = 0) -> list[bytes]:
    """``count`` payloads of ``size`` random upper-case letters (Kafka's perf payload alphabet)."""
    rng = random.Random(seed)
    return [bytes(rng.choices(range(65, 91), k=size)) for _ in range(count)]


def split_payloads(data: bytes, delimiter: bytes) -> list[bytes]:
    """The non-empty payloads of a ``--payload-file``; raises PerfError when there are none."""
    payloads = [part for part in data.split(delimiter) if part]
    if not payloads:
        raise PerfError("File does not exist or empty file provided.")
    return payloads


@dataclass(frozen=True)
class ProducerRun:
    topic: str
    num_records: int
    payloads: list[bytes]
    throughput: float
    props: Mapping[str, str]
    """Kafka producer properties, bootstrap.servers included."""
    client: str = "mq"


def run_producer(run: ProducerRun, out: Out, warn: Out) -> None:
    """Send the records, printing progress lines and the final summary through ``out``."""
    stats = ProducerStats(run.num_records, now_ms())
    failures: list[str] = []

    def completed(latency_ms: int, size: int, error: object | None) -> None:
        if error is not None:
            failures.append(str(error))
            return
        line = stats.record(latency_ms, size, now_ms())
        if line is not None:
            out(line)

    if run.client == "confluent":
        _produce_confluent(run, completed)
    else:
        asyncio.run(_produce_mq(run, completed, warn))
    out(stats.total_line(now_ms()))
    if failures:
        raise PerfError(f"{len(failures)} of {run.num_records} records failed: {failures[0]}")


def _payload_picker(payloads: list[bytes]) -> Callable[[int], bytes]:
    if len(payloads) == 1:
        only = payloads[0]
        return lambda _i: only
    rng = random.Random(0)
    return lambda _i: payloads[rng.randrange(len(payloads))]


async def _produce_mq(run: ProducerRun, completed: Completed, warn: Out) -> None:
    from mq.client.producer import AsyncProducer
    from mq.tools.client_properties import producer_settings

    settings = producer_settings(run.props, warn)
    settings.setdefault("client_id", "perf-producer-client")
    bootstrap = settings.pop("bootstrap_servers")
    pace = send_pacer(run.throughput)
    payload_for = _payload_picker(run.payloads)
    pending: deque[asyncio.Future[Any]] = deque()

    def done(sent_ms: int, size: int, future: asyncio.Future[Any]) -> None:
        completed(now_ms() - sent_ms, size, future.exception())

    async with AsyncProducer(bootstrap, **settings) as producer:
        for i in range(run.num_records):
            delay = pace()
            if delay:
                await asyncio.sleep(delay)
            payload = payload_for(i)
            sent_ms = now_ms()
            future = await producer.send(run.topic, payload)
            future.add_done_callback(functools.partial(done, sent_ms, len(payload)))
            pending.append(future)
            if len(pending) >= MAX_PENDING:
                await asyncio.wait([pending[0]])
                while pending and pending[0].done():
                    pending.popleft()
        await producer.flush()


def _confluent_config(props: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    config = dict(defaults)
    config.update((key, value) for key, value in props.items() if key not in JAVA_ONLY_KEYS)
    return config


def _produce_confluent(run: ProducerRun, completed: Completed) -> None:
    from confluent_kafka import KafkaException, Producer

    try:
        producer = Producer(_confluent_config(run.props, {"client.id": "perf-producer-client"}))
    except KafkaException as exc:
        raise PerfError(str(exc.args[0])) from None
    pace = send_pacer(run.throughput)
    payload_for = _payload_picker(run.payloads)

    def delivered(error: object | None, message: Any) -> None:
        completed(0 if error is not None else int(message.latency() * 1000), len(message), error)

    throttled = run.throughput >= 0
    for i in range(run.num_records):
        if throttled:
            delay = pace()
            if delay:
                time.sleep(delay)
        while True:
            try:
                producer.produce(run.topic, payload_for(i), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
    while producer.flush(1.0):
        pass


def message_bytes(messages: list[Any]) -> int:
    """Key + value bytes of confluent-kafka messages, summed without a Python loop per message."""
    from confluent_kafka import Message

    values = sum(map(len, filter(None, map(Message.value, messages))))
    return values + sum(map(len, filter(None, map(Message.key, messages))))


@dataclass(frozen=True)
class ConsumerRun:
    topic: str
    messages: int
    group: str
    fetch_size: int
    props: Mapping[str, str]
    """Kafka consumer properties, bootstrap.servers included."""
    timeout_ms: int = 10_000
    detailed: bool = False
    reporting_interval_ms: int = 5_000
    hide_header: bool = False
    from_latest: bool = False
    client: str = "mq"


class JoinTimer:
    """Time spent without any assigned partition, from the start or a full revocation to the next assignment."""

    def __init__(self, start_ms: int) -> None:
        self.join_start_ms = start_ms
        self.assigned: set[Any] = set()
        self.total_ms = 0
        self.round_ms = 0
        """Join time since the last progress line."""

    def revoked(self, partitions: list[Any]) -> None:
        self.assigned.difference_update(partitions)
        if not self.assigned:
            self.join_start_ms = wall_ms()

    def on_assigned(self, partitions: list[Any]) -> None:
        if not self.assigned:
            elapsed = wall_ms() - self.join_start_ms
            self.total_ms += elapsed
            self.round_ms += elapsed
        self.assigned.update(partitions)


class _AsyncJoinListener:
    """JoinTimer as mq's RebalanceListener."""

    def __init__(self, timer: JoinTimer) -> None:
        self.timer = timer

    async def on_partitions_revoked(self, revoked: list[Any]) -> None:
        self.timer.revoked(revoked)

    async def on_partitions_assigned(self, assigned: list[Any]) -> None:
        self.timer.on_assigned(assigned)


class ConsumeProgress:
    """Counts consumed messages and bytes, prints ``--show-detailed-stats`` lines, and decides when to stop."""

    def __init__(self, run: ConsumerRun, start_ms: int, out: Out) -> None:
        self.run = run
        self.out = out
        self.timer = JoinTimer(start_ms)
        self.messages = 0
        self.bytes = 0
        self.last_consumed_ms = start_ms
        self.last_report = ConsumerTotals(start_ms, start_ms, 0, 0, 0)

    def add(self, messages: int, size: int) -> None:
        now = wall_ms()
        if messages:
            self.last_consumed_ms = now
        self.messages += messages
        self.bytes += size
        if messages and now - self.last_report.end_ms >= self.run.reporting_interval_ms:
            current = ConsumerTotals(self.last_report.start_ms, now, self.bytes, self.messages, self.timer.round_ms)
            if self.run.detailed:
                self.out(consumer_progress(self.last_report, current))
            self.timer.round_ms = 0
            self.last_report = current

    def finished(self) -> bool:
        return self.messages >= self.run.messages or wall_ms() - self.last_consumed_ms > self.run.timeout_ms


def run_consumer(run: ConsumerRun, out: Out, warn: Out) -> None:
    """Consume, printing the header, progress lines (detailed) and the summary line (not detailed) via ``out``."""
    if not run.hide_header:
        out(consumer_header(run.detailed))
    start = wall_ms()
    progress = ConsumeProgress(run, start, out)
    if run.client == "confluent":
        _consume_confluent(run, progress)
    else:
        asyncio.run(_consume_mq(run, progress, warn))
    end = wall_ms()
    if progress.messages < run.messages:
        out(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({run.timeout_ms} ms) "
            "exceeded. You can use the --timeout option to increase the timeout."
        )
    if not run.detailed:
        out(consumer_summary(ConsumerTotals(start, end, progress.bytes, progress.messages, progress.timer.total_ms)))


async def _consume_mq(run: ConsumerRun, progress: ConsumeProgress, warn: Out) -> None:
    from mq.client.group_consumer import AsyncGroupConsumer
    from mq.tools.client_properties import consumer_settings

    settings = consumer_settings(run.props, warn, handled=frozenset({"group.id"}))
    settings.setdefault("client_id", "perf-consumer-client")
    settings.update(
        group_id=run.group,
        max_partition_fetch_bytes=run.fetch_size,
        auto_offset_reset="latest" if run.from_latest else "earliest",
    )
    bootstrap = settings.pop("bootstrap_servers")
    consumer = AsyncGroupConsumer(bootstrap, **settings)
    try:
        consumer.subscribe([run.topic], listener=_AsyncJoinListener(progress.timer))
        while not progress.finished():
            records = await consumer.poll(100, max_records=10_000)
            size = sum(len(r.value or b"") + len(r.key or b"") for r in records)
            progress.add(len(records), size)
    finally:
        await consumer.close()


def _consume_confluent(run: ConsumerRun, progress: ConsumeProgress) -> None:
    from confluent_kafka import Consumer, KafkaException, Message

    config = _confluent_config(run.props, CONFLUENT_CONSUMER_DEFAULTS)
    config.update(
        {
            "group.id": run.group,
            "max.partition.fetch.bytes": str(run.fetch_size),
            "auto.offset.reset": "latest" if run.from_latest else "earliest",
        }
    )
    try:
        consumer = Consumer(config)
    except KafkaException as exc:
        raise PerfError(str(exc.args[0])) from None
    timer = progress.timer
    try:
        consumer.subscribe(
            [run.topic],
            on_assign=lambda _c, partitions: timer.on_assigned([(p.topic, p.partition) for p in partitions]),
            on_revoke=lambda _c, partitions: timer.revoked([(p.topic, p.partition) for p in partitions]),
        )
        while not progress.finished():
            # librdkafka's consume waits for all it asks for: asking for no more than are missing keeps the last
            # call from idling out its timeout
            messages = consumer.consume(max(1, min(10_000, run.messages - progress.messages)), 0.1)
            if any(map(Message.error, messages)):
                for error in filter(None, map(Message.error, messages)):
                    if error.fatal():
                        raise PerfError(str(error))
                messages = [message for message in messages if message.error() is None]
            count = len(messages)
            size = message_bytes(messages)
            progress.add(count, size)
    except KafkaException as exc:
        raise PerfError(str(exc.args[0])) from None
    finally:
        consumer.close()
