"""The columnar decoder against the per-record decoder: the same rows for every magic, codec, timestamp type, null
and empty key/value, header layout and record size, control batches skipped; the same failure, at the same entry,
for damaged record data."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from mq.errors import KafkaError  # noqa: E402
from mq.records import (  # noqa: E402
    COMMIT,
    BatchHeader,
    Codec,
    LegacyBatchBuilder,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    iter_headers,
    iter_records,
)
from mq.records.columnar import EntryDecodeError, RecordColumns, decode_entries  # noqa: E402
from mq.records.columnar import _decode as bulk_decode  # noqa: E402  (valid entries must not need the fallback)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TS = 1_600_000_000_000
Rows = list[tuple[int, int, int, bytes | None, bytes | None, list[dict[str, object]]]]

payloads = st.none() | st.binary(max_size=30) | st.binary(min_size=60, max_size=200)
long_payloads = st.binary(min_size=8_200, max_size=20_000)  # 2- and 3-byte length varints, record length too
headers = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3)
v2_records = st.lists(
    st.tuples(
        st.integers(min_value=-(2**40), max_value=2**40),  # timestamp delta: 1 to 6 byte varlongs, negative too
        payloads | long_payloads,
        payloads,
        headers,
    ),
    max_size=10,
)


@st.composite
def v2_batches(draw: st.DrawFn) -> bytes:
    builder = RecordBatchBuilder(
        codec=draw(st.sampled_from(list(Codec))),
        timestamp_type=draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])),
    )
    for delta, key, value, record_headers in draw(v2_records):
        builder.append(TS + delta, key, value, record_headers)
    return builder.build()


@st.composite
def legacy_sets(draw: st.DrawFn) -> bytes:
    magic = draw(st.sampled_from([0, 1]))
    codec = draw(st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]))
    log_append = magic == 1 and draw(st.booleans())
    builder = LegacyBatchBuilder(
        magic, codec, 0, TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    )
    for i, (key, value) in enumerate(draw(st.lists(st.tuples(payloads, payloads), min_size=1, max_size=4))):
        builder.append(TS + i, key, value)
    return builder.build()


control_batches = st.just(build_control_batch(COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=3))
entry_lists = st.lists(st.one_of(v2_batches(), v2_batches(), legacy_sets(), control_batches), max_size=6)


def log(entries: list[bytes]) -> bytes:
    """``entries`` one after the other with consecutive offsets, as a partition's log holds them."""
    out = bytearray()
    offset = 0
    for entry in entries:
        for header in iter_headers(entry):
            part = bytearray(entry[header.position : header.end_position])
            last = header.last_offset_delta if header.magic >= 2 else 0
            if header.magic < 2 and header.codec != Codec.NONE:
                last = sum(1 for _ in iter_records(entry, header)) - 1
            struct.pack_into(">q", part, 0, offset + last if header.magic < 2 else offset)
            out += part
            offset += last + 1
    return bytes(out)


def reference(buf: bytes, headers: list[BatchHeader]) -> Rows:
    """The rows as the per-record decoder gives them."""
    return [
        (r.offset, r.timestamp, int(h.timestamp_type), r.key, r.value, [{"key": k, "value": v} for k, v in r.headers])
        for h in headers
        if not h.is_control
        for r in iter_records(buf, h)
    ]


def rows(cols: RecordColumns) -> Rows:
    headers = cols.headers.to_pylist() if cols.headers is not None else [[]] * len(cols)
    return list(
        zip(
            cols.offset.to_pylist(),
            cols.timestamp.to_pylist(),
            cols.timestamp_type.to_pylist(),
            cols.key.to_pylist(),
            cols.value.to_pylist(),
            headers,
            strict=True,
        )
    )


def check_columns(columns: RecordColumns, include_headers: bool) -> None:
    for name in ("offset", "timestamp", "timestamp_type", "key", "value"):
        getattr(columns, name).validate(full=True)
    assert columns.offset.type == pa.int64() and columns.timestamp.type == pa.int64()
    assert columns.timestamp_type.type == pa.int32()
    assert columns.key.type == pa.binary() and columns.value.type == pa.binary()
    if include_headers:
        columns.headers.validate(full=True)
    else:
        assert columns.headers is None


@SETTINGS
@given(entries=entry_lists, include_headers=st.booleans())
def test_same_rows_as_the_per_record_decoder(entries: list[bytes], include_headers: bool) -> None:
    buf = log(entries)
    headers = list(iter_headers(buf))
    columns = decode_entries([(buf, h) for h in headers], include_headers)
    check_columns(columns, include_headers)
    expected = reference(buf, headers)
    if not include_headers:
        expected = [(*row[:5], []) for row in expected]
    assert rows(columns) == expected
    assert rows(bulk_decode([(buf, h) for h in headers], include_headers)) == expected


sized_runs = st.lists(st.tuples(st.integers(min_value=1, max_value=120), st.integers(min_value=0, max_value=300)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(sized_runs, st.sampled_from([Codec.NONE, Codec.LZ4])), min_size=1, max_size=5))
def test_long_batches_of_runs_of_record_sizes(batches: list[tuple[list[tuple[int, int]], Codec]]) -> None:
    """Record starts are predicted from runs of equal sizes and corrected where a run ends or a delta grows."""
    entries = []
    for runs, codec in batches:
        builder = RecordBatchBuilder(codec=codec)
        for run, size in runs:
            for _ in range(run):
                builder.append(TS + len(builder) * 7, b"k", bytes(size), [])
        entries.append(builder.build())
    buf = log(entries)
    headers = list(iter_headers(buf))
    expected = reference(buf, headers)
    assert rows(bulk_decode([(buf, h) for h in headers], True)) == expected
    assert rows(decode_entries([(buf, h) for h in headers], True)) == expected


