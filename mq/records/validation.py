"""Deep validation of a producer's entries: the framing of every record, walked without materialising keys or values.

A v2 batch's records area (decompressed first when the batch is compressed) must hold exactly ``recordsCount``
records, record k laid out as (see ``default_batch``)::

    length varint (> 0, the bytes after it) | attributes int8 | timestampDelta varlong | offsetDelta varint (= k)
    keyLength varint (>= -1) | key | valueLength varint (>= -1) | value | headerCount varint (>= 0)
    [headerKeyLength varint (>= 0) | key | headerValueLength varint (>= -1) | value] * headerCount

each field inside the record's length, the fields taking exactly that length, and the last record ending where the
area does. Varints take at most 5 bytes and hold 32 bits, the timestamp delta at most 10 bytes. A v0/v1 message's key
and value lengths must take exactly the message; a compressed wrapper's value must decompress to whole messages of
the wrapper's magic, uncompressed, each with a valid CRC-32.

Faults are reported as Kafka's LogValidator does: a record that does not parse, or an inner message of a compressed
wrapper that is compressed itself or of another magic: INVALID_RECORD (Kafka's InvalidRecordException); an inner
message whose CRC fails: CORRUPT_MESSAGE; with the rules of ``RecordRules``, records without a key on a compacted
topic (INVALID_RECORD) and timestamps too far from now or a producer's LogAppendTime (INVALID_TIMESTAMP), every
offending record listed. A payload that does not decompress (or expands beyond ``MAX_DECOMPRESSED``) is
INVALID_RECORD too, where Kafka's broker answers UNKNOWN_SERVER_ERROR. Each error about one record carries its index
in the batch (``record_errors``, sent in Produce v8+ responses); faults of the batch as a whole (record count,
trailing bytes, payload) carry none.

Cost: one pass per batch, at most a few numpy calls per field for large batches.

* Uniform batches (from ``UNIFORM_MIN_RECORDS`` records): when every record has the first one's key and value
  lengths, no headers and a 1-byte timestamp delta — what most producers send — the framing bytes of every record
  are known in advance (``_Run``, cached per shape): each is one stepped slice of the batch, compared in C.
* Other batches of fewer than ``VECTOR_MIN_RECORDS`` records are walked in Python (``_walk``).
* Larger ones are walked with numpy: record starts are predicted from the first record (records of one batch mostly
  differ only in the size of their offset delta varint), each prediction checked against the length varints read
  at every predicted start at once and corrected where it first fails; when corrections do not settle the chain
  (records of varied sizes) the starts are found by a Python loop over the length varints alone. The fields of all
  records are then decoded column-wise.

The Python walker is the reference: the first faulty record of a batch is always named by it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mq.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordError
from mq.records.batch_header import (
    CODEC_MASK,
    TIMESTAMP_TYPE_BIT,
    V2_HEADER_SIZE,
    BatchHeader,
    Codec,
    iter_headers,
)
from mq.records.compression import decompress
from mq.records.crc import Buffer, crc32
from mq.records.default_batch import batch_codec
from mq.records.legacy import wrapper_codec
from mq.records.varint import record_jumps

UNIFORM_MIN_RECORDS = 16
"""From this many records a batch is first checked against the uniform layout (a fixed cost of about 15 µs)."""
VECTOR_MIN_RECORDS = 128
"""Below this many records a batch that is not uniform is walked in Python: numpy's fixed cost per call would
exceed the walk."""
MIN_RECORD_SIZE = 7
"""The smallest record: length, attributes, timestamp delta, offset delta, key, value and header count of 1 byte."""
NO_TIMESTAMP = -1
MAX_DECOMPRESSED = 256 * 1024 * 1024
"""A compressed batch or wrapper expanding beyond this is refused (INVALID_RECORD) before it is decompressed
further: producers' batches stay far below (librdkafka's batch.size is 1 MB by default), a decompression bomb
would not."""
_MAX_VECTOR_HEADERS = 16
"""Records with more headers than this send a batch to the Python walker (the vector pass loops once per header)."""
_MAX_CORRECTIONS = 4
_MIN_PROGRESS = 32
"""A correction that settles fewer records than this ends the predictions (record sizes vary too much)."""
_KEY_LENGTH_AT = {0: 18, 1: 26}
"""Where a v0/v1 message's key length lies (after offset, size, crc, magic, attributes and, v1, timestamp)."""

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Bytes = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class RecordRules:
    """The topic's rules every record must satisfy besides its framing."""

    require_keys: bool = False
    """Compacted topic: every record (outside control batches) has a key."""
    now: int = 0
    max_timestamp_difference: int | None = None
    """CreateTime topics with ``message.timestamp.difference.max.ms`` set: each record's timestamp (when it has one)
    lies within that many ms of ``now``."""
    log_append_time: bool = False
    """LogAppendTime topic: the broker stamps the time, a producer's entry must not claim LogAppendTime itself."""


