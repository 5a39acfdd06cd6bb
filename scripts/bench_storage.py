"""Append throughput of 16 KB batches through the partition log versus a raw os.write loop of the same bytes.

Both write the same batches to files in one temporary directory on the same disk, page cache only (no fsync, as
the log's default flush policy). Prints MB/s and batches/s of each and their ratio.

    python scripts/bench_storage.py [--megabytes 64] [--batch-kb 16] [--dir /path/on/the/disk]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from mq.config import TopicConfig
from mq.records.batch_header import Codec
from mq.records.default_batch import RecordBatchBuilder
from mq.storage.partition_log import Log


def make_batch(batch_bytes: int) -> bytes:
    """A producer-style v2 batch of about ``batch_bytes`` bytes (100-byte records)."""
    builder = RecordBatchBuilder(Codec.NONE)
    now = int(time.time() * 1000)
    while builder.estimated_size < batch_bytes - 120:
        builder.append(now, None, os.urandom(50).hex().encode())
    return builder.build()


def bench_log(directory: Path, batch: bytes, count: int) -> float:
    log = Log(directory / "bench-0", TopicConfig(retention_ms=-1))
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, 0)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def bench_raw(directory: Path, batch: bytes, count: int) -> float:
    fd = os.open(directory / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=64)
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to measure (default: a temp dir)")
    args = parser.parse_args()
    batch = make_batch(args.batch_kb * 1024)
    count = args.megabytes * 1024 * 1024 // len(batch)
    total_mb = count * len(batch) / 1e6
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        bench_raw(directory, batch, min(count, 200))  # warm up
        timings = []
        for bench in (bench_raw, bench_log):  # each starts with no dirty pages, so neither pays for the other
            target = directory / bench.__name__
            target.mkdir()
            os.sync()
            timings.append(bench(target, batch, count))
            shutil.rmtree(target)
    raw, log = timings
    print(f"batches: {count} x {len(batch)} bytes ({total_mb:.1f} MB)")
    print(f"raw os.write loop:   {total_mb / raw:8.1f} MB/s  {count / raw:10.0f} batches/s")
    print(f"partition log append:{total_mb / log:8.1f} MB/s  {count / log:10.0f} batches/s")
    print(f"ratio log/raw:       {raw / log:8.2f}")


if __name__ == "__main__":
    main()
