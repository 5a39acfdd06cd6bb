"""Produce and ApiVersions on the immediate path answer exactly what the general path answers.

Two replica managers start with the same partitions; every request goes to one through ``ApiDispatcher.now`` and
to the other through the general path, and the answers must be the same bytes (offsets included: a request one
path appends and the other refuses shows up in every later answer). The corpus covers every version, acks 0/1/-1
and invalid acks, and the refusals (unknown topic, not leader, the internal topic rule, corrupt and invalid batches
with record errors, null and empty record sets, transactional ids, an acks=all timeout); the fuzz mutates it. From
v13 the same requests name their topics by id (an unknown topic by an id no topic has).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from mq.config import BrokerConfig, TopicConfig
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import (
    InvalidRequestError,
    RequestHeader,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)
from mq.protocol.entities import build
from mq.server.api_dispatch import LATER, ApiDispatcher
from mq.server.handlers.api_versions import api_versions_api
from mq.server.handlers.produce import produce_api
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.server.network import ClientAddress
from mq.server.partition import Partition, ReplicaState
from mq.server.replica_manager import ReplicaManager
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition
from tests.fuzz_requests import malformed_frames
from tests.produce_frames import Topics
from tests.produce_frames import produce_frame as named_frame
from tests.unit.storage.storage_batches import legacy_batch, v2_batch

CLIENT = ClientAddress("127.0.0.1", 5555, 1)
LEADER, FOLLOWER = 1, 2
CONFIGS = {"c": TopicConfig(cleanup_policy="compact"), "r": TopicConfig(min_insync_replicas=1)}
LED = [("t", 0), ("t", 1), ("c", 0), ("r", 0), ("__consumer_offsets", 0)]


FOLLOWED_EPOCH = 4
"""The leader epoch of ``f``-0 in the metadata cache."""
IDS = {topic: uuid.uuid5(uuid.NAMESPACE_DNS, topic) for topic, _ in [*LED, ("f", 0), ("elsewhere", 0)]}
"""The topic ids; ``elsewhere``-0 is known to the metadata and hosted on broker 2 only."""


def produce_frame(version: int, topics: Topics, **kwargs: Any) -> bytearray:
    """A Produce frame; from v13 its topics are named by id (an unknown topic by an id no topic has)."""
    if version >= 13:
        topics = [(IDS.get(str(t), uuid.uuid5(uuid.NAMESPACE_URL, str(t))), parts) for t, parts in topics]
    return named_frame(version, topics, **kwargs)


def metadata_cache() -> MetadataCache:
    """The cluster as the broker knows it: brokers 1 and 2, ``f``-0 led by 2, the other partitions by 1."""
    cache = MetadataCache(LEADER, "cluster")
    cache.update_brokers([BrokerEndpoint(LEADER, "127.0.0.1", 9092), BrokerEndpoint(FOLLOWER, "127.0.0.2", 9093)], 1)
    for topic, index in [*LED, ("f", 0), ("elsewhere", 0)]:
        leader, epoch = (FOLLOWER, FOLLOWED_EPOCH) if topic in ("f", "elsewhere") else (LEADER, 0)
        topic_id = base64.urlsafe_b64encode(IDS[topic].bytes).rstrip(b"=").decode()
        cache.update_partition(topic, topic_id, index, PartitionInfo(leader, epoch, (leader,), (leader,)))
    return cache


def broker(directory: Path) -> ApiDispatcher:
    """A dispatcher over a replica manager leading ``LED`` (``r``-0 with a follower that never fetches, so acks=all
    waits there) and following ``f``-0."""
    return dispatcher_of(replica_manager(directory))


def dispatcher_of(rm: ReplicaManager) -> ApiDispatcher:
    cache = metadata_cache()
    rm.known_partition = lambda tp: cache.partition(tp) is not None  # as the broker wires it
    dispatcher = ApiDispatcher([produce_api(rm, None, cache)])
    dispatcher.add(api_versions_api(dispatcher))
    return dispatcher


def replica_manager(directory: Path) -> ReplicaManager:
    rm = ReplicaManager(
        BrokerConfig(), LEADER, LogManager([], TopicConfig()), lambda topic: CONFIGS.get(topic, TopicConfig())
    )
    for topic, index in [*LED, ("f", 0)]:
        tp = TopicPartition(topic, index)
        partition = Partition(tp, Log(directory / str(tp), CONFIGS.get(topic, TopicConfig())), LEADER)
        partition.leader_id, partition.leader_epoch = (FOLLOWER if topic == "f" else LEADER), 0
        partition.replicas = (LEADER, FOLLOWER) if topic == "r" else (LEADER,)
        partition.isr = frozenset(partition.replicas)
        partition.remote_replicas = {FOLLOWER: ReplicaState()} if topic == "r" else {}
        rm.partitions[tp] = partition
    return rm


def keyless() -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"v", headers=[])
    return bytes(builder.build())


def corrupt() -> bytes:
    data = bytearray(v2_batch())
    data[-1] ^= 0xFF  # the CRC no longer matches
    return bytes(data)


GOOD = v2_batch(count=1)


def transactional_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, 7, 0, 0, 1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


CASES: list[tuple[str, Callable[[int, int], bytearray], ErrorCode | None]] = [
    ("one", lambda v, a: produce_frame(v, [("t", [(0, GOOD)])], acks=a), ErrorCode.NONE),
    ("legacy", lambda v, a: produce_frame(v, [("t", [(1, legacy_batch(1))])], acks=a), ErrorCode.INVALID_RECORD),
    ("unknown", lambda v, a: produce_frame(v, [("zz", [(0, GOOD)])], acks=a), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("not-leader", lambda v, a: produce_frame(v, [("f", [(0, GOOD)])], acks=a), ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (
        "not-hosted",
        lambda v, a: produce_frame(v, [("elsewhere", [(0, GOOD)])], acks=a),
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ),
    (
        "internal",
        lambda v, a: produce_frame(v, [("__consumer_offsets", [(0, GOOD)])], acks=a),
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ),
    (
        "internal-admin",
        lambda v, a: produce_frame(v, [("__consumer_offsets", [(0, GOOD)])], acks=a, client_id="__admin_client"),
        ErrorCode.NONE,
    ),
    ("record-errors", lambda v, a: produce_frame(v, [("c", [(0, keyless())])], acks=a), ErrorCode.INVALID_RECORD),
    ("corrupt", lambda v, a: produce_frame(v, [("t", [(0, corrupt())])], acks=a), ErrorCode.CORRUPT_MESSAGE),
    ("null", lambda v, a: produce_frame(v, [("t", [(0, None)])], acks=a), ErrorCode.CORRUPT_MESSAGE),
    ("empty", lambda v, a: produce_frame(v, [("t", [(0, b"")])], acks=a), ErrorCode.CORRUPT_MESSAGE),
    (
        "transactional",
        lambda v, a: produce_frame(v, [("t", [(0, GOOD)])], acks=a, transactional_id="tx"),
        ErrorCode.NONE,
    ),
    (
        "transactional-without-id",
        lambda v, a: produce_frame(v, [("t", [(0, transactional_batch())])], acks=a),
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ),
    ("waits", lambda v, a: produce_frame(v, [("r", [(0, GOOD)])], acks=a, timeout_ms=5), None),
    ("no-wait", lambda v, a: produce_frame(v, [("r", [(0, GOOD)])], acks=a, timeout_ms=0), None),
    ("many", lambda v, a: produce_frame(v, [("t", [(0, GOOD), (1, GOOD)]), ("zz", [(0, GOOD)])], acks=a), None),
    ("twice", lambda v, a: produce_frame(v, [("t", [(0, GOOD), (0, None)]), ("t", [(1, GOOD)])], acks=a), None),
    ("many-waits", lambda v, a: produce_frame(v, [("t", [(0, GOOD)]), ("r", [(0, GOOD)])], acks=a, timeout_ms=5), None),
    ("nothing", lambda v, a: produce_frame(v, [], acks=a), None),
]


async def answers(fast: ApiDispatcher, general: ApiDispatcher, frame: bytes) -> tuple[Any, Any]:
    """(immediate answer, general answer) of ``frame``; a refused frame answers "refused"."""
    try:
        now = fast.now(bytearray(frame), CLIENT)
        assert now is not LATER
        if inspect.isawaitable(now):
            now = await now
    except InvalidRequestError:
        now = "refused"
    try:
        later = await general(bytearray(frame), CLIENT)
    except InvalidRequestError:
        later = "refused"
    return now, later


def first_code(response: bytes, version: int) -> int:
    _, body = decode_response(response[4:], response_schema(ApiKey.PRODUCE, version))
    return int(body.responses[0].partition_responses[0].error_code)


def expected_code(name: str, version: int, code: ErrorCode) -> ErrorCode:
    return ErrorCode.UNKNOWN_TOPIC_ID if name == "unknown" and version >= 13 else code


def test_the_corpus_answers_the_same_bytes_on_both_paths(tmp_path: Path) -> None:
    fast, general = broker(tmp_path / "fast"), broker(tmp_path / "general")

    async def run() -> None:
        for version in range(3, 14):
            for acks in (1, -1, 0, 2):
                for name, make, code in CASES:
                    now, later = await answers(fast, general, make(version, acks))
                    assert now == later, (name, version, acks)
                    if acks == 0:
                        assert now is None, name
                    elif acks == 2 and name != "nothing":
                        refusal = expected_code(name, version, ErrorCode.INVALID_REQUIRED_ACKS)
                        assert first_code(now, version) == refusal, name  # an unknown id is found first
                    elif code is not None:
                        assert first_code(now, version) == expected_code(name, version, code), (name, version, acks)
                    elif name == "waits":
                        expected = ErrorCode.REQUEST_TIMED_OUT if acks == -1 else ErrorCode.NONE
                        assert first_code(now, version) == expected

    asyncio.run(run())


@pytest.mark.parametrize("version", range(9, 14))
@pytest.mark.parametrize("shape", ["one", "many"])
def test_not_leader_names_the_current_leader_and_its_endpoint_from_v10(
    tmp_path: Path, version: int, shape: str
) -> None:
    """KIP-951: from v10 a partition answered NOT_LEADER_OR_FOLLOWER names its leader and epoch, and the response
    that leader's endpoint; the partitions answered otherwise name none."""
    topics: Topics = [("f", [(0, GOOD)])] if shape == "one" else [("t", [(0, GOOD)]), ("elsewhere", [(0, GOOD)])]
    frame = produce_frame(version, topics)
    answer = dispatcher_of(replica_manager(tmp_path)).now(frame, CLIENT)
    assert isinstance(answer, bytes)
    _, body = decode_response(answer[4:], response_schema(ApiKey.PRODUCE, version))
    found = {
        getattr(t, "name", None) or t.topic_id: [
            (p.error_code, getattr(p, "current_leader", None)) for p in t.partition_responses
        ]
        for t in body.responses
    }
    failed = "f" if shape == "one" else "elsewhere"  # led by broker 2: followed here, or not hosted here at all
    (error, leader) = found[failed if version < 13 else IDS[failed]][0]
    assert error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    if version < 10:
        assert leader is None and not hasattr(body, "node_endpoints")
        return
    assert (leader.leader_id, leader.leader_epoch) == (FOLLOWER, FOLLOWED_EPOCH)
    assert [(e.node_id, e.host, e.port) for e in body.node_endpoints] == [(FOLLOWER, "127.0.0.2", 9093)]
    if shape == "many":
        ((code, other),) = found["t" if version < 13 else IDS["t"]]
        assert code == ErrorCode.NONE and (other.leader_id, other.leader_epoch) == (-1, -1)