NO_RULES = RecordRules()
"""Framing only."""


class _Fault(Exception):
    """A framing fault inside one record; the walker adds the record's index."""


def validate_records(buf: Buffer, header: BatchHeader, rules: RecordRules = NO_RULES) -> None:
    """Check every record of the entry ``header`` describes in ``buf`` (its CRC already checked); raise
    InvalidRecordError, CorruptRecordError or InvalidTimestampError naming the first faulty record."""
    if header.magic >= 2:
        _validate_batch(buf, header, rules)
    else:
        _validate_legacy(buf, header, rules)


# --- v2 --------------------------------------------------------------------------------------------------------


def _validate_batch(buf: Buffer, header: BatchHeader, rules: RecordRules) -> None:
    count = header.records_count
    area: Buffer = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position]
    if header.attributes & CODEC_MASK:  # compressed (an int test: most produced batches of one record are not)
        try:
            area = decompress(batch_codec(header), area, 2, MAX_DECOMPRESSED)
        except CorruptRecordError as exc:
            raise InvalidRecordError(f"Batch at offset {header.offset}: {exc}") from None
    if count < 0 or count > len(area) // MIN_RECORD_SIZE:
        raise InvalidRecordError(
            f"Batch at offset {header.offset} claims {count} records; its {len(area)} bytes of records hold at most "
            f"{len(area) // MIN_RECORD_SIZE}"
        )
    uniform = _uniform(area, count) if count >= UNIFORM_MIN_RECORDS else None
    timestamp_deltas: Ints | None
    if uniform is not None:
        key_length, timestamp_bytes = uniform
        keys_missing = list(range(count)) if rules.require_keys and key_length == -1 else []
        timestamp_deltas = None
        if rules.max_timestamp_difference is not None:
            raw = np.frombuffer(timestamp_bytes, np.uint8).astype(np.int64)
            timestamp_deltas = (raw >> 1) ^ -(raw & 1)
    elif count < VECTOR_MIN_RECORDS:
        data = bytes(area)
        want_times = rules.max_timestamp_difference is not None
        null_keys: list[int] | None = [] if rules.require_keys else None
        deltas: list[int] | None = [] if want_times else None
        end = _walk(data, 0, 0, count, null_keys, deltas)
        if end != len(data):
            raise _trailing(header, len(data) - end)
        keys_missing = null_keys or []
        timestamp_deltas = np.asarray(deltas, np.int64) if deltas is not None else None
    else:
        found = _walk_vectorised(area, count, header)
        keys_missing = np.flatnonzero(found[0] == -1).tolist() if rules.require_keys else []
        timestamp_deltas = found[1]
    if keys_missing and not header.is_control:
        raise _missing_keys(keys_missing)
    _check_timestamp_type(header, count, rules)
    if rules.max_timestamp_difference is not None and timestamp_deltas is not None:
        if header.attributes & TIMESTAMP_TYPE_BIT:
            timestamps = np.full(count, header.max_timestamp, np.int64)
        else:
            timestamps = header.first_timestamp + timestamp_deltas
        _check_timestamps(timestamps, header.offset, rules.now, rules.max_timestamp_difference)


def _check_timestamp_type(header: BatchHeader, count: int, rules: RecordRules) -> None:
    """A producer's LogAppendTime entry is refused on a LogAppendTime topic, and on a CreateTime topic when it
    carries no timestamp (its records' timestamp is the entry's max timestamp): every record is named."""
    if header.attributes & TIMESTAMP_TYPE_BIT and (rules.log_append_time or header.max_timestamp == NO_TIMESTAMP):
        message = "Invalid timestamp type in message: producer should not set timestamp type to LogAppendTime"
        raise InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp",
            record_errors=tuple(RecordError(i, message) for i in range(count)),
        )


def _trailing(header: BatchHeader, extra: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"Batch at offset {header.offset}: {extra} bytes remain after its {header.records_count} records "
        "(incorrect declared batch size)"
    )


