"""The immediate path's OffsetCommit reader and response encoder against kio's decoder and encoder: the reader reads
what kio reads, and reads nothing kio refuses (it leaves doubtful frames to the general path)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetCommitRequest as ClientOffsetCommitRequest

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, decode_request, encode_response, request_schema, response_schema
from mq.protocol.entities import build
from mq.protocol.offset_commit import (
    MAX_VERSION,
    MIN_VERSION,
    OffsetCommit,
    encode_offset_commit_response,
    offset_commit_of,
    read_offset_commit,
)
from tests.fuzz_requests import malformed_frames, valid_frame

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)


def general(frame: bytes) -> OffsetCommit | None:
    try:
        _, body = decode_request(frame)
    except InvalidRequestError:
        return None
    return offset_commit_of(body)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_reads_what_kio_encodes(data: st.DataObject, version: int) -> None:
    body = data.draw(st.from_type(request_schema(ApiKey.OFFSET_COMMIT, version)))
    frame = valid_frame(ApiKey.OFFSET_COMMIT, version, 7, body)
    decoded = general(frame)
    assert read_offset_commit(bytearray(frame), version) == decoded
    if decoded is None:  # kio writes retention times it cannot read back (beyond 2**63 microseconds)
        assert abs(body.retention_time) > timedelta(microseconds=2**63 - 1)
    else:
        assert decoded == offset_commit_of(body)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_reads_nothing_kio_refuses_and_reads_alike(data: st.DataObject, version: int) -> None:
    _, frame = data.draw(malformed_frames(ApiKey.OFFSET_COMMIT, version, 3))
    fast = read_offset_commit(bytearray(frame), version)
    if fast is not None:
        assert fast == general(frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_left_to_the_general_path(version: int) -> None:
    body = build(
        request_schema(ApiKey.OFFSET_COMMIT, version),
        {
            "group_id": "group",
            "generation_id_or_member_epoch": 4,
            "member_id": "member",
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [
                {
                    "name": "tópic",
                    "partitions": [
                        {"partition_index": 1, "committed_offset": 42, "committed_metadata": "m"},
                        {"partition_index": 2, "committed_offset": 7, "committed_metadata": None},
                    ],
                }
            ],
        },
    )
    frame = valid_frame(ApiKey.OFFSET_COMMIT, version, 1, body)
    assert read_offset_commit(bytearray(frame), version) == offset_commit_of(body)
    for end in range(len(frame)):
        assert read_offset_commit(bytearray(frame[:end]), version) is None, end


@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=st.lists(
        st.tuples(
            st.text(max_size=10),
            st.lists(st.tuples(st.integers(0, 2**31 - 1), st.sampled_from([0, 15, 16, 22, 25, 27])), max_size=4),
        ),
        max_size=3,
    ),
)
def test_the_response_encodes_as_kio_encodes(
    version: int, correlation_id: int, topics: list[tuple[str, list[tuple[int, int]]]]
) -> None:
    values = {
        "throttle_time": 0,
        "topics": [
            {"name": name, "partitions": [{"partition_index": p, "error_code": e} for p, e in partitions]}
            for name, partitions in topics
        ],
    }
    general_bytes = encode_response(correlation_id, build(response_schema(ApiKey.OFFSET_COMMIT, version), values))
    assert encode_offset_commit_response(version, correlation_id, topics) == general_bytes


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_what_kafka_python_encodes(version: int) -> None:
    topic_class = ClientOffsetCommitRequest.OffsetCommitRequestTopic
    partition_class = topic_class.OffsetCommitRequestPartition
    partitions = [
        partition_class(
            partition_index=3, committed_offset=42, committed_leader_epoch=5, committed_metadata="m", version=version
        ),
        partition_class(
            partition_index=4, committed_offset=7, committed_leader_epoch=-1, committed_metadata=None, version=version
        ),
    ]
    request = ClientOffsetCommitRequest(
        group_id="gróup",
        generation_id_or_member_epoch=6,
        member_id="member-1",
        group_instance_id="instance" if version >= 7 else None,
        retention_time_ms=60_000,
        topics=[topic_class(name="tópic", partitions=partitions, version=version)],
        version=version,
    )
    request.with_header(correlation_id=9, client_id="kafka-python")
    found = read_offset_commit(bytearray(request.encode(header=True, framed=False)), version)
    assert found == OffsetCommit(
        "gróup",
        6,
        "member-1",
        "instance" if version >= 7 else None,
        60_000 if version <= 4 else -1,
        [("tópic", [(3, 42, 5 if version >= 6 else -1, "m"), (4, 7, -1, None)])],
    )
