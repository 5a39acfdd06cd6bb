"""The ZooKeeper-coordinated consumer of Kafka 0.8's design (the "high-level" consumer): the group lives in
``/consumers/<group>`` and every member computes the same partition assignment from what it reads there.

A consumer registers ``/consumers/<g>/ids/<consumer id>`` (ephemeral; id ``<group>_<host>-<ms>-<uuid8>``, or
``<group>_<consumer.id>``) with ``{topic: streams}`` (``static``) or, subscribed with a ``TopicFilter``, with
``{regex: streams}`` and the pattern ``white_list``/``black_list`` (Kafka's ``createMessageStreamsByFilter``: the
topics of ``/brokers/topics`` the filter allows, internal ones only without ``exclude.internal.topics``). It
rebalances when the children of ``/consumers/<g>/ids`` or a subscribed topic's ``/brokers/topics/<t>`` change, and a
wildcard consumer also when the set of allowed topics changes (a watch on ``/brokers/topics``): it calls
``on_revoked`` with the partitions it owns, commits its positions (with ``auto.commit.enable``), stops fetching and
deletes its ``/consumers/<g>/owners/<t>/<p>`` nodes, computes the assignment (``range`` or ``roundrobin`` over the
sorted consumer *thread* ids ``<consumer id>-<n>``, every member's wildcard registration applied to the existing
topics), reads the committed offsets of its new partitions, claims their owner nodes (ephemeral, data the thread id)
and calls ``on_assigned``. A claim that finds another owner undoes the claims made so far; the whole attempt is
retried after ``rebalance.backoff.ms``, at most ``rebalance.max.retries`` times. Offsets are the next offset to
consume, in ``/consumers/<g>/offsets/<t>/<p>`` (``offsets.storage=zookeeper``) or committed to the broker
(``kafka``; ``dual.commit.enabled`` writes ZooKeeper too and reads the larger of both).

Fetching is ``AsyncConsumer``'s (from the brokers registered in ``/brokers/ids``), driven through ``SyncConsumer``.
Rebalances and automatic commits run on one background thread; ``poll`` runs on the caller's. Both hold ``_lock``
while they touch the fetcher, and a turnstile lets a waiting rebalance in between two polls. Offset writes hold
``_commit_lock`` only, so ``commit`` (explicit offsets, e.g. acknowledged ones) may run while a rebalance waits in
``on_revoked`` for it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mq.client.admin import AsyncAdmin
from mq.client.consumer import ConsumerRecord
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.client.sync import SyncAdmin, SyncConsumer
from mq.errors import KafkaError
from mq.topic_partition import TopicFilter, TopicPartition
from mq.zk import paths
from mq.zk.codecs import ConsumerRegistration
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import MetadataStore, StoreError

log = logging.getLogger(__name__)


class ConsumerRebalanceFailedError(Exception):
    """No assignment could be claimed within ``rebalance.max.retries`` attempts."""


class ConsumerTimeoutError(Exception):
    """No record arrived within ``consumer.timeout.ms``."""


class ConsumerThreadId(NamedTuple):
    """A consumer's stream; sorts as Kafka's (consumer id, then thread number); prints ``<consumer id>-<n>``."""

    consumer: str
    thread: int

    def __str__(self) -> str:
        return f"{self.consumer}-{self.thread}"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, signed 32-bit)."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def range_assignment(
    threads_per_topic: Mapping[str, Sequence[ConsumerThreadId]], partitions_per_topic: Mapping[str, Sequence[int]]
) -> dict[TopicPartition, ConsumerThreadId]:
    """0.8's range assignor: per topic, the sorted partitions in contiguous runs over the sorted threads; with P
    partitions and T threads each thread gets P // T and the first P % T threads one more."""
    decision: dict[TopicPartition, ConsumerThreadId] = {}
    for topic in sorted(threads_per_topic):
        threads = sorted(threads_per_topic[topic])
        partitions = sorted(partitions_per_topic.get(topic, ()))
        if not threads:
            continue
        quota, extra = divmod(len(partitions), len(threads))
        for index, thread in enumerate(threads):
            start = quota * index + min(index, extra)
            for partition in partitions[start : start + quota + (1 if index < extra else 0)]:
                decision[TopicPartition(topic, partition)] = thread
    return decision


