"""Kafka's record formats: message sets v0/v1 and record batches v2.

``iter_records(buf, header)`` deep-iterates one entry of any magic; builders live in ``legacy`` and
``default_batch``; shallow headers in ``batch_header``.
"""

from __future__ import annotations

from collections.abc import Iterator

from mq.records.batch_header import BatchHeader
from mq.records.crc import Buffer
from mq.records.default_batch import iter_batch_records
from mq.records.legacy import iter_legacy_records
from mq.records.record import Record

__all__ = ["Record", "iter_records"]


def iter_records(buf: Buffer, header: BatchHeader) -> Iterator[Record]:
    """The records of the entry at ``header.position`` in ``buf``, decompressed, with absolute offsets."""
    if header.magic >= 2:
        return iter_batch_records(buf, header)
    return iter_legacy_records(buf, header)
