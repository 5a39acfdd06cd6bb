"""Support for the dump-segments tests: segment, index and time index bytes, and an in-process runner.

Record bytes come from kafka-python's record builders, an independent implementation of the formats, so they do not
come from the code under test. Offsets, leader epochs and attribute bits that the builders do not expose are patched in afterwards.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import lz4.frame
from click.testing import CliRunner
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from mq.cli.dump_segments import dump_segments
from mq.records.crc import crc32, crc32c

TS = 1_500_000_000_000
CODECS = {"NONE": 0, "GZIP": 1, "SNAPPY": 2, "LZ4": 3, "ZSTD": 4}

Header = tuple[str, bytes | None]
Rec = tuple[int, bytes | None, bytes | None, Sequence[Header]]
"""(timestamp, key, value, headers)"""


def v2_batch(
    records: Sequence[Rec],
    *,
    base_offset: int = 0,
    codec: int = 0,
    leader_epoch: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """A v2 batch; ``offset_deltas`` leaves gaps as compaction does; ``log_append_time`` stamps it LogAppendTime."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 24,
    )
    deltas = offset_deltas if offset_deltas is not None else range(len(records))
    for delta, (timestamp, key, value, headers) in zip(deltas, records, strict=True):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=list(headers))
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)
    attributes = struct.unpack_from(">h", data, 21)[0]
    if control:
        attributes |= 0x20
    if log_append_time is not None:
        attributes |= 0x08
        struct.pack_into(">q", data, 35, log_append_time)
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def legacy_entry(
    magic: int,
    records: Sequence[tuple[int | None, bytes | None, bytes | None]],
    *,
    offset: int = 0,
    codec: int = 0,
    log_append_time: int | None = None,
) -> bytes:
    """A v0/v1 entry (one message, or a compressed wrapper of several); ``offset`` is the first record's offset.

    Inner offsets are absolute for v0 and relative for v1, as Kafka writes them; the wrapper carries the last offset
    and, for v1 CreateTime, the largest inner timestamp.
    """
    if magic == 0 and codec == CODECS["LZ4"]:
        return _v0_lz4_wrapper(records, offset)
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 24)
    for i, (timestamp, key, value) in enumerate(records):
        inner = offset + i if magic == 0 or codec == 0 else i
        builder.append(inner, timestamp=timestamp, key=key, value=value)
    data = bytearray(builder.build())
    if codec != 0:
        struct.pack_into(">q", data, 0, offset + len(records) - 1)
        if magic == 1:
            struct.pack_into(">q", data, 18, max(ts or -1 for ts, _, _ in records))
    if log_append_time is not None:
        data[17] |= 0x08
        struct.pack_into(">q", data, 18, log_append_time)
    struct.pack_into(">I", data, 12, crc32(bytes(data[16:])))
    return bytes(data)


def _v0_lz4_wrapper(records: Sequence[tuple[int | None, bytes | None, bytes | None]], offset: int) -> bytes:
    """A v0 LZ4 wrapper as old Kafka wrote it: an LZ4 frame whose header checksum byte is computed wrongly (0x1A)."""
    inner = legacy_entry(0, records[:1], offset=offset)
    for i, record in enumerate(records[1:], start=1):
        inner += legacy_entry(0, [record], offset=offset + i)
    frame = bytearray(
        lz4.frame.compress(
            inner, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB, store_size=False, content_checksum=False
        )
    )
    assert frame[4:7] == b"\x60\x40\x82", "expected Kafka's standard LZ4 frame descriptor"
    frame[6] = 0x1A
    body = struct.pack(">bbi", 0, CODECS["LZ4"], -1) + struct.pack(">i", len(frame)) + bytes(frame)
    message = struct.pack(">I", crc32(body)) + body
    return struct.pack(">qi", offset + len(records) - 1, len(message)) + message


def control_batch(commit: bool, coordinator_epoch: int, *, base_offset: int, producer_id: int = 7) -> bytes:
    """A transaction marker: a control batch holding one ABORT or COMMIT record."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return v2_batch(
        [(TS, key, value, ())],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        transactional=True,
        control=True,
    )


def control_batch_of_type(type_id: int, *, base_offset: int) -> bytes:
    return v2_batch([(TS, struct.pack(">hh", 0, type_id), b"", ())], base_offset=base_offset, control=True)


def offset_index(base_offset: int, entries: Sequence[tuple[int, int]], zero_slots: int = 0) -> bytes:
    """Offset index bytes for (absolute offset, position) entries, plus preallocated zero slots."""
    body = b"".join(struct.pack(">ii", offset - base_offset, position) for offset, position in entries)
    return body + bytes(8 * zero_slots)


def time_index(base_offset: int, entries: Sequence[tuple[int, int]], zero_slots: int = 0) -> bytes:
    """Time index bytes for (timestamp, absolute offset) entries, plus preallocated zero slots."""
    body = b"".join(struct.pack(">qi", timestamp, offset - base_offset) for timestamp, offset in entries)
    return body + bytes(12 * zero_slots)


def write_segment(directory: Path, base_offset: int, log: bytes, index: bytes = b"", timeindex: bytes = b"") -> Path:
    """Writes ``<base>.log``, ``.index`` and ``.timeindex``; returns the ``.log`` path."""
    name = f"{base_offset:020d}"
    (directory / f"{name}.index").write_bytes(index)
    (directory / f"{name}.timeindex").write_bytes(timeindex)
    path = directory / f"{name}.log"
    path.write_bytes(log)
    return path


@dataclass(frozen=True)
class Dump:
    exit_code: int
    out: list[str]
    err: list[str]


def dump(*args: str, files: Sequence[Path | str] | None = None) -> Dump:
    """Runs ``mq dump-segments`` in-process; ``files`` become one ``--files`` value joined by commas."""
    argv = list(args)
    if files is not None:
        argv += ["--files", ",".join(str(f) for f in files)]
    result = CliRunner().invoke(dump_segments, argv, catch_exceptions=False)
    return Dump(result.exit_code, result.stdout.splitlines(), result.stderr.splitlines())
