"""``mq dump-segments`` on .log files: Kafka 2.8's batch and record lines for every format and codec, and damage."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from dump_support import CODECS, TS, control_batch, control_batch_of_type, dump, legacy_entry, v2_batch, write_segment
from vectors import V0_HELLO, V1_HELLO, V2_HELLO

HELLO_V0, HELLO_V1, HELLO_V2 = V0_HELLO, V1_HELLO, V2_HELLO

V2_BATCH_LINE = (
    "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1500000000000 "
    "size: 73 magic: 2 compresscodec: NONE crc: 2417795805 isvalid: true"
)
V2_RECORD_LINE = (
    "| offset: 0 isValid: true crc: null keySize: -1 valueSize: 5 CreateTime: 1500000000000 baseOffset: 0 "
    "lastOffset: 0 baseSequence: -1 lastSequence: -1 producerEpoch: -1 partitionLeaderEpoch: 0 batchSize: 73 "
    "magic: 2 compressType: NONE position: 0 sequence: -1 headerKeys: []"
)


def crc_of(entry: bytes) -> int:
    """The stored checksum of a v2 batch or v0/v1 message."""
    return int(struct.unpack_from(">I", entry, 17 if entry[16] == 2 else 12)[0])


def test_reference_v2_batch_matches_kafka_python() -> None:
    assert v2_batch([(TS, None, b"hello", ())]) == HELLO_V2


def test_v2_batch_shallow(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, HELLO_V2)
    result = dump(files=[log])
    assert result.exit_code == 0
    assert result.out == [f"Dumping {log}", "Starting offset: 0", V2_BATCH_LINE]
    assert result.err == []


def test_v2_record_lines_deep_and_with_data(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, HELLO_V2)
    assert dump("--deep-iteration", files=[log]).out[2:] == [V2_BATCH_LINE, V2_RECORD_LINE]
    assert dump("--print-data-log", files=[log]).out[2:] == [V2_BATCH_LINE, V2_RECORD_LINE + " payload: hello"]
    assert dump("--print-data-log", "--deep-iteration", files=[log]).out[3] == V2_RECORD_LINE + " payload: hello"


def test_v1_message_reference_lines(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, HELLO_V1)
    result = dump("--print-data-log", files=[log])
    assert result.out[2:] == [
        "offset: 0 position: 0 CreateTime: 1500000000000 size: 39 magic: 1 compresscodec: NONE crc: 3390604020 "
        "isvalid: true",
        "| offset: 0 isValid: true crc: 3390604020 keySize: -1 valueSize: 5 CreateTime: 1500000000000 baseOffset: 0 "
        "lastOffset: 0 baseSequence: -1 lastSequence: -1 producerEpoch: -1 partitionLeaderEpoch: -1 batchSize: 39 "
        "magic: 1 compressType: NONE position: 0 crc: 3390604020 isvalid: true payload: hello",
    ]


def test_v0_message_reference_lines(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, HELLO_V0)
    result = dump("--deep-iteration", files=[log])
    assert result.out[2:] == [
        "offset: 0 position: 0 NoTimestampType: -1 size: 31 magic: 0 compresscodec: NONE crc: 2275900082 isvalid: true",
        "| offset: 0 isValid: true crc: 2275900082 keySize: -1 valueSize: 5 NoTimestampType: -1 baseOffset: 0 "
        "lastOffset: 0 baseSequence: -1 lastSequence: -1 producerEpoch: -1 partitionLeaderEpoch: -1 batchSize: 31 "
        "magic: 0 compressType: NONE position: 0 crc: 2275900082 isvalid: true",
    ]


def test_legacy_entries_match_the_reference_bytes() -> None:
    assert legacy_entry(1, [(TS, None, b"hello")]) == HELLO_V1
    assert legacy_entry(0, [(None, None, b"hello")]) == HELLO_V0


@pytest.mark.parametrize("codec", list(CODECS))
def test_v2_every_codec_deep(tmp_path: Path, codec: str) -> None:
    records = [(TS + i, f"k{i}".encode(), f"value-{i}".encode() * 20, ()) for i in range(3)]
    batch = v2_batch(records, base_offset=100, codec=CODECS[codec], leader_epoch=3)
    log = write_segment(tmp_path, 100, batch)
    result = dump("--print-data-log", files=[log])
    assert result.exit_code == 0, result.err
    assert result.out[1:3] == [
        "Starting offset: 100",
        "baseOffset: 100 lastOffset: 102 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        f"partitionLeaderEpoch: 3 isTransactional: false isControl: false position: 0 CreateTime: {TS + 2} "
        f"size: {len(batch)} magic: 2 compresscodec: {codec} crc: {crc_of(batch)} isvalid: true",
    ]
    assert result.out[3:] == [
        f"| offset: {100 + i} isValid: true crc: null keySize: 2 valueSize: {len(records[i][2] or b'')} "
        f"CreateTime: {TS + i} baseOffset: 100 lastOffset: 102 baseSequence: -1 lastSequence: -1 producerEpoch: -1 "
        f"partitionLeaderEpoch: 3 batchSize: {len(batch)} magic: 2 compressType: {codec} position: 0 sequence: -1 "
        f"headerKeys: [] key: k{i} payload: {f'value-{i}' * 20}"
        for i in range(3)
    ]
    assert result.err == []


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["GZIP", "SNAPPY", "LZ4"])
def test_legacy_compressed_wrapper(tmp_path: Path, magic: int, codec: str) -> None:
    timestamp = None if magic == 0 else TS
    records = [(timestamp, b"key", b"v%d" % i) for i in range(3)]
    plain = legacy_entry(magic, [(timestamp, None, b"first")], offset=9)
    wrapper = legacy_entry(magic, records, offset=10, codec=CODECS[codec])
    log = write_segment(tmp_path, 9, plain + wrapper)
    result = dump("--print-data-log", files=[log])
    ts_field = "NoTimestampType: -1" if magic == 0 else f"CreateTime: {TS}"
    assert result.exit_code == 0, result.err
    assert result.out[4] == (
        f"offset: 12 position: {len(plain)} {ts_field} size: {len(wrapper)} magic: {magic} compresscodec: {codec} "
        f"crc: {crc_of(wrapper)} isvalid: true"
    )
    inner = result.out[5:]
    assert [line.split(" isValid:")[0] for line in inner] == ["| offset: 10", "| offset: 11", "| offset: 12"]
    for i, line in enumerate(inner):
        assert f" {ts_field} baseOffset: 10 lastOffset: 12 " in line
        assert f" batchSize: {len(wrapper)} magic: {magic} compressType: {codec} position: {len(plain)} crc: " in line
        assert line.endswith(f"isvalid: true key: key payload: v{i}")
    assert result.err == []


def test_v1_log_append_time_wrapper_gives_its_timestamp_to_every_record(tmp_path: Path) -> None:
    wrapper = legacy_entry(1, [(TS + i, None, b"x") for i in range(2)], codec=1, log_append_time=TS + 999)
    log = write_segment(tmp_path, 0, wrapper)
    result = dump("--deep-iteration", files=[log])
    assert f" LogAppendTime: {TS + 999} " in result.out[2]
    assert [f" LogAppendTime: {TS + 999} " in line for line in result.out[3:]] == [True, True]


def test_v2_log_append_time(tmp_path: Path) -> None:
    batch = v2_batch([(TS, None, b"a", ()), (TS + 5, None, b"b", ())], log_append_time=TS + 777)
    log = write_segment(tmp_path, 0, batch)
    out = dump("--deep-iteration", files=[log]).out
    assert f" position: 0 LogAppendTime: {TS + 777} size: " in out[2]
    assert all(f" LogAppendTime: {TS + 777} baseOffset: 0 " in line for line in out[3:])


def test_headers_sequences_and_producer_fields(tmp_path: Path) -> None:
    records = [(TS, b"k", b"v", [("trace", b"1"), ("null-header", None)]), (TS, None, None, [("only", b"x")])]
    batch = v2_batch(records, base_offset=5, producer_id=1000, producer_epoch=2, base_sequence=40, transactional=True)
    log = write_segment(tmp_path, 5, batch)
    out = dump("--print-data-log", files=[log]).out
    assert out[2].startswith(
        "baseOffset: 5 lastOffset: 6 count: 2 baseSequence: 40 lastSequence: 41 producerId: 1000 producerEpoch: 2 "
        "partitionLeaderEpoch: 0 isTransactional: true isControl: false position: 0 "
    )
    assert out[3].endswith(
        "baseOffset: 5 lastOffset: 6 baseSequence: 40 lastSequence: 41 producerEpoch: 2 partitionLeaderEpoch: 0 "
        f"batchSize: {len(batch)} magic: 2 compressType: NONE position: 0 sequence: 40 headerKeys: [trace,null-header] "
        "key: k payload: v"
    )
    assert out[4].startswith("| offset: 6 isValid: true crc: null keySize: -1 valueSize: -1 ")
    assert out[4].endswith(" sequence: 41 headerKeys: [only]")


def test_control_batches(tmp_path: Path) -> None:
    data = v2_batch([(TS, None, b"in-txn", ())], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    commit = control_batch(True, 5, base_offset=1)
    abort = control_batch(False, 6, base_offset=2)
    leader_change = control_batch_of_type(3, base_offset=3)
    unknown = control_batch_of_type(9, base_offset=4)
    log = write_segment(tmp_path, 0, data + commit + abort + leader_change + unknown)
    out = dump("--print-data-log", files=[log]).out
    assert " isTransactional: true isControl: true position: " in out[4]
    records = [line for line in out if line.startswith("| ")]
    assert records[0].endswith("headerKeys: [] payload: in-txn")
    assert records[1].endswith(" sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert records[2].endswith(" headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 6")
    assert records[3].endswith(" headerKeys: [] controlType: LEADER_CHANGE(3)")
    assert records[4].endswith(" headerKeys: [] controlType: UNKNOWN(9)")
    assert f"batchSize: {len(commit)} magic: 2 compressType: NONE position: {len(data)} " in records[1]


def test_starting_offset_positions_and_offsets_across_batches(tmp_path: Path) -> None:
    first = v2_batch([(TS, None, b"a", ())] * 2, base_offset=42)
    second = v2_batch([(TS, None, b"b", ())], base_offset=44)
    log = write_segment(tmp_path, 42, first + second)
    out = dump(files=[log]).out
    assert out[1] == "Starting offset: 42"
    assert out[2].startswith("baseOffset: 42 lastOffset: 43 count: 2 ")
    assert out[3].startswith("baseOffset: 44 lastOffset: 44 count: 1 ")
    assert f" position: {len(first)} " in out[3]


def test_non_consecutive_offsets_reported_newest_first_in_deep_mode_only(tmp_path: Path) -> None:
    compacted = v2_batch([(TS, b"k", b"v", ())] * 3, offset_deltas=[0, 2, 5])
    after = v2_batch([(TS, b"k", b"v", ())], base_offset=9)
    log = write_segment(tmp_path, 0, compacted + after)
    deep = dump("--deep-iteration", files=[log])
    assert deep.exit_code == 0
    assert deep.err == [
        f"Non-consecutive offsets in {os.path.abspath(log)}",
        "  5 is followed by 9",
        "  2 is followed by 5",
        "  0 is followed by 2",
    ]
    assert dump(files=[log]).err == []


def test_corrupt_entry_in_the_middle_is_reported_and_the_rest_dumped(tmp_path: Path) -> None:
    batches = [v2_batch([(TS, None, b"value-%d" % i, ())], base_offset=i) for i in range(3)]
    damaged = bytearray(batches[1])
    damaged[-3] ^= 0xFF
    log = write_segment(tmp_path, 0, batches[0] + bytes(damaged) + batches[2])
    result = dump("--print-data-log", files=[log])
    assert result.exit_code == 0
    stored = crc_of(batches[1])
    computed = crc_of(v2_batch([(TS, None, bytes(damaged[-8:-1]), ())], base_offset=1))
    position = len(batches[0])
    assert result.out[4] == (
        "baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        f"partitionLeaderEpoch: 0 isTransactional: false isControl: false position: {position} "
        f"CreateTime: 1500000000000 size: {len(damaged)} magic: 2 compresscodec: NONE crc: {stored} isvalid: false"
    )
    assert result.out[6].startswith("baseOffset: 2 lastOffset: 2 ")
    assert result.out[7].endswith("payload: value-2")
    assert result.err == [
        f"Corrupt entries in {os.path.abspath(log)}",
        f"  position: {position} offset: 1 stored crc: {stored} computed crc: {computed}",
    ]


def test_corrupt_legacy_message_is_reported(tmp_path: Path) -> None:
    damaged = bytearray(HELLO_V1)
    damaged[-1] = ord("X")
    log = write_segment(tmp_path, 0, HELLO_V0 + bytes(damaged))
    result = dump("--deep-iteration", files=[log])
    assert result.out[4].endswith(" magic: 1 compresscodec: NONE crc: 3390604020 isvalid: false")
    assert result.out[5].endswith(" position: 31 crc: 3390604020 isvalid: false")
    computed = crc_of(legacy_entry(1, [(TS, None, b"hellX")]))
    assert f"  position: 31 offset: 0 stored crc: 3390604020 computed crc: {computed}" in result.err


def test_unreadable_magic_with_a_sane_size_is_skipped(tmp_path: Path) -> None:
    bad = bytearray(v2_batch([(TS, None, b"x", ())], base_offset=1))
    bad[16] = 7
    after = v2_batch([(TS, None, b"y", ())], base_offset=2)
    log = write_segment(tmp_path, 0, HELLO_V2 + bytes(bad) + after)
    result = dump(files=[log])
    assert result.exit_code == 0
    assert [line.split(" lastOffset")[0] for line in result.out[2:]] == ["baseOffset: 0", "baseOffset: 2"]
    assert f" position: {73 + len(bad)} " in result.out[3]
    assert result.err[1] == f"  position: 73 invalid magic 7; skipped {len(bad)} bytes"


def test_insane_size_stops_and_reports_the_rest_as_invalid(tmp_path: Path) -> None:
    bad = bytearray(HELLO_V2)
    struct.pack_into(">i", bad, 8, 3)
    log = write_segment(tmp_path, 0, HELLO_V2 + bytes(bad) + HELLO_V2)
    result = dump(files=[log])
    assert result.exit_code == 0
    assert result.out[2:] == [V2_BATCH_LINE, "Found 146 invalid bytes at the end of 00000000000000000000.log"]
    assert result.err[1] == "  position: 73 record size 3 is smaller than the minimum record overhead (14)"


def test_size_above_max_message_size_stops(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, HELLO_V2 * 2)
    result = dump("--max-message-size", "72", files=[log])
    assert result.out[2:] == ["Found 146 invalid bytes at the end of 00000000000000000000.log"]
    assert result.err[1] == "  position: 0 record size 73 exceeds the largest allowable 72 (--max-message-size)"
    second = V2_BATCH_LINE.replace("position: 0", "position: 73")
    assert dump("--max-message-size", "73", files=[log]).out[2:] == [V2_BATCH_LINE, second]


def test_trailing_partial_entry(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, HELLO_V2 + HELLO_V2[:37])
    result = dump(files=[log])
    assert result.out[2:] == [V2_BATCH_LINE, "Found 37 invalid bytes at the end of 00000000000000000000.log"]
    assert result.err == []


def test_undecodable_records_are_reported(tmp_path: Path) -> None:
    batch = bytearray(v2_batch([(TS, None, b"x" * 50, ())], codec=CODECS["GZIP"]))
    batch[70:80] = bytes(10)
    struct.pack_into(">I", batch, 17, 0)
    log = write_segment(tmp_path, 0, bytes(batch) + HELLO_V2.replace(b"\x00" * 8, struct.pack(">q", 1), 1))
    result = dump("--deep-iteration", files=[log])
    assert result.exit_code == 0
    assert result.out[2].endswith("isvalid: false")
    assert result.out[3].startswith("baseOffset: 1 lastOffset: 1 ")
    assert result.err[2].startswith("  position: 0 records cannot be read: ")


def test_empty_log(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, b"")
    assert dump(files=[log]).out == [f"Dumping {log}", "Starting offset: 0"]


def test_unknown_suffix_is_ignored(tmp_path: Path) -> None:
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n0\n")
    log = write_segment(tmp_path, 0, HELLO_V2)
    result = dump(files=[other, log])
    assert result.exit_code == 0
    assert result.out == [f"Dumping {other}", f"Dumping {log}", "Starting offset: 0", V2_BATCH_LINE]
    assert result.err == [f"Ignoring unknown file {other}"]


def test_missing_file_fails_with_one_line_and_the_others_are_dumped(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000005.log"
    log = write_segment(tmp_path, 0, HELLO_V2)
    result = dump(files=[missing, log])
    assert result.exit_code == 1
    assert result.err == [f"Error: cannot read {missing}: No such file or directory"]
    assert result.out == [f"Dumping {missing}", f"Dumping {log}", "Starting offset: 0", V2_BATCH_LINE]


def test_log_not_named_after_an_offset_fails(tmp_path: Path) -> None:
    log = tmp_path / "segment.log"
    log.write_bytes(HELLO_V2)
    result = dump(files=[log])
    assert result.exit_code == 1
    assert len(result.err) == 1
    assert result.err[0].startswith(f"Error: cannot read {log}: segment.log is not named after a base offset")


def test_files_are_left_untouched(tmp_path: Path) -> None:
    write_segment(tmp_path, 0, HELLO_V2 + HELLO_V2[:10], index=bytes(80), timeindex=bytes(120))
    names = sorted(p.name for p in tmp_path.iterdir())
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    files = [tmp_path / name for name in names]
    dump("--print-data-log", files=files)
    dump("--index-sanity-check", files=files)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before