def roundrobin_assignment(
    threads_per_topic: Mapping[str, Sequence[ConsumerThreadId]], partitions_per_topic: Mapping[str, Sequence[int]]
) -> dict[TopicPartition, ConsumerThreadId]:
    """0.8's roundrobin assignor: every topic's threads must be the same set; all partitions, ordered by the Java
    hash code of ``[topic,partition]`` (ties by topic and partition), are dealt to the sorted threads in turn."""
    thread_sets = {topic: frozenset(threads) for topic, threads in threads_per_topic.items()}
    if not thread_sets:
        return {}
    head_topic, head = next(iter(sorted(thread_sets.items())))
    for topic, threads in sorted(thread_sets.items()):
        if threads != head:
            raise ValueError(
                "Round-robin assignment is allowed only if all consumers in the group subscribe to the same topics, "
                "AND if the stream counts across topics are identical for a given consumer instance. Topic "
                f"{topic} has the consumer streams {', '.join(sorted(map(str, threads)))}; topic {head_topic} has "
                f"{', '.join(sorted(map(str, head)))}"
            )
    ordered = sorted(head)
    partitions = sorted(
        (TopicPartition(t, p) for t in sorted(thread_sets) for p in sorted(partitions_per_topic.get(t, ()))),
        key=lambda tp: java_string_hash(f"[{tp.topic},{tp.partition}]"),
    )
    return {tp: ordered[i % len(ordered)] for i, tp in enumerate(partitions)}


ASSIGNMENTS = {"range": range_assignment, "roundrobin": roundrobin_assignment}


def _flag(key: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"Invalid value {value!r} for configuration {key}: expected true or false")
    return value.strip().lower() == "true"


def _int(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"Invalid value {value!r} for configuration {key}: expected an integer") from None


def _choice(key: str, value: str, choices: Sequence[str]) -> str:
    if value.strip() not in choices:
        raise ValueError(f"Invalid value {value!r} for configuration {key}: expected one of {', '.join(choices)}")
    return value.strip()


@dataclass(frozen=True)
class ZkConsumerConfig:
    """The 0.8 consumer keys mq acts on, with 0.8.2's defaults; other keys of such a file are accepted and unused."""

    zookeeper_connect: str
    group_id: str
    consumer_id: str | None = None
    client_id: str | None = None
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60_000
    auto_offset_reset: str = "largest"
    consumer_timeout_ms: int = -1
    offsets_storage: str = "zookeeper"
    dual_commit_enabled: bool = True
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    fetch_message_max_bytes: int = 1024 * 1024
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 100
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    partition_assignment_strategy: str = "range"
    exclude_internal_topics: bool = True

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ZkConsumerConfig:
        """ValueError names a missing or invalid key."""
        for required in ("zookeeper.connect", "group.id"):
            if not properties.get(required, "").strip():
                raise ValueError(f"Missing required configuration {required}")
        get = properties.get
        sync_ms = _int("zookeeper.sync.time.ms", get("zookeeper.sync.time.ms", "2000"))
        return cls(
            zookeeper_connect=properties["zookeeper.connect"].strip(),
            group_id=properties["group.id"].strip(),
            consumer_id=(get("consumer.id") or "").strip() or None,
            client_id=(get("client.id") or "").strip() or None,
            auto_commit_enable=_flag("auto.commit.enable", get("auto.commit.enable", "true")),
            auto_commit_interval_ms=_int("auto.commit.interval.ms", get("auto.commit.interval.ms", "60000")),
            auto_offset_reset=_choice(
                "auto.offset.reset", get("auto.offset.reset", "largest"), ("smallest", "largest")
            ),
            consumer_timeout_ms=_int("consumer.timeout.ms", get("consumer.timeout.ms", "-1")),
            offsets_storage=_choice("offsets.storage", get("offsets.storage", "zookeeper"), ("zookeeper", "kafka")),
            dual_commit_enabled=_flag("dual.commit.enabled", get("dual.commit.enabled", "true")),
            zookeeper_session_timeout_ms=_int(
                "zookeeper.session.timeout.ms", get("zookeeper.session.timeout.ms", "6000")
            ),
            zookeeper_connection_timeout_ms=_int(
                "zookeeper.connection.timeout.ms", get("zookeeper.connection.timeout.ms", "6000")
            ),
            fetch_message_max_bytes=_int("fetch.message.max.bytes", get("fetch.message.max.bytes", "1048576")),
            fetch_min_bytes=_int("fetch.min.bytes", get("fetch.min.bytes", "1")),
            fetch_wait_max_ms=_int("fetch.wait.max.ms", get("fetch.wait.max.ms", "100")),
            rebalance_max_retries=_int("rebalance.max.retries", get("rebalance.max.retries", "4")),
            rebalance_backoff_ms=_int("rebalance.backoff.ms", get("rebalance.backoff.ms", str(sync_ms))),
            partition_assignment_strategy=_choice(
                "partition.assignment.strategy", get("partition.assignment.strategy", "range"), tuple(ASSIGNMENTS)
            ),
            exclude_internal_topics=_flag("exclude.internal.topics", get("exclude.internal.topics", "true")),
        )