def _missing_keys(indexes: list[int]) -> InvalidRecordError:
    message = "Compacted topic cannot accept message without key"
    return InvalidRecordError(
        f"One or more records have been rejected: {len(indexes)} records without a key. {message}.",
        record_errors=tuple(RecordError(i, message) for i in indexes),
    )


def _check_timestamps(timestamps: Ints, base_offset: int, now: int, limit: int) -> None:
    bad = np.flatnonzero((timestamps != NO_TIMESTAMP) & (np.abs(timestamps - now) > limit))
    if len(bad):
        errors = tuple(
            RecordError(
                int(i),
                f"Timestamp {int(timestamps[i])} of message with offset {base_offset + int(i)} is out of range. "
                f"The timestamp should be within [{now - limit}, {now + limit}]",
            )
            for i in bad
        )
        raise InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", record_errors=errors
        )


def _varint(data: bytes, position: int, max_bytes: int = 5) -> tuple[int, int]:
    """The zigzag varint at ``position`` and the position after it; _Fault when it takes over ``max_bytes`` bytes
    or (``max_bytes`` 5) does not fit 32 bits. IndexError when the data ends inside it."""
    byte = data[position]
    if byte < 0x80:  # most fields of most records
        return (byte >> 1) ^ -(byte & 1), position + 1
    result = 0
    shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift >= 7 * max_bytes:
            raise _Fault(f"varint longer than {max_bytes} bytes")
    if max_bytes == 5 and result >> 32:
        raise _Fault("varint does not fit 32 bits")
    return (result >> 1) ^ -(result & 1), position


def _walk(
    data: bytes, position: int, index: int, stop: int, null_keys: list[int] | None, deltas: list[int] | None
) -> int:
    """Walk records ``index`` .. ``stop - 1`` of a records area from ``position``; return the position after them.
    InvalidRecordError (with the record's index) at the first record that does not parse."""
    varint = _varint
    end = len(data)
    try:
        while index < stop:
            length, position = varint(data, position)
            record_end = position + length
            if length < MIN_RECORD_SIZE - 1 or record_end > end:
                raise _Fault(f"invalid record size {length}, {end - position} bytes remain")
            position += 1  # the attributes
            byte = data[position]  # one-byte varints inline: the fields of a small record
            if byte < 0x80:
                delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                delta, position = varint(data, position, 10)
            byte = data[position]
            if byte < 0x80:
                offset_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                offset_delta, position = varint(data, position)
            if offset_delta != index:
                raise _Fault(f"offset delta {offset_delta} where {index} is expected")
            byte = data[position]
            if byte == 1:  # a null key
                key_length, position = -1, position + 1
            else:
                key_length, position = varint(data, position)
            if key_length < -1:
                raise _Fault(f"invalid key length {key_length}")
            if key_length >= 0:
                position += key_length
            elif null_keys is not None:
                null_keys.append(index)
            value_length, position = varint(data, position)
            if value_length < -1:
                raise _Fault(f"invalid value length {value_length}")
            if value_length > 0:
                position += value_length
            if data[position] == 0:  # no headers
                headers, position = 0, position + 1
            else:
                headers, position = varint(data, position)
            if headers < 0 or headers * 2 > record_end - position:
                raise _Fault(f"invalid number of record headers {headers}")
            for _ in range(headers):
                header_key, position = varint(data, position)
                if header_key < 0:
                    raise _Fault(f"invalid header key length {header_key}")
                position += header_key
                header_value, position = varint(data, position)
                if header_value < -1:
                    raise _Fault(f"invalid header value length {header_value}")
                if header_value > 0:
                    position += header_value
                if position > record_end:
                    break
            if position != record_end:
                raise _Fault(f"record length {length} but its fields take {length + position - record_end} bytes")
            if deltas is not None:
                deltas.append(delta)
            index += 1
    except _Fault as fault:
        raise _invalid(index, str(fault)) from None
    except IndexError:
        raise _invalid(index, "premature end of the records (incorrect declared batch size)") from None
    return position


def _invalid(index: int, reason: str) -> InvalidRecordError:
    message = f"Record {index} of the batch is invalid: {reason}"
    return InvalidRecordError(message, record_errors=(RecordError(index, message),))


