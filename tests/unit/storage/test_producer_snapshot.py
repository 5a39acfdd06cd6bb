"""Producer state snapshots in Kafka's format: version 1, CRC-32C over the entries, 46-byte entries."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record._crc32c import crc as independent_crc32c

from mq.storage.file_names import snapshot_file_name
from mq.storage.producer_snapshot import (
    CorruptSnapshotError,
    ProducerSnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_offsets,
    read_snapshot,
    write_snapshot,
)

TS = 1_700_000_000_000
ENTRIES = [
    ProducerSnapshotEntry(1000, 0, 9, 9, 9, TS, -1, -1),
    ProducerSnapshotEntry(1001, 2, 4, 30, 2, TS + 1, 5, 28),
    ProducerSnapshotEntry(7, 1, coordinator_epoch=0),  # known by its epoch only
]


def spec_snapshot(entries: list[tuple[int, ...]]) -> bytes:
    """Built from the documented layout, with kafka-python's CRC-32C."""
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *entry) for entry in entries)
    return struct.pack(">hI", 1, independent_crc32c(body)) + body


def test_bytes_match_the_layout() -> None:
    data = encode_snapshot(ENTRIES)
    assert data == spec_snapshot(
        [(1000, 0, 9, 9, 9, TS, -1, -1), (1001, 2, 4, 30, 2, TS + 1, 5, 28), (7, 1, -1, -1, 0, -1, 0, -1)]
    )
    assert len(data) == 10 + 3 * 46
    assert encode_snapshot([]) == bytes.fromhex("0001") + struct.pack(">I", independent_crc32c(b"\0\0\0\0")) + b"\0" * 4
    assert decode_snapshot(data) == ENTRIES


def test_first_sequence_and_batch() -> None:
    assert ENTRIES[1].first_sequence == 2 and ENTRIES[1].has_batch
    assert not ENTRIES[2].has_batch
    wrapped = ProducerSnapshotEntry(5, 0, last_sequence=1, last_offset=50, offset_delta=3)
    assert wrapped.first_sequence == 2**31 - 2


def test_write_read_and_list(tmp_path: Path) -> None:
    path = snapshot_file_name(tmp_path, 42)
    assert path.name == "00000000000000000042.snapshot"
    write_snapshot(path, ENTRIES)
    write_snapshot(snapshot_file_name(tmp_path, 7), [])
    (tmp_path / "00000000000000000042.log").touch()
    (tmp_path / "notes.snapshot").touch()
    assert read_snapshot(path) == ENTRIES
    assert read_snapshot(snapshot_file_name(tmp_path, 7)) == []
    assert list_snapshot_offsets(tmp_path) == [7, 42]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: b"\x00\x02" + data[2:], "unknown file version 2"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "CRC is no longer valid"),
        (lambda data: data[:-3], "CRC is no longer valid"),  # a torn write
        (lambda data: data[:5], "shorter than the header"),
    ],
)
def test_damaged_snapshots_are_corrupt(tmp_path: Path, damage: Callable[[bytes], bytes], message: str) -> None:
    path = snapshot_file_name(tmp_path, 1)
    path.write_bytes(damage(encode_snapshot(ENTRIES)))
    with pytest.raises(CorruptSnapshotError, match=message):
        read_snapshot(path)


def test_a_count_that_does_not_fill_the_file_is_corrupt() -> None:
    body = struct.pack(">i", 2) + struct.pack(">qhiqiqiq", 1, 0, 0, 0, 0, 0, 0, -1)
    data = struct.pack(">hI", 1, independent_crc32c(body)) + body
    with pytest.raises(CorruptSnapshotError, match="schema validation"):
        decode_snapshot(data)


@given(st.binary(max_size=120))
def test_any_bytes_decode_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptSnapshotError):
        decode_snapshot(data)


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**15), 2**15 - 1)), max_size=5))
def test_round_trip(pairs: list[tuple[int, int]]) -> None:
    entries = [ProducerSnapshotEntry(pid, epoch, 5, 9, 1, 7, 3, pid % 100) for pid, epoch in pairs]
    assert decode_snapshot(encode_snapshot(entries)) == entries
