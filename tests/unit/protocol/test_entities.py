from __future__ import annotations

import datetime

import pytest
from kafka.protocol.metadata import MetadataResponse as ClientMetadataResponse
from kio.schema.errors import ErrorCode as KioErrorCode

from mq.protocol.codec import decode_response, encode_response, response_schema
from mq.protocol.entities import build

METADATA = {
    "throttle_time": 0,
    "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}],
    "cluster_id": "abc",
    "controller_id": 0,
    "topics": [
        {
            "error_code": 0,
            "name": "t",
            "is_internal": False,
            "topic_authorized_operations": -2147483648,
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": 0,
                    "leader_id": 0,
                    "leader_epoch": 3,
                    "replica_nodes": [0],
                    "isr_nodes": [0],
                    "offline_replicas": [],
                }
            ],
        }
    ],
}


@pytest.mark.parametrize("version", [1, 4, 5, 9, 12])
def test_one_description_serves_every_version(version: int) -> None:
    schema = response_schema(3, version)
    entity = build(schema, METADATA)
    wire = encode_response(7, entity)
    decoded = ClientMetadataResponse.decode(wire[4:], version=version, header=True)
    topic = decoded.topics[0]
    assert topic.name == "t"
    assert topic.partitions[0].leader_id == 0
    assert decoded.brokers[0].host == "127.0.0.1"
    _, again = decode_response(wire[4:], schema)
    assert again == entity


def test_conversions() -> None:
    entity = build(response_schema(18, 3), {"error_code": 35, "api_keys": [], "throttle_time": 250})
    assert entity.error_code is KioErrorCode.unsupported_version
    assert entity.throttle_time == datetime.timedelta(milliseconds=250)


def test_missing_required_scalar_is_an_error() -> None:
    with pytest.raises(KeyError, match="host"):
        build(response_schema(3, 12), {"brokers": [{"node_id": 0, "port": 1}], "topics": []})


def test_null_lists() -> None:
    from mq.protocol.codec import request_schema

    entity = build(
        request_schema(3, 12),
        {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
    )
    assert entity.topics is None