def _walk_vectorised(area: Buffer, count: int, header: BatchHeader) -> tuple[Ints, Ints]:
    """The key lengths and timestamp deltas of the ``count`` records of ``area``, every record checked as ``_walk``
    checks it; raises what ``_walk`` raises for the first faulty record."""
    data = np.frombuffer(area, np.uint8)
    starts = _predicted_starts(data, count)
    if starts is None:
        starts = _python_starts(area, count, header)
    fields = _fields(data, starts, count)
    if fields is not None:
        return fields
    raw = bytes(area)  # records with many headers, or a fault: the reference walker decides and words it
    keys: list[int] = []
    deltas: list[int] = []
    end = _walk(raw, 0, 0, count, keys, deltas)
    if end != len(raw):
        raise _trailing(header, len(raw) - end)
    key_lengths = np.zeros(count, np.int64)
    key_lengths[keys] = -1
    return key_lengths, np.asarray(deltas, np.int64)


# A batch whose records all have the first one's key and value lengths, no headers and 1-byte timestamp deltas (what
# most producers send) has records that differ in framing only by their offset delta, whose varint takes 1 byte for
# records 0-63, 2 for 64-8191 and 3 from 8192 on. Within each of those runs every record has the same size S, so each
# framing byte of the run's records is one slice of the batch with step S: CPython copies it in C, and it is compared
# with bytes known in advance (``_Run``, cached per shape and offset delta size) in one memcmp.
_RUNS = ((1, 0, 64), (2, 64, 8192), (3, 8192, 1 << 20))
"""(offset delta varint bytes, first record, end) of each run."""
_MAX_UNIFORM_RECORDS = _RUNS[-1][2]
_RUN_CACHE_SIZE = 12


def _zigzag_bytes(value: int) -> bytes:
    """The zigzag varint of ``value``."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class _Run:
    """The framing of a uniform record whose offset delta varint takes ``delta_size`` bytes."""

    size: int
    """Bytes of the record, its length varint included."""
    constant: tuple[tuple[int, int], ...]
    """(column, byte) of every framing byte that is the same in each record: the length varint, the key and value
    length varints and the header count (0)."""
    timestamp: int
    """Column of the 1-byte timestamp delta (its high bit must be clear)."""
    offset_delta: int
    """First column of the offset delta varint."""


_runs: dict[tuple[int, int, int], _Run] = {}
_offset_delta_columns: dict[int, list[bytes]] = {}


def _run(key_length: int, value_length: int, delta_size: int) -> _Run:
    cached = _runs.get((key_length, value_length, delta_size))
    if cached is not None:
        return cached
    key_varint, value_varint = _zigzag_bytes(key_length), _zigzag_bytes(value_length)
    length = 3 + delta_size + len(key_varint) + max(key_length, 0) + len(value_varint) + max(value_length, 0)
    length_varint = _zigzag_bytes(length)
    key_at = len(length_varint) + 2 + delta_size
    value_at = key_at + len(key_varint) + max(key_length, 0)
    size = len(length_varint) + length
    fields = ((0, length_varint), (key_at, key_varint), (value_at, value_varint), (size - 1, b"\0"))
    constant = tuple((at + i, byte) for at, encoded in fields for i, byte in enumerate(encoded))
    run = _Run(size, constant, len(length_varint) + 1, len(length_varint) + 2)
    if len(_runs) >= _RUN_CACHE_SIZE:
        _runs.pop(next(iter(_runs)))
    _runs[key_length, value_length, delta_size] = run
    return run


def _expected_offset_deltas(delta_size: int, first: int, stop: int) -> list[bytes]:
    """Byte i of the offset delta varints of records ``first`` .. ``stop - 1`` (all ``delta_size`` bytes long), for
    each i; cached per size and grown as larger batches come."""
    run_start = _RUNS[delta_size - 1][1]
    cached = _offset_delta_columns.get(delta_size)
    if cached is None or len(cached[0]) < stop - run_start:
        have = len(cached[0]) if cached is not None else 0
        zigzag = np.arange(run_start, max(stop, run_start + 2 * have), dtype=np.int64) << 1
        cached = _offset_delta_columns[delta_size] = [
            (((zigzag >> (7 * i)) & 0x7F) | (0x80 if i < delta_size - 1 else 0)).astype(np.uint8).tobytes()
            for i in range(delta_size)
        ]
    return [column[first - run_start : stop - run_start] for column in cached]


def _contiguous_base(area: Buffer) -> tuple[bytes | bytearray, int]:
    """The bytes object ``area`` lies in and where it starts there (slices with a step are fast only on bytes and
    bytearray); a copy when it lies in anything else."""
    if isinstance(area, bytes | bytearray):
        return area, 0
    view = memoryview(area)
    base = view.obj
    if isinstance(base, bytes | bytearray) and view.c_contiguous and view.itemsize == 1 and len(view):
        start = np.frombuffer(view, np.uint8).ctypes.data - np.frombuffer(base, np.uint8).ctypes.data
        if 0 <= start <= len(base) - len(view):
            return base, start
    return bytes(view), 0


def _first_shape(base: bytes | bytearray, start: int, end: int) -> tuple[int, int] | None:
    """(key length, value length) of the record at ``start`` when it has no headers and a 1-byte timestamp delta."""
    head = bytes(base[start : min(start + 20, end)])
    try:
        _, position = _varint(head, 0)
        if head[position + 1] >= 0x80:
            return None
        key_length, position = _varint(head, position + 3)
        position += max(key_length, 0)
        if position >= len(head):
            position, head = 0, bytes(base[start + position : min(start + position + 6, end)])
        value_length, _ = _varint(head, position)
    except (_Fault, IndexError):
        return None
    if key_length < -1 or value_length < -1:
        return None
    return key_length, value_length


def _uniform(area: Buffer, count: int) -> tuple[int, bytes] | None:
    """(key length of every record, their timestamp delta bytes) when every record has exactly the framing the
    first one's shape predicts; else None (the batch may still be valid)."""
    base, start = _contiguous_base(area)
    end = start + len(area)
    shape = _first_shape(base, start, end)
    if shape is None or count > _MAX_UNIFORM_RECORDS:
        return None
    runs = [
        (delta_size, _run(*shape, delta_size), first, min(count, stop))
        for delta_size, first, stop in _RUNS
        if first < count
    ]
    if sum(run.size * (stop - first) for _, run, first, stop in runs) != end - start:
        return None
    timestamps = []
    position = start
    for delta_size, run, first, stop in runs:
        records = stop - first
        size, after = run.size, position + run.size * records
        for column, byte in run.constant:
            if base[position + column : after : size] != bytes((byte,)) * records:
                return None
        for i, expected in enumerate(_expected_offset_deltas(delta_size, first, stop)):
            if base[position + run.offset_delta + i : after : size] != expected:
                return None
        timestamp = base[position + run.timestamp : after : size]
        if not timestamp.isascii():
            return None
        timestamps.append(bytes(timestamp))
        position = after
    return shape[0], b"".join(timestamps)


