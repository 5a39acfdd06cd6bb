"""A batch's records taken as they are encoded into another producer's batch (``RecordBatchBuilder.adopt``): every
codec pair, every record field kept, the new header's own fields, and the batches that cannot be taken."""

from __future__ import annotations

import dataclasses

import pytest
from records_support import expected, kafka_python_read, mq_build, mq_read, sample_records

from mq.records import Codec, iter_headers
from mq.records.batch_header import V2_HEADER_SIZE, BatchHeader, is_valid, set_log_append_time
from mq.records.default_batch import RecordBatchBuilder, build_control_batch, reusable
from mq.records.validation import validate_records

PAIRS = [(source, target) for source in Codec for target in Codec]


def only_header(data: bytes) -> BatchHeader:
    (header,) = iter_headers(data)
    return header


def adopted(data: bytes, codec: Codec) -> bytes:
    builder = RecordBatchBuilder(codec, producer_id=42, producer_epoch=7, base_sequence=100, is_transactional=True)
    builder.adopt(data, only_header(data))
    return builder.build()


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s.name}-{t.name}" for s, t in PAIRS])
def test_adopted_records_are_the_same_under_the_new_header(source: Codec, target: Codec) -> None:
    records = sample_records(20, big=source == Codec.NONE)
    data = mq_build(2, source, records)
    built = adopted(data, target)
    before, after = only_header(data), only_header(built)
    assert is_valid(built, after)
    validate_records(built, after)  # what a broker checks of a produced batch
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (42, 7, 100)
    assert after.is_transactional and after.codec == target
    fields = ("records_count", "last_offset_delta", "first_timestamp", "max_timestamp", "timestamp_type")
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert kafka_python_read(built) == expected(records, 2)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in mq_read(built)] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in mq_read(data)
    ]
    if source == target:  # the records area is reused byte for byte
        assert built[V2_HEADER_SIZE:] == data[V2_HEADER_SIZE:]


def test_a_batch_at_a_position_inside_fetched_data_is_taken_from_there() -> None:
    first = mq_build(2, Codec.NONE, sample_records(3))
    second = mq_build(2, Codec.LZ4, sample_records(9), base_offset=3)
    data = first + second
    header = list(iter_headers(data))[1]
    builder = RecordBatchBuilder(Codec.LZ4)
    builder.adopt(data, header)
    assert builder.build()[V2_HEADER_SIZE:] == second[V2_HEADER_SIZE:]
    assert len(builder) == 9


def test_batches_that_cannot_be_taken_as_they_are() -> None:
    plain = mq_build(2, Codec.NONE, sample_records(5))
    header = only_header(plain)
    assert reusable(header)
    log_append = bytearray(plain)
    set_log_append_time(log_append, header, 1_700_000_000_000)
    compacted = dataclasses.replace(header, last_offset_delta=header.last_offset_delta + 2)  # offsets with gaps
    control = build_control_batch(1, 4711, 0, 0)
    legacy = mq_build(1, Codec.NONE, sample_records(5))
    refused = [
        (bytes(log_append), only_header(bytes(log_append))),
        (plain, compacted),
        (control, only_header(control)),
        (legacy, next(iter_headers(legacy))),
    ]
    for data, found in refused:
        assert not reusable(found)
        with pytest.raises(ValueError):
            RecordBatchBuilder().adopt(data, found)


def test_an_adopting_builder_must_be_empty_and_takes_nothing_after() -> None:
    data = mq_build(2, Codec.NONE, sample_records(5))
    started = RecordBatchBuilder()
    started.append(1, b"k", b"v")
    with pytest.raises(ValueError):
        started.adopt(data, only_header(data))
    builder = RecordBatchBuilder()
    builder.adopt(data, only_header(data))
    with pytest.raises(ValueError):
        builder.append(1, b"k", b"v")
    with pytest.raises(ValueError):
        builder.extend([1], [b"k"], [b"v"])
