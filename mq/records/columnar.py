"""Columnar decoding: whole entries straight into Arrow arrays, without a Python object per v2 record.

``decode_entries`` takes entries (each a buffer and the ``BatchHeader`` parsed in it, CRC already checked by the
caller) and returns their rows as ``RecordColumns``: offset int64, timestamp int64 (milliseconds, the effective
timestamp ``iter_records`` gives), timestampType int32, key and value binary (null where the length is -1) and,
when asked, headers ``list<struct<key: string, value: binary>>``. Control batches yield no rows and are not decoded.

v2 batches are decoded in bulk: each records area is decompressed once and the areas are joined into one buffer.
The sequential part, the chain of record length varints, is predicted for all batches at once and checked against
the varints found there (``_record_bounds``; batches whose record sizes vary from record to record are walked in
Python, one step per record, no objects); the fields inside the records are then decoded for all records at once,
a numpy operation per field, and key, value and header bytes are cut out of the joined buffer by Arrow's ``take``
over a binary array whose offsets are the field boundaries (no bytes object per record). Legacy v0/v1 entries
(only old producers write them) go through the per-record decoder, one Record object per message.

Errors and rows match the per-record decoder, which stays the reference: when the bulk pass rejects the entries,
they are decoded one at a time, and an entry the bulk pass rejects alone is decoded by ``iter_records``; if that
fails too, ``EntryDecodeError`` carries its message, the entry's index and the rows of the entries before it.
Timestamps and offsets are int64 sums (base + delta) that wrap where the per-record decoder's Python ints would not.

pyarrow is not a core dependency (the ``spark`` extra brings it) and ``mq.records`` does not import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mq.errors import CorruptRecordError, KafkaError
from mq.records import iter_records
from mq.records.batch_header import V2_HEADER_SIZE, BatchHeader, Codec, TimestampType
from mq.records.compression import decompress
from mq.records.crc import Buffer
from mq.records.default_batch import batch_codec
from mq.records.legacy import iter_legacy_records
from mq.records.record import Record
from mq.records.varint import MAX_VARLONG_BYTES, decode_varint, record_jumps

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """The rows of some entries, in offset order of the entries given. ``headers`` is None unless asked for."""

    offset: pa.Array
    timestamp: pa.Array
    timestamp_type: pa.Array
    key: pa.Array
    value: pa.Array
    headers: pa.Array | None

    def __len__(self) -> int:
        return len(self.offset)


class EntryDecodeError(CorruptRecordError):
    """Entry ``index`` of the call does not decode; ``decoded`` holds the rows of the entries before it."""

    def __init__(self, cause: KafkaError, index: int, decoded: RecordColumns) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.index = index
        self.decoded = decoded


def empty_columns(include_headers: bool) -> RecordColumns:
    return RecordColumns(
        pa.array([], pa.int64()),
        pa.array([], pa.int64()),
        pa.array([], pa.int32()),
        pa.array([], pa.binary()),
        pa.array([], pa.binary()),
        pa.array([], HEADERS_TYPE) if include_headers else None,
    )


def decode_entries(entries: Sequence[tuple[Buffer, BatchHeader]], include_headers: bool = False) -> RecordColumns:
    """The rows of ``entries`` (buffer, header of a whole entry in it); control batches give none.

    EntryDecodeError (a CorruptRecordError) names the first entry that does not decode, with the rows before it.
    """
    try:
        return _decode(entries, include_headers)
    except (KafkaError, _Corrupt):
        pass
    parts: list[RecordColumns] = []
    for index, (buf, header) in enumerate(entries):
        try:
            parts.append(_decode([(buf, header)], include_headers))
        except (KafkaError, _Corrupt):
            try:
                records = list(iter_records(buf, header))
            except KafkaError as exc:
                raise EntryDecodeError(exc, index, concat_columns(parts, include_headers)) from None
            parts.append(_from_records(records, int(header.timestamp_type), include_headers))
    return concat_columns(parts, include_headers)


class _Corrupt(Exception):
    """A bulk check failed; the per-record decoder names the exact fault."""


def _decode(entries: Sequence[tuple[Buffer, BatchHeader]], include_headers: bool) -> RecordColumns:
    parts: list[RecordColumns] = []
    run: list[tuple[Buffer, BatchHeader]] = []
    for buf, header in entries:
        if header.magic >= 2:
            if not header.is_control:
                run.append((buf, header))
            continue
        if run:
            parts.append(_decode_v2(run, include_headers))
            run = []
        records = list(iter_legacy_records(buf, header))
        parts.append(_from_records(records, int(header.timestamp_type), include_headers))
    if run:
        parts.append(_decode_v2(run, include_headers))
    return concat_columns(parts, include_headers)


def concat_columns(parts: Sequence[RecordColumns], include_headers: bool) -> RecordColumns:
    """The rows of ``parts`` one after the other (each with headers exactly when ``include_headers``)."""
    if not parts:
        return empty_columns(include_headers)
    if len(parts) == 1:
        return parts[0]
    return RecordColumns(
        pa.concat_arrays([p.offset for p in parts]),
        pa.concat_arrays([p.timestamp for p in parts]),
        pa.concat_arrays([p.timestamp_type for p in parts]),
        pa.concat_arrays([p.key for p in parts]),
        pa.concat_arrays([p.value for p in parts]),
        pa.concat_arrays([p.headers for p in parts if p.headers is not None]) if include_headers else None,
    )


def _from_records(records: list[Record], timestamp_type: int, include_headers: bool) -> RecordColumns:
    """Columns of records the per-record decoder produced (legacy entries: one object per message anyway)."""
    return RecordColumns(
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp for r in records], pa.int64()),
        pa.array(np.full(len(records), timestamp_type, np.int32)),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADERS_TYPE)
        if include_headers
        else None,
    )


def _decode_v2(batches: Sequence[tuple[Buffer, BatchHeader]], include_headers: bool) -> RecordColumns:
    """The rows of v2 data batches, decoded in bulk; KafkaError or _Corrupt when any of them does not decode."""
    areas: list[Buffer] = []
    for buf, header in batches:
        codec = batch_codec(header)
        if header.records_count < 0:
            raise _Corrupt("negative record count")
        area = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position]
        areas.append(area if codec == Codec.NONE else decompress(codec, area, 2))
    joined = b"".join([*areas, _PAD])
    data = np.frombuffer(joined, np.uint8)
    sizes = np.fromiter((len(a) for a in areas), np.int64, len(areas))
    area_end = np.cumsum(sizes)
    counts = np.fromiter((h.records_count for _, h in batches), np.int64, len(batches))
    if np.any(counts * _MIN_RECORD_SIZE > sizes):
        raise _Corrupt("more records than the records area can hold")
    first = np.zeros(len(batches) + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    start, end = _record_bounds(joined, area_end - sizes, area_end, counts, first)

    # Fields of every record at once: attributes, timestampDelta, offsetDelta, key, value, headersCount.
    p = start + 1
    timestamp_delta, p = _varints(data, p, end)
    offset_delta, p = _varints(data, p, end)
    key_start, key_end, key_null, p = _bytes_fields(data, p, end)
    value_start, value_end, value_null, p = _bytes_fields(data, p, end)
    header_counts, p = _varints(data, p, end)
    if np.any(header_counts < 0) or np.any(header_counts * 2 > end - p):
        raise _Corrupt("header count out of range")
    headers = _headers(data, joined, p, end, header_counts, include_headers)

    batch_of = np.repeat(np.arange(len(batches)), counts)
    base_offset = np.fromiter((h.offset for _, h in batches), np.int64, len(batches))
    log_append = np.fromiter(
        (h.timestamp_type == TimestampType.LOG_APPEND_TIME for _, h in batches), np.bool_, len(batches)
    )
    first_timestamp = np.fromiter((h.first_timestamp for _, h in batches), np.int64, len(batches))
    max_timestamp = np.fromiter((h.max_timestamp for _, h in batches), np.int64, len(batches))
    timestamp = np.where(log_append[batch_of], max_timestamp[batch_of], first_timestamp[batch_of] + timestamp_delta)
    buffer = pa.py_buffer(joined)
    return RecordColumns(
        pa.array(base_offset[batch_of] + offset_delta),
        pa.array(timestamp),
        pa.array(np.where(log_append, 1, 0).astype(np.int32)[batch_of]),
        _binary(buffer, key_start, key_end, key_null),
        _binary(buffer, value_start, value_end, value_null),
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


def _record_bounds(joined: bytes, area_start: Ints, area_end: Ints, counts: Ints, first: Ints) -> tuple[Ints, Ints]:
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
    length, body = _varints(data, start, limit)
    end = body + length
    expected = np.where(last, limit, start[np.minimum(np.arange(1, n + 1), n - 1)])
    if np.any(length < 1) or np.any(end != expected):
        raise _Corrupt("record lengths do not chain through the records area")
    empty = counts == 0
    if np.any(area_end[empty] != area_start[empty]):
        raise _Corrupt("bytes after the last record")
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
        raise _Corrupt("record length runs past the records area") from None
    out[:] = starts


def _varints(data: npt.NDArray[np.uint8], pos: Ints, limit: Ints) -> tuple[Ints, Ints]:
    """Zigzag varints at ``pos`` (each ending before ``limit``) and the positions after them."""
    if np.any(pos >= limit):
        raise _Corrupt("varint runs past the end of the record")
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
            raise _Corrupt("varint runs past the end of the record")
        byte = data[at]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = at + 1
        more = more[byte >= 0x80]
        if not len(more):
            signed = value.view(np.int64)
            return ((value >> np.uint64(1)).view(np.int64)) ^ -(signed & 1), after
    raise _Corrupt("varint longer than 10 bytes")


def _bytes_fields(data: npt.NDArray[np.uint8], pos: Ints, limit: Ints) -> tuple[Ints, Ints, Bools, Ints]:
    """Varint-length-prefixed byte strings at ``pos``: (start, end, is null, position after)."""
    length, start = _varints(data, pos, limit)
    if np.any(length < -1):
        raise _Corrupt("invalid field length")
    null = length < 0
    stop = start + np.where(null, 0, length)
    if np.any(stop > limit):
        raise _Corrupt("field runs past the end of its record")
    return start, stop, null, stop


def _headers(
    data: npt.NDArray[np.uint8], joined: bytes, pos: Ints, end: Ints, counts: Ints, include: bool
) -> pa.Array | None:
    """Walk every record's headers (one header of every record that has one more per step), check that the record
    ends right after them, and build the headers column when asked."""
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
        k_start, k_end, k_null, at = _bytes_fields(data, at, limit)
        if np.any(k_null):
            raise _Corrupt("null header key")
        v_start, v_end, v_null, at = _bytes_fields(data, at, limit)
        pos[rows] = at
        flat = list_offsets[rows] + step
        key_start[flat], key_end[flat] = k_start, k_end
        value_start[flat], value_end[flat], value_null[flat] = v_start, v_end, v_null
    if np.any(pos != end):
        raise _Corrupt("record length does not match its fields")
    if not include:
        return None
    buffer = pa.py_buffer(joined)
    keys = _binary(buffer, key_start, key_end, None).view(pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        keys = pa.array([k.decode("utf-8", "replace") for k in keys.view(pa.binary()).to_pylist()], pa.string())
    values = _binary(buffer, value_start, value_end, value_null)
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_offsets.astype(np.int32)), structs, type=HEADERS_TYPE)


def _binary(buffer: pa.Buffer, start: Ints, stop: Ints, null: Bools | None) -> pa.Array:
    """A binary array of ``buffer[start[i]:stop[i]]`` (null where ``null``); the ranges ascend and do not overlap.

    The ranges and the gaps between them are the elements of one binary array over ``buffer`` (offsets = every
    boundary, no copy); taking the even elements copies the ranges into a compact array in C++."""
    n = len(start)
    if n == 0:
        return pa.array([], pa.binary())
    large = buffer.size >= 1 << 31
    bounds = np.empty(2 * n, np.int64 if large else np.int32)
    bounds[0::2] = start
    bounds[1::2] = stop
    kind = pa.large_binary() if large else pa.binary()
    interleaved = pa.Array.from_buffers(kind, 2 * n - 1, [None, pa.py_buffer(bounds), buffer])
    taken = interleaved.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if large:
        taken = taken.cast(pa.binary())
    if null is None or not null.any():
        return taken
    validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, *taken.buffers()[1:]], offset=taken.offset)
