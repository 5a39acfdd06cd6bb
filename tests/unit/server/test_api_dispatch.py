"""Dispatch of real client request bytes (encoded by kafka-python) through the broker's API table."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from mq.errors import ErrorCode, TopicExistsError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, UnsupportedVersionError, decode_response, response_schema
from mq.server.api_dispatch import LATER, Api, ApiDispatcher, RequestContext
from mq.server.handlers.api_versions import api_versions_api
from mq.server.network import ClientAddress

CLIENT = ClientAddress("127.0.0.1", 5555, 1)


def metadata_api(behaviour: str) -> Api:
    async def handle(context: RequestContext, request: Any) -> dict[str, Any] | None:
        if behaviour == "crash":
            raise RuntimeError("boom")
        if behaviour == "kafka-error":
            raise TopicExistsError("exists")
        if behaviour == "silent":
            return None
        if behaviour == "unencodable":
            return {"brokers": [], "controller_id": 0, "topics": [{"error_code": 0, "name": None, "partitions": []}]}
        return {"brokers": [], "controller_id": 0, "topics": [{"error_code": 0, "name": "x", "partitions": []}]}

    def error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"brokers": [], "controller_id": -1, "topics": [{"error_code": code, "name": "x", "partitions": []}]}

    return Api(ApiKey.METADATA, 1, 8, handle, error)


def dispatcher(behaviour: str = "ok") -> ApiDispatcher:
    d = ApiDispatcher([metadata_api(behaviour)])
    d.add(api_versions_api(d))
    return d


def call(d: ApiDispatcher, request: Any) -> bytes | None:
    request.with_header(correlation_id=3, client_id="t")
    frame = bytes(request.encode(header=True, framed=True))[4:]
    result = asyncio.run(d(frame, CLIENT))
    assert result is None or isinstance(result, bytes)
    return result


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_the_table(version: int) -> None:
    kwargs = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"} if version >= 3 else {}
    wire = call(dispatcher(), ApiVersionsRequest[version](**kwargs))
    assert wire is not None
    response = ApiVersionsResponse.decode(wire[4:], version=version, header=True)
    assert response.error_code == 0
    ranges = {(k.api_key, k.min_version, k.max_version) for k in response.api_keys}
    assert ranges == {(3, 1, 8), (18, 0, 4)}


def test_api_versions_rejects_a_bad_software_name() -> None:
    request = ApiVersionsRequest[3](client_software_name="bad name!", client_software_version="1")
    wire = call(dispatcher(), request)
    assert wire is not None
    _, response = decode_response(wire[4:], response_schema(ApiKey.API_VERSIONS, 3))
    assert response.error_code == ErrorCode.INVALID_REQUEST


def test_newer_api_versions_gets_a_v0_answer_with_error_35() -> None:
    frame = struct.pack(">hhih", 18, 9, 77, -1) + b"\x00\x00"
    wire = asyncio.run(dispatcher()(frame, CLIENT))
    assert isinstance(wire, bytes)
    response = ApiVersionsResponse.decode(wire[4:], version=0, header=True)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert struct.unpack(">i", wire[4:8])[0] == 77
    assert {k.api_key for k in response.api_keys} == {3, 18}


def test_unsupported_version_of_another_api_is_refused() -> None:
    request = MetadataRequest[12](topics=None, allow_auto_topic_creation=False)
    with pytest.raises(UnsupportedVersionError, match="METADATA version 12 is not in the supported range 1-8"):
        call(dispatcher(), request)


def test_unknown_api_key_is_malformed() -> None:
    with pytest.raises(InvalidRequestError):
        asyncio.run(dispatcher()(struct.pack(">hhih", 999, 0, 1, -1), CLIENT))


@pytest.mark.parametrize(("behaviour", "code"), [("crash", -1), ("kafka-error", 36), ("unencodable", -1)])
def test_handler_errors_become_the_api_error_response(behaviour: str, code: int) -> None:
    wire = call(dispatcher(behaviour), MetadataRequest[4](topics=None, allow_auto_topic_creation=False))
    assert wire is not None
    assert MetadataResponse.decode(wire[4:], version=4, header=True).topics[0].error_code == code


def test_no_response_when_the_handler_says_so() -> None:
    assert call(dispatcher("silent"), MetadataRequest[4](topics=None, allow_auto_topic_creation=False)) is None


def test_the_immediate_path_asks_only_an_api_that_has_one_and_only_in_its_version_range() -> None:
    seen: list[tuple[int, int]] = []

    def now(frame: bytearray, version: int, correlation_id: int, client: ClientAddress) -> bytes:
        seen.append((version, correlation_id))
        return b"answer"

    d = ApiDispatcher([dataclasses.replace(metadata_api("ok"), now=now)])
    d.add(api_versions_api(d))

    def frame_of(request: Any) -> bytearray:
        request.with_header(correlation_id=3, client_id="t")
        return bytearray(request.encode(header=True, framed=True)[4:])

    assert d.now(frame_of(MetadataRequest[4](topics=None)), CLIENT) == b"answer"
    assert seen == [(4, 3)]
    assert d.now(frame_of(MetadataRequest[9](topics=None)), CLIENT) is LATER  # above the range: refused later
    without_now = ApiDispatcher([metadata_api("ok")])
    assert without_now.now(frame_of(MetadataRequest[4](topics=None)), CLIENT) is LATER  # no immediate handler
    assert seen == [(4, 3)]
