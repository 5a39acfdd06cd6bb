"""Columnar decoding: whole entries straight into Arrow arrays, without a Python object per v2 record.

``decode_entries`` takes entries (each a buffer and the ``BatchHeader`` parsed in it, CRC already checked by the
caller) and returns their rows as ``RecordColumns``: offset int64, timestamp int64 (milliseconds, the effective
timestamp ``iter_records`` gives), timestampType int32, key and value binary (null where the length is -1) and,
when asked, headers ``list<struct<key: string, value: binary>>``. Control batches yield no rows and are not decoded.

v2 batches are laid out in bulk by ``mq.records.bulk_decode`` (numpy, no Python object per record); key, value and
header bytes are then cut out of the joined records areas by Arrow's ``take`` over a binary array whose offsets are
the field boundaries (no bytes object per record). Legacy v0/v1 entries (only old producers write them) go through
the per-record decoder, one Record object per message.

Errors and rows match the per-record decoder, which stays the reference: when the bulk pass rejects the entries,
they are decoded one at a time, and an entry the bulk pass rejects alone is decoded by ``iter_records``; if that
fails too, ``EntryDecodeError`` carries its message, the entry's index and the rows of the entries before it.

pyarrow is not a core dependency (the ``spark`` extra brings it) and ``mq.records`` does not import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mq.errors import CorruptRecordError, KafkaError
from mq.records import iter_records
from mq.records.batch_header import BatchHeader
from mq.records.bulk_decode import BulkDecodeError, HeaderFields, v2_layout
from mq.records.crc import Buffer
from mq.records.legacy import iter_legacy_records
from mq.records.record import Record

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
    except (KafkaError, BulkDecodeError):
        pass
    parts: list[RecordColumns] = []
    for index, (buf, header) in enumerate(entries):
        try:
            parts.append(_decode([(buf, header)], include_headers))
        except (KafkaError, BulkDecodeError):
            try:
                records = list(iter_records(buf, header))
            except KafkaError as exc:
                raise EntryDecodeError(exc, index, concat_columns(parts, include_headers)) from None
            parts.append(_from_records(records, int(header.timestamp_type), include_headers))
    return concat_columns(parts, include_headers)


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
    """The rows of v2 data batches, decoded in bulk (``v2_layout``); KafkaError or BulkDecodeError when any of them
    does not decode."""
    layout = v2_layout(batches)
    buffer = pa.py_buffer(layout.joined)
    return RecordColumns(
        pa.array(layout.offset),
        pa.array(layout.timestamp),
        pa.array(np.where(layout.log_append_time, 1, 0).astype(np.int32)),
        _binary(buffer, layout.key_start, layout.key_end, layout.key_null),
        _binary(buffer, layout.value_start, layout.value_end, layout.value_null),
        _headers(buffer, layout.headers) if include_headers else None,
    )


def _headers(buffer: pa.Buffer, fields: HeaderFields) -> pa.Array:
    """The headers column: a list of (key string, value binary) structs per record."""
    keys = _binary(buffer, fields.key_start, fields.key_end, None).view(pa.string())
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        keys = pa.array([k.decode("utf-8", "replace") for k in keys.view(pa.binary()).to_pylist()], pa.string())
    values = _binary(buffer, fields.value_start, fields.value_end, fields.value_null)
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(fields.list_offsets.astype(np.int32)), structs, type=HEADERS_TYPE)


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
