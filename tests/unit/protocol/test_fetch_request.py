from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest as ClientFetchRequest

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, decode_request, request_schema
from mq.protocol.fetch_request import (
    MAX_VERSION,
    MIN_VERSION,
    NO_RESPONSE_LIMIT,
    UNKNOWN_HIGH_WATERMARK,
    FetchRequest,
    decode_fetch_request,
)
from tests.fuzz_requests import malformed_frames, valid_frame

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
ZERO_ID = uuid.UUID(int=0)
"""The zero topic id, which kio reads as None."""


def _expected(body: Any) -> tuple[Any, ...]:
    """What the fast decoder must produce for a body kio decoded."""
    state = getattr(body, "replica_state", None)
    return (
        body.replica_id if state is None else state.replica_id,
        body.max_wait // datetime.timedelta(milliseconds=1),
        body.min_bytes,
        getattr(body, "max_bytes", NO_RESPONSE_LIMIT),  # v0-v2 have no response limit
        getattr(body, "isolation_level", 0),
        getattr(body, "session_id", 0),
        getattr(body, "session_epoch", -1),
        [
            (
                getattr(t, "topic", ""),  # v13+: by id
                [
                    (
                        p.partition,
                        getattr(p, "current_leader_epoch", -1),
                        p.fetch_offset,
                        getattr(p, "last_fetched_epoch", -1),
                        getattr(p, "log_start_offset", -1),
                        p.partition_max_bytes,
                        getattr(p, "high_watermark", UNKNOWN_HIGH_WATERMARK),
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
        [
            (t.topic if hasattr(t, "topic") else t.topic_id or ZERO_ID, list(t.partitions))
            for t in getattr(body, "forgotten_topics_data", ())
        ],
        getattr(body, "rack_id", ""),
        [t.topic_id or ZERO_ID for t in body.topics] if body.__version__ >= 13 else None,
    )


def _fields(request: FetchRequest) -> tuple[Any, ...]:
    return (
        request.replica_id,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        request.isolation_level,
        request.session_id,
        request.session_epoch,
        [(topic, list(partitions)) for topic, partitions in request.topics],
        request.forgotten_topics,
        request.rack_id,
        request.topic_ids,
    )


def _outcome(decode: Any, frame: bytes) -> tuple[Any, ...] | None:
    try:
        header, body = decode(frame)
    except InvalidRequestError:
        return None
    return (header.api_version, header.correlation_id, header.client_id, header.size, body)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_decodes_what_kio_encodes(data: st.DataObject, version: int) -> None:
    body = data.draw(st.from_type(request_schema(ApiKey.FETCH, version)))
    frame = valid_frame(ApiKey.FETCH, version, 11, body)
    header, request = decode_fetch_request(bytearray(frame))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (1, version, 11, "fuzz")
    assert _fields(request) == _expected(body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_refuses_exactly_what_the_general_decoder_refuses(data: st.DataObject, version: int) -> None:
    _, frame = data.draw(malformed_frames(ApiKey.FETCH, version, 3))
    general = _outcome(decode_request, frame)
    fast = _outcome(decode_fetch_request, frame)
    assert (general is None) == (fast is None)
    if general is not None and fast is not None:
        assert general[:4] == fast[:4]
        assert _fields(fast[4]) == _expected(general[4])


_HEADER_V12 = struct.pack(">hhih", ApiKey.FETCH, 12, 5, -1) + b"\0"
_FIXED_V12 = struct.pack(">iiiibii", -1, 500, 1, 1000, 0, 0, -1)


@pytest.mark.parametrize(
    "tags",
    [
        b"\0",  # none
        b"\x01\x05\x02ab",  # an unknown tag
        b"\x01\x00\x03\x03ab",  # cluster_id
        b"\x01\x00\x05\x03abcd",  # cluster_id in a larger field
        b"\x01\x00\x02\x03ab",  # cluster_id longer than its field
        b"\x01\x00\x03\x03\xff\xfe",  # cluster_id not UTF-8
        b"\x02\x00\x03\x03ab\x00\x03\x03cd",  # cluster_id twice
        b"\x01\x00\x01\x00",  # a null cluster_id
        b"\x02\x00\x05\x03ab\x05\x00\x00\x03\x03cd",  # fits by sizes; by values an unknown tag follows the string
        b"\x02\x00\x05\x03ab\x00\x00\x03\x03cd",  # fits by values, not by sizes
        b"\x01\x00\x00\x03ab",  # an empty field holding a string
        b"\x01\x00\x00",  # an empty field at the end
        b"\x80\x00",  # no tags, in a 2-byte varint
        b"\x80\x80\x80\x80\x80\x01",  # a 6-byte varint
    ],
)
def test_body_tagged_fields_as_the_general_decoder(tags: bytes) -> None:
    frame = _HEADER_V12 + _FIXED_V12 + b"\x01\x01\x01" + tags
    assert (_outcome(decode_request, frame) is None) == (_outcome(decode_fetch_request, frame) is None)


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 17, 18])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_is_an_invalid_request(version: int, data: st.DataObject) -> None:
    body = data.draw(st.from_type(request_schema(ApiKey.FETCH, version)))
    frame = valid_frame(ApiKey.FETCH, version, 1, body)
    for end in range(8, len(frame)):
        general = _outcome(decode_request, frame[:end])
        assert (general is None) == (_outcome(decode_fetch_request, frame[:end]) is None)


def test_other_apis_and_versions_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="not a fetch request"):
        decode_fetch_request(struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, -1))
    with pytest.raises(InvalidRequestError, match="not a fetch request"):
        decode_fetch_request(struct.pack(">hhih", ApiKey.FETCH, 19, 1, -1))


@pytest.mark.parametrize("version", range(MIN_VERSION, 13))
def test_decodes_what_kafka_python_encodes(version: int) -> None:
    partition = ClientFetchRequest.FetchTopic.FetchPartition(
        partition=3,
        current_leader_epoch=5,
        fetch_offset=42,
        last_fetched_epoch=4,
        log_start_offset=7,
        partition_max_bytes=1000,
        version=version,
    )
    topic = ClientFetchRequest.FetchTopic(topic="tópic", partitions=[partition], version=version)
    request = ClientFetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=2000,
        isolation_level=1,
        session_id=8,
        session_epoch=2,
        topics=[topic],
        forgotten_topics_data=[],
        rack_id="rack",
        version=version,
    )
    request.with_header(correlation_id=9, client_id="kafka-python")
    header, decoded = decode_fetch_request(request.encode(header=True, framed=False))
    assert (header.api_version, header.correlation_id, header.client_id) == (version, 9, "kafka-python")
    leader_epoch, last_fetched, log_start = (
        (5 if version >= 9 else -1),
        (4 if version >= 12 else -1),
        (7 if version >= 5 else -1),
    )
    assert _fields(decoded) == (
        -1,
        500,
        1,
        2000 if version >= 3 else NO_RESPONSE_LIMIT,
        1 if version >= 4 else 0,
        8 if version >= 7 else 0,
        2 if version >= 7 else -1,
        [("tópic", [(3, leader_epoch, 42, last_fetched, log_start, 1000, UNKNOWN_HIGH_WATERMARK)])],
        [],
        "rack" if version >= 11 else "",
        None,
    )


