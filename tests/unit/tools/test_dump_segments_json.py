"""``--format json``: NDJSON that parses back line by line and carries the same facts as the text lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dump_support import TS, control_batch, dump, legacy_entry, offset_index, time_index, v2_batch, write_segment


def java(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def batch_text(doc: dict[str, Any]) -> str:
    """The text line a JSON batch object stands for."""
    if doc["magic"] >= 2:
        names = ["baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch"]
        names += ["partitionLeaderEpoch", "isTransactional", "isControl"]
        head = " ".join(f"{name}: {java(doc[name])}" for name in names)
    else:
        head = f"offset: {doc['lastOffset']}"
    tail = " ".join(f"{name}: {java(doc[name])}" for name in ["size", "magic", "compresscodec", "crc", "isvalid"])
    return f"{head} position: {doc['position']} {doc['timestampType']}: {doc['maxTimestamp']} {tail}"


def record_text(doc: dict[str, Any]) -> str:
    """The text line a JSON record object stands for."""
    line = (
        f"| offset: {doc['offset']} isValid: {java(doc['isValid'])} crc: {java(doc['crc'])} "
        f"keySize: {doc['keySize']} valueSize: {doc['valueSize']} {doc['timestampType']}: {doc['timestamp']}"
    )
    names = ["baseOffset", "lastOffset", "baseSequence", "lastSequence", "producerEpoch", "partitionLeaderEpoch"]
    names += ["batchSize", "magic", "compressType", "position"]
    line += "".join(f" {name}: {java(doc[name])}" for name in names)
    if doc["magic"] >= 2:
        line += f" sequence: {doc['sequence']} headerKeys: [{','.join(doc['headerKeys'])}]"
    else:
        line += f" crc: {doc['crc']} isvalid: {java(doc['isValid'])}"
    if "endTxnMarker" in doc:
        line += f" endTxnMarker: {doc['endTxnMarker']} coordinatorEpoch: {doc['coordinatorEpoch']}"
    line += "".join(f" {name}: {doc[name]}" for name in ("key", "payload") if name in doc)
    return line


TEXT_OF = {
    "file": lambda d: f"Dumping {d['file']}",
    "log_start": lambda d: f"Starting offset: {d['startingOffset']}",
    "batch": batch_text,
    "record": record_text,
    "index_entry": lambda d: f"offset: {d['offset']} position: {d['position']}",
    "time_index_entry": lambda d: f"timestamp: {d['timestamp']} offset: {d['offset']}",
    "invalid_bytes": lambda d: f"Found {d['count']} invalid bytes at the end of {os.path.basename(d['file'])}",
    "index_empty": lambda d: f"{d['file']} is empty.",
}


def test_json_lines_carry_what_the_text_lines_say(tmp_path: Path) -> None:
    data = v2_batch([(TS, b"k", b"v\xff", [("h", b"1")]), (TS + 1, None, None, ())], producer_id=3, base_sequence=0)
    marker = control_batch(True, 4, base_offset=2, producer_id=3)
    legacy = legacy_entry(1, [(TS, b"a", b"b"), (TS, None, b"c")], offset=5, codec=1)
    log = write_segment(
        tmp_path,
        0,
        data + marker + legacy + b"\x00" * 10,
        index=offset_index(0, [(2, len(data)), (3, len(data))], zero_slots=2),
        timeindex=time_index(0, [(TS + 9, 1), (TS + 5, 4)]),
    )
    empty = write_segment(tmp_path, 9, b"").with_suffix(".index")
    files = [log, log.with_suffix(".index"), log.with_suffix(".timeindex"), empty, tmp_path / "notes.txt"]
    text = dump("--print-data-log", files=files)
    as_json = dump("--print-data-log", "--format", "json", files=files)
    assert text.exit_code == as_json.exit_code == 0

    docs = [json.loads(line) for line in as_json.out]
    assert all(isinstance(doc, dict) and "type" in doc for doc in docs)
    lines = [TEXT_OF[doc["type"]](doc) for doc in docs if doc["type"] in TEXT_OF]
    assert lines == text.out

    findings = [doc for doc in docs if doc["type"] not in TEXT_OF]
    assert [doc["type"] for doc in findings] == [
        "unknown_file",
        "index_mismatch",
        "time_index_mismatch",
        "indexed_offset_not_found",
        "non_consecutive_offsets",
    ]
    assert findings[0] == {"type": "unknown_file", "file": str(tmp_path / "notes.txt")}
    index_abs = os.path.abspath(log.with_suffix(".index"))
    assert findings[1] == {"type": "index_mismatch", "file": index_abs, "indexOffset": 3, "logOffset": 2}
    assert text.err == [
        f"Ignoring unknown file {tmp_path / 'notes.txt'}",
        f"Mismatches in :{index_abs}",
        "  Index offset: 3, log offset: 2",
        f"Found timestamp mismatch in :{os.path.abspath(log.with_suffix('.timeindex'))}",
        f"  Index timestamp: {TS + 9}, log timestamp: {TS + 1}",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 4, found log offset: 6",
        f"Non-consecutive offsets in {os.path.abspath(log)}",
        "  2 is followed by 5",
    ]
    assert as_json.err == []


def test_json_corrupt_entry_and_failure(tmp_path: Path) -> None:
    batch = bytearray(v2_batch([(TS, None, b"hello", ())]))
    batch[-2] ^= 1
    log = write_segment(tmp_path, 0, bytes(batch))
    missing = tmp_path / "00000000000000000001.log"
    result = dump("--format", "json", files=[log, missing])
    assert result.exit_code == 1
    docs = [json.loads(line) for line in result.out]
    assert docs[2]["type"] == "batch"
    assert docs[2]["isvalid"] is False
    assert docs[3] == {"type": "file", "file": str(missing)}
    assert docs[4]["type"] == "error"
    assert docs[5]["type"] == "corrupt_entry"
    assert docs[5]["position"] == 0
    assert docs[5]["storedCrc"] == docs[2]["crc"]
    assert docs[5]["computedCrc"] not in (None, docs[2]["crc"])
    assert result.err == [f"Error: cannot read {missing}: No such file or directory"]