def _sizes(values: Ints) -> Ints:
    """Bytes of the zigzag varints of non-negative ``values``."""
    zigzag = values << 1
    return 1 + (zigzag >= 1 << 7) + (zigzag >= 1 << 14) + (zigzag >= 1 << 21) + (zigzag >= 1 << 28)


def _model(first_start: int, first_index: int, length: int, count: int) -> Ints:
    """Predicted starts of records ``first_index`` .. ``count`` (the last one: the area's end) when record
    ``first_index`` at ``first_start`` has body ``length`` and later ones differ only in their offset delta size."""
    indexes = np.arange(first_index, count, dtype=np.int64)
    lengths = length + _sizes(indexes) - _sizes(np.asarray([first_index], np.int64))[0]
    sizes = _sizes(lengths) + lengths
    starts = np.empty(count - first_index + 1, np.int64)
    starts[0] = first_start
    np.cumsum(sizes, out=starts[1:])
    starts[1:] += first_start
    return starts


def _scalar_length(data: Bytes, position: int) -> int | None:
    try:
        length, _ = _varint(data[position : position + 5].tobytes(), 0)
    except (_Fault, IndexError):
        return None
    return length if length > 0 else None


def _predicted_starts(data: Bytes, count: int) -> Ints | None:
    """The start of every record and, last, the area's end — when predictions settle within a few corrections
    into a chain where each record's length varint leads to the next start; else None."""
    end = len(data)
    length = _scalar_length(data, 0)
    if length is None or _scalar_length(data, int(_model(0, 0, length, 2)[1])) != length:
        return None  # the second record differs in size already: sizes vary, predictions would not settle
    starts = _model(0, 0, length, count)
    settled = 0
    for _ in range(_MAX_CORRECTIONS):
        starts[-1] = end
        lengths, sizes, bad = _varints(data, starts[:-1])
        following = starts[:-1] + sizes + lengths
        wrong = np.flatnonzero(bad | (following != starts[1:]))
        if not len(wrong):
            return starts
        first = int(wrong[0])
        nxt = int(following[first])
        if bad[first] or first + 1 >= count or not 0 < nxt < end or first < settled + _MIN_PROGRESS:
            return None
        settled = first
        length = _scalar_length(data, nxt)
        if length is None:
            return None
        starts[first + 1 :] = _model(nxt, first + 1, length, count)
    return None


