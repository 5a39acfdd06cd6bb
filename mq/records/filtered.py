"""Keeping a subset of an entry's records: what log compaction writes back.

``keyed_records`` lists the records of one entry (v2 batch, plain v0/v1 message or compressed v0/v1 wrapper) with
the fields compaction decides on: offset, timestamp, key, whether the value is null, and for v2 the record's byte
span inside the (decompressed) records area. ``rebuild`` writes the entry again with only the kept records:

* v2: base offset, last offset delta, first timestamp, attributes (codec, timestamp type, transactional, control),
  producer id/epoch, base sequence and partition leader epoch stay; the kept records' bytes are copied unchanged
  (their offset and timestamp deltas stay relative to the same base offset and first timestamp), recompressed with
  the batch's codec; records count and (CreateTime) max timestamp follow the kept records; a new CRC-32C.
* v2 with no record kept: ``empty_batch`` — the header alone (no compression, count 0, both timestamps the max),
  which keeps a producer's last sequence readable after its records are gone.
* v0/v1 wrapper: a new wrapper of the same magic, codec and timestamp type around the kept inner messages; v1
  inner offsets are relative to the first kept one and the wrapper carries the last kept offset, v0 inner offsets
  stay absolute.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from mq.errors import CorruptRecordError
from mq.records.batch_header import (
    CODEC_MASK,
    TIMESTAMP_TYPE_BIT,
    V2_HEADER_SIZE,
    BatchHeader,
    Codec,
    TimestampType,
)
from mq.records.compression import compress, decompress
from mq.records.crc import Buffer
from mq.records.default_batch import assemble_batch, batch_codec
from mq.records.legacy import encode_message, iter_legacy_records, wrapper_codec
from mq.records.varint import decode_varint


class KeyedRecord(NamedTuple):
    """One record as compaction sees it; ``start``/``end`` span its bytes in the v2 records area (0 for v0/v1)."""

    offset: int
    timestamp: int
    key: bytes | None
    is_tombstone: bool
    start: int
    end: int
    attributes: int
    value: bytes | None
    """v0/v1 only (needed to write the message again); None for v2 records."""


def keyed_records(buf: Buffer, header: BatchHeader) -> tuple[Buffer, list[KeyedRecord]]:
    """The records area (v2: decompressed; v0/v1: ``buf``) and the records of the entry at ``header.position``.
    CorruptRecordError when the entry does not decode."""
    if header.magic < 2:
        records = [
            KeyedRecord(r.offset, r.timestamp, r.key, r.value is None, 0, 0, r.attributes, r.value)
            for r in iter_legacy_records(buf, header)
        ]
        return buf, records
    codec = batch_codec(header)
    area: Buffer = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position]
    if codec != Codec.NONE:
        area = decompress(codec, area, 2)
    size = len(area)
    base_offset = header.offset
    first_timestamp = header.first_timestamp
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    out: list[KeyedRecord] = []
    position = 0
    for _ in range(header.records_count):
        start = position
        length, position = decode_varint(area, position)
        end = position + length
        if length < 1 or end > size:
            raise CorruptRecordError(f"record of batch at offset {base_offset} runs past its records area")
        timestamp_delta, p = decode_varint(area, position + 1)
        offset_delta, p = decode_varint(area, p)
        key_length, p = decode_varint(area, p)
        key = None
        if key_length >= 0:
            key = bytes(area[p : p + key_length])
            p += key_length
        value_length, p = decode_varint(area, p)
        if p > end:
            raise CorruptRecordError(f"record of batch at offset {base_offset} has fields past its length")
        timestamp = header.max_timestamp if log_append else first_timestamp + timestamp_delta
        out.append(KeyedRecord(base_offset + offset_delta, timestamp, key, value_length < 0, start, end, 0, None))
        position = end
    if position != size:
        raise CorruptRecordError(f"batch at offset {base_offset} has bytes after its {header.records_count} records")
    return area, out


def _v2_batch(header: BatchHeader, attributes: int, count: int, first_ts: int, max_ts: int, records: bytes) -> bytes:
    return assemble_batch(
        header.offset,
        header.partition_leader_epoch,
        attributes,
        header.last_offset_delta,
        first_ts,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
        records,
    )


def empty_batch(header: BatchHeader) -> bytes:
    """The v2 batch ``header`` describes with no records (offsets, producer fields and timestamp type kept)."""
    attributes = header.attributes & ~CODEC_MASK
    return _v2_batch(header, attributes, 0, header.max_timestamp, header.max_timestamp, b"")


def rebuild(header: BatchHeader, area: Buffer, kept: Sequence[KeyedRecord]) -> bytes:
    """The entry ``header`` describes holding only ``kept`` (a non-empty, ordered subset of ``keyed_records``)."""
    if header.magic >= 2:
        records = b"".join(area[r.start : r.end] for r in kept)
        codec = batch_codec(header)
        if codec != Codec.NONE:
            records = compress(codec, records, 2)
        log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        max_ts = header.max_timestamp if log_append else max(r.timestamp for r in kept)
        return _v2_batch(header, header.attributes, len(kept), header.first_timestamp, max_ts, records)
    codec = wrapper_codec(header)
    if codec == Codec.NONE:
        raise ValueError("a plain v0/v1 message is kept or dropped whole")
    magic = header.magic
    type_bit = header.attributes & TIMESTAMP_TYPE_BIT if magic == 1 else 0
    first = kept[0].offset
    inner = b"".join(
        encode_message(r.offset - first if magic == 1 else r.offset, magic, r.attributes, r.timestamp, r.key, r.value)
        for r in kept
    )
    if magic == 1 and type_bit:
        wrapper_ts = header.max_timestamp
    else:
        wrapper_ts = max(r.timestamp for r in kept) if magic == 1 else -1
    return encode_message(
        kept[-1].offset, magic, int(codec) | type_bit, wrapper_ts, None, compress(codec, inner, magic)
    )
