from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mq.errors import RecordError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import encode_response, response_schema
from mq.protocol.entities import build
from mq.protocol.produce_response import PartitionResponse, TopicKey, encode_produce_response, with_throttle_time
from mq.protocol.response_writer import NodeEndpoint

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
    current_leader=st.just((-1, -1)) | st.tuples(st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1)),
)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=8), st.lists(partition_responses, max_size=3)), max_size=3)
endpoints = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.text(min_size=1, max_size=8), st.integers(0, 65535), st.none() | st.text()),
    max_size=3,
)


def _keyed(version: int, topics: list[tuple[str, list[PartitionResponse]]]) -> list[tuple[TopicKey, list[Any]]]:
    """``topics`` keyed as ``version`` names them: from v13 by an id made from the name."""
    if version < 13:
        return list(topics)
    return [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics]


def _kio(
    version: int,
    correlation_id: int,
    topics: list[tuple[TopicKey, list[PartitionResponse]]],
    throttle: int,
    node_endpoints: list[NodeEndpoint] = (),  # type: ignore[assignment]
) -> bytes:
    """The same response built through kio's generated schema."""

    def append_time(ms: int) -> datetime.datetime | None:
        return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)

    values = {
        "node_endpoints": [
            {"node_id": node, "host": host, "port": port, "rack": rack} for node, host, port, rack in node_endpoints
        ],
        "responses": [
            {
                "topic_id" if isinstance(key, uuid.UUID) else "name": key,
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
                        "current_leader": {"leader_id": p.current_leader[0], "leader_epoch": p.current_leader[1]},
                    }
                    for p in parts
                ],
            }
            for key, parts in topics
        ],
        "throttle_time": throttle,
    }
    return encode_response(correlation_id, build(response_schema(ApiKey.PRODUCE, version), values))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 13),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=topics,
    endpoints=endpoints,
    throttle=st.integers(0, 2**31 - 1),
)
def test_bytes_equal_kios_encoding(
    version: int,
    correlation_id: int,
    topics: list[tuple[str, list[PartitionResponse]]],
    endpoints: list[NodeEndpoint],
    throttle: int,
) -> None:
    """Every version against kio's (v10+ with current leaders and node endpoints, v13 keyed by topic id), and the
    throttle time written into an encoded response where kio writes it."""
    keyed = _keyed(version, topics)
    ours = encode_produce_response(version, correlation_id, keyed, 0, endpoints)
    assert ours == _kio(version, correlation_id, keyed, 0, endpoints)
    if version >= 1:
        assert with_throttle_time(ours, version, throttle) == _kio(version, correlation_id, keyed, throttle, endpoints)


def test_unsupported_version_is_refused() -> None:
    with pytest.raises(ValueError, match="produce response version 14 is not supported"):
        encode_produce_response(14, 1, [])
