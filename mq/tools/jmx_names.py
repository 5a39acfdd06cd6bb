"""Kafka's JMX MBean names and the Prometheus samples mq's metrics endpoint exports for them.

The endpoint names every sample as Strimzi's rules for the JMX exporter (``examples/metrics/kafka-metrics.yaml``)
name the MBean attribute it stands for: ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t``
attribute ``Count`` is ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``; a gauge's ``Value`` is
``kafka_<domain>_<type>_<name>`` with the other keys as labels; a histogram's ``99thPercentile`` is the same name
with ``quantile="0.99"`` and its ``Count`` ``<name>_count``. ``RULES`` is that file's Kafka part as data and
``sample_for`` applies it (the first rule that matches wins, the JMX exporter's order). ``MBEANS`` lists the MBeans
mq exports (key order as Kafka registers them) and their kind; ``exported_mbeans`` inverts the rules over a scrape:
which MBean and attribute each sample stands for. Attributes the rules do not export (a meter's
``OneMinuteRate``, a histogram's ``Mean``) have no sample: Prometheus derives rates itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Labels = frozenset[tuple[str, str]]
"""A sample's labels as a hashable set of (name, value)."""


@dataclass(frozen=True)
class ObjectName:
    """A JMX object name with its key properties in registration order (JMX prints them in that order)."""

    domain: str
    properties: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return self.domain + ":" + ",".join(f"{key}={value}" for key, value in self.properties)

    def exporter_string(self, attribute: str) -> str:
        """The string the JMX exporter matches rules against: ``domain<k=v, k2=v2><>Attribute``."""
        props = ", ".join(f"{key}={value}" for key, value in self.properties)
        return f"{self.domain}<{props}><>{attribute}"


def parse_object_name(text: str) -> tuple[str, tuple[tuple[str, str], ...], bool]:
    """``domain:k=v,...[,*]`` as (domain, properties, property-list pattern); ValueError when malformed. Quoted
    values are not supported (Kafka's MBean names need none)."""
    domain, colon, rest = text.partition(":")
    if not colon or not rest:
        raise ValueError(f"Invalid object name '{text}': expected domain:key=value[,key=value...]")
    properties: list[tuple[str, str]] = []
    wildcard = False
    for part in rest.split(","):
        if part == "*" and not wildcard:
            wildcard = True
            continue
        key, equals, value = part.partition("=")
        if not equals or not key or not value or any(k == key for k, _ in properties):
            raise ValueError(f"Invalid object name '{text}': bad key property '{part}'")
        properties.append((key, value))
    return domain, tuple(properties), wildcard


