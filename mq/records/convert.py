"""Conversions between message sets (magic 0 and 1) and record batches (magic 2), for the wire versions that
predate the v2 format: Produce v0-v2 bring message sets, Fetch v0-v3 read them.

``up_convert`` turns a producer's message set into one v2 batch holding the same records (keys, values,
timestamps; magic 0 has none: -1), compressed with the codec of its first compressed wrapper, offsets relative (the
log assigns them). ``down_convert`` turns stored entries of any magic into an uncompressed message set of the magic
the client reads, from a given offset on (a batch read for an offset in its middle starts before it), leaving out
control batches, within a byte limit: whole messages while they fit; when not even the first fits, its first
``max_bytes`` bytes, a partial message, which old clients take as a message larger than their fetch size (as
Kafka's brokers send an overflow message). Both decode record by record: they cost per record, and only the old
versions pay them.
"""

from __future__ import annotations

from mq.errors import CorruptRecordError
from mq.records import iter_records
from mq.records.batch_header import TIMESTAMP_TYPE_BIT, Codec, TimestampType, iter_headers, validate
from mq.records.crc import Buffer
from mq.records.default_batch import RecordBatchBuilder
from mq.records.legacy import encode_message, wrapper_codec


def up_convert(data: Buffer) -> bytes | None:
    """``data``, a producer's message set of magic 0 or 1, as one v2 batch; None when it holds v2 batches only.
    CorruptRecordError when an entry is partial or fails its CRC, or the set mixes v2 batches with messages."""
    headers = list(iter_headers(data))
    end = headers[-1].end_position if headers else 0
    if end != len(data):
        raise CorruptRecordError(f"message set ends with {len(data) - end} bytes of a partial message")
    if all(h.magic >= 2 for h in headers):
        return None
    if any(h.magic >= 2 for h in headers):
        raise CorruptRecordError("a produce request mixes record batches with messages")
    codec = next((c for c in map(wrapper_codec, headers) if c != Codec.NONE), Codec.NONE)
    builder = RecordBatchBuilder(codec)
    for header in headers:
        validate(data, header)
        for record in iter_records(data, header):
            if not record.is_valid:
                raise CorruptRecordError(
                    f"inner message at offset {record.offset} is corrupt (stored crc = {record.crc})"
                )
            builder.append(record.timestamp, record.key, record.value)
    return builder.build()


def down_convert(data: Buffer, magic: int, first_offset: int, max_bytes: int) -> bytes:
    """The records of the complete entries of ``data`` from ``first_offset`` on as uncompressed messages of
    ``magic`` (0 or 1), at most ``max_bytes`` of them (a partial first message when no whole one fits)."""
    out = bytearray()
    for header in iter_headers(data):
        if header.is_control or header.last_offset < first_offset:
            continue
        log_append = magic == 1 and header.timestamp_type == TimestampType.LOG_APPEND_TIME
        attributes = TIMESTAMP_TYPE_BIT if log_append else 0
        for record in iter_records(data, header):
            if record.offset < first_offset:
                continue
            message = encode_message(record.offset, magic, attributes, record.timestamp, record.key, record.value)
            if len(out) + len(message) > max_bytes:
                return bytes(out) if out else message[:max_bytes]
            out += message
    return bytes(out)