def new_consumer_id(group: str, consumer_id: str | None = None) -> str:
    """Kafka 0.8's registered id: ``<group>_<consumer.id>``, or ``<group>_<host>-<ms>-<first 8 hex of a uuid>``."""
    if consumer_id is None:
        consumer_id = f"{socket.gethostname()}-{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
    return f"{group}_{consumer_id}"


PartitionsListener = Callable[[list[TopicPartition]], None]
"""Called on the rebalance thread with sorted partitions: before they are released, after they are claimed."""


class ZookeeperConsumer:
    """A member of a ZooKeeper-coordinated group consuming ``topics`` (names, or a filter) with ``streams`` consumer
    threads, which share one fetcher. ``store`` is opened on ``zookeeper.connect`` when not given and closed by
    ``close`` either way. Raises ConsumerIdTakenError when the id is registered already and
    ConsumerRebalanceFailedError when the first rebalance fails."""

    def __init__(
        self,
        config: ZkConsumerConfig,
        topics: Sequence[str] | TopicFilter,
        *,
        streams: int = 1,
        store: MetadataStore | None = None,
        security: ClientSecurity = PLAINTEXT,
        on_revoked: PartitionsListener | None = None,
        on_assigned: PartitionsListener | None = None,
    ) -> None:
        if streams < 1:
            raise ValueError("a consumer needs at least one stream")
        if store is None:
            from mq.zk.zk_store import ZooKeeperStore

            store = ZooKeeperStore(
                config.zookeeper_connect,
                session_timeout_ms=config.zookeeper_session_timeout_ms,
                connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            )
        self.config = config
        self.store = store
        self.groups = ZkConsumerGroups(store)
        self.zk = KafkaZkClient(store)
        self.group = config.group_id
        self.consumer_id = new_consumer_id(config.group_id, config.consumer_id)
        self.filter = topics if isinstance(topics, TopicFilter) else None
        self.topics = [] if isinstance(topics, TopicFilter) else list(dict.fromkeys(topics))
        """The subscribed topics; a wildcard consumer's as of its last rebalance."""
        self.threads = [ConsumerThreadId(self.consumer_id, n) for n in range(streams)]
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned
        self._owned: dict[TopicPartition, ConsumerThreadId] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._watched: set[str] = set()
        """Topics with a data watch (ZooKeeper's event thread only, after the constructor)."""
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._turnstile = threading.Lock()
        self._wanted = threading.Event()
        self._closed = threading.Event()
        self._renewed = threading.Event()
        self._admin: SyncAdmin | None = None
        self._fetcher: SyncConsumer | None = None
        try:
            bootstrap = self.zk.bootstrap_servers()
            if not bootstrap:
                raise ValueError(f"no brokers are registered in {config.zookeeper_connect}")
            self._fetcher = SyncConsumer(
                bootstrap,
                client_id=config.client_id or config.group_id,
                auto_offset_reset="earliest" if config.auto_offset_reset == "smallest" else "latest",
                max_partition_fetch_bytes=config.fetch_message_max_bytes,
                fetch_min_bytes=config.fetch_min_bytes,
                fetch_max_wait_ms=config.fetch_wait_max_ms,
                allow_auto_create_topics=False,
                security=security,
            )
            if config.offsets_storage == "kafka":
                self._admin = SyncAdmin(bootstrap, security=security)
            self._register()
            self.store.watch_children(paths.consumer_ids(self.group), self._changed)
            if self.filter is None:
                self._watch_topics(self.topics)
            else:
                self.store.watch_children(paths.BROKER_TOPICS, self._topics_changed)
            on_new_session = getattr(store, "on_new_session", None)
            if on_new_session is not None:
                on_new_session(self._session_renewed)
            self._wanted.clear()
            self._rebalance()
        except BaseException:
            self._release_resources()
            raise
        self._worker = threading.Thread(target=self._run, name=f"zk-consumer-{self.consumer_id}", daemon=True)
        self._worker.start()

    # --- membership ----------------------------------------------------------------------------------------------

    def registration(self) -> ConsumerRegistration:
        """What this consumer registers (the timestamp is now)."""
        now = int(time.time() * 1000)
        if self.filter is not None:
            return ConsumerRegistration({self.filter.regex: len(self.threads)}, self.filter.pattern, now)
        return ConsumerRegistration({topic: len(self.threads) for topic in self.topics}, "static", now)

    def _register(self) -> None:
        self.groups.register(self.group, self.consumer_id, self.registration())

    def _watch_topics(self, topics: Sequence[str]) -> None:
        """Rebalance when a topic's partitions change; a topic no longer subscribed stops being watched."""
        for topic in topics:
            if topic in self._watched:
                continue
            self._watched.add(topic)

            def changed(data: bytes | None, _stat: object, topic: str = topic) -> bool:
                if topic not in self._watched:
                    return False
                if data is None and self.filter is not None:
                    self._watched.discard(topic)
                    self._changed([])
                    return False
                return self._changed([])

            self.store.watch_data(paths.topic(topic), changed)

    def _topics_changed(self, children: list[str]) -> bool:
        """Watch callback of ``/brokers/topics`` (wildcard consumers): rebalance when the allowed topics change."""
        assert self.filter is not None
        allowed = {t for t in children if self.filter.allows(t, self.config.exclude_internal_topics)}
        if allowed == self._watched:
            return not self._closed.is_set()
        self._watched &= allowed
        self._watch_topics(sorted(allowed))
        return self._changed([])

    def _changed(self, _children: list[str]) -> bool:
        """Watch callback (ZooKeeper's thread): ask the worker for a rebalance; stops watching once closed."""
        if self._closed.is_set():
            return False
        self._wanted.set()
        return True

    def _session_renewed(self) -> None:
        """A new session replaced an expired one: its ephemeral registration and owner nodes are gone."""
        self._renewed.set()
        self._wanted.set()

    def owned(self) -> list[TopicPartition]:
        """The partitions this consumer owns after its last rebalance, sorted."""
        return sorted(self._owned)

    # --- rebalance -----------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._turnstile, self._lock:
            yield

    def _rebalance(self) -> None:
        retries = self.config.rebalance_max_retries
        for attempt in range(retries):
            if self._closed.is_set():
                return
            if self._try_rebalance():
                return
            log.info("%s: rebalance attempt %d failed, retrying", self.consumer_id, attempt + 1)
            self._closed.wait(self.config.rebalance_backoff_ms / 1000)
        raise ConsumerRebalanceFailedError(f"{self.consumer_id} can't rebalance after {retries} retries")

    def _try_rebalance(self) -> bool:
        with self._exclusive():
            if self._renewed.is_set():
                self._renewed.clear()
                self._owned.clear()
                self._register()
            if self.on_revoked is not None and self._owned:
                self.on_revoked(sorted(self._owned))
            self._release()
            decision = self._assignment()
            mine = {tp: thread for tp, thread in decision.items() if thread in self.threads}
            offsets = self._fetch_offsets(sorted(mine))
            claimed: list[TopicPartition] = []
            for tp, thread in sorted(mine.items()):
                if not self.groups.claim(self.group, tp, str(thread)):
                    log.info("%s: %s is still owned by another consumer", self.consumer_id, tp)
                    for done in claimed:
                        self.groups.release(self.group, done)
                    return False
                claimed.append(tp)
            self._owned = mine
            self._committed = dict(offsets)
            fetcher = self._require_fetcher()
            fetcher.assign(sorted(mine))
            for tp, offset in offsets.items():
                fetcher.seek(tp, offset)
            log.info("%s: owns %s", self.consumer_id, ", ".join(map(str, sorted(mine))) or "nothing")
            if self.on_assigned is not None:
                self.on_assigned(sorted(mine))
            return True

    def _assignment(self) -> dict[TopicPartition, ConsumerThreadId]:
        """Kafka's assignment over the topics this consumer subscribes to (as of now, for a wildcard one)."""
        exclude_internal = self.config.exclude_internal_topics
        subscriptions = self.groups.subscriptions(self.group, exclude_internal)
        if self.filter is not None:
            self.topics = sorted(t for t in self.zk.get_all_topics() if self.filter.allows(t, exclude_internal))
        threads: dict[str, list[ConsumerThreadId]] = {}
        for consumer_id, subscription in subscriptions.items():
            for topic, streams in subscription.items():
                threads.setdefault(topic, []).extend(ConsumerThreadId(consumer_id, n) for n in range(streams))
        mine = {t: threads.get(t, []) for t in self.topics}
        partitions: dict[str, list[int]] = {}
        for topic in self.topics:
            assignment = self.zk.get_topic_assignment(topic)
            partitions[topic] = sorted(assignment.partitions) if assignment is not None else []
        return ASSIGNMENTS[self.config.partition_assignment_strategy](mine, partitions)

    def _release(self) -> None:
        """Commit (with auto.commit.enable), stop fetching and delete this consumer's owner nodes."""
        if self.config.auto_commit_enable:
            self._commit()
        self._require_fetcher().assign([])
        for tp, thread in sorted(self._owned.items()):
            if self.groups.owner(self.group, tp) == str(thread):
                self.groups.release(self.group, tp)
        self._owned = {}

    def _require_fetcher(self) -> SyncConsumer:
        assert self._fetcher is not None
        return self._fetcher

    # --- offsets -------------------------------------------------------------------------------------------------

    def _fetch_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        offsets: dict[TopicPartition, int] = {}
        if self.config.offsets_storage == "zookeeper" or self.config.dual_commit_enabled:
            for tp in partitions:
                offset = self.groups.offset(self.group, tp)
                if offset is not None:
                    offsets[tp] = offset
        if self._admin is not None and partitions:
            kafka = self._admin.call(AsyncAdmin.list_group_offsets, self.group, partitions)
            for tp, offset in kafka.items():
                offsets[tp] = max(offset, offsets.get(tp, -1))
        return offsets

    def _commit(self) -> None:
        """Store the positions of owned partitions (caller holds ``_lock``)."""
        if self._fetcher is not None:
            self._store(self._fetcher.consumer.known_positions())

    def _store(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Write the offsets of owned partitions that changed since the last commit."""
        with self._commit_lock:
            owned = self._owned
            changed = {tp: o for tp, o in offsets.items() if tp in owned and self._committed.get(tp) != o}
            if not changed:
                return
            if self._admin is not None:
                self._admin.call(AsyncAdmin.alter_group_offsets, self.group, changed)
            if self._admin is None or self.config.dual_commit_enabled:
                for tp, offset in sorted(changed.items()):
                    self.groups.set_offset(self.group, tp, offset)
            self._committed.update(changed)

    def commit_offsets(self) -> None:
        """Commit the position of every owned partition now (Kafka's ``commitOffsets``)."""
        with self._exclusive():
            self._commit()

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit these next offsets to consume; partitions this consumer does not own (any more) are skipped. Does
        not wait for a poll, so an ``on_revoked`` listener may have it called from another thread."""
        self._store(offsets)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of ``tp`` as of the last fetch that returned it."""
        return self._require_fetcher().consumer.highwater(tp)

    # --- consuming -----------------------------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records of the owned partitions, waiting at most ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._require_fetcher()
        while True:
            with self._turnstile:
                pass
            with self._lock:
                remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                records = fetcher.poll(min(remaining_ms, 100), max_records)
            if records or time.monotonic() >= deadline or self._closed.is_set():
                return records

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records one by one; ConsumerTimeoutError after ``consumer.timeout.ms`` without one (-1: wait forever)."""
        timeout_ms = self.config.consumer_timeout_ms
        idle_since = time.monotonic()
        while not self._closed.is_set():
            records = self.poll(200)
            if records:
                idle_since = time.monotonic()
                yield from records
            elif timeout_ms >= 0 and (time.monotonic() - idle_since) * 1000 >= timeout_ms:
                raise ConsumerTimeoutError(f"no message within consumer.timeout.ms={timeout_ms}")

    # --- worker and shutdown -------------------------------------------------------------------------------------

    def _run(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000
        next_commit = time.monotonic() + interval
        while not self._closed.is_set():
            wait = max(0.0, next_commit - time.monotonic()) if self.config.auto_commit_enable else None
            if self._wanted.wait(wait) and not self._closed.is_set():
                self._wanted.clear()
                try:
                    self._rebalance()
                except ConsumerRebalanceFailedError as exc:
                    log.error("%s", exc)
                except (StoreError, KafkaError, OSError, ValueError) as exc:
                    log.warning("%s: rebalance failed (%s), retrying", self.consumer_id, exc)
                    self._closed.wait(self.config.rebalance_backoff_ms / 1000)
                    self._wanted.set()
            if self.config.auto_commit_enable and time.monotonic() >= next_commit and not self._closed.is_set():
                next_commit = time.monotonic() + interval
                try:
                    self.commit_offsets()
                except (StoreError, KafkaError, OSError) as exc:
                    log.warning("%s: offset commit failed: %s", self.consumer_id, exc)

    def close(self) -> None:
        """Stop rebalancing, commit (with auto.commit.enable) and end the session: the registration and the owner
        nodes disappear, so the rest of the group rebalances."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wanted.set()
        self._worker.join()
        try:
            if self.config.auto_commit_enable:
                with self._exclusive():
                    self._commit()
        finally:
            self._release_resources()

    def _release_resources(self) -> None:
        self._closed.set()
        for client in (self._fetcher, self._admin):
            if client is not None:
                with contextlib.suppress(KafkaError, OSError):
                    client.close()
        self.store.close()

    def __enter__(self) -> ZookeeperConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
