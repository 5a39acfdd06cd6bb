"""Helpers for storage tests: batches built by an independent implementation (kafka-python)."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

TS = 1_700_000_000_000


def v2_batch(count: int = 3, value_size: int = 20, timestamp: int = TS, codec: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 26)
    for i in range(count):
        builder.append(i, timestamp=timestamp + i, key=b"k%d" % i, value=bytes([65 + i % 26]) * value_size, headers=[])
    return bytes(builder.build())


def legacy_batch(magic: int, count: int = 3, codec: int = 0, timestamp: int = TS) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 26)
    for i in range(count):
        builder.append(i, timestamp=timestamp + i if magic else None, key=None, value=b"m%d" % i)
    return bytes(builder.build())
