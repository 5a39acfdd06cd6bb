"""The piecewise Fetch response equals what kio and kafka-python decode, for every version, with file regions."""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.protocol.consumer import FetchResponse as ClientFetchResponse
from vectors import V2_HELLO

from mq.protocol.codec import decode_response, response_schema
from mq.protocol.fetch_response import (
    FetchPartition,
    FetchTopic,
    FileRegion,
    encode_empty_fetch_response,
    encode_fetch_response,
    keyed,
)
from mq.protocol.response_writer import NodeEndpoint


@dataclass(frozen=True)
class Region:
    fd: int
    position: int
    length: int


@pytest.fixture
def region(tmp_path: Path) -> Iterator[Region]:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"junk" + V2_HELLO + V2_HELLO + b"tail")
    fd = os.open(path, os.O_RDONLY)
    yield Region(fd, 4, 2 * len(V2_HELLO))
    os.close(fd)


def materialise(pieces: list[bytes | FileRegion]) -> bytes:
    return b"".join(p if isinstance(p, bytes) else os.pread(p.fd, p.length, p.position) for p in pieces)


def topics(region: Region) -> list[FetchTopic]:
    return [
        FetchTopic(
            "orders",
            uuid.UUID(int=12345),
            [
                FetchPartition(0, 0, 2, 2, 0, None, -1, region),
                FetchPartition(1, 1, 10, 9, 3, [(7, 4)], -1, None),
                FetchPartition(2, 0, 1, 1, 0, [], -1, V2_HELLO),
            ],
        ),
        FetchTopic("empty", None, []),
    ]


@pytest.mark.parametrize("version", range(19))
def test_pieces_decode_with_kio(version: int, region: Region) -> None:
    wire = materialise(encode_fetch_response(version, 42, topics(region), throttle_time_ms=5, session_id=0))
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    correlation_id, body = decode_response(wire[4:], response_schema(1, version))
    assert correlation_id == 42
    first = body.responses[0]
    if version >= 13:
        assert first.topic_id == uuid.UUID(int=12345)
    else:
        assert first.topic == "orders"
    p0, p1, p2 = first.partitions
    assert bytes(p0.records) == V2_HELLO + V2_HELLO
    assert p0.high_watermark == 2
    if version >= 4:
        assert p0.last_stable_offset == 2
    assert p1.records is None and int(p1.error_code) == 1
    if version >= 4:
        assert [(a.producer_id, a.first_offset) for a in p1.aborted_transactions] == [(7, 4)]
    assert bytes(p2.records) == V2_HELLO
    if version >= 5:
        assert p1.log_start_offset == 3
    assert body.responses[1].partitions == ()


@pytest.mark.parametrize("version", [0, 1, 3, 4, 7, 11, 12])
def test_pieces_decode_with_an_independent_client(version: int, region: Region) -> None:
    wire = materialise(encode_fetch_response(version, 9, topics(region)))
    response = ClientFetchResponse.decode(wire[4:], version=version, header=True)
    partitions = response.responses[0].partitions
    assert bytes(partitions[0].records) == V2_HELLO + V2_HELLO
    assert partitions[1].error_code == 1


def test_regions_stay_regions(region: Region) -> None:
    pieces = encode_fetch_response(12, 1, topics(region))
    assert [p for p in pieces if not isinstance(p, bytes)] == [region]


def test_unsupported_version() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(19, 1, [])


@pytest.mark.parametrize("version", range(12, 19))
def test_current_leaders_and_node_endpoints_decode_with_kio(version: int, region: Region) -> None:
    """KIP-951's tagged fields: a partition's current leader from v12, the node endpoints from v16."""
    answered = topics(region)
    answered[0].partitions[1].current_leader = (2, 7)
    endpoints: list[NodeEndpoint] = [(2, "broker-2", 9093, None), (3, "broker-3", 9094, "r1")]
    wire = materialise(encode_fetch_response(version, 42, answered, node_endpoints=endpoints))
    _, body = decode_response(wire[4:], response_schema(1, version))
    p0, p1, _ = body.responses[0].partitions
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (2, 7)
    assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (-1, -1)
    assert bytes(p0.records) == V2_HELLO + V2_HELLO
    found = [(e.node_id, e.host, e.port, e.rack) for e in getattr(body, "node_endpoints", ())]
    assert found == (endpoints if version >= 16 else [])


@pytest.mark.parametrize("version", range(19))
@pytest.mark.parametrize("read_committed", [False, True])
def test_empty_responses_from_their_layout_equal_the_encoders(version: int, read_committed: bool) -> None:
    first, second = ("tópic", "b") if version < 13 else (uuid.UUID(int=1), uuid.UUID(int=2))
    shape = ((first, (0, 7)), (second, (3,)))
    values = [(0, 10, 9, 2), (6, -1, -1, -1), (0, 2**40, 2**40 - 1, 0)]
    for correlation_id in (1, -5):  # the second answer is patched into the layout the first one left
        aborted: list[tuple[int, int]] | None = [] if read_committed else None
        partitions = [FetchPartition(p, *v, aborted, -1, b"") for p, v in zip((0, 7, 3), values, strict=True)]
        topics = [FetchTopic(*keyed(first), partitions[:2]), FetchTopic(*keyed(second), partitions[2:])]
        expected = b"".join(encode_fetch_response(version, correlation_id, topics))  # type: ignore[arg-type]
        assert encode_empty_fetch_response(version, correlation_id, shape, read_committed, values) == expected
