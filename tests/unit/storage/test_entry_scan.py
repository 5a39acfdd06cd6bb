"""The storage layer's entry scanner over real files of kafka-python-built batches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_batches import legacy_batch, v2_batch

from mq.errors import CorruptRecordError
from mq.records.batch_header import iter_headers
from mq.storage.entry_scan import scan_entries


def _file(tmp_path: Path, entries: list[bytes], tail: bytes = b"") -> tuple[int, int, list[int]]:
    """The file of ``entries`` then ``tail``: its fd, the entries' size and the entries' positions (a legacy
    message set of several uncompressed messages is several entries)."""
    data = b"".join(entries)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data + tail)
    return os.open(path, os.O_RDONLY), len(data), [h.position for h in iter_headers(data)]


def _scanned(fd: int, size: int, read_chunk: int, start: int = 0) -> list[int]:
    return [chunk_position + h.position for _, chunk_position, h in scan_entries(fd, size, read_chunk, None, start)]


@pytest.mark.parametrize("read_chunk", [64, 100, 1 << 20])
def test_every_entry_of_mixed_formats_is_found_whatever_the_chunk_size(tmp_path: Path, read_chunk: int) -> None:
    entries = [v2_batch(3, 50), legacy_batch(0), v2_batch(1, 300), legacy_batch(1), v2_batch(5, 10)]
    fd, size, positions = _file(tmp_path, entries)
    try:
        assert len(positions) == 9
        assert _scanned(fd, size, read_chunk) == positions
        assert _scanned(fd, size, read_chunk, start=positions[2]) == positions[2:]
    finally:
        os.close(fd)


def test_the_scan_ends_at_size_and_at_a_torn_tail(tmp_path: Path) -> None:
    entries = [v2_batch(3, 50), v2_batch(2, 50), v2_batch(4, 50)]
    fd, _, positions = _file(tmp_path, entries, tail=v2_batch(3, 50)[:70])
    try:
        assert _scanned(fd, positions[2], 1 << 20) == positions[:2]  # bytes past ``size`` are unread
        assert _scanned(fd, os.fstat(fd).st_size, 1 << 20) == positions  # the partial tail ends it
    finally:
        os.close(fd)


def test_a_header_that_cannot_be_parsed_raises_after_the_entries_before_it(tmp_path: Path) -> None:
    bad_magic = bytearray(v2_batch(2, 20))
    bad_magic[16] = 7
    fd, _, positions = _file(tmp_path, [v2_batch(3, 50)], tail=bytes(bad_magic))
    seen = []
    try:
        with pytest.raises(CorruptRecordError):
            for _, chunk_position, header in scan_entries(fd, os.fstat(fd).st_size, 1 << 20):
                seen.append(chunk_position + header.position)
    finally:
        os.close(fd)
    assert seen == positions
