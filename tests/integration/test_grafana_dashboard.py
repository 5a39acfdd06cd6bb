"""A broker with its metrics endpoint (metrics.listener) under real client traffic: the Grafana dashboard's every
metric name is in its scrape, and mq jmx-tool reads Kafka's MBeans from it."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, free_port
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

from mq.tools.grafana import dashboard_metric_names

pytestmark = pytest.mark.slow

DASHBOARD = Path(__file__).resolve().parents[2] / "config" / "grafana" / "mq-overview.json"
TOPIC = "dash"
GROUP = "dash-readers"


def metrics_broker(broker_factory: Callable[..., BrokerProcess]) -> tuple[BrokerProcess, str]:
    url = f"http://127.0.0.1:{free_port()}"
    return broker_factory(overrides=[f"metrics.listener={url}"]).start(), url


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, value=f"m{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def traffic(bootstrap: str) -> None:
    """10 records produced and consumed by GROUP (committed), then 5 more it has not read: its lag is 5."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
    produce(bootstrap, 10)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    read = 0
    while read < 10:
        message = consumer.poll(10)
        assert message is not None, f"only {read} of 10 consumed"
        assert message.error() is None, message.error()
        read += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    produce(bootstrap, 5)


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_every_dashboard_metric_is_scraped(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker, url = metrics_broker(broker_factory)
    traffic(broker.bootstrap)
    wanted = dashboard_metric_names(json.loads(DASHBOARD.read_text(encoding="utf-8")))
    assert len(wanted) >= 10

    def lag() -> float:
        samples = scrape(url)
        return sum(
            v
            for (n, labels), v in samples.items()
            if n == "kafka_consumergroup_lag" and ("consumergroup", GROUP) in labels
        )

    assert wait_for(lambda: lag() == 5), f"lag of {GROUP} is {lag()}, not 5"
    samples = scrape(url)
    names = {name for name, _ in samples}
    assert wanted - names == set()
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", TOPIC)}))] == 15
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", frozenset())] == 1
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", frozenset())] == 0


def test_jmx_tool_reads_the_broker(mq_command: list[str], broker_factory: Callable[..., BrokerProcess]) -> None:
    broker, url = metrics_broker(broker_factory)
    traffic(broker.bootstrap)
    messages_in = f"kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic={TOPIC}"
    args = [
        *mq_command,
        "jmx-tool",
        "--jmx-url",
        url,
        "--object-name",
        messages_in,
        "--object-name",
        "kafka.controller:type=KafkaController,name=ActiveControllerCount",
        "--object-name",
        "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
        "--attributes",
        "Count,Value,99thPercentile",
        "--report-format",
        "tsv",
        "--one-time",
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    values = dict(line.split("\t") for line in done.stdout.splitlines())
    assert values.pop("time").isdigit()
    assert values.pop(f"{messages_in}:Count") == "15"
    assert values.pop("kafka.controller:type=KafkaController,name=ActiveControllerCount:Value") == "1"
    produce_time = "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce"
    assert int(values.pop(f"{produce_time}:Count")) >= 2  # two flushes: at least two Produce requests
    assert float(values.pop(f"{produce_time}:99thPercentile")) >= 0
    assert values == {}
