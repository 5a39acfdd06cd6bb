"""The collector on a broker in this process: connected client software, consumer lag of a group this broker
coordinates, and scrapes while the broker shuts down (never an error)."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

GROUP = "lagging"


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_client_software_and_consumer_lag(in_process_broker: Callable[..., Any], tmp_path: Path) -> None:
    broker = in_process_broker([f"log.dirs={tmp_path / 'logs'}", "metrics.listener=http://127.0.0.1:0"])
    port = broker.server.metrics_port
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    written_ms = int(time.time() * 1000) - 100_000
    for i in range(10):  # a batch each, record i written 100 - i seconds ago
        producer.produce("lagged", value=b"%d" % i, timestamp=written_ms + i * 1000)
        assert producer.flush(30) == 0
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP, enable_auto_commit=False)
    tp = TopicPartition("lagged", 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(4, "", -1)})
    status, text = scrape(port)
    consumer.close()
    assert status == 200
    software = re.findall(
        r'^kafka_server_socket_server_metrics_connections_software\{clientSoftwareName="([^"]+)",'
        r'clientSoftwareVersion="([^"]+)"',
        text,
        re.M,
    )
    assert "confluent-kafka-python" in {name for name, _ in software}
    labels = f'consumergroup="{GROUP}",partition="0",topic="lagged"'
    assert re.search(rf"^kafka_consumergroup_current_offset\{{{labels}\}} 4\.0$", text, re.M), text
    assert re.search(rf"^kafka_consumergroup_lag\{{{labels}\}} 6\.0$", text, re.M)
    seconds = re.search(rf"^kafka_consumergroup_lag_seconds\{{{labels}\}} (\S+)$", text, re.M)
    assert seconds is not None, text
    assert 96 <= float(seconds.group(1)) < 96 + 60  # the first unconsumed record, offset 4, is 96 s old
    assert scrape(port, "/ready")[0] == 200


def test_scrapes_during_shutdown_never_fail(in_process_broker: Callable[..., Any], tmp_path: Path) -> None:
    broker = in_process_broker([f"log.dirs={tmp_path / 'logs'}", "metrics.listener=http://127.0.0.1:0"])
    port = broker.server.metrics_port
    stopping = asyncio.run_coroutine_threadsafe(broker.server.shutdown(), broker.loop)
    statuses = set()
    while not stopping.done():
        try:
            statuses.add(scrape(port)[0])
            statuses.add(scrape(port, "/ready")[0])
        except (urllib.error.URLError, ConnectionError):
            statuses.add(0)  # the listener closed at the end of the shutdown
    stopping.result()
    assert statuses <= {200, 503, 0}
