"""Entries rewritten in a topic's compression.type: every codec pair, every record field and batch flag kept, what
is kept as sent, and v0/v1 message sets (zstd: converted to one v2 batch)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from records_support import (
    LEGAL_CODECS,
    Sample,
    as_tuples,
    expected,
    kafka_python_build,
    kafka_python_read,
    mq_build,
    mq_read,
    sample_lists,
    sample_records,
)

from mq.records import Codec, iter_headers, iter_records, parse_header
from mq.records.batch_header import CONTROL_BIT, TIMESTAMP_TYPE_BIT, BatchHeader, set_log_append_time
from mq.records.default_batch import RecordBatchBuilder, build_control_batch
from mq.records.legacy import encode_message
from mq.records.recompress import recompress, target_codec
from mq.records.validation import validate_records

CODECS = list(Codec)
V2_PAIRS = [(source, target) for source in CODECS for target in CODECS]
LEGACY_CASES = [
    (magic, Codec(source), target) for magic in (0, 1) for source in LEGAL_CODECS[magic] for target in CODECS
]


def headers_of(data: bytes) -> list[BatchHeader]:
    return list(iter_headers(data))


def producer_batch(source: Codec, records: list[Sample], *, transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(
        source,
        base_offset=0,
        producer_id=4711,
        producer_epoch=3,
        base_sequence=1_000,
        is_transactional=transactional,
        partition_leader_epoch=-1,
    )
    for r in records:
        builder.append(r.timestamp, r.key, r.value, r.headers)
    return builder.build()


def rewritten(data: bytes, target: Codec) -> bytes:
    found = recompress(data, headers_of(data), target)
    assert found is not None
    for header in headers_of(found):  # what the log appends must pass a producer's validation itself
        validate_records(found, header)
    return found


def test_target_codec() -> None:
    names = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
    assert [target_codec(name) for name in names] == [None, *Codec]


@pytest.mark.parametrize(("source", "target"), V2_PAIRS, ids=[f"{s.name}-{t.name}" for s, t in V2_PAIRS])
@pytest.mark.parametrize("transactional", [False, True])
def test_v2_batch_in_every_codec_pair(source: Codec, target: Codec, transactional: bool) -> None:
    records = sample_records(20, big=source == Codec.NONE)
    data = producer_batch(source, records, transactional=transactional)
    if source == target:
        assert recompress(data, headers_of(data), target) is None
        return
    found = rewritten(data, target)
    (before,) = headers_of(data)
    (after,) = headers_of(found)
    assert after.codec == target
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    kept = ("offset", "magic", "last_offset_delta", "first_timestamp", "max_timestamp", "producer_id")
    kept += ("producer_epoch", "base_sequence", "records_count", "partition_leader_epoch")
    assert [getattr(after, f) for f in kept] == [getattr(before, f) for f in kept]
    assert after.is_transactional is transactional
    assert list(iter_records(found, after)) == list(iter_records(data, before))
    assert (
        kafka_python_read(found)
        == kafka_python_read(data)
        == [(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    )


def test_a_batch_read_by_kafka_python_from_another_client() -> None:
    """A batch kafka-python encoded (as its producer sends it) comes out in the target codec with its records."""
    records = sample_records(30)
    data = kafka_python_build(2, Codec.LZ4, records)
    found = rewritten(data, Codec.GZIP)
    assert headers_of(found)[0].codec == Codec.GZIP
    assert as_tuples(mq_read(found)) == expected(records, 2)


def test_uncompressed_control_batches_stay_uncompressed() -> None:
    marker = build_control_batch(1, producer_id=7, producer_epoch=2, coordinator_epoch=5, timestamp=1)
    assert recompress(marker, headers_of(marker), Codec.GZIP) is None


def test_a_compressed_control_batch_keeps_its_flags() -> None:
    builder = RecordBatchBuilder(Codec.SNAPPY, producer_id=7, producer_epoch=2, is_transactional=True, is_control=True)
    builder.append(1, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")
    data = builder.build()
    (after,) = headers_of(rewritten(data, Codec.NONE))
    assert after.codec == Codec.NONE and after.is_control and after.is_transactional
    assert after.attributes & CONTROL_BIT


def test_a_log_append_time_batch_keeps_its_timestamp_type() -> None:
    builder = RecordBatchBuilder(Codec.GZIP)
    builder.append(5, b"k", b"v")
    data = bytearray(builder.build())
    header = parse_header(data, 0)
    assert header is not None
    set_log_append_time(data, header, 99)
    found = rewritten(bytes(data), Codec.ZSTD)
    (after,) = headers_of(found)
    assert after.attributes & TIMESTAMP_TYPE_BIT and after.max_timestamp == 99
    assert [r.timestamp for r in iter_records(found, after)] == [99]


@pytest.mark.parametrize(
    ("magic", "source", "target"), LEGACY_CASES, ids=[f"v{m}-{s.name}-{t.name}" for m, s, t in LEGACY_CASES]
)
def test_legacy_sets_in_every_codec_pair(magic: int, source: Codec, target: Codec) -> None:
    records = sample_records(12)
    data = mq_build(magic, source, records)
    if source == target:
        assert recompress(data, headers_of(data), target) is None
        return
    found = rewritten(data, target)
    entries = headers_of(found)
    if target == Codec.ZSTD:  # zstd exists in format v2 only
        assert [(h.magic, h.codec, h.records_count) for h in entries] == [(2, Codec.ZSTD, 12)]
        assert as_tuples(mq_read(found)) == expected(records, magic)
    elif target == Codec.NONE:
        assert [(h.magic, h.codec) for h in entries] == [(magic, Codec.NONE)] * 12
        assert as_tuples(mq_read(found)) == expected(records, magic)
    else:
        assert [(h.magic, h.codec) for h in entries] == [(magic, target)]
        assert as_tuples(mq_read(found)) == expected(records, magic)
        assert kafka_python_read(found) == expected(records, magic)


def test_plain_messages_of_one_magic_become_one_wrapper_and_formats_stay_apart() -> None:
    """Consecutive messages of one magic are wrapped together; a change of magic or a kept entry ends a wrapper."""
    v1 = [encode_message(i, 1, 0, 100 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    v0 = [encode_message(i, 0, 0, -1, None, b"old%d" % i) for i in range(2)]
    kept = mq_build(1, Codec.GZIP, [Sample(7, None, b"kept", [])])
    data = b"".join([*v1, *v0, kept, v1[0]])
    found = rewritten(data, Codec.GZIP)
    entries = headers_of(found)
    assert [(h.magic, h.codec) for h in entries] == [(1, Codec.GZIP), (0, Codec.GZIP), (1, Codec.GZIP), (1, Codec.GZIP)]
    assert found[entries[2].position : entries[2].end_position] == kept
    values = [r.value for h in entries for r in iter_records(found, h)]
    assert values == [b"v0", b"v1", b"v2", b"old0", b"old1", b"kept", b"v0"]


def test_a_log_append_time_wrapper_gives_its_timestamp_to_its_messages() -> None:
    data = bytearray(mq_build(1, Codec.GZIP, [Sample(10, b"a", b"1", []), Sample(20, b"b", b"2", [])]))
    header = parse_header(data, 0)
    assert header is not None
    set_log_append_time(data, header, 555)
    found = rewritten(bytes(data), Codec.NONE)
    assert [(h.timestamp_type.name, h.max_timestamp) for h in headers_of(found)] == [("CREATE_TIME", 555)] * 2


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=sample_lists,
    source=st.sampled_from(CODECS),
    target=st.sampled_from(CODECS),
    transactional=st.booleans(),
)
def test_recompression_keeps_every_record(
    records: list[Sample], source: Codec, target: Codec, transactional: bool
) -> None:
    data = producer_batch(source, records, transactional=transactional)
    found = recompress(data, headers_of(data), target)
    if source == target:
        assert found is None
        return
    assert found is not None
    (before,), (after,) = headers_of(data), headers_of(found)
    assert (after.codec, after.is_transactional) == (target, transactional)
    assert list(iter_records(found, after)) == list(iter_records(data, before))
    assert kafka_python_read(found) == kafka_python_read(data)
