from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.errors import RecordError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import encode_response, response_schema
from mq.protocol.entities import build
from mq.protocol.produce_response import PartitionResponse, encode_produce_response

partition_responses = st.builds(
    PartitionResponse,
    index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 1, 6, 10, 19, 87]),
    base_offset=st.integers(-1, 2**63 - 1),
    log_append_time_ms=st.sampled_from([-1, 0, 1_795_000_000_000]),
    log_start_offset=st.integers(-1, 2**40),
    error_message=st.none() | st.text(max_size=12),
    record_errors=st.lists(
        st.builds(RecordError, st.integers(0, 2**31 - 1), st.none() | st.text(max_size=12)), max_size=3
    ).map(tuple),
)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=8), st.lists(partition_responses, max_size=3)), max_size=3)


def _kio(version: int, correlation_id: int, topics: list[tuple[str, list[PartitionResponse]]], throttle: int) -> bytes:
    """The same response built through kio's generated schema."""

    def append_time(ms: int) -> datetime.datetime | None:
        return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)

    values = {
        "responses": [
            {
                "name": name,
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": p.error_code,
                        "base_offset": p.base_offset,
                        "log_append_time": append_time(p.log_append_time_ms),
                        "log_start_offset": p.log_start_offset,
                        "record_errors": [
                            {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                            for e in p.record_errors
                        ],
                        "error_message": p.error_message,
                    }
                    for p in parts
                ],
            }
            for name, parts in topics
        ],
        "throttle_time": throttle,
    }
    return encode_response(correlation_id, build(response_schema(ApiKey.PRODUCE, version), values))


@settings(max_examples=200, deadline=None)
@given(version=st.integers(0, 9), correlation_id=st.integers(-(2**31), 2**31 - 1), topics=topics)
def test_bytes_equal_kios_encoding(
    version: int, correlation_id: int, topics: list[tuple[str, list[PartitionResponse]]]
) -> None:
    expected = _kio(version, correlation_id, topics, 0)
    assert encode_produce_response(version, correlation_id, topics) == expected


def test_unsupported_version_is_refused() -> None:
    with pytest.raises(ValueError, match="produce response version 10 is not supported"):
        encode_produce_response(10, 1, [])
