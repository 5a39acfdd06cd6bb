"""JMX object names to Strimzi-named Prometheus samples and back, and JMX query matching."""

from __future__ import annotations

import pytest

from mq.tools.jmx_names import (
    KINDS,
    MBEANS,
    ObjectName,
    ObjectNamePattern,
    exported_mbeans,
    parse_object_name,
    sample_for,
)


def name(text: str) -> ObjectName:
    domain, properties, _ = parse_object_name(text)
    return ObjectName(domain, properties)


@pytest.mark.parametrize(
    ("object_name", "attribute", "sample"),
    [
        (
            "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec",
            "Count",
            ("kafka_server_brokertopicmetrics_messagesin_total", {}),
        ),
        (
            "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,topic=t1",
            "Count",
            ("kafka_server_brokertopicmetrics_bytesout_total", {"topic": "t1"}),
        ),
        (
            "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9",
            "Count",
            ("kafka_network_requestmetrics_requests_total", {"request": "Produce", "version": "9"}),
        ),
        (
            "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
            "99thPercentile",
            ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.99"}),
        ),
        (
            "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Fetch",
            "999thPercentile",
            ("kafka_network_requestmetrics_totaltimems", {"request": "Fetch", "quantile": "0.999"}),
        ),
        (
            "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
            "Count",
            ("kafka_network_requestmetrics_totaltimems_count", {"request": "Produce"}),
        ),
        (
            "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
            "Value",
            ("kafka_server_replicamanager_underreplicatedpartitions", {}),
        ),
        (
            "kafka.controller:type=KafkaController,name=ActiveControllerCount",
            "Value",
            ("kafka_controller_kafkacontroller_activecontrollercount", {}),
        ),
        (
            "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
            "Count",
            ("kafka_server_replicamanager_isrshrinks_total", {}),
        ),
        (
            "kafka.log:type=Log,name=Size,topic=t,partition=3",
            "Value",
            ("kafka_log_log_size", {"topic": "t", "partition": "3"}),
        ),
        (
            "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent",
            "MeanRate",
            ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", {}),
        ),
        (
            "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
            "50thPercentile",
            ("kafka_controller_controllerstats_leaderelectionrateandtimems", {"quantile": "0.50"}),
        ),
        (
            "kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=ReplicaFetcherThread-0-1,topic=t,partition=0",
            "Value",
            (
                "kafka_server_fetcherlagmetrics_consumerlag",
                {"clientId": "ReplicaFetcherThread-0-1", "topic": "t", "partition": "0"},
            ),
        ),
    ],
)
def test_strimzi_rules_name_the_sample(object_name: str, attribute: str, sample: tuple[str, dict[str, str]]) -> None:
    assert sample_for(name(object_name), attribute) == sample


@pytest.mark.parametrize("attribute", ["OneMinuteRate", "MeanRate", "FiveMinuteRate"])
def test_meter_rates_are_not_exported(attribute: str) -> None:
    assert sample_for(name("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"), attribute) is None


def test_histogram_mean_is_not_exported() -> None:
    assert sample_for(name("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce"), "Mean") is None


SCRAPE = {
    ("kafka_server_brokertopicmetrics_messagesin_total", frozenset()): 30.0,
    ("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", "a")})): 10.0,
    ("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", "b")})): 20.0,
    ("kafka_network_requestmetrics_totaltimems", frozenset({("request", "Produce"), ("quantile", "0.5")})): 1.5,
    ("kafka_network_requestmetrics_totaltimems", frozenset({("request", "Produce"), ("quantile", "0.99")})): 9.0,
    ("kafka_network_requestmetrics_totaltimems_count", frozenset({("request", "Produce")})): 7.0,
    ("kafka_network_requestmetrics_requests_total", frozenset({("request", "Produce"), ("version", "9")})): 7.0,
    ("kafka_log_log_size", frozenset({("topic", "a"), ("partition", "0")})): 4096.0,
    ("kafka_server_replicamanager_underreplicatedpartitions", frozenset()): 0.0,
    # not an MBean mq names: ignored
    ("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", "a"), ("extra", "x")})): 1.0,
    ("process_cpu_seconds_total", frozenset()): 3.0,
}


def test_scrape_reads_back_as_mbeans() -> None:
    mbeans = {str(k): v for k, v in exported_mbeans(SCRAPE).items()}
    assert mbeans == {
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec": {"Count": 30.0},
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=a": {"Count": 10.0},
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=b": {"Count": 20.0},
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce": {
            "50thPercentile": 1.5,
            "99thPercentile": 9.0,
            "Count": 7.0,
        },
        "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9": {"Count": 7.0},
        "kafka.log:type=Log,name=Size,topic=a,partition=0": {"Value": 4096.0},
        "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions": {"Value": 0.0},
    }


def test_every_exported_attribute_reads_back_as_itself() -> None:
    exported = 0
    for mbean in MBEANS:
        tags = tuple((key, f"v-{key}") for key in mbean.tags)
        object_name = ObjectName(mbean.domain, (("type", mbean.type), ("name", mbean.name), *tags))
        for attribute in KINDS[mbean.kind]:
            sample = sample_for(object_name, attribute)
            if sample is None:
                continue
            metric, labels = sample
            assert exported_mbeans({(metric, frozenset(labels.items())): 1.0}) == {object_name: {attribute: 1.0}}
            exported += 1
    assert exported > len(MBEANS)


MESSAGES_IN = "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"


@pytest.mark.parametrize(
    ("query", "matched"),
    [
        (MESSAGES_IN, {MESSAGES_IN}),
        (f"{MESSAGES_IN},topic=*", {f"{MESSAGES_IN},topic=a", f"{MESSAGES_IN},topic=b"}),
        (f"{MESSAGES_IN},topic=a", {f"{MESSAGES_IN},topic=a"}),
        (f"{MESSAGES_IN},topic=?", {f"{MESSAGES_IN},topic=a", f"{MESSAGES_IN},topic=b"}),
        (f"{MESSAGES_IN},*", {MESSAGES_IN, f"{MESSAGES_IN},topic=a", f"{MESSAGES_IN},topic=b"}),
        ("kafka.server:type=BrokerTopicMetrics,name=*PerSec", {MESSAGES_IN}),
        (
            "kafka.serv*:name=MessagesInPerSec,type=BrokerTopicMetrics,*",
            {MESSAGES_IN, f"{MESSAGES_IN},topic=a", f"{MESSAGES_IN},topic=b"},
        ),
        ("kafka.log:type=Log,*", {"kafka.log:type=Log,name=Size,topic=a,partition=0"}),
        ("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec", set()),
    ],
)
def test_queries_match_as_jmx_patterns(query: str, matched: set[str]) -> None:
    pattern = ObjectNamePattern.parse(query)
    assert {str(n) for n in exported_mbeans(SCRAPE) if pattern.matches(n)} == matched


def test_star_matches_everything() -> None:
    mbeans = exported_mbeans(SCRAPE)
    assert all(ObjectNamePattern.parse("*:*").matches(n) for n in mbeans)


@pytest.mark.parametrize("bad", ["kafka.server", "kafka.server:", "kafka.server:type", "d:type=a,type=b", "d:=x"])
def test_malformed_object_names(bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid object name"):
        ObjectNamePattern.parse(bad)