def _wildcard_regex(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


@dataclass(frozen=True)
class ObjectNamePattern:
    """A JMX query: ``*`` and ``?`` in the domain and in property values; a trailing ``,*`` lets a name have more
    keys than the pattern (without it the keys must be exactly the pattern's)."""

    text: str
    domain: re.Pattern[str]
    properties: tuple[tuple[str, re.Pattern[str]], ...]
    property_list_pattern: bool

    @classmethod
    def parse(cls, text: str) -> ObjectNamePattern:
        if text in ("*", "*:*"):
            return cls(text, _wildcard_regex("*"), (), True)
        domain, properties, wildcard = parse_object_name(text)
        return cls(text, _wildcard_regex(domain), tuple((k, _wildcard_regex(v)) for k, v in properties), wildcard)

    def matches(self, name: ObjectName) -> bool:
        if not self.domain.fullmatch(name.domain):
            return False
        values = dict(name.properties)
        if not self.property_list_pattern and len(values) != len(self.properties):
            return False
        return all(key in values and value.fullmatch(values[key]) for key, value in self.properties)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Rule:
    """One rule of the JMX exporter: ``pattern`` (unanchored, as the exporter applies it), the sample ``name`` and
    ``labels`` with ``$n`` group references."""

    pattern: str
    name: str
    labels: tuple[tuple[str, str], ...] = ()


_TWO = (("$4", "$5"), ("$6", "$7"))
RULES: tuple[Rule, ...] = (
    Rule(
        r"kafka.server<type=(.+), name=(.+), clientId=(.+), topic=(.+), partition=(.*)><>Value",
        "kafka_server_$1_$2",
        (("clientId", "$3"), ("topic", "$4"), ("partition", "$5")),
    ),
    Rule(
        r"kafka.server<type=(.+), name=(.+), clientId=(.+), brokerHost=(.+), brokerPort=(.+)><>Value",
        "kafka_server_$1_$2",
        (("clientId", "$3"), ("broker", "$4:$5")),
    ),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)Percent\w*><>MeanRate", "kafka_$1_$2_$3_percent"),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)Percent\w*><>Value", "kafka_$1_$2_$3_percent"),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)Percent\w*, (.+)=(.+)><>Value", "kafka_$1_$2_$3_percent", _TWO[:1]),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+), (.+)=(.+)><>Count", "kafka_$1_$2_$3_total", _TWO),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+)><>Count", "kafka_$1_$2_$3_total", _TWO[:1]),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count", "kafka_$1_$2_$3_total"),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value", "kafka_$1_$2_$3", _TWO),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value", "kafka_$1_$2_$3", _TWO[:1]),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)><>Value", "kafka_$1_$2_$3"),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Count", "kafka_$1_$2_$3_count", _TWO),
    Rule(
        r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*), (.+)=(.+)><>(\d+)thPercentile",
        "kafka_$1_$2_$3",
        (*_TWO, ("quantile", "0.$8")),
    ),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Count", "kafka_$1_$2_$3_count", _TWO[:1]),
    Rule(
        r"kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*)><>(\d+)thPercentile",
        "kafka_$1_$2_$3",
        (("$4", "$5"), ("quantile", "0.$6")),
    ),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)><>Count", "kafka_$1_$2_$3_count"),
    Rule(r"kafka.(\w+)<type=(.+), name=(.+)><>(\d+)thPercentile", "kafka_$1_$2_$3", (("quantile", "0.$4"),)),
)
"""The Kafka rules of Strimzi's kafka-metrics.yaml (``lowercaseOutputName: true``), in its order."""

_COMPILED = tuple((re.compile(f".*(?:{rule.pattern}).*"), rule) for rule in RULES)
_GROUP = re.compile(r"\$(\d+)")


def _safe_name(name: str) -> str:
    """The JMX exporter's metric name sanitising: characters outside ``[a-zA-Z0-9:_]`` become ``_``, runs of
    underscores collapse to one, a leading digit gets a ``_`` before it."""
    out = ["_"] if name[:1].isdigit() else []
    for char in name:
        if char == "_" or not (char.isascii() and (char.isalnum() or char == ":")):
            if not out or out[-1] != "_":
                out.append("_")
        else:
            out.append(char)
    return "".join(out)


def sample_for(name: ObjectName, attribute: str) -> tuple[str, dict[str, str]] | None:
    """The Prometheus sample name and labels the rules give an MBean attribute; None when no rule exports it."""
    subject = name.exporter_string(attribute) + ": 0"
    for pattern, rule in _COMPILED:
        match = pattern.fullmatch(subject)
        if match is None:
            continue

        def expand(template: str, match: re.Match[str] = match) -> str:
            return _GROUP.sub(lambda group: match.group(int(group.group(1))) or "", template)

        labels = {_safe_name(expand(key)): expand(value) for key, value in rule.labels}
        return _safe_name(expand(rule.name)).lower(), labels
    return None


METER = ("Count", "MeanRate", "OneMinuteRate", "FiveMinuteRate", "FifteenMinuteRate")
HISTOGRAM = (
    "Count",
    "Min",
    "Max",
    "Mean",
    "StdDev",
    "50thPercentile",
    "75thPercentile",
    "95thPercentile",
    "98thPercentile",
    "99thPercentile",
    "999thPercentile",
)
GAUGE = ("Value",)
KINDS: dict[str, tuple[str, ...]] = {
    "meter": METER,
    "histogram": HISTOGRAM,
    "timer": tuple(dict.fromkeys(METER + HISTOGRAM)),
    "gauge": GAUGE,
}
"""The attributes of Kafka's (Yammer) metric kinds."""