_HEADER_V18 = struct.pack(">hhih", ApiKey.FETCH, 18, 5, -1) + b"\0"
_FIXED_V18 = struct.pack(">iiibii", 500, 1, 1000, 0, 0, -1)
_PARTITION_V18 = struct.pack(">iiqiqi", 0, 3, 42, 2, 0, 1000)


@pytest.mark.parametrize(
    ("partition_tags", "body_tags"),
    [
        (b"\0", b"\0"),
        (b"\x01\x01\x08" + struct.pack(">q", 77), b"\0"),  # high_watermark
        (b"\x02\x00\x10" + b"d" * 16 + b"\x01\x08" + struct.pack(">q", 77), b"\0"),  # directory id, high_watermark
        (b"\x01\x01\x07" + struct.pack(">q", 77)[:7], b"\0"),  # high_watermark in a short field
        (b"\x01\x02\x01\x00", b"\0"),  # an unknown partition tag
        (b"\x01\x00\x10" + b"d" * 15, b"\0"),  # a directory id past the end
        (b"\0", b"\x01\x01\x0d" + struct.pack(">iq", 2, 9) + b"\0"),  # replica_state of broker 2
        (b"\0", b"\x01\x01\x0e" + struct.pack(">iq", 2, 9) + b"\x01\x00\x00"),  # replica_state with a tag of its own
        (b"\0", b"\x02\x00\x03\x03ab\x01\x0d" + struct.pack(">iq", 3, 9) + b"\0"),  # cluster_id, replica_state
        (b"\0", b"\x01\x02\x01\x00"),  # an unknown body tag
    ],
)
def test_v18_tagged_fields_as_the_general_decoder(partition_tags: bytes, body_tags: bytes) -> None:
    topic = b"\x02" + uuid.UUID(int=5).bytes + b"\x02" + _PARTITION_V18 + partition_tags + b"\0"
    frame = _HEADER_V18 + _FIXED_V18 + topic + b"\x01\x01" + body_tags
    general, fast = _outcome(decode_request, frame), _outcome(decode_fetch_request, frame)
    assert (general is None) == (fast is None)
    if general is not None and fast is not None:
        assert _fields(fast[4]) == _expected(general[4])