def _python_starts(area: Buffer, count: int, header: BatchHeader) -> Ints:
    """Record starts (and the end) following the length varints one by one, unchecked (``_fields`` checks every
    length); a chain that leaves the area is walked by ``_walk`` to name the fault."""
    data = bytes(area)
    jumps = record_jumps()
    starts = [0] * (count + 1)
    position = 0
    try:
        for index in range(count):
            starts[index] = position
            jump = jumps[data[position] | data[position + 1] << 8]
            if jump < 0:
                length, after = _varint(data, position)
                jump = after - position + length
            position += jump
    except (_Fault, IndexError):
        position = -1
    if position != len(data):
        end = _walk(data, 0, 0, count, None, None)
        raise _trailing(header, len(data) - end)
    starts[count] = position
    return np.asarray(starts, np.int64)


def _varints(data: Bytes, positions: Ints, max_bytes: int = 5) -> tuple[Ints, Ints, Bools]:
    """(values, sizes, faulty) of the zigzag varints at ``positions``: faulty where one runs past the data, takes
    more than ``max_bytes`` bytes or (5) does not fit 32 bits."""
    last = len(data) - 1
    clipped = np.minimum(positions, last)
    byte = data[clipped]
    going = byte >= 0x80
    unsigned = byte.astype(np.uint64)
    if not going.any():
        sizes = np.ones(len(positions), np.int64)
    else:
        unsigned &= np.uint64(0x7F)
        sizes = 1 + going.astype(np.int64)
        for shift in range(7, 7 * max_bytes, 7):
            byte = data[np.minimum(clipped + (shift // 7), last)]
            unsigned |= ((byte & 0x7F).astype(np.uint64) << np.uint64(shift)) * going
            going &= byte >= 0x80
            if not going.any():
                break
            sizes += going
    faulty = going | (positions + sizes > last + 1)
    if max_bytes == 5:
        faulty |= unsigned >= np.uint64(1 << 32)
    values = ((unsigned >> np.uint64(1)) ^ (np.uint64(0) - (unsigned & np.uint64(1)))).view(np.int64)
    return values, sizes, faulty


def _fields(data: Bytes, starts: Ints, count: int) -> tuple[Ints, Ints] | None:
    """Key lengths and timestamp deltas of the records at ``starts`` (consecutive, the last entry the end), or None
    when a record is faulty or has more headers than the vector pass walks."""
    ends = starts[1:]
    lengths, sizes, faulty = _varints(data, starts[:-1])
    faulty |= lengths < MIN_RECORD_SIZE - 1
    position = starts[:-1] + sizes + 1  # after the attributes
    deltas, sizes, bad = _varints(data, position, 10)
    faulty |= bad
    position += sizes
    offset_deltas, sizes, bad = _varints(data, position)
    faulty |= bad | (offset_deltas != np.arange(count, dtype=np.int64))
    position += sizes
    key_lengths, sizes, bad = _varints(data, position)
    faulty |= bad | (key_lengths < -1)
    position += sizes + np.maximum(key_lengths, 0)
    value_lengths, sizes, bad = _varints(data, position)
    faulty |= bad | (value_lengths < -1)
    position += sizes + np.maximum(value_lengths, 0)
    headers, sizes, bad = _varints(data, position)
    faulty |= bad | (headers < 0)
    position += sizes
    if headers.any():
        faulty |= headers * 2 > ends - position
        if int(headers.max()) > _MAX_VECTOR_HEADERS:
            return None
        for header in range(int(headers.max())):
            rows = np.flatnonzero((headers > header) & ~faulty)
            at = position[rows]
            lengths, sizes, bad = _varints(data, at)
            bad |= lengths < 0
            at += sizes + np.maximum(lengths, 0)
            lengths, sizes, more_bad = _varints(data, at)
            bad |= more_bad | (lengths < -1)
            position[rows] = at + sizes + np.maximum(lengths, 0)
            faulty[rows] |= bad
    faulty |= position != ends
    if faulty.any():
        return None
    return key_lengths, deltas


# --- v0 / v1 ---------------------------------------------------------------------------------------------------


def _message_fault(buf: Buffer, header: BatchHeader) -> str | None:
    """Why the key and value lengths of the v0/v1 message ``header`` describes do not take exactly the message."""
    position = header.position + _KEY_LENGTH_AT[header.magic]
    end = header.end_position
    for field in ("key", "value"):
        if position + 4 > end:
            return f"its {field} length runs past its end"
        length = int.from_bytes(buf[position : position + 4], "big", signed=True)
        if length < -1:
            return f"invalid {field} length {length}"
        position += 4 + max(length, 0)
    if position != end:
        return f"its size is {header.size} bytes but its fields take {header.size + position - end}"
    return None


def _validate_legacy(buf: Buffer, header: BatchHeader, rules: RecordRules) -> None:
    fault = _message_fault(buf, header)
    if fault is not None:
        raise _invalid(0, f"message at offset {header.offset}: {fault}")
    codec = wrapper_codec(header)
    if codec == Codec.NONE:
        messages: list[tuple[Buffer, BatchHeader]] = [(buf, header)]
    else:
        messages = _inner_messages(buf, header, codec)
    missing = [i for i, (data, inner) in enumerate(messages) if rules.require_keys and _null_key(data, inner)]
    if missing:
        raise _missing_keys(missing)
    if header.magic >= 1:
        _check_timestamp_type(header, len(messages), rules)
    if rules.max_timestamp_difference is not None and header.magic >= 1:
        log_append = bool(header.attributes & TIMESTAMP_TYPE_BIT)
        stamps = [header.max_timestamp if log_append else inner.max_timestamp for _, inner in messages]
        _check_timestamps(np.asarray(stamps, np.int64), header.offset, rules.now, rules.max_timestamp_difference)


def _null_key(buf: Buffer, header: BatchHeader) -> bool:
    position = header.position + _KEY_LENGTH_AT[header.magic]
    return int.from_bytes(buf[position : position + 4], "big", signed=True) < 0


def _inner_messages(buf: Buffer, wrapper: BatchHeader, codec: Codec) -> list[tuple[Buffer, BatchHeader]]:
    """The inner messages of a compressed wrapper, each whole, of the wrapper's magic, uncompressed, with a valid
    CRC and exact framing."""
    value_at = wrapper.position + _KEY_LENGTH_AT[wrapper.magic]
    key_length = int.from_bytes(buf[value_at : value_at + 4], "big", signed=True)
    value_at += 4 + max(key_length, 0)
    value_length = int.from_bytes(buf[value_at : value_at + 4], "big", signed=True)
    if value_length < 0:
        raise _invalid(0, f"compressed message at offset {wrapper.offset} has a null value")
    try:
        inner = decompress(
            codec, memoryview(buf)[value_at + 4 : value_at + 4 + value_length], wrapper.magic, MAX_DECOMPRESSED
        )
    except CorruptRecordError as exc:
        raise InvalidRecordError(f"Compressed message at offset {wrapper.offset}: {exc}") from None
    messages: list[tuple[Buffer, BatchHeader]] = []
    position = 0
    try:
        for index, header in enumerate(iter_headers(inner)):
            messages.append((inner, header))
            position = header.end_position
            if header.magic != wrapper.magic:
                raise _invalid(index, f"inner message magic {header.magic} does not match outer magic {wrapper.magic}")
            if header.attributes & CODEC_MASK:
                raise _invalid(index, "compressed outer message has an inner message with a compression codec")
            fault = _message_fault(inner, header)
            if fault is not None:
                raise _invalid(index, f"inner message: {fault}")
            computed = crc32(memoryview(inner)[header.crc_start : header.end_position])
            if computed != header.crc:
                message = f"Record {index} is corrupt (stored crc = {header.crc}, computed crc = {computed})"
                raise CorruptRecordError(message, record_errors=(RecordError(index, message),))
    except CorruptRecordError as exc:
        if exc.record_errors:
            raise
        raise _invalid(len(messages), f"inner message: {exc}") from None
    if position != len(inner):
        raise _invalid(len(messages), f"{len(inner) - position} bytes of a partial inner message")
    if not messages:
        raise _invalid(0, f"compressed message at offset {wrapper.offset} holds no messages")
    return messages