INTEGRAL_ATTRIBUTES = frozenset({"Count"})
"""Attributes JMX reports as a long; the others of a meter or histogram are doubles, a gauge's as its value."""


@dataclass(frozen=True)
class MBeanKind:
    """MBeans of one metric: ``domain:type=T,name=N`` plus ``tags`` keys in Kafka's order, of one ``kind``."""

    domain: str
    type: str
    name: str
    tags: tuple[str, ...]
    kind: str


def _mbeans(domain: str, type_: str, kind: str, names: Iterable[str], *tag_sets: tuple[str, ...]) -> list[MBeanKind]:
    return [MBeanKind(domain, type_, name, tags, kind) for name in names for tags in tag_sets or ((),)]


_TOPIC_METERS = (
    "MessagesInPerSec",
    "BytesInPerSec",
    "BytesOutPerSec",
    "BytesRejectedPerSec",
    "FailedProduceRequestsPerSec",
    "FailedFetchRequestsPerSec",
    "TotalProduceRequestsPerSec",
    "TotalFetchRequestsPerSec",
)
_REQUEST_TIMES = (
    "TotalTimeMs",
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
)
_TP = ("topic", "partition")
MBEANS: tuple[MBeanKind, ...] = (
    *_mbeans("kafka.server", "BrokerTopicMetrics", "meter", _TOPIC_METERS, (), ("topic",)),
    *_mbeans("kafka.server", "BrokerTopicMetrics", "meter", ("ReplicationBytesInPerSec", "ReplicationBytesOutPerSec")),
    *_mbeans(
        "kafka.server",
        "ReplicaManager",
        "gauge",
        (
            "UnderReplicatedPartitions",
            "PartitionCount",
            "LeaderCount",
            "OfflineReplicaCount",
            "UnderMinIsrPartitionCount",
            "AtMinIsrPartitionCount",
        ),
    ),
    *_mbeans(
        "kafka.server", "ReplicaManager", "meter", ("IsrShrinksPerSec", "IsrExpandsPerSec", "FailedIsrUpdatesPerSec")
    ),
    *_mbeans("kafka.server", "KafkaRequestHandlerPool", "meter", ("RequestHandlerAvgIdlePercent",)),
    *_mbeans("kafka.server", "ReplicaFetcherManager", "gauge", ("MaxLag", "MinFetchRate"), ("clientId",)),
    *_mbeans(
        "kafka.server",
        "DelayedOperationPurgatory",
        "gauge",
        ("PurgatorySize", "NumDelayedOperations"),
        ("delayedOperation",),
    ),
    *_mbeans(
        "kafka.controller",
        "KafkaController",
        "gauge",
        (
            "ActiveControllerCount",
            "OfflinePartitionsCount",
            "PreferredReplicaImbalanceCount",
            "GlobalTopicCount",
            "GlobalPartitionCount",
        ),
    ),
    *_mbeans("kafka.controller", "ControllerStats", "timer", ("LeaderElectionRateAndTimeMs",)),
    *_mbeans("kafka.controller", "ControllerStats", "meter", ("UncleanLeaderElectionsPerSec",)),
    *_mbeans("kafka.network", "RequestMetrics", "meter", ("RequestsPerSec",), ("request", "version")),
    *_mbeans("kafka.network", "RequestMetrics", "meter", ("ErrorsPerSec",), ("request", "error")),
    *_mbeans("kafka.network", "RequestMetrics", "histogram", _REQUEST_TIMES, ("request",)),
    *_mbeans("kafka.network", "RequestChannel", "gauge", ("RequestQueueSize", "ResponseQueueSize")),
    *_mbeans("kafka.network", "SocketServer", "gauge", ("NetworkProcessorAvgIdlePercent",)),
    *_mbeans("kafka.log", "Log", "gauge", ("Size", "NumLogSegments", "LogStartOffset", "LogEndOffset"), _TP),
    *_mbeans("kafka.log", "LogFlushStats", "timer", ("LogFlushRateAndTimeMs",)),
    *_mbeans("kafka.cluster", "Partition", "gauge", ("UnderReplicated", "InSyncReplicasCount", "ReplicasCount"), _TP),
    *_mbeans("kafka.coordinator.group", "GroupMetadataManager", "gauge", ("NumGroups", "NumOffsets")),
)
"""The MBeans (as Kafka 2.8 names them) a scrape is read back as; a sample no entry here names is ignored."""