@pytest.mark.parametrize("version", [3, 9, 13])
def test_acks_all_answers_at_once_when_the_high_watermark_covers_the_batch(tmp_path: Path, version: int) -> None:
    dispatcher = broker(tmp_path)
    answer = dispatcher.now(produce_frame(version, [("t", [(0, GOOD)])], acks=-1), CLIENT)
    assert isinstance(answer, bytes)
    assert first_code(answer, version) == ErrorCode.NONE


def test_a_waiting_acks_all_answer_is_a_future_whose_cancelling_leaves_the_purgatory(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path)
    dispatcher = dispatcher_of(rm)

    async def run() -> None:
        waiting = dispatcher.now(produce_frame(9, [("r", [(0, GOOD)])], acks=-1, timeout_ms=60_000), CLIENT)
        assert isinstance(waiting, asyncio.Future) and not waiting.done()
        assert rm.produce_purgatory.watched(TopicPartition("r", 0)) == 1
        waiting.cancel()
        await asyncio.sleep(0)
        assert len(rm.produce_purgatory) == 0

    asyncio.run(run())


def mutated(frame: bytearray) -> st.SearchStrategy[bytes]:
    frame = bytes(frame)
    at = st.integers(8, len(frame) - 1)
    return st.one_of(
        at.map(lambda end: frame[:end]),
        st.tuples(at, st.binary(min_size=1, max_size=4)).map(
            lambda p: frame[: p[0]] + p[1] + frame[p[0] + len(p[1]) :]
        ),
        st.binary(min_size=1, max_size=16).map(lambda tail: frame + tail),
    )


