"""Records encoded in bulk (``RecordBatchBuilder.extend``) are byte for byte those ``append`` makes one at a time:
null and empty keys and values, lengths and deltas across varint widths, negative timestamp deltas, several
``extend`` calls mixed with ``append`` in one batch, every codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.records.batch_header import Codec
from mq.records.default_batch import RecordBatchBuilder

field = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=120, max_size=300))
row = st.tuples(st.integers(-(2**40), 2**40), field, field)
run = st.lists(row, min_size=1, max_size=40)


def built(runs: list[list[tuple[int, bytes | None, bytes | None]]], bulk: list[bool], codec: Codec) -> bytes:
    builder = RecordBatchBuilder(codec=codec, producer_id=5, base_sequence=3)
    for rows, in_bulk in zip(runs, bulk, strict=True):
        if in_bulk:
            builder.extend([t for t, _, _ in rows], [k for _, k, _ in rows], [v for _, _, v in rows])
        else:
            for timestamp, key, value in rows:
                builder.append(timestamp, key, value)
    assert len(builder) == sum(map(len, runs))
    return builder.build()


@settings(max_examples=300, deadline=None)
@given(st.lists(run, min_size=1, max_size=4), st.data())
def test_bulk_records_equal_records_appended_one_by_one(
    runs: list[list[tuple[int, bytes | None, bytes | None]]], data: st.DataObject
) -> None:
    bulk = data.draw(st.lists(st.booleans(), min_size=len(runs), max_size=len(runs)))
    codec = data.draw(st.sampled_from([Codec.NONE, Codec.GZIP, Codec.ZSTD]))
    assert built(runs, bulk, codec) == built(runs, [False] * len(runs), codec)


def test_many_records_and_long_offset_deltas() -> None:
    rows = [(1_700_000_000_000 + i % 3, None if i % 5 else b"k%d" % i, b"v" * (i % 200)) for i in range(20_000)]
    assert built([rows[:70], rows[70:]], [True, True], Codec.NONE) == built([rows], [False], Codec.NONE)
    keyless = [(t, None, v) for t, _, v in rows]
    assert built([keyless], [True], Codec.NONE) == built([keyless], [False], Codec.NONE)
