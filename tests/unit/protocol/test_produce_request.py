from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError
from mq.protocol.produce_request import decode_produce_request
from tests.produce_frames import produce_frame

names = st.text(alphabet="abc-é", min_size=1, max_size=8)
partitions = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.none() | st.binary(max_size=40)), max_size=3)


def _frame(version: int, transactional_id: str | None, acks: int, timeout_ms: int, topics: list) -> bytearray:
    return produce_frame(version, topics, acks=acks, transactional_id=transactional_id, timeout_ms=timeout_ms)


@settings(max_examples=150, deadline=None)
@given(
    version=st.integers(0, 13),
    transactional_id=st.none() | names,
    acks=st.sampled_from([-1, 0, 1, 2]),
    timeout_ms=st.integers(0, 2**31 - 1),
    topics=st.lists(st.tuples(names, partitions), max_size=3),
)
def test_decodes_what_kio_encodes(
    version: int, transactional_id: str | None, acks: int, timeout_ms: int, topics: list
) -> None:
    if version < 3:
        transactional_id = None  # v0-v2 have none
    if version >= 13:  # topics by id
        topics = [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics]
    header, request = decode_produce_request(_frame(version, transactional_id, acks, timeout_ms, topics))
    assert (header.api_version, header.correlation_id, header.client_id) == (version, 7, "client-é")
    assert (request.transactional_id, request.acks, request.timeout_ms) == (transactional_id, acks, timeout_ms)
    decoded = [
        (t.topic_id or t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
        for t in request.topic_data
    ]
    assert decoded == topics
    assert all((t.name == "") == (version >= 13) for t in request.topic_data)


def test_record_sets_are_writable_views_of_the_frame() -> None:
    frame = _frame(9, None, 1, 1000, [("t", [(0, b"batch-bytes")])])
    _, request = decode_produce_request(frame)
    records = request.topic_data[0].partition_data[0].records
    assert records is not None and not records.readonly
    records[:5] = b"BATCH"
    assert b"BATCH-bytes" in frame


@pytest.mark.parametrize("version", [0, 2, 3, 8, 9, 12, 13])
def test_every_truncation_is_an_invalid_request(version: int) -> None:
    topic = uuid.uuid4() if version >= 13 else "topic"
    frame = _frame(version, "tx" if version >= 3 else None, 1, 1000, [(topic, [(0, b"x" * 20), (1, None)])])
    for end in range(8, len(frame)):
        with pytest.raises(InvalidRequestError):
            decode_produce_request(frame[:end])


def test_other_apis_are_refused() -> None:
    frame = _frame(9, None, 1, 1000, [])
    frame[1] = ApiKey.FETCH
    with pytest.raises(InvalidRequestError, match="not a produce request"):
        decode_produce_request(frame)


@pytest.mark.parametrize(("version", "null_count"), [(3, b"\xff\xff\xff\xff"), (8, b"\xff\xff\xff\xfe"), (9, b"\0")])
def test_a_null_topic_array_is_an_invalid_request(version: int, null_count: bytes) -> None:
    frame = _frame(version, None, 1, 1000, [])
    empty = b"\1" if version >= 9 else b"\0\0\0\0"  # the empty topic array, then (v9) the body's tagged fields
    body_end = len(frame) - (1 if version >= 9 else 0)
    assert frame[body_end - len(empty) : body_end] == empty
    with pytest.raises(InvalidRequestError, match="null array"):
        decode_produce_request(frame[: body_end - len(empty)] + null_count + frame[body_end:])
