""".txnindex and .snapshot files: Kafka 2.8's lines for aborted transactions and producer state."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from dump_support import TS, dump

from mq.records.crc import crc32c


def aborted_txn(producer_id: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    return struct.pack(">hqqqq", version, producer_id, first, last, lso)


def snapshot(entries: list[tuple[int, int, int, int, int, int, int, int]], version: int = 1) -> bytes:
    """version, CRC-32C of the rest, then the producer entries."""
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *entry) for entry in entries)
    return struct.pack(">hI", version, crc32c(body)) + body


def test_txn_index_lines(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(aborted_txn(1000, 10, 14, 15) + aborted_txn(1001, 20, 21, 22) + b"\x00" * 7)
    result = dump(files=[path])
    assert result.exit_code == 0
    assert result.out == [
        f"Dumping {path}",
        "version: 0 producerId: 1000 firstOffset: 10 lastOffset: 14 lastStableOffset: 15",
        "version: 0 producerId: 1001 firstOffset: 20 lastOffset: 21 lastStableOffset: 22",
    ]
    json_doc = json.loads(dump("--format", "json", files=[path]).out[1])
    assert json_doc["type"] == "aborted_txn"
    assert json_doc["lastStableOffset"] == 15


def test_txn_index_with_an_unknown_version_fails(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(aborted_txn(1000, 10, 14, 15) + aborted_txn(1, 1, 1, 1, version=3))
    result = dump(files=[path])
    assert result.exit_code == 1
    assert result.out[1] == "version: 0 producerId: 1000 firstOffset: 10 lastOffset: 14 lastStableOffset: 15"
    assert "Unexpected aborted transaction version 3" in result.err[0]


def test_snapshot_lines(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.snapshot"
    path.write_bytes(
        snapshot([(1000, 0, 9, 9, 9, TS, -1, -1), (1001, 2, 4, 30, 2, TS + 1, 5, 28), (7, 1, -1, -1, 0, -1, 0, -1)])
    )
    result = dump(files=[path])
    assert result.exit_code == 0
    assert result.out == [
        f"Dumping {path}",
        "producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: None firstSequence: 0 "
        f"lastSequence: 9 lastOffset: 9 offsetDelta: 9 timestamp: {TS}",
        "producerId: 1001 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: Some(28) firstSequence: 2 "
        f"lastSequence: 4 lastOffset: 30 offsetDelta: 2 timestamp: {TS + 1}",
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: 0 currentTxnFirstOffset: None ",
    ]


def test_snapshot_first_sequence_wraps(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.snapshot"
    path.write_bytes(snapshot([(1, 0, 1, 5, 3, TS, -1, -1)]))
    assert " firstSequence: 2147483646 lastSequence: 1 " in dump(files=[path]).out[1]


def test_corrupt_snapshot_is_reported_and_the_dump_goes_on(tmp_path: Path) -> None:
    damaged = bytearray(snapshot([(1000, 0, 9, 9, 9, TS, -1, -1)]))
    damaged[-1] ^= 1
    path = tmp_path / "00000000000000000000.snapshot"
    path.write_bytes(bytes(damaged))
    stored = struct.unpack_from(">I", damaged, 2)[0]
    computed = crc32c(bytes(damaged[6:]))
    old = tmp_path / "00000000000000000001.snapshot"
    old.write_bytes(snapshot([], version=2))
    result = dump(files=[path, old])
    assert result.exit_code == 0
    assert result.out == [f"Dumping {path}", f"Dumping {old}"]
    assert result.err == [
        f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}",
        "Snapshot contained an unknown file version 2",
    ]
