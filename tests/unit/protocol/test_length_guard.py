"""The length guard accepts every valid request body and refuses counts and lengths the frame cannot hold."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, decode_request, request_schema
from mq.protocol.length_guard import LengthError, check_lengths
from tests.fuzz_requests import valid_frame

SCHEMAS = [
    (key, version, schema)
    for key in ApiKey
    for version in range(20)
    if (schema := request_schema(key, version)) is not None
]
HEADER = 8 + 2 + len("fuzz")


@pytest.mark.parametrize(("api_key", "api_version", "schema"), SCHEMAS, ids=lambda v: str(v))
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_valid_body_passes(api_key: int, api_version: int, schema: type[Any], data: st.DataObject) -> None:
    frame = valid_frame(api_key, api_version, 1, data.draw(st.from_type(schema)))
    check_lengths(schema, frame, HEADER + (1 if schema.__flexible__ else 0))


@pytest.mark.parametrize(
    ("api_key", "api_version", "body"),
    [
        (ApiKey.METADATA, 1, struct.pack(">i", 2**31 - 1) + b"\0\1a"),  # int32 count
        (ApiKey.METADATA, 9, b"\xff\xff\xff\xff\x0f\0"),  # compact count of 2^32 - 2
        (ApiKey.FIND_COORDINATOR, 4, b"\0\xc6\xe7\xf7\xb7\x76"),  # a 5-byte varint count above 2^34
        (ApiKey.DESCRIBE_GROUPS, 0, struct.pack(">ih", 1, 2**15 - 1) + b"g"),  # a string longer than the frame
        (ApiKey.METADATA, 9, b"\1\0\0\0" + b"\1\0\x7f" + b"ab"),  # a tagged field of 127 bytes in 2
        (ApiKey.DELETE_RECORDS, 0, struct.pack(">ii", -1, 1000)),  # a null array where none is allowed
        (ApiKey.DESCRIBE_GROUPS, 0, struct.pack(">ih", 1, -1)),  # a null string where none is allowed
    ],
)
def test_a_count_beyond_the_frame_or_a_forbidden_null_is_refused_before_decoding(
    api_key: int, api_version: int, body: bytes
) -> None:
    schema = request_schema(api_key, api_version)
    assert schema is not None
    header = struct.pack(">hhih", api_key, api_version, 1, -1) + (b"\0" if schema.__flexible__ else b"")
    frame = header + body
    with pytest.raises(LengthError):
        check_lengths(schema, frame, len(header))
    with pytest.raises(InvalidRequestError):
        decode_request(frame)
