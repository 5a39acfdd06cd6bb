"""Record batches v2 (magic 2): building, and deep iteration of the records inside.

Header layout: see ``batch_header``. Each record::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
    headersCount varint | [headerKeyLength varint | key utf-8 | headerValueLength varint (-1 = null) | value]*

The records area (from byte 61) is compressed as one stream when the codec is not NONE; recordsCount stays plain.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence

import numpy as np

from mq.errors import CorruptRecordError, UnsupportedCompressionError
from mq.records.batch_header import (
    CODEC_MASK,
    CONTROL_BIT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_CRC_START,
    V2_HEADER_SIZE,
    BatchHeader,
    Codec,
    TimestampType,
)
from mq.records.bulk_encode import encode_records
from mq.records.compression import compress, decompress
from mq.records.crc import Buffer, crc32c
from mq.records.record import (
    ABORT,
    COMMIT,
    EndTxnMarker,
    Record,
    control_key,
    end_txn_marker,
    parse_control_key,
    parse_end_txn_marker,
)
from mq.records.varint import decode_varint, encode_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")
SEQUENCE_MODULUS = 0x80000000


def _bytes_field(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


class RecordBatchBuilder:
    """Accumulates records and builds one complete v2 batch with a correct CRC."""

    def __init__(
        self,
        codec: Codec = Codec.NONE,
        base_offset: int = 0,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
    ) -> None:
        self.codec = Codec(codec)
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self._records: list[bytes] = []
        """Encoded records: one per ``append``, many per ``extend``."""
        self._adopted: Codec | None = None
        """The codec ``_records`` (one records area taken by ``adopt``) is compressed with; None: not compressed."""
        self._count = 0
        self._first_timestamp = -1
        self._max_timestamp = -1
        self._size = 0

    def __len__(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Uncompressed size of the batch built so far."""
        return V2_HEADER_SIZE + self._size

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> None:
        if self._adopted is not None:
            raise ValueError("a builder that adopted a batch takes no more records")
        if not self._count:
            self._first_timestamp = timestamp
        self._max_timestamp = max(self._max_timestamp, timestamp)
        body = b"".join(
            [
                b"\x00",
                encode_varint(timestamp - self._first_timestamp),
                encode_varint(self._count),
                _bytes_field(key),
                _bytes_field(value),
                encode_varint(len(headers)),
                *(_bytes_field(k.encode("utf-8")) + _bytes_field(v) for k, v in headers),
            ]
        )
        record = encode_varint(len(body)) + body
        self._records.append(record)
        self._count += 1
        self._size += len(record)

    def extend(self, timestamps: Sequence[int], keys: Sequence[bytes | None], values: Sequence[bytes | None]) -> None:
        """``append`` for each (timestamp, key, value) without headers, encoded in bulk (``encode_records``): the
        same bytes, without Python work per field."""
        if not values:
            return
        if self._adopted is not None:
            raise ValueError("a builder that adopted a batch takes no more records")
        stamps = np.asarray(timestamps, np.int64)
        if not self._count:
            self._first_timestamp = int(stamps[0])
        self._max_timestamp = max(self._max_timestamp, int(stamps.max()))
        records = encode_records(self._count, stamps - self._first_timestamp, keys, values)
        self._records.append(records)
        self._count += len(values)
        self._size += len(records)

    def adopt(self, buf: Buffer, header: BatchHeader) -> None:
        """Take the records of another v2 batch (``header`` in ``buf``; ``reusable``) as they are encoded: its
        records area, timestamps and count, into this empty builder, which takes nothing after it. The built batch
        has this builder's own header fields (producer, sequence, transaction) around the same records area,
        recompressed only when its codec is not this builder's."""
        if self._count:
            raise ValueError("adopt needs an empty builder")
        if not reusable(header):
            raise ValueError(f"the batch at position {header.position} cannot be taken as it is")
        self._adopted = batch_codec(header)
        area = bytes(memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position])
        self._records.append(area)
        self._count = header.records_count
        self._first_timestamp = header.first_timestamp
        self._max_timestamp = header.max_timestamp
        self._size = len(area)

    def build(self) -> bytes:
        records = b"".join(self._records)
        if self._adopted is None or self._adopted != self.codec:
            if self._adopted not in (None, Codec.NONE):
                records = decompress(self._adopted, records, 2)
            if self.codec != Codec.NONE:
                records = compress(self.codec, records, 2)
        attributes = int(self.codec)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self.is_transactional:
            attributes |= TRANSACTIONAL_BIT
        if self.is_control:
            attributes |= CONTROL_BIT
        count = self._count
        return assemble_batch(
            self.base_offset,
            self.partition_leader_epoch,
            attributes,
            max(count - 1, 0),
            self._first_timestamp,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            count,
            records,
        )


