"""The consumer's records laid out in bulk equal the per-record decoder's: every codec, both timestamp types, null
and empty keys and values, long deltas, a position inside a batch, and batches with headers (decoded one by one)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mq.client.consumer import ConsumerRecord, entry_records, select_entries
from mq.records import iter_records
from mq.records.batch_header import Codec, TimestampType
from mq.records.default_batch import RecordBatchBuilder
from mq.topic_partition import TopicPartition

TP = TopicPartition("t", 2)
field = st.one_of(st.none(), st.binary(max_size=12), st.binary(min_size=130, max_size=200))
record = st.tuples(st.integers(0, 2**41), field, field, st.lists(st.tuples(st.text(max_size=3), field), max_size=2))
batch = st.tuples(
    st.lists(record, min_size=1, max_size=30),
    st.sampled_from([Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY]),
    st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]),
    st.booleans(),
)


def encoded(
    batches: list[tuple[list[tuple[int, bytes | None, bytes | None, list]], Codec, TimestampType, bool]],
) -> bytes:
    data, offset = b"", 0
    for records, codec, timestamp_type, with_headers in batches:
        builder = RecordBatchBuilder(codec=codec, base_offset=offset, timestamp_type=timestamp_type)
        for timestamp, key, value, headers in records:
            builder.append(timestamp, key, value, headers if with_headers else [])
        data += builder.build()
        offset += len(records) + 3  # a gap, as compaction leaves
    return data


def reference(data: bytes, position: int) -> list[ConsumerRecord]:
    entries = select_entries(TP, data, position)
    return [
        ConsumerRecord("t", 2, r.offset, r.timestamp, int(h.timestamp_type), r.key, r.value, r.headers)
        for h in entries.headers
        for r in iter_records(data, h)
        if r.offset >= position
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(batch, min_size=1, max_size=4), st.integers(0, 40))
def test_bulk_records_equal_the_per_record_decoders(batches: list, position: int) -> None:
    data = encoded(batches)
    assert entry_records(select_entries(TP, data, position)) == reference(data, position)
