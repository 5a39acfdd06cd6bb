"""Helpers for compaction tests: a compacted log, keyed produce, and what a log holds."""

from __future__ import annotations

import threading
from pathlib import Path

from mq.config import TopicConfig
from mq.records import iter_records
from mq.records.batch_header import Codec, iter_headers
from mq.records.default_batch import RecordBatchBuilder
from mq.storage.cleaner import Cleaner
from mq.storage.partition_log import Log

TS = 1_700_000_000_000
Pair = tuple[bytes | None, bytes | None]


class Clock:
    def __init__(self, now: int = TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compacted(**overrides: str) -> TopicConfig:
    return TopicConfig().with_overrides({"cleanup.policy": "compact", **overrides})


def batch(pairs: list[Pair], codec: Codec = Codec.NONE, timestamp: int = TS, producer_id: int = -1) -> bytes:
    builder = RecordBatchBuilder(codec, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1)
    if producer_id >= 0:
        builder.base_sequence = 0
    for i, (key, value) in enumerate(pairs):
        builder.append(timestamp + i, key, value)
    return builder.build()


def produce(log: Log, pairs: list[Pair], codec: Codec = Codec.NONE, timestamp: int = TS) -> None:
    log.append_as_leader(batch(pairs, codec, timestamp), leader_epoch=0)


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start, read through ``Log.read`` as a fetch does."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 30)
        if info.records is None:
            break
        data = info.records.read()
        for header in iter_headers(data):
            out += [(r.offset, r.key, r.value) for r in iter_records(data, header) if r.offset >= offset]
            offset = header.next_offset
    return out


def latest(pairs: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Key -> (offset, value) of its last record."""
    return {key: (offset, value) for offset, key, value in pairs}


def clean(log: Log, first_dirty: int = 0, first_uncleanable: int | None = None) -> int:
    """One pass over ``log`` (dirty from ``first_dirty`` up to the active segment by default); the end offset."""
    end = log.active.base_offset if first_uncleanable is None else first_uncleanable
    end_offset, _ = Cleaner(1 << 20, threading.Event()).clean(log, first_dirty, end)
    return end_offset


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith("-checkpoint"))
