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

from mq.errors import CorruptRecordError
from mq.records.batch_header import (
    CONTROL_BIT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_CRC_START,
    V2_HEADER_SIZE,
    BatchHeader,
    Codec,
    TimestampType,
)
from mq.records.compression import compress, decompress
from mq.records.crc import Buffer, crc32c
from mq.records.record import Record, control_key, end_txn_marker
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
        self._first_timestamp = -1
        self._max_timestamp = -1
        self._size = 0

    def __len__(self) -> int:
        return len(self._records)

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
        if not self._records:
            self._first_timestamp = timestamp
        self._max_timestamp = max(self._max_timestamp, timestamp)
        body = b"".join(
            [
                b"\x00",
                encode_varint(timestamp - self._first_timestamp),
                encode_varint(len(self._records)),
                _bytes_field(key),
                _bytes_field(value),
                encode_varint(len(headers)),
                *(_bytes_field(k.encode("utf-8")) + _bytes_field(v) for k, v in headers),
            ]
        )
        record = encode_varint(len(body)) + body
        self._records.append(record)
        self._size += len(record)

    def build(self) -> bytes:
        records = b"".join(self._records)
        if self.codec != Codec.NONE:
            records = compress(self.codec, records, 2)
        attributes = int(self.codec)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self.is_transactional:
            attributes |= TRANSACTIONAL_BIT
        if self.is_control:
            attributes |= CONTROL_BIT
        count = len(self._records)
        header = bytearray(
            _HEADER.pack(
                self.base_offset,
                V2_HEADER_SIZE - 12 + len(records),
                self.partition_leader_epoch,
                2,
                0,
                attributes,
                max(count - 1, 0),
                self._first_timestamp,
                self._max_timestamp,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                count,
            )
        )
        header += records
        _UINT32.pack_into(header, 17, crc32c(memoryview(header)[V2_CRC_START:]))
        return bytes(header)


def build_control_batch(
    kind: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
) -> bytes:
    """A transaction marker: a transactional control batch holding one ABORT (0) or COMMIT (1) record."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    now = int(time.time() * 1000) if timestamp is None else timestamp
    builder.append(now, control_key(kind), end_txn_marker(coordinator_epoch))
    return builder.build()


def iter_batch_records(buf: Buffer, header: BatchHeader) -> Iterator[Record]:
    """Every record of the v2 batch described by ``header``, decompressing its records area when needed."""
    start = header.position + V2_HEADER_SIZE
    area: Buffer = memoryview(buf)[start : header.end_position]
    if header.codec != Codec.NONE:
        area = decompress(header.codec, area, 2)
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    position = 0
    for _ in range(header.records_count):
        length, position = decode_varint(area, position)
        end = position + length
        if length < 0 or end > len(area):
            raise CorruptRecordError(f"record of {length} bytes runs past the end of batch at {header.position}")
        attributes = area[position]
        timestamp_delta, p = decode_varint(area, position + 1)
        offset_delta, p = decode_varint(area, p)
        key, p = _read_bytes(area, p)
        value, p = _read_bytes(area, p)
        count, p = decode_varint(area, p)
        headers = []
        for _ in range(count):
            raw_key, p = _read_bytes(area, p)
            if raw_key is None:
                raise CorruptRecordError("record header with a null key")
            header_value, p = _read_bytes(area, p)
            headers.append((raw_key.decode("utf-8", "replace"), header_value))
        if p != end:
            raise CorruptRecordError(f"record length {length} does not match its fields in batch at {header.position}")
        position = end
        sequence = -1 if header.base_sequence < 0 else (header.base_sequence + offset_delta) % SEQUENCE_MODULUS
        yield Record(
            header.offset + offset_delta,
            header.max_timestamp if log_append else header.first_timestamp + timestamp_delta,
            key,
            value,
            tuple(headers),
            sequence,
            None,
            True,
            attributes,
        )
    if position != len(area):
        raise CorruptRecordError(f"batch at {header.position} has {len(area) - position} bytes after its records")


def _read_bytes(area: Buffer, position: int) -> tuple[bytes | None, int]:
    length, position = decode_varint(area, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(area):
        raise CorruptRecordError("record field runs past the end of the batch")
    return bytes(area[position:end]), end
