"""``mq segments-to-parquet`` over a copy of a real broker's log directory: topics produced by confluent-kafka with
every codec, in several segments each, read back equal to a batch read of the same topics through the mq source."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mq.spark.segments import SegmentsDataSource
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.slow

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
COLUMNS = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "timestampType", "headers"]


def produce_with_every_codec(bootstrap: str) -> list[str]:
    """Topic ``seg-<codec>`` (2 partitions, 4 KiB segments) per codec, 150 records each in batches of at most 1 KB,
    with headers."""
    topics = [f"seg-{codec}" for codec in CODECS]
    failed: list[Any] = []
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1, config={"segment.bytes": "4096"}) for t in topics]).values():
        future.result(10)
    for codec, topic in zip(CODECS, topics, strict=True):
        producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "batch.size": 1000}
        )
        for i in range(150):
            key = None if i % 10 == 0 else f"{codec}-{i}".encode()
            producer.produce(
                topic,
                f"value {i} ".encode() * 4,
                key,
                partition=i % 2,
                headers=[("i", str(i).encode())],
                on_delivery=lambda error, _message: failed.append(error) if error else None,
            )
        assert producer.flush(10) == 0 and failed == []
    return topics


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.selectExpr(*COLUMNS).collect())


def test_a_copied_log_directory_reads_as_the_topics_do(
    broker: BrokerProcess, spark: Any, mq_command: list[str], tmp_path: Path
) -> None:
    topics = produce_with_every_codec(broker.bootstrap)
    expected = rows(
        spark.read.format("mq")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", ",".join(topics))
        .option("includeHeaders", "true")
        .load()
    )
    assert len(expected) == 150 * len(CODECS)
    broker.stop()
    copy = tmp_path / "copy"
    shutil.copytree(broker.log_dir, copy)
    last = sorted((copy / "seg-zstd-1").glob("*.log"))[-1]
    whole = last.read_bytes()
    with open(last, "ab") as segment:
        segment.write(whole[: min(len(whole), 40)])  # a torn write: part of an entry after the last whole one
    segments = len(list(copy.glob("seg-*/*.log")))
    assert segments > 2 * len(topics)  # more than one segment in some partitions

    out = tmp_path / "parquet"
    args = [
        "segments-to-parquet",
        "--log-dir",
        str(copy),
        "--to",
        str(out),
        "--include-headers",
        "--master",
        "local[2]",
    ]
    done = subprocess.run(
        [*mq_command, *args, *[a for t in topics for a in ("--topic", t)]], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"Wrote {len(expected)} records from {segments} segment files to {out}"
    assert f"Corrupt tail in {last}" in done.stderr
    assert rows(spark.read.parquet(str(out))) == expected
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [f"topic={t}" for t in sorted(topics)]

    spark.dataSource.register(SegmentsDataSource)
    only = spark.read.format("mq-segments").option("topics", "seg-gzip").load(str(copy))
    assert only.rdd.getNumPartitions() == len(list(copy.glob("seg-gzip-*/*.log")))  # one task per segment file
