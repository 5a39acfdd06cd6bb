"""``mq export`` against a real broker: killed with SIGKILL in the middle of a run and run again, the Parquet output
holds every record exactly once; a later run adds only what was produced since."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mq.spark.export import CONCURRENT_WRITERS_KEY, ExportError, ExportOptions, export
from tests.integration.conftest import BrokerProcess
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.slow

TOPIC = "orders"
Row = tuple[str, int, int, bytes | None, bytes]


def produce(bootstrap: str, first: int, count: int) -> list[Row]:
    """Records ``first`` .. ``first + count - 1`` over 3 partitions, as the broker acknowledged them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    acked: list[Row] = []

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        acked.append((message.topic(), message.partition(), message.offset(), message.key(), message.value()))

    for i in range(first, first + count):
        key = None if i % 9 == 0 else f"key-{i}".encode()
        producer.produce(TOPIC, f"value-{i}".encode(), key, partition=i % 3, on_delivery=delivered)
    assert producer.flush(10) == 0
    return acked


def exported(spark: Any, out: Path) -> list[Row]:
    df = spark.read.parquet(str(out)).select("topic", "partition", "offset", "key", "value")
    return sorted((r.topic, r.partition, r.offset, r.key, r.value) for r in df.collect())


@pytest.mark.timeout(300)
def test_a_run_killed_mid_way_and_run_again_exports_every_record_once(
    broker: BrokerProcess, spark: Any, mq_command: list[str], tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(10)
    records = produce(broker.bootstrap, 0, 800)
    out = tmp_path / "out"
    command = [
        *mq_command,
        "export",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        TOPIC,
        "--to",
        str(out),
        "--partition-by",
        "topic,partition,date",
        "--max-offsets-per-chunk",
        "200",
        "--master",
        "local[2]",
    ]
    commits = out / "_mq_export" / "commits"
    # its own session: SIGKILL reaches the command and the Spark JVM it started, as a crash would
    killed = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: any(commits.glob("*.json")), timeout=150, interval=0.05)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(30)
    assert killed.returncode == -signal.SIGKILL  # killed mid-run, not finished
    assert len(list(commits.glob("*.json"))) < 4

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=200)
    assert rerun.returncode == 0, rerun.stderr
    summary = re.fullmatch(r"Exported (\d+) offsets of 3 partitions in (\d+) chunks to (.*)", rerun.stdout.strip())
    assert summary is not None, rerun.stdout
    assert 0 < int(summary[1]) < 800 and summary[3] == str(out)
    rows = exported(spark, out)
    assert rows == sorted(records)  # nothing twice, nothing missing

    more = produce(broker.bootstrap, 800, 90)
    options = ExportOptions(broker.bootstrap, (TOPIC,), str(out), partition_by=("topic", "partition", "date"))
    result = export(spark, options)
    assert result.offsets == 90 and len(result.chunks) == 1
    assert result.plan.recovery.discarded == [] and result.plan.recovery.moved_files == 0
    assert exported(spark, out) == sorted(records + more)
    assert export(spark, options).chunks == []
    assert spark.conf.get(CONCURRENT_WRITERS_KEY) == "0"  # the session's own setting is back


def test_offsets_kept_in_a_checkpoint_directory(broker: BrokerProcess, spark: Any, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 3, 1), NewTopic("audit", 1, 1)]).values():
        future.result(10)
    records = produce(broker.bootstrap, 0, 60)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("audit", b"only", b"one")
    assert producer.flush(10) == 0
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    options = ExportOptions(broker.bootstrap, (TOPIC, "audit"), str(out), str(checkpoint), partition_by=())
    assert export(spark, options).offsets == 61
    assert exported(spark, out) == sorted([*records, ("audit", 0, 0, b"one", b"only")])
    assert len(list((checkpoint / "commits").glob("*.json"))) == 1
    assert not (out / "_mq_export").exists()
    assert export(spark, options).chunks == []


def test_a_topic_that_does_not_exist(broker: BrokerProcess, spark: Any, tmp_path: Path) -> None:
    options = ExportOptions(broker.bootstrap, ("missing",), str(tmp_path / "out"))
    with pytest.raises(ExportError, match="topic missing does not exist"):
        export(spark, options)


@pytest.mark.parametrize("partition_by", [("topic", "partition", "date"), ()], ids=["by-day", "flat"])
def test_the_workers_write_what_sparks_parquet_writer_writes(
    broker: BrokerProcess, spark: Any, tmp_path: Path, partition_by: tuple[str, ...]
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("days", 2, 1)])["days"].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    day_ms = 86_400_000
    for i in range(300):  # records on three UTC days, some without key or headers
        headers = [("n", b"%d" % i), ("empty", None)] if i % 4 else None
        key = None if i % 7 == 0 else b"k%d" % i
        producer.produce(
            "days", b"v%d" % i, key, partition=i % 2, timestamp=1_700_000_000_000 + i % 3 * day_ms, headers=headers
        )
    assert producer.flush(10) == 0

    def run(name: str, spark_writer: bool) -> Path:
        out = tmp_path / name
        options = ExportOptions(
            broker.bootstrap,
            ("days",),
            str(out),
            partition_by=partition_by,
            include_headers=True,
            spark_writer=spark_writer,
        )
        assert export(spark, options).offsets == 300
        return out

    workers, sparks = run("workers", False), run("spark", True)

    def data_files(out: Path) -> list[Path]:
        return sorted(
            p
            for p in out.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(out).parts)
        )

    written_by_workers = re.compile(r"part-\d{5}-.+-\d+\.snappy\.parquet")  # Spark's end in .c000.snappy.parquet
    assert all(written_by_workers.fullmatch(p.name) for p in data_files(workers))
    assert not any(written_by_workers.fullmatch(p.name) for p in data_files(sparks))
    assert {p.parent.relative_to(workers) for p in data_files(workers)} == {
        p.parent.relative_to(sparks) for p in data_files(sparks)
    }
    if partition_by:
        assert len({p.parent for p in data_files(workers)}) == 6  # 2 partitions x 3 days

    def rows(out: Path) -> list[Any]:
        df = spark.read.parquet(str(out))
        return sorted(df.select(*sorted(df.columns)).collect(), key=lambda row: (row["partition"], row["offset"]))

    found = rows(workers)
    assert len(found) == 300 and found == rows(sparks)
    assert spark.read.parquet(str(workers)).schema == spark.read.parquet(str(sparks)).schema
