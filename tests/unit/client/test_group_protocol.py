"""ConsumerProtocol Subscription and Assignment bytes: layout, versions, and kafka-python reading ours and we theirs."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from mq.client.group_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from mq.topic_partition import TopicPartition as TP


def test_subscription_v1_bytes() -> None:
    data = encode_subscription(Subscription(("ab", "c"), b"\x07", (TP("ab", 2), TP("ab", 5)), version=1))
    assert data == (
        b"\x00\x01"  # version
        + b"\x00\x00\x00\x02" + b"\x00\x02ab" + b"\x00\x01c"  # topics
        + b"\x00\x00\x00\x01\x07"  # user data
        + b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x05"
    )  # fmt: skip


def test_subscription_v0_has_no_owned_partitions_and_null_user_data() -> None:
    data = encode_subscription(Subscription(("t",), None, version=0))
    assert data == b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(data) == Subscription(("t",), None, version=0)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips_every_version(version: int) -> None:
    subscription = Subscription(
        ("a", "b"),
        b"user",
        (TP("a", 0), TP("b", 3)) if version >= 1 else (),
        7 if version >= 2 else -1,
        "rack-1" if version >= 3 else None,
        version,
    )
    assert decode_subscription(encode_subscription(subscription)) == subscription


def test_assignment_bytes_and_round_trip() -> None:
    assignment = Assignment((TP("t", 0), TP("t", 2), TP("u", 1)), None, version=1)
    data = encode_assignment(assignment)
    assert data == (
        b"\x00\x01"
        + b"\x00\x00\x00\x02"
        + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02"
        + b"\x00\x01u" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
        + b"\xff\xff\xff\xff"
    )  # fmt: skip
    assert decode_assignment(data) == assignment
    assert decode_assignment(b"") == Assignment(())


def test_newer_versions_are_read_as_far_as_known() -> None:
    newer = bytearray(encode_subscription(Subscription(("t",), b"", (TP("t", 1),), 4, "r", version=3)))
    newer[0:2] = b"\x00\x05"
    decoded = decode_subscription(bytes(newer) + b"future fields")
    assert (decoded.topics, decoded.owned_partitions, decoded.generation_id, decoded.rack_id) == (
        ("t",),
        (TP("t", 1),),
        4,
        "r",
    )


def test_truncated_and_invalid_data_is_rejected() -> None:
    data = encode_subscription(Subscription(("topic",), b"xyz"))
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data[:-3])
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\xff\xff\x00\x00\x00\x00")
    with pytest.raises(ValueError):
        encode_subscription(Subscription(("t",), version=4))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_reads_our_subscription_and_we_read_theirs(version: int) -> None:
    ours = Subscription(
        ("a", "b"), b"u", (TP("a", 1),) if version >= 1 else (), 3 if version >= 2 else -1, None, version
    )
    theirs = ConsumerProtocolSubscription.decode(encode_subscription(ours))
    assert list(theirs.topics) == ["a", "b"]
    assert theirs.user_data == b"u"
    if version >= 1:
        assert [(p.topic, list(p.partitions)) for p in theirs.owned_partitions] == [("a", [1])]
    if version >= 2:
        assert theirs.generation_id == 3
    kwargs = {"owned_partitions": [("b", [0, 2])]} if version >= 1 else {}
    encoded = ConsumerProtocolSubscription(version=version, topics=["x", "y"], user_data=b"", **kwargs).encode()
    decoded = decode_subscription(encoded)
    assert decoded.topics == ("x", "y")
    assert decoded.user_data == b""
    assert decoded.owned_partitions == ((TP("b", 0), TP("b", 2)) if version >= 1 else ())


def test_kafka_python_reads_our_assignment_and_we_read_theirs() -> None:
    ours = encode_assignment(Assignment((TP("t", 0), TP("t", 3), TP("u", 1))))
    assert sorted(ConsumerProtocolAssignment.decode(ours).partitions()) == [("t", 0), ("t", 3), ("u", 1)]
    theirs = ConsumerProtocolAssignment(0, [("t", [1, 2]), ("v", [0])], b"").encode()
    assert decode_assignment(theirs) == Assignment((TP("t", 1), TP("t", 2), TP("v", 0)), b"", 0)
