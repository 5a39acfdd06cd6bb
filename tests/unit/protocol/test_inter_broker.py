"""The inter-broker APIs encode and decode through the same codec as every other API."""

from __future__ import annotations

import struct

from mq.protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_schema,
    response_schema,
)
from mq.protocol.entities import build


def round_trip(api_key: int, version: int, body: dict) -> object:
    entity = build(request_schema(api_key, version), body)
    wire = encode_request(RequestHeader(api_key, version, 9, "controller-1", 0), entity)
    header, decoded = decode_request(wire[4:])
    assert (header.api_key, header.api_version, header.client_id) == (api_key, version, "controller-1")
    assert decoded == entity
    return decoded


def test_leader_and_isr() -> None:
    decoded = round_trip(
        4,
        5,
        {
            "controller_id": 1,
            "controller_epoch": 3,
            "max_broker_epoch": 77,
            "topic_states": [
                {
                    "topic_name": "orders",
                    "partition_states": [
                        {
                            "partition_index": 0,
                            "controller_epoch": 3,
                            "leader": 2,
                            "leader_epoch": 5,
                            "isr": [2, 3],
                            "zk_version": 4,
                            "replicas": [2, 3, 1],
                            "is_new": True,
                        }
                    ],
                }
            ],
            "live_leaders": [{"broker_id": 2, "host_name": "127.0.0.1", "port": 9093}],
        },
    )
    state = decoded.topic_states[0].partition_states[0]
    assert (state.leader, state.isr, state.replicas, state.is_new) == (2, (2, 3), (2, 3, 1), True)


def test_stop_replica_bytes() -> None:
    entity = build(
        request_schema(5, 3),
        {
            "controller_id": 1,
            "controller_epoch": 2,
            "delete_partitions": True,
            "topics": [{"name": "t", "partition_indexes": [0, 1]}],
        },
    )
    wire = encode_request(RequestHeader(5, 3, 1, None, 0), entity)
    body = wire[4 + 11 :]  # size, api key/version, correlation id, null client id, empty tags
    assert body[:16] == struct.pack(">iiq", 1, 2, -1)
    assert body[16:] == bytes.fromhex("010202740300000000000000010000")


def test_update_metadata_and_responses() -> None:
    round_trip(
        6,
        7,
        {
            "controller_id": 1,
            "controller_epoch": 1,
            "topic_states": [
                {
                    "topic_name": "t",
                    "partition_states": [
                        {
                            "partition_index": 0,
                            "controller_epoch": 1,
                            "leader": 1,
                            "leader_epoch": 0,
                            "isr": [1],
                            "zk_version": 0,
                            "replicas": [1],
                        }
                    ],
                }
            ],
            "live_brokers": [
                {
                    "id": 1,
                    "endpoints": [{"port": 9092, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}],
                    "rack": None,
                }
            ],
        },
    )
    round_trip(7, 3, {"broker_id": 2, "broker_epoch": 10})
    for api_key, version, body in (
        (4, 5, {"error_code": 0, "partition_errors": [{"topic_name": "t", "partition_index": 0, "error_code": 6}]}),
        (5, 3, {"error_code": 0, "partition_errors": []}),
        (6, 7, {"error_code": 11}),
        (7, 3, {"error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 1}]}),
    ):
        schema = response_schema(api_key, version)
        entity = build(schema, body)
        correlation_id, decoded = decode_response(encode_response(5, entity)[4:], schema)
        assert (correlation_id, decoded) == (5, entity)