CORPUS = [make(v, a) for v in range(3, 14) for a in (1, -1, 0) for name, make, _ in CASES if name != "waits"]


def test_fuzzed_requests_answer_the_same_bytes_on_both_paths(tmp_path: Path) -> None:
    fast, general = broker(tmp_path / "fast"), broker(tmp_path / "general")
    loop = asyncio.new_event_loop()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(
        st.sampled_from(CORPUS).flatmap(mutated)
        | st.integers(3, 13).flatmap(lambda v: malformed_frames(ApiKey.PRODUCE, v, 11).map(lambda m: m[1]))
    )
    def fuzz(frame: bytes) -> None:
        now, later = loop.run_until_complete(answers(fast, general, frame))
        assert now == later, frame.hex()

    try:
        fuzz()
    finally:
        loop.close()


@pytest.mark.parametrize("version", range(5))
def test_api_versions_answers_from_its_cache_what_the_general_path_answers(version: int) -> None:
    dispatcher = broker(Path("/nonexistent"))
    software = {"client_software_name": "kcat", "client_software_version": "1.7.0"}
    bad = {"client_software_name": "bad name!", "client_software_version": "1"}
    for values, correlation_id in [(software, 1), (software, 2), (bad, 3), (software, -7)]:
        body = build(request_schema(ApiKey.API_VERSIONS, version), values if version >= 3 else {})
        frame = encode_request(RequestHeader(ApiKey.API_VERSIONS, version, correlation_id, "c", 0), body)[4:]
        now = dispatcher.now(bytearray(frame), CLIENT)
        later = asyncio.run(dispatcher(bytearray(frame), CLIENT))
        assert now == later
        assert isinstance(now, bytes)
        _, decoded = decode_response(now[4:], response_schema(ApiKey.API_VERSIONS, version))
        assert decoded.error_code == (ErrorCode.INVALID_REQUEST if values is bad and version >= 3 else 0)
    dispatcher.add(dataclasses.replace(dispatcher.apis[ApiKey.PRODUCE], max_version=8))  # the table changes
    now = dispatcher.now(bytearray(frame), CLIENT)
    assert now == asyncio.run(dispatcher(bytearray(frame), CLIENT))
    assert isinstance(now, bytes)
    _, decoded = decode_response(now[4:], response_schema(ApiKey.API_VERSIONS, version))
    assert {(k.api_key, k.max_version) for k in decoded.api_keys} >= {(ApiKey.PRODUCE, 8)}
