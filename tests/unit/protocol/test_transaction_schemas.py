"""DescribeTransactions v0 responses with no transaction started and WriteTxnMarkers v0, in Kafka's bytes."""

from __future__ import annotations

import datetime
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

STATE = {
    "error_code": 0,
    "transactional_id": "tx",
    "transaction_state": "Empty",
    "transaction_timeout": 60000,
    "producer_id": 7,
    "producer_epoch": 2,
    "topics": [],
}


def test_describe_transactions_reads_and_writes_a_start_time_of_minus_one_as_none() -> None:
    schema = response_schema(65, 0)
    wire = encode_response(3, build(schema, {"transaction_states": [{**STATE, "transaction_start_time": None}]}))
    # size, correlation id, header tags, throttle, states (1 + 1), error, id, state, timeout, start time
    start = 4 + 4 + 1 + 4 + 1 + 2 + (1 + 2) + (1 + 5) + 4
    assert struct.unpack_from(">q", wire, start) == (-1,)
    _, decoded = decode_response(wire[4:], schema)
    (state,) = decoded.transaction_states
    assert state.transaction_start_time is None
    assert (state.transactional_id, state.producer_id, state.transaction_timeout.total_seconds()) == ("tx", 7, 60)


def test_describe_transactions_keeps_a_start_time() -> None:
    schema = response_schema(65, 0)
    started = datetime.datetime.fromtimestamp(1_700_000_000.123, datetime.UTC)
    body = {
        "transaction_states": [
            {**STATE, "transaction_start_time": started, "topics": [{"topic": "t", "partitions": [0, 2]}]}
        ]
    }
    _, decoded = decode_response(encode_response(3, build(schema, body))[4:], schema)
    (state,) = decoded.transaction_states
    assert state.transaction_start_time == started
    assert [(t.topic, t.partitions) for t in state.topics] == [("t", (0, 2))]


def test_write_txn_markers_v0_request_bytes() -> None:
    marker = {
        "producer_id": 9,
        "producer_epoch": 3,
        "transaction_result": False,
        "topics": [{"name": "t", "partition_indexes": [4]}],
        "coordinator_epoch": 5,
    }
    entity = build(request_schema(27, 0), {"markers": [marker]})
    wire = encode_request(RequestHeader(27, 0, 1, "c", 0), entity)
    body = wire[4 + 2 + 2 + 4 + 2 + 1 :]
    expected = struct.pack(">iqhbihsiii", 1, 9, 3, 0, 1, 1, b"t", 1, 4, 5)
    assert body == expected
    header, decoded = decode_request(wire[4:])
    assert (header.api_key, header.api_version) == (27, 0)
    assert decoded == entity


def test_write_txn_markers_v0_response_round_trip() -> None:
    schema = response_schema(27, 0)
    result = {"producer_id": 9, "topics": [{"name": "t", "partitions": [{"partition_index": 4, "error_code": 47}]}]}
    wire = encode_response(5, build(schema, {"markers": [result]}))
    assert wire[8:] == struct.pack(">iqihsiih", 1, 9, 1, 1, b"t", 1, 4, 47)
    _, decoded = decode_response(wire[4:], schema)
    assert decoded.markers[0].topics[0].partitions[0].error_code == 47