def assemble_batch(
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    first_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    records: bytes,
) -> bytes:
    """A complete v2 batch: the header fields around ``records`` (the encoded, already compressed records area),
    with its CRC-32C."""
    batch = bytearray(
        _HEADER.pack(
            base_offset,
            V2_HEADER_SIZE - 12 + len(records),
            partition_leader_epoch,
            2,
            0,
            attributes,
            last_offset_delta,
            first_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
    )
    batch += records
    _UINT32.pack_into(batch, 17, crc32c(memoryview(batch)[V2_CRC_START:]))
    return bytes(batch)


def build_control_batch(
    kind: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker: a transactional control batch (attributes 0x30: uncompressed, CreateTime) holding one
    ABORT (0) or COMMIT (1) record at offset delta 0, with no base sequence (-1), as Kafka writes it."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    now = int(time.time() * 1000) if timestamp is None else timestamp
    builder.append(now, control_key(kind), end_txn_marker(coordinator_epoch))
    return builder.build()


def read_end_txn_marker(buf: Buffer, header: BatchHeader) -> EndTxnMarker | None:
    """The transaction marker the batch at ``header`` holds; None for a data batch, a control batch of another
    type, or one without records (log compaction empties a marker once its transaction is gone). CorruptRecordError
    for a control batch that is not one well-formed control record (or, for an ABORT or COMMIT record, whose value
    is not an end-transaction marker)."""
    if not header.is_control:
        return None
    records = list(iter_batch_records(buf, header))
    if not records:
        return None
    if len(records) != 1:
        raise CorruptRecordError(
            f"control batch at position {header.position} holds {len(records)} records, expected exactly 1"
        )
    kind = parse_control_key(records[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    coordinator_epoch = parse_end_txn_marker(records[0].value)
    return EndTxnMarker(header.producer_id, header.producer_epoch, coordinator_epoch, kind == COMMIT)


def reusable(header: BatchHeader) -> bool:
    """Whether a batch's records can be taken as they are encoded into a batch of another producer
    (``RecordBatchBuilder.adopt``): a v2 data batch whose timestamps are the records' own (CreateTime) and whose
    last offset delta is its record count - 1 (as a broker requires of a produced batch), so that the new batch's
    sequence numbers cover its records exactly. A compacted batch with gaps is not."""
    return (
        header.magic >= 2
        and not header.is_control
        and header.timestamp_type == TimestampType.CREATE_TIME
        and header.records_count > 0
        and header.last_offset_delta == header.records_count - 1
    )


def batch_codec(header: BatchHeader) -> Codec:
    """The codec of a v2 batch; UnsupportedCompressionError for the undefined ids 5-7."""
    codec_id = header.attributes & CODEC_MASK
    if codec_id > Codec.ZSTD:
        raise UnsupportedCompressionError(
            f"batch at position {header.position} uses unknown compression codec {codec_id}"
        )
    return Codec(codec_id)


def iter_batch_records(buf: Buffer, header: BatchHeader) -> Iterator[Record]:
    """Every record of the v2 batch described by ``header``, decompressing its records area when needed.

    CorruptRecordError when the records area does not hold exactly ``recordsCount`` well-formed records.
    """
    codec = batch_codec(header)
    if header.records_count < 0:
        raise CorruptRecordError(f"batch at position {header.position} has a negative record count")
    area = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position]
    if codec != Codec.NONE:
        area = memoryview(decompress(codec, area, 2))
    area_size = len(area)
    base_offset = header.offset
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    first_timestamp = header.first_timestamp
    base_sequence = header.base_sequence
    position = 0
    for index in range(header.records_count):
        length, position = decode_varint(area, position)
        end = position + length
        if length < 1 or end > area_size:
            raise CorruptRecordError(
                f"record {index} of batch at position {header.position} has length {length}, "
                f"{area_size - position} bytes remain"
            )
        record = area[position:end]
        timestamp_delta, p = decode_varint(record, 1)
        offset_delta, p = decode_varint(record, p)
        key, p = _read_bytes(record, p)
        value, p = _read_bytes(record, p)
        count, p = decode_varint(record, p)
        if count < 0:
            raise CorruptRecordError(f"record {index} of batch at position {header.position} has {count} headers")
        headers = []
        for _ in range(count):
            raw_key, p = _read_bytes(record, p)
            if raw_key is None:
                raise CorruptRecordError(f"record {index} of batch at position {header.position} has a null header key")
            header_value, p = _read_bytes(record, p)
            headers.append((raw_key.decode("utf-8", "replace"), header_value))
        if p != length:
            raise CorruptRecordError(
                f"record {index} of batch at position {header.position} has length {length} "
                f"but its fields take {p} bytes"
            )
        position = end
        yield Record(
            base_offset + offset_delta,
            header.max_timestamp if log_append else first_timestamp + timestamp_delta,
            key,
            value,
            tuple(headers),
            -1 if base_sequence < 0 else (base_sequence + offset_delta) % SEQUENCE_MODULUS,
            None,
            True,
            record[0],
        )
    if position != area_size:
        raise CorruptRecordError(
            f"batch at position {header.position} has {area_size - position} bytes after its "
            f"{header.records_count} records"
        )


def _read_bytes(area: memoryview, position: int) -> tuple[bytes | None, int]:
    """A varint-length-prefixed byte string (length -1 = None) and the position after it."""
    length, position = decode_varint(area, position)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid field length {length} in a record")
        return None, position
    end = position + length
    if end > len(area):
        raise CorruptRecordError("record field runs past the end of its record")
    return bytes(area[position:end]), end
