"""Rows/s of a Spark batch read of raw segment files (the ``mq-segments`` source into Spark's ``noop`` sink, every
column materialised, ``local[2]``) with this tree's mq and with a baseline commit's, in one run, with the ratio.

The log directory holds ``--partitions`` partitions of one segment each (one Spark task per segment), ``--records``
records in all, 100 B values and 8 B keys, in batches of 500 records of codec ``--codec``. Each tree runs in its own
process (PYTHONPATH set to the tree, inherited by Spark's Python workers); the baseline tree is ``git archive`` of
``--baseline`` into a temporary directory. The first read of each process warms the JVM and the Python workers and is
not counted; the best of the next ``--runs`` counts.

    python scripts/bench_segments_spark.py [--records 1000000] [--codec none] [--baseline 03e5214] [--runs 4]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 500


def write_log_dir(log_dir: Path, records: int, partitions: int, codec: str) -> None:
    from mq.records import Codec, RecordBatchBuilder

    per_partition = records // partitions
    for partition in range(partitions):
        directory = log_dir / f"bench-{partition}"
        directory.mkdir(parents=True)
        with open(directory / f"{0:020d}.log", "wb") as file:
            for base in range(0, per_partition, BATCH):
                builder = RecordBatchBuilder(codec=Codec[codec.upper()], base_offset=base)
                for i in range(base, min(base + BATCH, per_partition)):
                    builder.append(1_700_000_000_000 + i, b"key%05d" % (i % 100_000), bytes(100))
                file.write(builder.build())


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def read_rows_per_second(log_dir: str, records: int, runs: int) -> float:
    """In a process whose PYTHONPATH names the tree: the best rows/s of ``runs`` reads after a warm-up read."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from mq.spark.segments import SegmentsDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-segments")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.port", free_port())
        .config("spark.blockManager.port", free_port())
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(SegmentsDataSource)
    fastest = float("inf")
    for run in range(runs + 1):
        started = time.perf_counter()
        spark.read.format("mq-segments").load(log_dir).write.format("noop").mode("overwrite").save()
        if run:
            fastest = min(fastest, time.perf_counter() - started)
    spark.stop()
    return records / fastest


def measure(tree: Path, log_dir: Path, records: int, runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--read", str(log_dir), "--records", str(records), "--runs", str(runs)],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--baseline", default="03e5214", help="commit whose segment reader decodes per record")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--read", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        print(read_rows_per_second(args.read, args.records, args.runs))
        return
    with tempfile.TemporaryDirectory() as scratch:
        log_dir, baseline = Path(scratch) / "logs", Path(scratch) / "baseline"
        baseline.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "mq"], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive.stdout, check=True)
        sys.path.insert(0, str(ROOT))
        write_log_dir(log_dir, args.records, args.partitions, args.codec)
        print(
            f"{args.records:,} records of 100 B in {args.partitions} segments, {args.codec}, local[2], best of {args.runs}"
        )
        old = measure(baseline, log_dir, args.records, args.runs)
        new = measure(ROOT, log_dir, args.records, args.runs)
        print(f"baseline {args.baseline}: {old:,.0f} rows/s   this tree: {new:,.0f} rows/s   ratio {new / old:.1f}x")


if __name__ == "__main__":
    main()
