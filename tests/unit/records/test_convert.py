"""Up-conversion of producers' message sets to v2 batches and down-conversion of stored entries to message sets,
checked against kafka-python's record classes (its producer's sets in, its consumer's reading out)."""

from __future__ import annotations

import pytest
from records_support import expected, kafka_python_build, kafka_python_read, mq_read, sample_records

from mq.errors import CorruptRecordError
from mq.records import Codec, RecordBatchBuilder, iter_headers
from mq.records.convert import down_convert, up_convert
from mq.records.legacy import encode_message

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_a_producers_message_set_becomes_one_v2_batch_with_the_same_records(magic: int, codec: Codec) -> None:
    records = sample_records(12)
    batch = up_convert(kafka_python_build(magic, codec, records))
    assert batch is not None
    (header,) = iter_headers(batch)
    assert (header.magic, header.codec, header.records_count) == (2, codec, 12)
    no_headers = [(o, ts, k, v, []) for o, ts, k, v, _ in expected(records, magic)]
    assert kafka_python_read(batch) == no_headers


def test_v2_batches_are_left_alone_and_broken_sets_refused() -> None:
    v2 = kafka_python_build(2, Codec.NONE, sample_records(3))
    assert up_convert(v2) is None
    message = encode_message(0, 1, 0, 5, b"k", b"v")
    with pytest.raises(CorruptRecordError):
        up_convert(message[:-1])  # a partial message
    corrupt = bytearray(message)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        up_convert(bytes(corrupt))
    with pytest.raises(CorruptRecordError):
        up_convert(message + v2)


def stored(records: int, codec: Codec, base_offset: int = 0) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=base_offset)
    for i in range(records):
        builder.append(1000 + i, b"k%d" % i, b"value-%d" % i)
    return builder.build()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_stored_batches_are_read_as_the_clients_magic_from_the_fetch_offset(magic: int, codec: Codec) -> None:
    data = stored(5, codec, base_offset=10) + stored(5, codec, base_offset=15)
    converted = down_convert(data, magic, 12, 1 << 20)
    assert {h.magic for h in iter_headers(converted)} == {magic}
    assert kafka_python_read(converted) == [
        (o, 1000 + o - (10 if o < 15 else 15) if magic else -1, b"k%d" % (o % 5), b"value-%d" % (o % 5), [])
        for o in range(12, 20)
    ]


def test_the_fetch_size_cuts_at_whole_messages_or_sends_a_partial_first_one() -> None:
    data = stored(10, Codec.NONE)
    whole = down_convert(data, 1, 0, 1 << 20)
    sizes = [h.size for h in iter_headers(whole)]
    cut = down_convert(data, 1, 0, sum(sizes[:3]) + 5)
    assert [r.offset for r in mq_read(cut)] == [0, 1, 2]
    partial = down_convert(data, 1, 0, sizes[0] - 1)
    assert partial == whole[: sizes[0] - 1] and list(iter_headers(partial)) == []
