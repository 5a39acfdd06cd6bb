"""Helpers for compaction tests: a compacted log, keyed produce, transactions, and what a log holds."""

from __future__ import annotations

import threading
from pathlib import Path

from click.testing import CliRunner, Result

from mq.cli.dump_segments import dump_segments
from mq.config import TopicConfig
from mq.records import ABORT, COMMIT, iter_records, parse_control_key
from mq.records.batch_header import Codec, iter_headers
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.storage.cleaner import Cleaner
from mq.storage.partition_log import Log
from mq.storage.txn_index import AbortedTxn

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


def dump_cleaned_segment(log: Log) -> Result:
    """``mq dump-segments --deep-iteration`` over the first segment of ``log`` and its indexes (``log`` closed
    first); asserts it succeeds and finds no index mismatch."""
    segment = log.segments[0]
    paths = [segment.log_path, segment.index.path, segment.time_index.path]
    log.close()
    result = CliRunner().invoke(
        dump_segments, ["--deep-iteration", "--files", ",".join(map(str, paths))], catch_exceptions=False
    )
    assert result.exit_code == 0
    assert "Mismatch" not in result.stdout + result.stderr
    return result


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith("-checkpoint"))


class Transactions:
    """Writes transactional batches and their markers to a log as its partition's leader does: an ABORT marker
    adds the aborted transaction to the transaction index, with the last stable offset after it."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.first: dict[int, int] = {}
        """Producer id -> first offset of its open transaction."""
        self.sequence: dict[int, int] = {}

    def send(self, producer_id: int, pairs: list[Pair], codec: Codec = Codec.NONE) -> int:
        """Append ``pairs`` as one batch of ``producer_id``'s transaction; its base offset."""
        sequence = self.sequence.get(producer_id, 0)
        builder = RecordBatchBuilder(
            codec, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True
        )
        for i, (key, value) in enumerate(pairs):
            builder.append(TS + i, key, value)
        self.sequence[producer_id] = sequence + len(pairs)
        offset = int(self.log.append_as_leader(builder.build(), leader_epoch=0).first_offset)
        self.first.setdefault(producer_id, offset)
        return offset

    def end(self, producer_id: int, commit: bool) -> int:
        """Append ``producer_id``'s COMMIT or ABORT marker; its offset."""
        marker = build_control_batch(COMMIT if commit else ABORT, producer_id, 0, 0, timestamp=TS)
        offset = int(self.log.append_as_leader(marker, leader_epoch=0).first_offset)
        first = self.first.pop(producer_id)
        if not commit:
            lso = min(self.first.values(), default=offset + 1)
            self.log.append_aborted_txn(AbortedTxn(producer_id, first, offset, lso))
        return offset


def data_records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record in the segment files, control batches left out."""
    out = []
    for segment in log.segments:
        data = Path(segment.log_path).read_bytes()[: segment.size]
        for header in iter_headers(data):
            if not header.is_control:
                out += [(r.offset, r.key, r.value) for r in iter_records(data, header)]
    return out


def markers(log: Log) -> list[tuple[int, int, str]]:
    """(offset, producer id, COMMIT | ABORT | EMPTY) of every control batch in the segment files."""
    out = []
    for segment in log.segments:
        data = Path(segment.log_path).read_bytes()[: segment.size]
        for header in iter_headers(data):
            if header.is_control:
                control = [parse_control_key(r.key) for r in iter_records(data, header)]
                kind = "EMPTY" if not control else "COMMIT" if control == [COMMIT] else "ABORT"
                out.append((header.offset, header.producer_id, kind))
    return out
