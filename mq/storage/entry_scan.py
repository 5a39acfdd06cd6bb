"""Sequential reads of the entries (v2 batches or legacy messages) of a ``.log`` file, a chunk at a time: the one
scanner behind segment recovery, the cleaner, dump-segments and the Spark segment reader."""

from __future__ import annotations

import os
from collections.abc import Iterator

from mq.records.batch_header import BatchHeader, parse_header


def scan_entries(
    fd: int, size: int, read_chunk: int, max_message_size: int | None = None, start: int = 0
) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """Every whole entry from ``start`` to ``size`` as (chunk, the chunk's file position, the entry's header parsed
    in the chunk: its ``position`` is relative to the chunk). Reads ``read_chunk`` bytes at a time; an entry larger
    than that is read whole. Ends at a partial entry (the torn tail of an interrupted write) or where the file is
    shorter than ``size``. The CRC is not checked; ``parse_header``'s CorruptRecordError (unknown magic, size field
    out of range or above ``max_message_size``) propagates after the entries before it were yielded."""
    position = start
    want = read_chunk
    while position < size:
        chunk = os.pread(fd, want, position)  # a whole chunk: allocations of one size reuse freed memory
        if len(chunk) > size - position:
            chunk = chunk[: size - position]
        consumed = 0
        while (header := parse_header(chunk, consumed, max_message_size)) is not None:
            yield chunk, position, header
            consumed += header.size
        if consumed:
            position += consumed
            want = read_chunk
            continue
        head = parse_header(chunk, 0, max_message_size, complete=False)
        if head is None or position + head.size > size or head.size <= want:
            return
        want = head.size
