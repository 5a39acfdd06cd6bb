"""The layout of many v2 record batches found at once with numpy: where every record's fields lie, without a
Python object per record. ``mq.records.columnar`` builds Arrow columns on it; mq's consumer cuts keys and values out
of it.

``v2_layout`` takes data batches (buffer, ``BatchHeader``; CRCs checked by the caller, control batches left out),
decompresses each records area once and joins the areas into one buffer. The sequential part, the chain of record
length varints, is predicted for all batches at once and checked against the varints found there
(``record_bounds``; batches whose record sizes vary from record to record are walked in Python, one step per record,
no objects); the fields inside the records are then decoded for all records at once, a numpy operation per field.
Any inconsistency raises ``BulkDecodeError``: the per-record decoder, the reference, then names the exact fault.
Timestamps and offsets are int64 sums (base + delta) that wrap where the per-record decoder's Python ints would not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from mq.records.batch_header import V2_HEADER_SIZE, BatchHeader, Codec, TimestampType
from mq.records.compression import decompress
from mq.records.crc import Buffer
from mq.records.default_batch import batch_codec
from mq.records.varint import MAX_VARLONG_BYTES, decode_varint, record_jumps

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class BulkDecodeError(Exception):
    """A bulk check failed; the per-record decoder names the exact fault."""


@dataclass(frozen=True, slots=True)
class HeaderFields:
    """Every header of every record, record by record: record ``i``'s are ``list_offsets[i]:list_offsets[i + 1]``;
    key and value bytes are ``[start, end)`` of the joined buffer (values null where ``value_null``)."""

    list_offsets: Ints
    key_start: Ints
    key_end: Ints
    value_start: Ints
    value_end: Ints
    value_null: Bools


@dataclass(frozen=True, slots=True)
class V2Layout:
    """Every record of some v2 batches, in order: absolute offset, effective timestamp (the batch's max timestamp
    under LogAppendTime), whether its batch is LogAppendTime, and where its key, value and headers lie in
    ``joined`` (the decompressed records areas one after the other)."""

    joined: bytes
    offset: Ints
    timestamp: Ints
    log_append_time: Bools
    key_start: Ints
    key_end: Ints
    key_null: Bools
    value_start: Ints
    value_end: Ints
    value_null: Bools
    header_counts: Ints
    headers: HeaderFields


def v2_layout(batches: Sequence[tuple[Buffer, BatchHeader]]) -> V2Layout:
    """The layout of the records of v2 data batches; BulkDecodeError (or a KafkaError of decompression) when any
    of them does not decode."""
    areas: list[Buffer] = []
    for buf, header in batches:
        codec = batch_codec(header)
        if header.records_count < 0:
            raise BulkDecodeError("negative record count")
        area = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position]
        areas.append(area if codec == Codec.NONE else decompress(codec, area, 2))
    joined = b"".join([*areas, _PAD])
    data = np.frombuffer(joined, np.uint8)
    sizes = np.fromiter((len(a) for a in areas), np.int64, len(areas))
    area_end = np.cumsum(sizes)
    counts = np.fromiter((h.records_count for _, h in batches), np.int64, len(batches))
    if np.any(counts * _MIN_RECORD_SIZE > sizes):
        raise BulkDecodeError("more records than the records area can hold")
    first = np.zeros(len(batches) + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    start, end = record_bounds(joined, area_end - sizes, area_end, counts, first)

    # Fields of every record at once: attributes, timestampDelta, offsetDelta, key, value, headersCount.
    p = start + 1
    timestamp_delta, p = varints(data, p, end)
    offset_delta, p = varints(data, p, end)
    key_start, key_end, key_null, p = bytes_fields(data, p, end)
    value_start, value_end, value_null, p = bytes_fields(data, p, end)
    header_counts, p = varints(data, p, end)
    if np.any(header_counts < 0) or np.any(header_counts * 2 > end - p):
        raise BulkDecodeError("header count out of range")
    headers = header_fields(data, p, end, header_counts)

    batch_of = np.repeat(np.arange(len(batches)), counts)
    base_offset = np.fromiter((h.offset for _, h in batches), np.int64, len(batches))
    log_append = np.fromiter(
        (h.timestamp_type == TimestampType.LOG_APPEND_TIME for _, h in batches), np.bool_, len(batches)
    )
    first_timestamp = np.fromiter((h.first_timestamp for _, h in batches), np.int64, len(batches))
    max_timestamp = np.fromiter((h.max_timestamp for _, h in batches), np.int64, len(batches))
    timestamp = np.where(log_append[batch_of], max_timestamp[batch_of], first_timestamp[batch_of] + timestamp_delta)
    return V2Layout(
        joined,
        base_offset[batch_of] + offset_delta,
        timestamp,
        log_append[batch_of],
        key_start,
        key_end,
        key_null,
        value_start,
        value_end,
        value_null,
        header_counts,
        headers,
    )


_MIN_RECORD_SIZE = 7
"""Length, attributes, timestampDelta, offsetDelta, keyLength, valueLength and headersCount: a byte each at least."""
_PASSES = 8
"""Rounds of predict-and-check before the batches whose record sizes keep changing are walked in Python."""
_MIN_PROGRESS = 16
"""A batch whose prediction held for fewer records than this in a round is walked in Python at once."""
_PAD = b"\0\0"
"""After the joined records areas, so that two bytes can be read at any position up to their end."""


@cache
def _jump_table() -> npt.NDArray[np.int64]:
    """``record_jumps`` as a numpy array, for gathers."""
    return np.asarray(record_jumps(), np.int64)


def record_bounds(joined: bytes, area_start: Ints, area_end: Ints, counts: Ints, first: Ints) -> tuple[Ints, Ints]:
    """Start (after the length varint) and end of every record, batch-major.

        Record starts form a chain through the length varints, sequential within a batch. They are predicted instead:
        from an anchor (a start known to be right, first the batch's first record) every later record is assumed to be
        as long as the anchor's, and all predictions of all batches are checked at once against the length varints found
        there; each batch's first wrong prediction gives the next anchor. Records of one batch mostly differ only where a
        delta varint grows a byte, so a few rounds settle; batches that do not (sizes varying from record to record) are
    walked in Python. The chain found is
        then checked with the full varint decoder, as every later field is."""
    data = np.frombuffer(joined, np.uint8)
    n = int(first[-1])
    batches = len(counts)
    jumps = _jump_table()
    top = len(data) - len(_PAD)
    batch_of = np.repeat(np.arange(batches), counts)
    index = np.arange(n, dtype=np.int64) - first[:-1][batch_of]
    last = np.zeros(n, np.bool_)
    last[first[1:][counts > 0] - 1] = True
    start = np.zeros(n, np.int64)
    anchor, anchor_index = area_start.copy(), np.zeros(batches, np.int64)
    pending = counts > 0
    for _ in range(_PASSES):
        if not pending.any():
            break
        size = jumps[_pairs(data, np.minimum(anchor, top))]
        rows = np.flatnonzero(pending[batch_of] & (index >= anchor_index[batch_of]))
        of = batch_of[rows]
        start[rows] = anchor[of] + (index[rows] - anchor_index[of]) * size[of]
        jump = jumps[_pairs(data, np.clip(start[rows], 0, top))]
        following = start[rows] + jump
        expected = np.where(last[rows], area_end[of], start[np.minimum(rows + 1, n - 1)])
        wrong = rows[(jump < 1) | (following != expected) | (size[of] < 1)]
        pending[:] = False
        if not len(wrong):
            break
        wrong_batch, first_wrong = np.unique(batch_of[wrong], return_index=True)
        row = wrong[first_wrong]
        pending[wrong_batch] = True
        at = np.searchsorted(rows, row)
        slow = index[row] + 1 - anchor_index[wrong_batch] < _MIN_PROGRESS
        anchor[wrong_batch] = following[at]
        anchor_index[wrong_batch] = index[row] + 1
        stuck = wrong_batch[slow | last[row] | (jump[at] < 1) | (following[at] >= area_end[wrong_batch])]
        if len(stuck):
            pending[stuck] = False
            for batch in stuck.tolist():
                _walk(joined, int(area_start[batch]), int(counts[batch]), start[first[batch] : first[batch + 1]])
    for batch in np.flatnonzero(pending).tolist():
        _walk(joined, int(area_start[batch]), int(counts[batch]), start[first[batch] : first[batch + 1]])
    limit = area_end[batch_of]
    length, body = varints(data, start, limit)
    end = body + length
    expected = np.where(last, limit, start[np.minimum(np.arange(1, n + 1), n - 1)])
    if np.any(length < 1) or np.any(end != expected):
        raise BulkDecodeError("record lengths do not chain through the records area")
    empty = counts == 0
    if np.any(area_end[empty] != area_start[empty]):
        raise BulkDecodeError("bytes after the last record")
    return body, end


def _pairs(data: npt.NDArray[np.uint8], at: Ints) -> Ints:
    """``data[at] | data[at + 1] << 8``: the index into the jump table of a record starting at ``at``."""
    return data[at].astype(np.int64) | data[at + 1].astype(np.int64) << 8


def _walk(joined: bytes, position: int, count: int, out: Ints) -> None:
    """Starts of ``count`` records from ``position`` by following the length varints one by one, into ``out``
    (unchecked: a chain that leaves its area fails the check after)."""
    jumps = record_jumps()
    starts: list[int] = []
    append = starts.append
    try:
        for _ in range(count):
            append(position)
            jump = jumps[joined[position] | joined[position + 1] << 8]
            if jump < 1:
                length, after = decode_varint(joined, position)
                jump = after - position + abs(length)
            position += jump
    except IndexError:
        raise BulkDecodeError("record length runs past the records area") from None
    out[:] = starts


def varints(data: npt.NDArray[np.uint8], pos: Ints, limit: Ints) -> tuple[Ints, Ints]:
    """Zigzag varints at ``pos`` (each ending before ``limit``) and the positions after them."""
    if np.any(pos >= limit):
        raise BulkDecodeError("varint runs past the end of the record")
    byte = data[pos]
    more = np.flatnonzero(byte >= 0x80)
    if not len(more):
        raw = byte.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), pos + 1
    value = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    for shift in range(7, 7 * MAX_VARLONG_BYTES, 7):
        at = after[more]
        if np.any(at >= limit[more]):
            raise BulkDecodeError("varint runs past the end of the record")
        byte = data[at]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = at + 1
        more = more[byte >= 0x80]
        if not len(more):
            signed = value.view(np.int64)
            return ((value >> np.uint64(1)).view(np.int64)) ^ -(signed & 1), after
    raise BulkDecodeError("varint longer than 10 bytes")


def bytes_fields(data: npt.NDArray[np.uint8], pos: Ints, limit: Ints) -> tuple[Ints, Ints, Bools, Ints]:
    """Varint-length-prefixed byte strings at ``pos``: (start, end, is null, position after)."""
    length, start = varints(data, pos, limit)
    if np.any(length < -1):
        raise BulkDecodeError("invalid field length")
    null = length < 0
    stop = start + np.where(null, 0, length)
    if np.any(stop > limit):
        raise BulkDecodeError("field runs past the end of its record")
    return start, stop, null, stop


def header_fields(data: npt.NDArray[np.uint8], pos: Ints, end: Ints, counts: Ints) -> HeaderFields:
    """Walk every record's headers from ``pos`` (one header of every record that has one more per step) and check
    that the record ends right after them."""
    total = int(counts.sum())
    list_offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=list_offsets[1:])
    key_start = np.empty(total, np.int64)
    key_end, value_start, value_end = np.empty_like(key_start), np.empty_like(key_start), np.empty_like(key_start)
    value_null = np.empty(total, np.bool_)
    pos = pos.copy()
    for step in range(int(counts.max()) if len(counts) else 0):
        rows = np.flatnonzero(counts > step)
        at = pos[rows]
        limit = end[rows]
        k_start, k_end, k_null, at = bytes_fields(data, at, limit)
        if np.any(k_null):
            raise BulkDecodeError("null header key")
        v_start, v_end, v_null, at = bytes_fields(data, at, limit)
        pos[rows] = at
        flat = list_offsets[rows] + step
        key_start[flat], key_end[flat] = k_start, k_end
        value_start[flat], value_end[flat], value_null[flat] = v_start, v_end, v_null
    if np.any(pos != end):
        raise BulkDecodeError("record length does not match its fields")
    return HeaderFields(list_offsets, key_start, key_end, value_start, value_end, value_null)
