"""Requests encoded by an independent client (kafka-python) decode with mq; mq's responses decode with it."""

from __future__ import annotations

import datetime
import struct
from typing import Any

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.response import ApiVersion as ApiVersionsKey
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i16, i32Timedelta
from vectors import V2_HELLO

from mq.protocol.codec import (
    InvalidRequestError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_schema,
)
from mq.protocol.entities import build


def client_frame(request: Any, correlation_id: int = 11, client_id: str | None = "tester") -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))[4:]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_request(version: int) -> None:
    kwargs = {"client_software_name": "kp", "client_software_version": "3"} if version >= 3 else {}
    header, body = decode_request(client_frame(ApiVersionsRequest[version](**kwargs)))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, version, 11, "tester")
    if version >= 3:
        assert body.client_software_name == "kp"


@pytest.mark.parametrize("version", [1, 4, 9, 12, 13])
def test_metadata_request(version: int) -> None:
    cls = MetadataRequest[version]
    request = cls(topics=[cls.MetadataRequestTopic(name="orders")], allow_auto_topic_creation=True)
    header, body = decode_request(client_frame(request, client_id=None))
    assert header.client_id is None
    assert [t.name for t in body.topics] == ["orders"]


@pytest.mark.parametrize("version", [3, 7, 9])
def test_produce_request_keeps_records_as_bytes(version: int) -> None:
    cls = ProduceRequest[version]
    request = cls(
        transactional_id=None,
        acks=-1,
        timeout_ms=1500,
        topic_data=[
            cls.TopicProduceData(
                name="t", partition_data=[cls.TopicProduceData.PartitionProduceData(index=2, records=V2_HELLO)]
            )
        ],
    )
    _header, body = decode_request(client_frame(request))
    partition = body.topic_data[0].partition_data[0]
    assert (body.acks, partition.index, bytes(partition.records)) == (-1, 2, V2_HELLO)


def test_api_versions_response_v3_reads_in_the_client() -> None:
    response = ApiVersionsResponseV3(
        error_code=KioErrorCode.none,
        api_keys=(ApiVersionsKey(api_key=i16(0), min_version=i16(3), max_version=i16(9)),),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
    )
    wire = encode_response(42, response)
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    assert struct.unpack(">i", wire[4:8])[0] == 42  # header v0: no tagged fields after the correlation id
    decoded = ApiVersionsResponse.decode(wire[4:], version=3, header=True)
    assert decoded.api_keys[0].max_version == 9


def test_api_versions_response_v0_body() -> None:
    response = ApiVersionsResponseV0(error_code=KioErrorCode.unsupported_version, api_keys=())
    correlation_id, body = decode_response(encode_response(5, response)[4:], ApiVersionsResponseV0)
    assert (correlation_id, body.error_code) == (5, KioErrorCode.unsupported_version)


def test_request_round_trip_through_mq_encoder() -> None:
    cls = MetadataRequest[12]
    _, body = decode_request(client_frame(cls(topics=None, allow_auto_topic_creation=False)))
    wire = encode_request(RequestHeader(3, 12, 99, "mq", 0), body)
    header, again = decode_request(wire[4:])
    assert (header.correlation_id, header.client_id, again) == (99, "mq", body)


def test_unknown_version_is_unsupported_not_malformed() -> None:
    frame = struct.pack(">hhih", 18, 99, 1, -1)
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)


@pytest.mark.parametrize("cut", [0, 3, 7, 9, 12])
def test_truncated_requests_are_malformed(cut: int) -> None:
    frame = client_frame(MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
    with pytest.raises((InvalidRequestError, UnsupportedVersionError)):
        decode_request(frame[: cut if cut else len(frame) - 1])


def test_trailing_bytes_are_ignored() -> None:
    frame = client_frame(MetadataRequest[4](topics=None, allow_auto_topic_creation=True))
    _, body = decode_request(frame + b"\x00\x00\x00")
    assert body.topics is None


def test_describe_log_dirs_v0_reads_as_v1_and_its_answer_reads_in_the_client() -> None:
    request = DescribeLogDirsRequest[0](
        topics=[DescribeLogDirsRequest[0].DescribableLogDirTopic(topic="t", partitions=[0])]
    )
    header, body = decode_request(client_frame(request))
    assert (header.api_key, header.api_version) == (35, 0)
    assert [(t.topic, list(t.partitions)) for t in body.topics] == [("t", [0])]
    answer = {"throttle_time": 0, "results": [{"error_code": 0, "log_dir": "/d", "topics": []}]}
    frame = encode_response(11, build(response_schema(35, 0), answer))
    decoded = DescribeLogDirsResponse[0].decode(frame[8:])
    assert [(r.error_code, r.log_dir) for r in decoded.results] == [(0, "/d")]
