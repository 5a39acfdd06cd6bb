"""Rows/s of decoding v2 entries into Arrow columns: the per-record path (``iter_records`` then ``pa.array`` over
Python lists, what the offline segment reader did) against ``mq.records.columnar.decode_entries``, on the same
entries in one run, with the ratio; and rows/s of the whole offline reader (``read_segment``: file reads, CRC
checks, decoding and Arrow record batches with every column) over a segment file of the same entries.

The data: ``--records`` records with 100 B values (``--varied``: 50 to 150 B) and 8 B keys, one header each with
``--headers``, in batches of ``--batch`` records, uncompressed and lz4. Entries are decoded in groups of ``--group`` rows (the segment reader's rows per Arrow batch), each path
``--runs`` times; the best run counts. CPU-bound, single-threaded.

    python scripts/bench_columnar.py [--records 1000000] [--batch 500 1000] [--group 32768] [--runs 3] [--headers] [--varied]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from mq.records import BatchHeader, Codec, RecordBatchBuilder, iter_headers, iter_records
from mq.records.columnar import decode_entries
from mq.spark.segment_reader import SegmentFile, read_segment
from mq.topic_partition import TopicPartition

Entries = list[tuple[bytes, BatchHeader]]


def build(records: int, batch: int, codec: Codec, headers: bool, varied: bool) -> Entries:
    entries: Entries = []
    rng = random.Random(1)
    value = bytes(range(150))
    for base in range(0, records, batch):
        builder = RecordBatchBuilder(codec=codec, base_offset=base)
        for i in range(base, min(base + batch, records)):
            size = rng.randrange(50, 151) if varied else 100
            builder.append(
                1_700_000_000_000 + i, b"key%05d" % (i % 100_000), value[:size], [("h", b"1")] if headers else []
            )
        entry = builder.build()
        (header,) = iter_headers(entry)
        entries.append((entry, header))
    return entries


def per_record(group: Entries, include_headers: bool) -> int:
    records = [r for buf, h in group for r in iter_records(buf, h)]
    arrays = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp for r in records], pa.int64()),
        pa.array([int(h.timestamp_type) for buf, h in group for _ in range(h.records_count)], pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records]))
    return len(arrays[0])


def columnar(group: Entries, include_headers: bool) -> int:
    return len(decode_entries(group, include_headers))


def groups(entries: Entries, rows: int) -> list[Entries]:
    out: list[Entries] = [[]]
    count = 0
    for entry in entries:
        out[-1].append(entry)
        count += entry[1].records_count
        if count >= rows:
            out.append([])
            count = 0
    return [g for g in out if g]


def best(decode: Callable[[Entries, bool], int], chunks: Sequence[Entries], headers: bool, runs: int) -> float:
    fastest = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        rows = sum(decode(chunk, headers) for chunk in chunks)
        fastest = min(fastest, time.perf_counter() - started)
    return rows / fastest


def reader(entries: Entries, headers: bool, runs: int) -> float:
    """Rows/s of ``read_segment`` over one segment file holding ``entries`` (the page cache warm)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"{0:020d}.log"
        path.write_bytes(b"".join(entry for entry, _ in entries))
        segment = SegmentFile(str(path), TopicPartition("bench", 0), 0, path.stat().st_size)
        fastest = float("inf")
        for _ in range(runs):
            started = time.perf_counter()
            rows = sum(b.num_rows for b in read_segment(segment, lambda _: None, include_headers=headers))
            fastest = min(fastest, time.perf_counter() - started)
    return rows / fastest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--group", type=int, default=32_768)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--headers", action="store_true", help="one header per record, decoded into the column")
    parser.add_argument("--varied", action="store_true", help="values of 50 to 150 B instead of 100 B")
    args = parser.parse_args()
    sizes = "50-150 B" if args.varied else "100 B"
    print(
        f"{args.records:,} records of {sizes}{' + 1 header' if args.headers else ''}, groups of {args.group:,} rows, best of {args.runs}"
    )
    print(
        f"{'batch':>6} {'codec':>6} {'per-record rows/s':>18} {'columnar rows/s':>16} {'ratio':>6} {'read_segment rows/s':>20}"
    )
    for batch in args.batch:
        for codec in (Codec.NONE, Codec.LZ4):
            entries = build(args.records, batch, codec, args.headers, args.varied)
            chunks = groups(entries, args.group)
            old = best(per_record, chunks, args.headers, args.runs)
            new = best(columnar, chunks, args.headers, args.runs)
            whole = reader(entries, args.headers, args.runs)
            print(f"{batch:>6} {codec.name.lower():>6} {old:>18,.0f} {new:>16,.0f} {new / old:>5.1f}x {whole:>20,.0f}")


if __name__ == "__main__":
    main()
