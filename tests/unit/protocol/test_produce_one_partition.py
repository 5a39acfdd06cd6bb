"""The immediate path's Produce reader and encoder against the full decoder and the general encoder."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import InvalidRequestError
from mq.protocol.produce_request import decode_produce_request, read_one_partition
from mq.protocol.produce_response import PartitionResponse, encode_one_partition, encode_produce_response
from tests.fuzz_requests import malformed_frames
from tests.produce_frames import Topics, produce_frame

names = st.text(alphabet="abc-é_", min_size=1, max_size=8) | st.just("t" * 200)
records = st.none() | st.binary(max_size=40) | st.just(b"r" * 300)


def frame(
    version: int,
    topics: Topics,
    client_id: str | None = "client-é",
    transactional_id: str | None = None,
    acks: int = 1,
) -> bytearray:
    return produce_frame(version, topics, acks=acks, client_id=client_id, transactional_id=transactional_id)


def topic_of(version: int, name: str) -> str | uuid.UUID:
    """The topic as ``version`` names it: from v13 by an id made from the name."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name) if version >= 13 else name


def full(data: bytearray) -> tuple[Any, ...]:
    """What decode_produce_request reads, in read_one_partition's shape."""
    header, request = decode_produce_request(data)
    (topic,) = request.topic_data
    (partition,) = topic.partition_data
    return (
        header.client_id,
        request.transactional_id is not None,
        request.acks,
        request.timeout_ms,
        topic.name if topic.topic_id is None else topic.topic_id,
        partition.index,
        partition.records,
    )


def outcome(read: Any, data: bytearray) -> Any:
    """The value read (record sets as bytes), or the refusal."""
    try:
        found = read(data)
    except InvalidRequestError:
        return "refused"
    except ValueError:  # the full decoder's shape check: not one topic with one partition
        return "many"
    if found is None:
        return "many"
    *fields, last = found
    return (*fields, None if last is None else bytes(last))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 13),
    name=names,
    index=st.integers(0, 2**31 - 1),
    records=records,
    client_id=st.none() | st.text(max_size=20) | st.just("__admin_client"),
    transactional_id=st.none() | names,
    acks=st.sampled_from([-1, 0, 1, 5]),
)
def test_one_partition_reads_as_the_full_decoder_reads_it(
    version: int,
    name: str,
    index: int,
    records: bytes | None,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
) -> None:
    data = frame(version, [(topic_of(version, name), [(index, records)])], client_id, transactional_id, acks)
    fast = outcome(lambda d: read_one_partition(d, version), data)
    common = transactional_id is None and (version < 9 or version >= 13 or len(name.encode()) + 1 < 0x80)
    assert fast == (outcome(full, data) if common else "many")
    assert outcome(full, data) != "refused"


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize(
    "topics",
    [[], [("a", [])], [("a", [(0, b"x"), (1, b"y")])], [("a", [(0, b"x")]), ("b", [(0, b"y")])]],
)
def test_other_shapes_are_left_to_the_full_decoder(version: int, topics: list[Any]) -> None:
    keyed = [(topic_of(version, name), parts) for name, parts in topics]
    assert read_one_partition(frame(version, keyed), version) is None


@pytest.mark.parametrize("version", range(3, 14))
def test_record_sets_are_writable_slices_of_the_frame(version: int) -> None:
    data = frame(version, [(topic_of(version, "t"), [(0, b"batch-bytes")])])
    found = read_one_partition(data, version)
    assert found is not None and found[-1] is not None and not found[-1].readonly
    found[-1][:5] = b"BATCH"
    assert b"BATCH-bytes" in data


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("shape", ["one", "many"])
@pytest.mark.parametrize("transactional_id", [None, "tx"])
def test_a_truncated_frame_is_left_to_the_full_decoder(version: int, shape: str, transactional_id: str | None) -> None:
    """The common reader reads only a whole frame (its bytes past the body are ignored, as the full decoder ignores
    them); every cut that removes part of the body is read by the full decoder, which refuses it."""
    parts = [(0, b"x" * 20)] if shape == "one" else [(0, b"x" * 20), (1, None)]
    data = frame(version, [(topic_of(version, "topic"), parts)], transactional_id=transactional_id)
    for end in range(8, len(data)):
        cut = data[:end]
        assert outcome(lambda d: read_one_partition(d, version), cut) == "many", end
        assert outcome(full, cut) == "refused", end
    whole = outcome(lambda d: read_one_partition(d, version), data)
    assert whole == (outcome(full, data) if shape == "one" and transactional_id is None else "many")


@pytest.mark.parametrize("version", range(3, 14))
def test_malformed_frames_are_refused_alike(version: int) -> None:
    @settings(max_examples=80, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(malformed_frames(ApiKey.PRODUCE, version, 7))
    def check(mutated: tuple[str, bytes]) -> None:
        data = bytearray(mutated[1])
        fast = outcome(lambda d: read_one_partition(d, version), data)
        if fast != "many":
            assert fast == outcome(full, data), mutated

    check()


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(3, 13),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    name=names,
    index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 6, 7, 19]),
    offsets=st.tuples(st.integers(-1, 2**63 - 1), st.sampled_from([-1, 1_795_000_000_000]), st.integers(-1, 2**40)),
)
def test_the_cached_layout_encodes_as_the_general_encoder(
    version: int, correlation_id: int, name: str, index: int, error_code: int, offsets: tuple[int, int, int]
) -> None:
    topic = topic_of(version, name)
    general = encode_produce_response(
        version, correlation_id, [(topic, [PartitionResponse(index, error_code, *offsets)])]
    )
    assert encode_one_partition(version, correlation_id, topic, index, error_code, *offsets) == general
