"""Many v2 records without headers encoded at once: the varints of every record computed with numpy, the bytes
assembled by one ``bytes.join``, no Python object per field.

Each record, as ``RecordBatchBuilder.append`` writes it::

    length varint | attributes 0 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value | headersCount 0

The parts between two keys or values (the tail of one record and the head of the next) are cut from one numpy
buffer, so a record costs a slice or two and its share of the join.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Int64s = npt.NDArray[np.int64]

_MAX_VARINT = 10


def _zigzag(values: Int64s) -> npt.NDArray[np.uint64]:
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _varint_sizes(zigzagged: npt.NDArray[np.uint64]) -> Int64s:
    """Bytes of each value's varint: one pass per byte the largest value needs beyond the first."""
    sizes = np.ones(len(zigzagged), np.int64)
    top = int(zigzagged.max(initial=0))
    for k in range(1, _MAX_VARINT):
        if top < 1 << (7 * k):
            break
        sizes += zigzagged >= np.uint64(1 << (7 * k))
    return sizes


def _put_varints(out: npt.NDArray[np.uint8], at: Int64s, zigzagged: npt.NDArray[np.uint64], sizes: Int64s) -> None:
    """Write each ``zigzagged`` value's varint (``sizes`` bytes) at ``out[at]``."""
    for k in range(int(sizes.max(initial=1))):
        rows = np.nonzero(sizes > k)[0]
        group = (zigzagged[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = np.where(sizes[rows] > k + 1, 0x80, 0).astype(np.uint64)
        out[at[rows] + k] = (group | more).astype(np.uint8)


def field_lengths(fields: Sequence[bytes | None]) -> Int64s:
    """Each field's length, -1 for None."""
    nulls = fields.count(None)
    if nulls == len(fields):
        return np.full(nulls, -1, np.int64)
    if nulls:
        return np.array([-1 if f is None else len(f) for f in fields], np.int64)
    return np.fromiter(map(len, fields), np.int64, len(fields))  # type: ignore[arg-type]


def encode_records(
    first_offset_delta: int,
    timestamp_deltas: Int64s,
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
) -> bytes:
    """The records of ``keys`` and ``values`` (same length, at least one) with offset deltas from
    ``first_offset_delta`` and the given timestamp deltas, byte for byte what ``append`` makes of each."""
    n = len(values)
    key_lengths, value_lengths = field_lengths(keys), field_lengths(values)
    keyless = int(key_lengths.max()) < 0
    zigzagged = [
        _zigzag(timestamp_deltas.astype(np.int64)),
        _zigzag(np.arange(first_offset_delta, first_offset_delta + n, dtype=np.int64)),
        _zigzag(key_lengths),
    ]
    sizes = [_varint_sizes(z) for z in zigzagged]
    value_z = _zigzag(value_lengths)
    value_size = _varint_sizes(value_z)
    # body: attributes, timestamp delta, offset delta, key length, key, value length, value, header count
    body = 1 + sizes[0] + sizes[1] + sizes[2] + np.maximum(key_lengths, 0)
    body += value_size + np.maximum(value_lengths, 0) + 1
    body_z = _zigzag(body)
    body_size = _varint_sizes(body_z)
    # head i: the header count of record i-1 (none for the first), length, attributes, timestamp delta, offset
    # delta, key length, and without keys the value length too
    fields = [(body_z, body_size), *zip(zigzagged, sizes, strict=True)]
    if keyless:
        fields.append((value_z, value_size))
    head_len = sum(size for _, size in fields) + 1 + np.where(np.arange(n) > 0, 1, 0)
    head_end = np.cumsum(head_len)
    head_start = head_end - head_len
    heads = _cut(head_start, head_end, fields, skip_first=True)
    if keyless:
        parts: list[bytes | None] = [None] * (2 * n)
        parts[0::2] = heads
        parts[1::2] = values if None not in values else [v or b"" for v in values]
    else:
        value_end = np.cumsum(value_size)
        value_heads = _cut(value_end - value_size, value_end, [(value_z, value_size)], skip_first=False)
        parts = [None] * (4 * n)
        parts[0::4] = heads
        parts[1::4] = keys if None not in keys else [k or b"" for k in keys]
        parts[2::4] = value_heads
        parts[3::4] = values if None not in values else [v or b"" for v in values]
    return b"".join(parts) + b"\x00"  # type: ignore[arg-type]


def _cut(
    start: Int64s, end: Int64s, fields: list[tuple[npt.NDArray[np.uint64], Int64s]], skip_first: bool
) -> list[bytes]:
    """One bytes object per record: ``fields``' varints one after the other in ``[start, end)`` of a zeroed buffer,
    after one zero byte (the previous record's header count) for every record but the first when ``skip_first``,
    and a zero (attributes) after the first field when there are several."""
    buffer = np.zeros(int(end[-1]), np.uint8)
    at = start + (np.where(np.arange(len(start)) > 0, 1, 0) if skip_first else 0)
    for index, (zigzagged, size) in enumerate(fields):
        _put_varints(buffer, at, zigzagged, size)
        at = at + size + (1 if index == 0 and len(fields) > 1 else 0)
    data = buffer.tobytes()
    return [data[a:b] for a, b in zip(start.tolist(), end.tolist(), strict=True)]
