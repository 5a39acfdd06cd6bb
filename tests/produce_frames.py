"""Produce request frames (no size prefix) encoded through kio's schemas, for the tests of both Produce readers."""

from __future__ import annotations

import datetime
import uuid

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, encode_request, request_schema
from mq.protocol.entities import build

Topics = list[tuple[str | uuid.UUID, list[tuple[int, bytes | None]]]]
"""(topic name, or id from v13, [(partition index, record set or None)])."""


def produce_frame(
    version: int,
    topics: Topics,
    *,
    acks: int = 1,
    client_id: str | None = "client-é",
    transactional_id: str | None = None,
    timeout_ms: int = 1500,
    correlation_id: int = 7,
) -> bytearray:
    values = {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout": datetime.timedelta(milliseconds=timeout_ms),
        "topic_data": [
            {
                "topic_id" if isinstance(topic, uuid.UUID) else "name": topic,
                "partition_data": [{"index": i, "records": r} for i, r in parts],
            }
            for topic, parts in topics
        ],
    }
    body = build(request_schema(ApiKey.PRODUCE, version), values)
    header = RequestHeader(ApiKey.PRODUCE, version, correlation_id, client_id, 0)
    return bytearray(encode_request(header, body)[4:])
