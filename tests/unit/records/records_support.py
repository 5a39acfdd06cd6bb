"""Sample records and the two implementations under comparison: mq's record layer and kafka-python's."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from mq.records import Codec, Record, iter_headers, iter_records, validate
from mq.records.default_batch import RecordBatchBuilder
from mq.records.legacy import LegacyBatchBuilder

TS = 1_500_000_000_000
LEGAL_CODECS = {0: [0, 1, 2, 3], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3, 4]}
MAGIC_CODECS = [(magic, Codec(codec)) for magic, codecs in LEGAL_CODECS.items() for codec in codecs]

Headers = list[tuple[str, bytes | None]]


@dataclass
class Sample:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


samples = st.builds(
    Sample,
    timestamp=st.integers(min_value=0, max_value=2**41),
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=10)), max_size=3),
)
sample_lists = st.lists(samples, min_size=1, max_size=12)
"""Hypothesis: 1 to 12 records of any timestamp, key, value and headers."""


def sample_records(n: int, big: bool = False) -> list[Sample]:
    """Null keys and values, empty values, headers with null values, non-ASCII keys, values and header names.

    ``big`` makes the records area over 128 KiB, half of it incompressible, so lz4 (64 KiB) and snappy (32 KiB)
    frames hold several blocks, some stored raw.
    """
    records = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{i}-ключ".encode()
        value = None if i % 7 == 3 else (b"" if i % 5 == 1 else f"välue-{i}-".encode() * (200 if big else 1))
        headers: Headers = [] if i % 3 else [("h1", f"{i}".encode()), ("ключ", None), ("", b"")]
        records.append(Sample(TS + i * 13 - (50 if i == 2 else 0), key, value, headers))
    if big:
        records.append(Sample(TS, b"random", os.urandom(70_000), [("size", b"70000")]))
    return records


def mq_build(magic: int, codec: Codec, records: list[Sample], base_offset: int = 0) -> bytes:
    if magic == 2:
        builder = RecordBatchBuilder(codec, base_offset=base_offset)
        for r in records:
            builder.append(r.timestamp, r.key, r.value, r.headers)
        return builder.build()
    legacy = LegacyBatchBuilder(magic, codec, base_offset=base_offset)
    for r in records:
        legacy.append(r.timestamp, r.key, r.value)
    return legacy.build()


def kafka_python_build(magic: int, codec: Codec, records: list[Sample]) -> bytes:
    """kafka-python's encoding of ``records`` at offsets 0..n-1, as its producer writes them."""
    if magic == 2:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=int(codec),
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 26,
        )
        for i, r in enumerate(records):
            builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
        return bytes(builder.build())
    legacy = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 26)
    for i, r in enumerate(records):
        legacy.append(i, timestamp=r.timestamp if magic else None, key=r.key, value=r.value)
    return bytes(legacy.build())


def mq_read(data: bytes) -> list[Record]:
    """Every record of every entry in ``data``, each entry's CRC checked first; the entries must fill ``data``."""
    records: list[Record] = []
    end = 0
    for header in iter_headers(data):
        validate(data, header)
        records.extend(iter_records(data, header))
        end = header.end_position
    assert end == len(data)
    return records


def kafka_python_read(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, Headers]]:
    """(offset, timestamp, key, value, headers) as kafka-python's consumer sees them, each batch's CRC checked."""
    theirs = MemoryRecords(data)
    out = []
    while theirs.has_next():
        batch = theirs.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value, list(r.headers)))
    return out


def expected(
    records: list[Sample], magic: int, base_offset: int = 0
) -> list[tuple[int, int, bytes | None, bytes | None, Headers]]:
    """What a reader of format ``magic`` sees: v0 has no timestamps (-1), v0/v1 have no headers."""
    return [
        (base_offset + i, r.timestamp if magic else -1, r.key, r.value, r.headers if magic == 2 else [])
        for i, r in enumerate(records)
    ]


def as_tuples(records: list[Record]) -> list[tuple[int, int, bytes | None, bytes | None, Headers]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]
