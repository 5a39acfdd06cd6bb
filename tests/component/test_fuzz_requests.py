"""Malformed requests never cause a traceback: for every API and version the broker advertises, frames derived from
valid bodies (truncated, extended, random, overwritten, with hostile lengths) and valid bodies of random field values
go straight to the broker's dispatcher. Each must answer a well-formed response of that version with the request's
correlation id and without UNKNOWN_SERVER_ERROR, or raise a KafkaError (the network layer then closes the
connection); nothing is logged at ERROR level."""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import mq
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError, decode_response, request_schema, response_schema
from mq.protocol.entities import build
from mq.server.api_dispatch import ApiDispatcher
from mq.server.clock import ManualClock
from mq.server.network import ClientAddress
from tests.fuzz_requests import hostile_count_frame, malformed_frames, valid_frame

CLIENT = ClientAddress("127.0.0.1", 1, 1)
CORRELATION_ID = 0x5EED
EXAMPLES_PER_VERSION = 25
PARKED_ADVANCE_MS = 2**31
"""A request still pending after a moment waits on the broker's clock (a long poll, a rebalance): move it this far."""
MQ_SOURCES = str(Path(mq.__file__).parent)


def from_mq(record: logging.LogRecord) -> bool:
    """A line the broker logged (not a client library's, e.g. of another test's client still retrying)."""
    return record.pathname.startswith(MQ_SOURCES)


CLOSING_CODES = {ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION}
"""A frame that does not decode (or has no schema for its version) closes its connection with one of these."""


def error_codes(entity: Any) -> Iterator[int]:
    """Every error_code field anywhere in a decoded response."""
    if isinstance(entity, tuple):
        for item in entity:
            yield from error_codes(item)
    elif hasattr(entity, "__dataclass_fields__"):
        for name in entity.__dataclass_fields__:
            value = getattr(entity, name)
            if name == "error_code":
                yield int(value)
            else:
                yield from error_codes(value)


def check_response(api_key: int, api_version: int, response: Any) -> None:
    if response is None:
        assert api_key == ApiKey.PRODUCE, f"{ApiKey(api_key).name} answered nothing"
        return
    if isinstance(response, list):  # a fetch answer with file slices: its first piece holds size and header
        assert api_key == ApiKey.FETCH and isinstance(response[0], bytes)
        assert struct.unpack_from(">i", response[0], 4)[0] == CORRELATION_ID
        return
    (size,) = struct.unpack_from(">i", response, 0)
    assert size == len(response) - 4
    correlation_id, body = decode_response(response[4:], response_schema(api_key, api_version))
    assert correlation_id == CORRELATION_ID
    assert ErrorCode.UNKNOWN_SERVER_ERROR not in set(error_codes(body))


SEMANTIC_GARBAGE = [
    (
        ApiKey.METADATA,
        10,
        {
            "topics": [{"name": None, "topic_id": uuid.UUID(int=1)}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
        ErrorCode.INVALID_REQUEST,
    ),
    (ApiKey.CREATE_PARTITIONS, 1, {"topics": [{"name": "", "count": 3}], "timeout": 0, "validate_only": False}, 3),
    (ApiKey.DELETE_TOPICS, 4, {"topic_names": [""], "timeout": 0}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (
        ApiKey.CREATE_TOPICS,
        5,
        {"topics": [{"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1}], "timeout": 0},
        ErrorCode.INVALID_PARTITIONS,
    ),
    (
        ApiKey.DESCRIBE_CONFIGS,
        1,
        {"resources": [{"resource_type": 2, "resource_name": "", "configuration_keys": None}]},
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ),
    (
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        {"timeout": 0, "topics": [{"name": "/", "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ),
    (ApiKey.ELECT_LEADERS, 1, {"election_type": 7, "topic_partitions": None, "timeout": 0}, 42),
]
"""Bodies that decode but make no sense, with the error code their answer carries."""


@pytest.mark.parametrize(("api_key", "api_version", "values", "code"), SEMANTIC_GARBAGE)
def test_a_body_that_makes_no_sense_answers_an_error_code(
    in_process_broker: Callable[..., Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    api_key: int,
    api_version: int,
    values: dict[str, Any],
    code: int,
) -> None:
    broker = in_process_broker([f"log.dirs={tmp_path / 'logs'}"])
    schema = request_schema(api_key, api_version)
    assert schema is not None
    frame = valid_frame(api_key, api_version, CORRELATION_ID, build(schema, values))
    answer = asyncio.run_coroutine_threadsafe(broker.server.server.handler(bytearray(frame), CLIENT), broker.loop)
    response = answer.result(30)
    check_response(api_key, api_version, response)
    _, body = decode_response(response[4:], response_schema(api_key, api_version))
    assert code in set(error_codes(body))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and from_mq(r)]


@pytest.mark.timeout(900)  # every version of every API the broker advertises, 25 examples each
def test_malformed_requests_answer_an_error_or_close_the_connection(
    in_process_broker: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = in_process_broker([f"log.dirs={tmp_path / 'logs'}", "num.partitions=1"], ManualClock())
    dispatcher = broker.server.server.handler
    assert isinstance(dispatcher, ApiDispatcher)
    advertised = dispatcher.advertised()
    assert {a["api_key"] for a in advertised} >= {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.CREATE_TOPICS}
    caplog.set_level(logging.WARNING)

    def dispatch(frame: bytes) -> Any:
        pending = asyncio.run_coroutine_threadsafe(dispatcher(bytearray(frame), CLIENT), broker.loop)
        try:
            return pending.result(1.0)  # an answer not there by then is parked (a loaded machine answers slowly)
        except TimeoutError:
            broker.advance(PARKED_ADVANCE_MS)
            return pending.result(30)

    for entry in advertised:
        for api_version in range(entry["min_version"], entry["max_version"] + 1):
            fuzz_version(dispatch, caplog, entry["api_key"], api_version)
            hostile = hostile_count_frame(entry["api_key"], api_version, CORRELATION_ID)
            if hostile is not None:
                with pytest.raises(InvalidRequestError):
                    dispatch(hostile)


def fuzz_version(
    dispatch: Callable[[bytes], Any], caplog: pytest.LogCaptureFixture, api_key: int, api_version: int
) -> None:
    @settings(
        max_examples=EXAMPLES_PER_VERSION,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(malformed_frames(api_key, api_version, CORRELATION_ID))
    def fuzz(mutated: tuple[str, bytes]) -> None:
        mutation, frame = mutated
        caplog.clear()
        try:
            response = dispatch(frame)
        except KafkaError as exc:
            assert exc.code in CLOSING_CODES, f"{mutation}: {exc!r}"
            assert mutation != "valid" or exc.code == ErrorCode.UNSUPPORTED_VERSION, repr(exc)
        else:
            check_response(api_key, api_version, response)
        errors = [r for r in caplog.records if (r.levelno >= logging.ERROR or r.exc_info) and from_mq(r)]
        assert not errors, f"{mutation} {frame.hex()}: {errors[0].getMessage()}"

    fuzz()
