"""Properties of the dump logic over generated segments: every record comes back, damage is pinned to its entry."""

from __future__ import annotations

import tempfile
from pathlib import Path

from dump_support import TS, legacy_entry, v2_batch, write_segment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.tools.dump_segments import BatchEntry, DumpOptions, DumpReport, InvalidBytes, RecordEntry, dump_files

values = st.one_of(st.none(), st.binary(max_size=40))
batch_specs = st.lists(
    st.tuples(st.sampled_from(["v2", "v1", "v0"]), st.integers(0, 4), st.lists(values, min_size=1, max_size=5)),
    min_size=1,
    max_size=6,
)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def build(specs: list[tuple[str, int, list[bytes | None]]]) -> tuple[bytes, list[int], list[bytes | None]]:
    """Segment bytes, the start position of each entry and every record value in offset order."""
    data, positions, expected = b"", [], []
    for kind, codec, batch_values in specs:
        offset = len(expected)
        positions.append(len(data))
        if kind == "v2":
            data += v2_batch(
                [(TS + i, None, v, ()) for i, v in enumerate(batch_values)], base_offset=offset, codec=codec
            )
        else:
            magic = 1 if kind == "v1" else 0
            legacy_codec = min(codec, 3)
            records = batch_values if legacy_codec else batch_values[:1]
            data += legacy_entry(
                magic, [(TS if magic else None, None, v) for v in records], offset=offset, codec=legacy_codec
            )
            batch_values = records
        expected += batch_values
    return data, positions, expected


def run(data: bytes) -> tuple[list[BatchEntry], list[RecordEntry], list[InvalidBytes], DumpReport]:
    with tempfile.TemporaryDirectory() as directory:
        log = write_segment(Path(directory), 0, data)
        report = DumpReport()
        events = list(dump_files([str(log)], DumpOptions(deep_iteration=True), report))
    batches = [e for e in events if isinstance(e, BatchEntry)]
    records = [e for e in events if isinstance(e, RecordEntry)]
    return batches, records, [e for e in events if isinstance(e, InvalidBytes)], report


@SETTINGS
@given(batch_specs)
def test_every_record_comes_back_in_order(specs: list[tuple[str, int, list[bytes | None]]]) -> None:
    data, positions, expected = build(specs)
    batches, records, invalid, report = run(data)
    assert [b.position for b in batches] == positions
    assert all(b.is_valid for b in batches)
    assert [r.offset for r in records] == list(range(len(expected)))
    assert [r.value for r in records] == expected
    assert invalid == []
    assert report.empty


@SETTINGS
@given(batch_specs, st.data())
def test_a_flipped_byte_marks_only_its_entry(
    specs: list[tuple[str, int, list[bytes | None]]], data: st.DataObject
) -> None:
    segment, positions, _ = build(specs)
    victim = data.draw(st.integers(0, len(positions) - 1))
    start = positions[victim]
    end = positions[victim + 1] if victim + 1 < len(positions) else len(segment)
    magic = segment[start + 16]
    covered_from = start + (21 if magic == 2 else 17)
    where = data.draw(st.integers(covered_from, end - 1))
    damaged = bytearray(segment)
    damaged[where] ^= data.draw(st.integers(1, 255))
    batches, _, invalid, report = run(bytes(damaged))
    assert [b.position for b in batches] == positions
    assert [b.is_valid for b in batches] == [i != victim for i in range(len(positions))]
    assert invalid == []
    [entries] = report.corrupt_entries.values()
    [crc_mismatch] = [entry for entry in entries if entry.stored_crc is not None]
    assert crc_mismatch.position == start
    assert (crc_mismatch.stored_crc, crc_mismatch.computed_crc) == (batches[victim].crc, batches[victim].computed_crc)