_SLOT = "\x00{}\x00"
_SLOT_RE = re.compile("\x00(\\d+)\x00")


@dataclass(frozen=True)
class LabelTemplate:
    """A label's value as the rules build it: ``regex`` with one group per tag slot (``slots``, tag indexes), or a
    ``literal`` (a quantile) when it holds no tag."""

    literal: str
    regex: re.Pattern[str] | None = None
    slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class SampleTemplate:
    """The sample one attribute of an ``MBeanKind`` is exported as."""

    mbean: MBeanKind
    attribute: str
    metric: str
    labels: tuple[tuple[str, LabelTemplate], ...]

    def object_name(self, labels: Mapping[str, str]) -> ObjectName | None:
        """The MBean a sample with these labels stands for, None when the labels are not this template's."""
        if len(labels) != len(self.labels):
            return None
        tags: dict[int, str] = {}
        for label, template in self.labels:
            value = labels.get(label)
            if value is None:
                return None
            if template.regex is None:
                if not _same_literal(value, template.literal):
                    return None
                continue
            match = template.regex.fullmatch(value)
            if match is None:
                return None
            for slot, group in zip(template.slots, match.groups(), strict=True):
                if tags.setdefault(slot, group) != group:
                    return None
        if len(tags) != len(self.mbean.tags):
            return None
        props = (("type", self.mbean.type), ("name", self.mbean.name))
        return ObjectName(self.mbean.domain, props + tuple((key, tags[i]) for i, key in enumerate(self.mbean.tags)))


def _same_literal(value: str, literal: str) -> bool:
    """Equal label values; quantiles compare as numbers (``0.50`` is ``0.5``)."""
    try:
        return value == literal or float(value) == float(literal)
    except ValueError:
        return False


def _label_template(value: str) -> LabelTemplate:
    parts = _SLOT_RE.split(value)  # literal, slot, literal, slot, ..., literal
    if len(parts) == 1:
        return LabelTemplate(value)
    regex = "".join(re.escape(part) if i % 2 == 0 else "(.*)" for i, part in enumerate(parts))
    return LabelTemplate(value, re.compile(regex), tuple(int(slot) for slot in parts[1::2]))


def _template(mbean: MBeanKind, attribute: str) -> SampleTemplate | None:
    props = (("type", mbean.type), ("name", mbean.name))
    slots = tuple((key, _SLOT.format(i)) for i, key in enumerate(mbean.tags))
    sample = sample_for(ObjectName(mbean.domain, props + slots), attribute)
    if sample is None:
        return None
    metric, labels = sample
    return SampleTemplate(mbean, attribute, metric, tuple((k, _label_template(v)) for k, v in labels.items()))


def templates() -> dict[str, list[SampleTemplate]]:
    """Every exported attribute of ``MBEANS``, by sample name."""
    by_metric: dict[str, list[SampleTemplate]] = {}
    for mbean in MBEANS:
        for attribute in KINDS[mbean.kind]:
            template = _template(mbean, attribute)
            if template is not None:
                by_metric.setdefault(template.metric, []).append(template)
    return by_metric


def exported_mbeans(samples: Mapping[tuple[str, Labels], float]) -> dict[ObjectName, dict[str, float]]:
    """The MBeans and attribute values a scrape (sample name and labels -> value) stands for."""
    by_metric = templates()
    mbeans: dict[ObjectName, dict[str, float]] = {}
    for (metric, labels), value in samples.items():
        label_map = dict(labels)
        for template in by_metric.get(metric, ()):
            name = template.object_name(label_map)
            if name is not None:
                mbeans.setdefault(name, {})[template.attribute] = value
                break
    return mbeans