@SETTINGS
@given(entries=st.lists(v2_batches(), min_size=1, max_size=4), data=st.data())
def test_damaged_records_fail_at_the_same_entry_with_the_same_error(entries: list[bytes], data: st.DataObject) -> None:
    buf = bytearray(log(entries))
    headers = list(iter_headers(buf))
    victim = data.draw(st.sampled_from(headers))
    at = data.draw(st.integers(min_value=victim.position + 57, max_value=victim.end_position - 1))  # recordsCount on
    buf[at] = data.draw(st.integers(min_value=0, max_value=255))
    headers = list(iter_headers(buf))
    entries_in_buf = [(bytes(buf), h) for h in headers]
    failed: tuple[int, str] | None = None
    for index, (entry_buf, header) in enumerate(entries_in_buf):
        try:
            list(iter_records(entry_buf, header))
        except KafkaError as exc:
            failed = (index, str(exc))
            break
    if failed is None:
        assert rows(decode_entries(entries_in_buf, True)) == reference(bytes(buf), headers)
        assert rows(bulk_decode(entries_in_buf, True)) == reference(bytes(buf), headers)
        return
    with pytest.raises(EntryDecodeError) as caught:
        decode_entries(entries_in_buf, True)
    assert (caught.value.index, str(caught.value)) == failed
    assert rows(caught.value.decoded) == reference(bytes(buf), headers[: failed[0]])


def test_many_records_of_varied_and_uniform_sizes() -> None:
    """Batches long enough that record sizes change many times (found by the Python walk), change where a delta
    varint grows (settled by prediction), and records whose length varint takes three bytes."""
    rng = random.Random(7)
    varied = RecordBatchBuilder(codec=Codec.LZ4)
    uniform = RecordBatchBuilder()
    large = RecordBatchBuilder(codec=Codec.ZSTD)
    for i in range(3000):
        varied.append(TS + i, None if i % 11 == 0 else b"k", rng.randbytes(rng.randrange(0, 300)), [])
        uniform.append(TS + i * 3, b"key%05d" % i, bytes(100), [("h", b"v")] if i % 500 == 0 else [])
    for _ in range(5):
        large.append(TS, b"k", rng.randbytes(rng.randrange(8_200, 300_000)), [])
    buf = log([varied.build(), uniform.build(), large.build()] * 2)
    headers = list(iter_headers(buf))
    columns = bulk_decode([(buf, h) for h in headers], include_headers=True)
    assert rows(columns) == reference(buf, headers)
    assert len(columns) == 2 * 6005


def test_nothing_to_decode() -> None:
    marker = build_control_batch(COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=3)
    for include_headers in (False, True):
        assert len(decode_entries([], include_headers)) == 0
        columns = decode_entries([(marker, h) for h in iter_headers(marker)], include_headers)
        check_columns(columns, include_headers)
        assert len(columns) == 0
    empty = RecordBatchBuilder().build()
    assert len(decode_entries([(empty, h) for h in iter_headers(empty)], True)) == 0


def test_invalid_utf8_header_keys_are_replaced_as_the_per_record_decoder_does() -> None:
    builder = RecordBatchBuilder()
    builder.append(TS, b"k", b"v", [("ok", b"1")])
    batch = bytearray(builder.build())
    at = batch.index(b"ok")
    batch[at] = 0xFF
    from mq.records.batch_header import compute_crc

    (header,) = iter_headers(batch)
    struct.pack_into(">I", batch, 17, compute_crc(batch, header))
    (header,) = iter_headers(batch)
    columns = decode_entries([(bytes(batch), header)], include_headers=True)
    assert rows(columns) == reference(bytes(batch), [header])
    assert columns.headers.to_pylist() == [[{"key": "\ufffdk", "value": b"1"}]]


def test_every_damaged_byte_of_a_small_batch_fails_or_reads_as_the_per_record_decoder() -> None:
    """Each byte of the records area set to values that make lengths null, negative, -1, huge or multi-byte."""
    builder = RecordBatchBuilder()
    builder.append(TS, b"key", b"value", [("h", None), ("k", b"v")])
    builder.append(TS + 1, None, b"", [])
    good = builder.build() + RecordBatchBuilder().build()
    buf = log([good])
    outcomes = set()
    for at in range(57, len(good) - 61):  # recordsCount and the records area of the first batch
        for byte in (0, 1, 2, 3, 4, 5, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF):
            damaged = bytearray(buf)
            damaged[at] = byte
            headers = list(iter_headers(damaged))
            entries = [(bytes(damaged), h) for h in headers]
            try:
                expected = reference(bytes(damaged), headers)
            except KafkaError as exc:
                with pytest.raises(EntryDecodeError) as caught:
                    decode_entries(entries, True)
                assert (caught.value.index, str(caught.value)) == (0, str(exc))
                assert len(caught.value.decoded) == 0
                outcomes.add("fails")
                continue
            assert rows(decode_entries(entries, True)) == expected
            assert rows(bulk_decode(entries, True)) == expected
            outcomes.add("reads")
    assert outcomes == {"fails", "reads"}
