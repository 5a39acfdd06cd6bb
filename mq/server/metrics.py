"""The broker's metrics: plain recorders on the hot path, one Prometheus collector that reads everything at scrape time.

Components own their recorders and count per request or per batch, never per record: the network layer counts
every request and times a sample of them (``RequestStats``, only while ``metrics.listener`` is set), the replica
manager counts appends and fetches per topic (``BrokerTopicStats``), the controller and the log flushes time
themselves (``Timer``). Gauges
(partition counts, log offsets, purgatory sizes, connections, consumer lag) are not recorded at all: the collector
reads them from the broker's state when scraped. The scrape runs on the event loop (``mq.server.metrics_http``), so
it reads loop-owned state without locks; it changes nothing but the recorders (it prunes topic counters, and starts
new quantile windows).

Names follow what Strimzi's JMX exporter rules (``kafka-metrics.yaml``) make of Kafka's MBeans: lower case,
``PerSec`` dropped, meters as counters ``_total``, gauges by their name, histograms and timers as summaries (a gauge
per quantile with ``quantile`` = "0.50", "0.75", "0.95", "0.98", "0.99", "0.999", plus ``_count`` and ``_sum``;
quantiles over the last one to two minutes, count and sum since start; request times are those of the first and
every ``SAMPLE_EVERY``-th request of each type, the count is of all of them and the sum is scaled to it). Topic
metrics come once per topic (label ``topic``) and once for all topics (no label).

=====================================================================  ========  ===========================================
name                                                                   type      labels
=====================================================================  ========  ===========================================
kafka_server_brokertopicmetrics_messagesin_total                       counter   [topic]
kafka_server_brokertopicmetrics_bytesin_total                          counter   [topic]
kafka_server_brokertopicmetrics_bytesout_total                         counter   [topic]
kafka_server_brokertopicmetrics_bytesrejected_total                    counter   [topic]
kafka_server_brokertopicmetrics_failedproducerequests_total            counter   [topic]
kafka_server_brokertopicmetrics_failedfetchrequests_total              counter   [topic]
kafka_server_brokertopicmetrics_totalproducerequests_total             counter   [topic]
kafka_server_brokertopicmetrics_totalfetchrequests_total               counter   [topic]
kafka_network_requestmetrics_requests_total                            counter   request, version
kafka_network_requestmetrics_totaltimems                               summary   request (+ quantile)
kafka_network_requestmetrics_requestqueuetimems                        summary   request (+ quantile)
kafka_network_requestmetrics_localtimems                               summary   request (+ quantile)
kafka_network_requestmetrics_remotetimems                              summary   request (+ quantile)
kafka_network_requestmetrics_responsesendtimems                        summary   request (+ quantile)
kafka_server_replicamanager_underreplicatedpartitions                  gauge
kafka_server_replicamanager_underminisrpartitioncount                  gauge
kafka_server_replicamanager_partitioncount                             gauge
kafka_server_replicamanager_leadercount                                gauge
kafka_server_replicamanager_offlinereplicacount                        gauge
kafka_server_replicamanager_isrshrinks_total                           counter
kafka_server_replicamanager_isrexpands_total                           counter
kafka_server_replicafetchermanager_maxlag                              gauge     clientId="Replica"
kafka_controller_kafkacontroller_activecontrollercount                 gauge
kafka_controller_kafkacontroller_offlinepartitionscount                gauge     (0 unless active controller)
kafka_controller_kafkacontroller_globaltopiccount                      gauge     (0 unless active controller)
kafka_controller_kafkacontroller_globalpartitioncount                  gauge     (0 unless active controller)
kafka_controller_controllerstats_leaderelectionrateandtimems           summary   (+ quantile)
kafka_controller_controllerstats_uncleanleaderelections_total          counter
kafka_log_logflushstats_logflushrateandtimems                          summary   (+ quantile)
kafka_log_log_logstartoffset                                           gauge     topic, partition
kafka_log_log_logendoffset                                             gauge     topic, partition
kafka_log_log_size                                                     gauge     topic, partition
kafka_log_log_numlogsegments                                           gauge     topic, partition
kafka_server_delayedoperationpurgatory_purgatorysize                   gauge     delayedOperation (Produce, Fetch)
kafka_server_socket_server_metrics_connection_count                    gauge     listener, networkProcessor="0"
kafka_server_socket_server_metrics_connections_software                gauge     clientSoftwareName, clientSoftwareVersion,
                                                                                 listener, networkProcessor="0"
kafka_network_socketserver_networkprocessoravgidle_percent             gauge     (a fraction 0..1, as Kafka's)
kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent     gauge     (the same loop's idle fraction)
kafka_server_kafkaserver_brokerstate                                   gauge     (1 starting, 3 running, 7 shutting down)
kafka_server_quota_throttle_time_ms_total                              counter   quota (produce, fetch, request)
kafka_log_logcleaner_cleaner_runs_total                                counter
kafka_log_logcleaner_max_clean_time_secs                               gauge
kafka_log_logcleaner_cleaner_recopy_percent                            gauge
kafka_log_logcleanermanager_uncleanable_partitions_count               gauge
kafka_consumergroup_current_offset                                     gauge     consumergroup, topic, partition
kafka_consumergroup_lag                                                gauge     consumergroup, topic, partition
kafka_consumergroup_lag_seconds                                        gauge     consumergroup, topic, partition
process_cpu_seconds_total, process_resident_memory_bytes,              (prometheus-client's process collector)
process_virtual_memory_bytes, process_open_fds, process_max_fds,
process_start_time_seconds
=====================================================================  ========  ===========================================

Beyond Kafka: consumer lag of the groups this broker coordinates (kafka_exporter's names: the committed offset and
the high watermark minus it, for the partitions this broker leads; in seconds, the age of the first unconsumed
record as the timestamp of its batch's header gives it, one read of a header per lagging partition and scrape) and
the software of connected clients
(ApiVersions v3's client_software_name/version; Kafka's own metric, under Strimzi's name for it).

A scrape never fails for the broker's state: a section that cannot be read (a log closed by the shutdown, a broker
still starting) is left out of that scrape and logged at debug level.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from mq.protocol.api_keys import request_name

if TYPE_CHECKING:
    from mq.server.broker import KafkaServer

log = logging.getLogger(__name__)

QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
"""Kafka's histogram percentiles, and the ``quantile`` label Strimzi's rules give each."""

WINDOW_S = 60.0
"""Quantiles cover the samples of the current window and of the one before it."""

BOUNDS_MS = tuple(0.01 * 1.2**i for i in range(90))
"""Upper bounds of the histogram buckets (0.01 ms to about 130 s, 20 % apart: a quantile is within 20 %)."""


class Histogram:
    """Fixed-bucket histogram of milliseconds: ``record`` is a bisect and three additions."""

    __slots__ = ("buckets", "count", "previous", "sum", "window_start")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BOUNDS_MS) + 1)
        self.previous = [0] * (len(BOUNDS_MS) + 1)
        self.count = 0
        self.sum = 0.0
        self.window_start = time.monotonic()

    def record(self, ms: float) -> None:
        self.buckets[bisect.bisect_left(BOUNDS_MS, ms)] += 1
        self.count += 1
        self.sum += ms

    def quantiles(self, now: float) -> list[float]:
        """The value at each of ``QUANTILES`` (a bucket's upper bound), starting a new window when this one is old."""
        if now - self.window_start >= WINDOW_S:
            self.previous, self.buckets = self.buckets, [0] * (len(BOUNDS_MS) + 1)
            self.window_start = now
        counts = [a + b for a, b in zip(self.buckets, self.previous, strict=True)]
        total = sum(counts)
        values = []
        for _, q in QUANTILES:
            if total == 0:
                values.append(0.0)
                continue
            rank, seen = q * total, 0
            for index, n in enumerate(counts):
                seen += n
                if seen >= rank:
                    values.append(BOUNDS_MS[min(index, len(BOUNDS_MS) - 1)])
                    break
        return values


class Timer(Histogram):
    """A Kafka timer (``...RateAndTimeMs``): a histogram of durations."""

    __slots__ = ()

    def time_since(self, started: float) -> None:
        """Record the time since ``started`` (a ``time.monotonic()``)."""
        self.record((time.monotonic() - started) * 1000)


@dataclass(slots=True)
class ApiStats:
    """One request type's counts per version and its five time histograms."""

    requests: dict[int, int] = field(default_factory=dict)
    count: int = 0
    """Requests of this type (the histograms hold the timed sample of them)."""
    total: Histogram = field(default_factory=Histogram)
    queue: Histogram = field(default_factory=Histogram)
    local: Histogram = field(default_factory=Histogram)
    remote: Histogram = field(default_factory=Histogram)
    send: Histogram = field(default_factory=Histogram)


SAMPLE_EVERY = 8
"""Of each request type, the first request and every ``SAMPLE_EVERY``-th after it are timed (as Kafka's
histograms keep a sample, not every value); every request is counted."""


class RequestStats:
    """Kafka's RequestMetrics, recorded by the network layer: ``count`` for every request, ``record`` for those it
    says to time, from their loop timestamps (seconds of ``time.monotonic``): received (the read that completed the
    frame), started (handed to the handler), handled (the handler returned), answered (the response was ready) and
    sent (the socket took all of it)."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}

    def count(self, api_key: int, version: int) -> bool:
        """Count a request; True when it is to be timed."""
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiStats()
        requests = stats.requests
        requests[version] = requests.get(version, 0) + 1
        stats.count += 1
        return stats.count % SAMPLE_EVERY == 1

    def record(
        self, api_key: int, received: float, started: float, handled: float, answered: float, sent: float
    ) -> None:
        stats = self.apis[api_key]
        stats.queue.record((started - received) * 1000)
        stats.local.record((handled - started) * 1000)
        stats.remote.record((answered - handled) * 1000)
        stats.send.record((sent - answered) * 1000)
        stats.total.record((sent - received) * 1000)


MESSAGES_IN, BYTES_IN, BYTES_OUT, BYTES_REJECTED, FAILED_PRODUCE, FAILED_FETCH, TOTAL_PRODUCE, TOTAL_FETCH = range(8)
_TOPIC_METRICS = (
    "messagesin",
    "bytesin",
    "bytesout",
    "bytesrejected",
    "failedproducerequests",
    "failedfetchrequests",
    "totalproducerequests",
    "totalfetchrequests",
)


class BrokerTopicStats(dict[str, list[int]]):
    """Kafka's BrokerTopicMetrics: per topic, eight counters indexed by ``MESSAGES_IN`` ... ``TOTAL_FETCH``; the
    all-topics values are their sums plus ``gone``, taken at scrape time. Topics this broker holds no partition of
    (deleted ones, names clients asked for in vain) are folded into ``gone`` at each scrape, so the dict stays
    bounded by the topics here."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = [0] * len(_TOPIC_METRICS)

    def of(self, topic: str) -> list[int]:
        counters = self.get(topic)
        if counters is None:
            counters = self[topic] = [0] * len(_TOPIC_METRICS)
        return counters

    def prune(self, hosted: set[str]) -> None:
        """Fold the counters of topics not in ``hosted`` into ``gone`` (on the loop, which records them)."""
        for topic in [t for t in self if t not in hosted]:
            for index, value in enumerate(self.pop(topic)):
                self.gone[index] += value


@dataclass(slots=True)
class ControllerStats:
    """Recorded on the controller thread, read at scrape time."""

    leader_election: Timer = field(default_factory=Timer)
    unclean_elections: int = 0


@dataclass(slots=True)
class ReplicaManagerStats:
    """ISR changes of partitions this broker leads: its own (a follower fell behind or caught up) and the
    controller's (a follower's broker died or came back)."""

    isr_shrinks: int = 0
    isr_expands: int = 0


def _summary(name: str, documentation: str) -> Metric:
    return Metric(name, documentation, "summary")


def _add_histogram(
    metric: Metric, histogram: Histogram, labels: dict[str, str], now: float, count: int | None = None
) -> None:
    """Quantile samples, ``_count`` and ``_sum``; with ``count`` (the histogram holds a sample of ``count`` values)
    the sum is the sample's scaled to it."""
    name = metric.name
    for (label, _), value in zip(QUANTILES, histogram.quantiles(now), strict=True):
        metric.add_sample(name, {**labels, "quantile": label}, value)
    total = histogram.sum
    if count is None:
        count = histogram.count
    elif histogram.count:
        total = total * count / histogram.count
    metric.add_sample(name + "_count", labels, count)
    metric.add_sample(name + "_sum", labels, total)


STARTING, RUNNING, SHUTTING_DOWN = 1, 3, 7
"""Kafka's BrokerState values."""


class BrokerCollector(Collector):
    """Reads the broker's recorders and state at scrape time (on the event loop)."""

    def __init__(self, broker: KafkaServer) -> None:
        self.broker = broker
        self.controller_snapshot: tuple[int, int, int, int] | None = None
        """(active, offline partitions, topics, partitions) as the controller thread last reported them."""
        self._idle_mark = (time.monotonic(), time.thread_time())

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        now = time.monotonic()
        sections: list[Callable[[], Iterator[Metric]]] = [
            self._topic_metrics,
            self._replica_metrics,
            lambda: self._controller_metrics(now),
            self._log_metrics,
            lambda: self._network_metrics(now),
            self._group_metrics,
        ]
        if broker.request_stats is not None:
            stats = broker.request_stats
            sections.insert(1, lambda: self._request_metrics(stats, now))
        for section in sections:
            try:
                metrics = list(section())
            except Exception:
                log.debug("metrics section %s not read", section, exc_info=True)
                continue
            yield from metrics

    def _topic_metrics(self) -> Iterator[Metric]:
        manager = self.broker.replica_manager
        if manager is None:
            return
        stats = manager.topic_stats
        stats.prune({tp.topic for tp in manager.partitions})
        for index, short in enumerate(_TOPIC_METRICS):
            metric = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{short}", f"BrokerTopicMetrics {short}", labels=["topic"]
            )
            total = stats.gone[index]
            for topic, counters in stats.items():
                value = counters[index]
                total += value
                metric.add_metric([topic], value)
            metric.add_sample(metric.name + "_total", {}, total)
            yield metric

    def _request_metrics(self, stats: RequestStats, now: float) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests per type and version", labels=["request", "version"]
        )
        times = {
            part: _summary(f"kafka_network_requestmetrics_{part}", f"RequestMetrics {part}")
            for part in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems")
        }
        for api_key, api in sorted(stats.apis.items()):
            name = request_name(api_key)
            for version, count in sorted(api.requests.items()):
                requests.add_metric([name, str(version)], count)
            labels = {"request": name}
            _add_histogram(times["totaltimems"], api.total, labels, now, api.count)
            _add_histogram(times["requestqueuetimems"], api.queue, labels, now, api.count)
            _add_histogram(times["localtimems"], api.local, labels, now, api.count)
            _add_histogram(times["remotetimems"], api.remote, labels, now, api.count)
            _add_histogram(times["responsesendtimems"], api.send, labels, now, api.count)
        yield requests
        yield from times.values()

    def _replica_metrics(self) -> Iterator[Metric]:
        broker = self.broker
        manager = broker.replica_manager
        if manager is None:
            return
        under, under_min, leaders, offline = 0, 0, 0, 0
        offline_dirs = manager.log_manager.offline_dirs
        for partition in manager.partitions.values():
            if offline_dirs and partition.log.dir.parent in offline_dirs:
                offline += 1
            if partition.is_leader:
                leaders += 1
                isr = len(partition.isr)
                if isr < len(partition.replicas):
                    under += 1
                if isr < broker.topic_config(partition.tp.topic).min_insync_replicas:
                    under_min += 1
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(prefix + "underreplicatedpartitions", "Led partitions with ISR < replicas", under)
        yield GaugeMetricFamily(prefix + "underminisrpartitioncount", "Led partitions below min ISR", under_min)
        yield GaugeMetricFamily(prefix + "partitioncount", "Partitions on this broker", len(manager.partitions))
        yield GaugeMetricFamily(prefix + "leadercount", "Partitions led by this broker", leaders)
        yield GaugeMetricFamily(prefix + "offlinereplicacount", "Replicas in failed log dirs", offline)
        yield CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks", manager.stats.isr_shrinks)
        yield CounterMetricFamily(prefix + "isrexpands", "ISR expands", manager.stats.isr_expands)
        max_lag = 0
        for partition in manager.partitions.values():
            if not partition.is_leader and partition.follower_lag > max_lag:
                max_lag = partition.follower_lag
        lag = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag", "Largest follower lag in messages", labels=["clientId"]
        )
        lag.add_metric(["Replica"], max_lag)
        yield lag
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Operations waiting in a purgatory",
            labels=["delayedOperation"],
        )
        purgatory.add_metric(["Produce"], len(manager.produce_purgatory))
        purgatory.add_metric(["Fetch"], len(manager.fetch_purgatory))
        yield purgatory

    def _controller_metrics(self, now: float) -> Iterator[Metric]:
        controller = getattr(self.broker, "controller", None)
        prefix = "kafka_controller_kafkacontroller_"
        active, offline, topics, partitions = self.controller_snapshot or (0, 0, 0, 0)
        if controller is None or not controller.active:
            active, offline, topics, partitions = 0, 0, 0, 0
        yield GaugeMetricFamily(prefix + "activecontrollercount", "1 on the active controller", active)
        yield GaugeMetricFamily(prefix + "offlinepartitionscount", "Partitions without a live leader", offline)
        yield GaugeMetricFamily(prefix + "globaltopiccount", "Topics in the cluster", topics)
        yield GaugeMetricFamily(prefix + "globalpartitioncount", "Partitions in the cluster", partitions)
        if controller is None:
            return
        stats = controller.stats
        election = _summary("kafka_controller_controllerstats_leaderelectionrateandtimems", "Leader elections")
        _add_histogram(election, stats.leader_election, {}, now)
        yield election
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections",
            stats.unclean_elections,
        )

    def _log_metrics(self) -> Iterator[Metric]:
        broker = self.broker
        manager = broker.replica_manager
        flush = _summary("kafka_log_logflushstats_logflushrateandtimems", "Log flushes (fsync)")
        _add_histogram(flush, broker.flush_timer, {}, time.monotonic())
        yield flush
        if manager is None:
            return
        labels = ["topic", "partition"]
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes", labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the log", labels=labels)
        for tp, partition in list(manager.partitions.items()):
            log = partition.log
            key = [tp.topic, str(tp.partition)]
            start.add_metric(key, log.log_start_offset)
            end.add_metric(key, log.log_end_offset)
            size.add_metric(key, log.size_in_bytes)
            segments.add_metric(key, len(log.segments))
        yield from (start, end, size, segments)
        cleaner = broker.log_cleaner
        if cleaner is not None:
            yield CounterMetricFamily("kafka_log_logcleaner_cleaner_runs", "Cleaner runs", cleaner.runs)
            yield GaugeMetricFamily(
                "kafka_log_logcleaner_max_clean_time_secs", "Seconds the last clean took", cleaner.last_clean_time_secs
            )
            yield GaugeMetricFamily(
                "kafka_log_logcleaner_cleaner_recopy_percent",
                "Bytes written per 100 read by the last clean",
                cleaner.last_recopy_percent,
            )
            yield GaugeMetricFamily(
                "kafka_log_logcleanermanager_uncleanable_partitions_count",
                "Partitions the cleaner gave up on",
                cleaner.uncleanable_count,
            )

    def _network_metrics(self, now: float) -> Iterator[Metric]:
        broker = self.broker
        server = broker.server
        count = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open connections",
            labels=["listener", "networkProcessor"],
        )
        software = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connections_software",
            "Open connections per client software",
            labels=["clientSoftwareName", "clientSoftwareVersion", "listener", "networkProcessor"],
        )
        connections = list(server.connections) if server is not None else []
        per_listener = dict.fromkeys((a.name for a in broker.advertised), 0)
        by_software: dict[tuple[str, str, str], int] = {}
        for connection in connections:
            listener = connection.security.name
            per_listener[listener] = per_listener.get(listener, 0) + 1
            if connection.software is not None:
                key = (*connection.software, listener)
                by_software[key] = by_software.get(key, 0) + 1
        for listener, n in per_listener.items():
            count.add_metric([listener, "0"], n)
        for (name, version, listener), n in sorted(by_software.items()):
            software.add_metric([name, version, listener, "0"], n)
        yield count
        yield software
        mark_wall, mark_cpu = self._idle_mark
        cpu = time.thread_time()
        self._idle_mark = (now, cpu)
        busy = (cpu - mark_cpu) / (now - mark_wall) if now > mark_wall else 0.0
        idle = min(max(1.0 - busy, 0.0), 1.0)
        yield GaugeMetricFamily(
            "kafka_network_socketserver_networkprocessoravgidle_percent",
            "Fraction of time the event loop thread was idle since the last scrape",
            idle,
        )
        yield GaugeMetricFamily(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "Fraction of time the request handlers were idle: the event loop's, which handles requests too",
            idle,
        )
        yield GaugeMetricFamily(
            "kafka_server_kafkaserver_brokerstate",
            "1 starting, 3 serving, 7 shutting down",
            RUNNING if broker.ready else SHUTTING_DOWN if broker.shutting_down else STARTING,
        )
        quotas = broker.client_quotas
        throttle = CounterMetricFamily(
            "kafka_server_quota_throttle_time_ms", "Throttle time given to clients", labels=["quota"]
        )
        if quotas is not None:
            for name, manager in (("produce", quotas.produce), ("fetch", quotas.fetch), ("request", quotas.request)):
                throttle.add_metric([name], manager.throttle_time_ms_total)
        yield throttle

    def _group_metrics(self) -> Iterator[Metric]:
        broker = self.broker
        coordinator, manager = broker.group_coordinator, broker.replica_manager
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed offset", labels=labels)
        lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_lag_seconds",
            "Age of the first unconsumed record (by its batch's timestamp); 0 without lag",
            labels=labels,
        )
        now_ms = time.time() * 1000
        if coordinator is not None and manager is not None:
            for group_id, group in list(coordinator.groups.items()):
                for tp, committed in list(group.offsets.items()):
                    key = [group_id, tp.topic, str(tp.partition)]
                    current.add_metric(key, committed.offset)
                    partition = manager.partitions.get(tp)
                    if partition is None or not partition.is_leader:
                        continue
                    behind = max(partition.high_watermark - committed.offset, 0)
                    lag.add_metric(key, behind)
                    if not behind:
                        lag_seconds.add_metric(key, 0)
                    elif stamp := partition.log.entry_timestamp(max(committed.offset, partition.log.log_start_offset)):
                        lag_seconds.add_metric(key, max(now_ms - stamp, 0) / 1000)
        yield current
        yield lag
        yield lag_seconds


def registry_for(broker: KafkaServer) -> tuple[CollectorRegistry, BrokerCollector]:
    """A registry with the broker's collector and the process collector (CPU, memory, open files)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = BrokerCollector(broker)
    registry.register(collector)
    ProcessCollector(registry=registry)
    return registry, collector
