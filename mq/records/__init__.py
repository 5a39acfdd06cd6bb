"""Kafka's record formats: message sets v0/v1 and record batches v2.

``iter_records(buf, header)`` deep-iterates one entry of any magic and codec; ``batch_header`` parses and patches
entries shallowly (never touching records); builders live in ``legacy`` (v0/v1) and ``default_batch`` (v2);
``validation`` checks a producer's entries record by record before they are appended; ``recompress`` rewrites them in
the codec a topic's ``compression.type`` names.
"""

from __future__ import annotations

from collections.abc import Iterator

from mq.records.batch_header import (
    BatchHeader,
    Codec,
    TimestampType,
    compute_crc,
    is_valid,
    iter_headers,
    parse_header,
    validate,
)
from mq.records.compression import compress, decompress
from mq.records.crc import Buffer, crc32, crc32c
from mq.records.default_batch import RecordBatchBuilder, build_control_batch, iter_batch_records, read_end_txn_marker
from mq.records.legacy import LegacyBatchBuilder, assign_offsets_compressed, iter_legacy_records
from mq.records.record import ABORT, COMMIT, EndTxnMarker, Record, parse_control_key, parse_end_txn_marker

__all__ = [
    "ABORT",
    "COMMIT",
    "BatchHeader",
    "Codec",
    "EndTxnMarker",
    "LegacyBatchBuilder",
    "Record",
    "RecordBatchBuilder",
    "TimestampType",
    "assign_offsets_compressed",
    "build_control_batch",
    "compress",
    "compute_crc",
    "crc32",
    "crc32c",
    "decompress",
    "is_valid",
    "iter_headers",
    "iter_records",
    "parse_control_key",
    "parse_end_txn_marker",
    "parse_header",
    "read_end_txn_marker",
    "validate",
]


def iter_records(buf: Buffer, header: BatchHeader) -> Iterator[Record]:
    """The records of the entry at ``header.position`` in ``buf``: decompressed, with absolute offsets and effective
    timestamps. CorruptRecordError (or UnsupportedCompressionError) when the entry does not decode."""
    if header.magic >= 2:
        return iter_batch_records(buf, header)
    return iter_legacy_records(buf, header)
