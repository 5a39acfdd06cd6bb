"""A producer's entries rewritten in the codec a topic's ``compression.type`` asks for (Kafka's LogValidator when the
source and target codecs differ).

``producer`` keeps every entry as sent (``target_codec`` is None); ``uncompressed`` stores entries without
compression; ``gzip``, ``snappy``, ``lz4`` and ``zstd`` store them in that codec. An entry already in the target
codec is kept (offsets are then assigned in place), and so is an uncompressed control batch: Kafka compresses
control records only when they were written compressed.

* v2 batch in another codec: its records area is decompressed and compressed again in the target codec, the
  records keeping the producer's encoding byte for byte (keys, values, headers, timestamp and offset deltas), the
  header keeping every field but the codec bits and the CRC (base timestamp, max timestamp, producer id, epoch, base
  sequence, transactional, control and timestamp-type flags, record count). One codec pass each way, no per-record
  work. (Kafka re-encodes each record; the records it writes decode to the same offsets, timestamps, keys, values
  and headers.)
* v0/v1 entries (a message set keeps its magic: mq writes no format conversion): consecutive messages of one magic
  not in the target codec become one compressed wrapper of that magic (inner offsets relative for v1, as Kafka
  writes them), or, for ``uncompressed``, plain messages; each record keeps its key, value and timestamp (a
  LogAppendTime wrapper's timestamp for its inner messages). zstd exists only in format v2: such messages become one
  v2 batch, as Kafka's broker (storing format v2) converts them.

Rewritten v0/v1 entries come back with offsets from 0 and CreateTime, rewritten v2 batches with the producer's
header fields: the caller assigns offsets and stamps LogAppendTime as for any producer's set. A rewritten entry may
exceed ``max.message.bytes``: the caller checks it again (Kafka's RecordTooLargeException, MESSAGE_TOO_LARGE).

Cost, on the thread that appends (the loop, where validation decompresses too): a 1 MB batch of 100 B records takes
about 3 ms to decompress, 4-10 ms to compress with lz4, snappy or zstd, 85 ms with gzip (zlib level 6, Kafka's
default).
"""

from __future__ import annotations

from mq.records.batch_header import CODEC_MASK, V2_HEADER_SIZE, BatchHeader, Codec
from mq.records.compression import compress, decompress
from mq.records.crc import Buffer
from mq.records.default_batch import RecordBatchBuilder, assemble_batch, batch_codec
from mq.records.legacy import LegacyBatchBuilder, iter_legacy_records, wrapper_codec
from mq.records.validation import MAX_DECOMPRESSED

_TARGETS = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}

LegacyRecord = tuple[int, bytes | None, bytes | None]
"""(timestamp, key, value) of a v0/v1 message."""


def target_codec(compression_type: str) -> Codec | None:
    """The codec entries are stored in under ``compression_type`` (a ``compression.type`` value); None for
    ``producer``: each entry keeps its own."""
    return _TARGETS.get(compression_type)


def _kept(header: BatchHeader, target: Codec) -> bool:
    codec = batch_codec(header) if header.magic >= 2 else wrapper_codec(header)
    return codec == target or (codec == Codec.NONE and header.is_control)


def recompress(buf: Buffer, headers: list[BatchHeader], target: Codec) -> bytearray | None:
    """The entries ``headers`` describe in ``buf`` (validated: CRCs and framing) rewritten in ``target`` (a buffer the
    caller patches offsets into), or None when every entry is kept as it is."""
    if all(_kept(h, target) for h in headers):
        return None
    out: list[bytes] = []
    pending: list[LegacyRecord] = []
    pending_magic = -1
    for header in headers:
        if header.magic < 2 and not _kept(header, target):
            if pending and header.magic != pending_magic:
                out.append(_legacy_set(pending_magic, pending, target))
                pending = []
            pending_magic = header.magic
            pending.extend((r.timestamp, r.key, r.value) for r in iter_legacy_records(buf, header))
            continue
        if pending:
            out.append(_legacy_set(pending_magic, pending, target))
            pending = []
        if _kept(header, target):
            out.append(bytes(buf[header.position : header.end_position]))
        else:
            out.append(_batch(buf, header, target))
    if pending:
        out.append(_legacy_set(pending_magic, pending, target))
    return bytearray().join(out)


def _batch(buf: Buffer, header: BatchHeader, target: Codec) -> bytes:
    """The v2 batch ``header`` describes with its records area in ``target``."""
    area = memoryview(buf)[header.position + V2_HEADER_SIZE : header.end_position]
    source = batch_codec(header)
    plain = decompress(source, area, 2, MAX_DECOMPRESSED) if source != Codec.NONE else bytes(area)
    return assemble_batch(
        header.offset,
        header.partition_leader_epoch,
        (header.attributes & ~CODEC_MASK) | target,
        header.last_offset_delta,
        header.first_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
        compress(target, plain, 2) if target != Codec.NONE else plain,
    )


def _legacy_set(magic: int, records: list[LegacyRecord], target: Codec) -> bytes:
    """``records`` of format ``magic`` as one ``target`` wrapper, plain messages, or (zstd) one v2 batch."""
    if target == Codec.ZSTD:
        batch = RecordBatchBuilder(Codec.ZSTD)
        for timestamp, key, value in records:
            batch.append(timestamp if magic >= 1 else -1, key, value)
        return batch.build()
    legacy = LegacyBatchBuilder(magic, target)
    for timestamp, key, value in records:
        legacy.append(timestamp, key, value)
    return legacy.build()
