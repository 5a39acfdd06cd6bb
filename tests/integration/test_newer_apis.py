"""The APIs of Kafka 3.7+ brokers with real clients: DescribeTopicPartitions (kafka-python's describe_topic_partitions
page by page; librdkafka 2.16's describe_topics still uses Metadata), the client-metrics APIs (librdkafka asks for its
subscription and waits the push interval before asking again; kafka-python lists config resources) and DescribeCluster
v2."""

from __future__ import annotations

import logging
import re

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic as KafkaPythonNewTopic

pytestmark = pytest.mark.slow


class Lines(logging.Handler):
    """librdkafka's debug lines, as confluent-kafka hands them to a Python logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_kafka_python_pages_through_topic_partitions_and_lists_config_resources(broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KafkaPythonNewTopic("pages-a", 3, 1), KafkaPythonNewTopic("pages-b", 2, 1)])
        [node] = [b["broker_id"] for b in admin.describe_cluster()["brokers"]]  # DescribeCluster v2
        seen: list[tuple[str, int, int]] = []
        cursor = None
        for _ in range(10):
            page = admin.describe_topic_partitions(["pages-b", "pages-a"], response_partition_limit=2, cursor=cursor)
            for topic in page["topics"]:
                assert topic["error_code"] == 0 and topic["topic_id"] is not None
                seen += [(topic["name"], p["partition_index"], p["leader_id"]) for p in topic["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [("pages-a", p, node) for p in range(3)] + [("pages-b", p, node) for p in range(2)]
        listed = admin.list_config_resources()  # v1 (KIP-1142): every type
        assert listed == {"broker_logger": [str(node)], "broker": [str(node)], "topic": ["pages-a", "pages-b"]}
        assert admin.list_config_resources(["CLIENT_METRICS"]) == {}
    finally:
        admin.close()


def test_librdkafka_asks_for_its_telemetry_subscription_once_and_never_pushes(broker) -> None:
    lines = Lines()
    logger = logging.getLogger("librdkafka-newer-apis")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "debug": "protocol,telemetry", "logger": logger})
    admin.create_topics([NewTopic("telemetry", 1, 1)])["telemetry"].result(15)
    [node] = [b.id for b in admin.describe_cluster().result(15).nodes]
    assert node >= 0
    admin.poll(0)
    sent = "\n".join(lines.lines)
    assert re.search(r"Received GetTelemetrySubscriptionsResponse \(v0", sent), sent[-3000:]
    # an empty subscription: the client asks again after the 5-minute push interval, and has nothing to push
    assert "requested metrics count 0" in sent
    assert "Handled GetTelemetrySubscriptions, scheduling FSM after 300000000 microseconds" in sent
    assert sent.count("Sent GetTelemetrySubscriptionsRequest") == 1
    assert "PushTelemetryRequest" not in sent
