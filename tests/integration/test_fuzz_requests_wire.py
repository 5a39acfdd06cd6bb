"""Malformed requests from raw sockets against a broker process: for every API and version it advertises, a few
frames derived from valid bodies (truncated, extended, random, overwritten, with hostile lengths). Each connection
gets an answer carrying its correlation id or is closed; the broker stays up, logs no traceback and no ERROR, and
its sockets and resident memory return near their baseline once the fuzzing connections are gone."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader, decode_response, encode_request, request_schema, response_schema
from mq.protocol.entities import build
from tests.fuzz_requests import hostile_count_frame, malformed_frames
from tests.integration.conftest import BrokerProcess
from tests.integration.waiting import wait_for

pytestmark = pytest.mark.slow

CORRELATION_ID = 0x5EED
EXAMPLES_PER_VERSION = 4
RSS_SLACK_KB = 50 * 1024
UNANSWERED = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP}
"""APIs whose valid requests may get no answer (acks=0) or wait for minutes (a long poll, a rebalance): their
connections are waited on only briefly, then left open until the end."""
ANSWER_TIMEOUT_S = 20.0


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes, or None when the broker closed the connection first."""
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def exchange(sock: socket.socket, frame: bytes) -> bytes | None:
    """Send one frame; the response (without its size) or None when the broker closed the connection."""
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = recv_exactly(sock, 4)
    if size is None:
        return None
    return recv_exactly(sock, struct.unpack(">i", size)[0])


def advertised(broker: BrokerProcess) -> list[tuple[int, int]]:
    schema = request_schema(ApiKey.API_VERSIONS, 0)
    assert schema is not None
    request = encode_request(RequestHeader(ApiKey.API_VERSIONS, 0, 1, "fuzz", 0), build(schema, {}))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        answer = exchange(sock, request[4:])
    assert answer is not None
    _, body = decode_response(answer, response_schema(ApiKey.API_VERSIONS, 0))
    return [(int(a.api_key), v) for a in body.api_keys for v in range(a.min_version, a.max_version + 1)]


def sockets_open(pid: int) -> int:
    """The broker's open sockets (a descriptor closed while they are counted is not one)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def rss_kb(pid: int) -> int:
    match = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.MULTILINE)
    assert match is not None
    return int(match.group(1))


def test_malformed_requests_from_sockets_are_answered_or_closed(broker: BrokerProcess) -> None:
    assert broker.process is not None
    pid = broker.process.pid
    versions = advertised(broker)
    assert len({key for key, _ in versions}) > 20
    baseline_sockets, baseline_rss = sockets_open(pid), rss_kb(pid)
    unanswered: list[socket.socket] = []
    outcomes = {"answered": 0, "closed": 0, "unanswered": 0}

    def fuzz_version(api_key: int, api_version: int) -> Callable[[], None]:
        @settings(
            max_examples=EXAMPLES_PER_VERSION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(malformed_frames(api_key, api_version, CORRELATION_ID))
        def fuzz(mutated: tuple[str, bytes]) -> None:
            mutation, frame = mutated
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=ANSWER_TIMEOUT_S)
            if api_key in UNANSWERED:
                sock.settimeout(0.5)
            try:
                answer = exchange(sock, frame)
            except TimeoutError:
                assert api_key in UNANSWERED, f"{ApiKey(api_key).name} v{api_version} {mutation}: no answer"
                outcomes["unanswered"] += 1
                unanswered.append(sock)
                return
            if answer is None:
                outcomes["closed"] += 1
            else:
                outcomes["answered"] += 1
                assert struct.unpack_from(">i", answer)[0] == CORRELATION_ID
            sock.close()

        return fuzz

    for api_key, api_version in versions:
        fuzz_version(api_key, api_version)()
        hostile = hostile_count_frame(api_key, api_version, CORRELATION_ID)
        if hostile is not None:
            with socket.create_connection(("127.0.0.1", broker.port), timeout=ANSWER_TIMEOUT_S) as sock:
                assert exchange(sock, hostile) is None, f"{ApiKey(api_key).name} v{api_version}: a hostile count"
    for sock in unanswered:
        sock.close()

    assert broker.process.poll() is None, broker.stderr()
    assert len(advertised(broker)) == len(versions)
    assert outcomes["answered"] > 0 and outcomes["closed"] > 0, outcomes
    assert wait_for(lambda: sockets_open(pid) <= baseline_sockets, timeout=30), (sockets_open(pid), baseline_sockets)
    assert rss_kb(pid) <= baseline_rss + RSS_SLACK_KB
    log = broker.stderr()
    assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:3000]
    assert not re.search(r"^\[[^]]+\] (ERROR|CRITICAL) ", log, re.MULTILINE), log
