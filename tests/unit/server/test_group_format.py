"""``__consumer_offsets`` key/value formats against byte layouts written out from Kafka's schema definitions
(OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue), and the group partitioning rule."""

from __future__ import annotations

import pytest

from mq.protocol.consumer_offsets import (
    FormatError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for,
    subscribed_topics,
)


def test_offset_commit_key_v1_bytes() -> None:
    key = OffsetCommitKey("g1", "t", 3)
    expected = bytes.fromhex("00010002673100017400000003")
    assert encode_offset_commit_key(key) == expected
    assert decode_key(expected) == key


def test_offset_commit_key_v0_reads_like_v1() -> None:
    assert decode_key(bytes.fromhex("000000016700017400000000")) == OffsetCommitKey("g", "t", 0)


def test_group_metadata_key_v2_bytes() -> None:
    expected = bytes.fromhex("00020003677270")
    assert encode_group_metadata_key(GroupMetadataKey("grp")) == expected
    assert decode_key(expected) == GroupMetadataKey("grp")


def test_unknown_key_version_is_refused() -> None:
    with pytest.raises(FormatError):
        decode_key(bytes.fromhex("0007000167"))


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    expected = bytes.fromhex("0003000000000000002a0000000500016d00000000000003e8")
    assert encode_offset_commit_value(value) == expected
    assert decode_offset_commit_value(expected) == value


def test_offset_commit_value_v1_carries_the_expire_timestamp() -> None:
    data = bytes.fromhex("00010000000000000007000000000000000000010000000000000002")
    assert decode_offset_commit_value(data) == OffsetCommitValue(7, "", 1, -1, 2)


def test_offset_commit_value_with_expire_timestamp_is_written_as_v1() -> None:
    value = OffsetCommitValue(7, "", 1, -1, 2)
    expected = bytes.fromhex("00010000000000000007000000000000000000010000000000000002")
    assert encode_offset_commit_value(value) == expected


def test_offset_commit_value_v0_and_v2() -> None:
    for version in ("0000", "0002"):
        data = bytes.fromhex(version + "0000000000000009000268690000000000000064")
        assert decode_offset_commit_value(data) == OffsetCommitValue(9, "hi", 100)


def test_truncated_value_is_refused() -> None:
    with pytest.raises(FormatError):
        decode_offset_commit_value(bytes.fromhex("00030000"))


def test_group_metadata_value_v3_bytes() -> None:
    member = MemberMetadataValue("m-1", "c", "/h", 300, 10, b"\x01", b"\x02\x03", "i")
    value = GroupMetadataValue("consumer", 2, "range", "m-1", 1000, (member,))
    expected = bytes.fromhex(
        "0003"
        "0008" + b"consumer".hex() + "00000002"
        "0005" + b"range".hex() + "0003" + b"m-1".hex() + "00000000000003e8"
        "00000001"
        "0003" + b"m-1".hex() + "0001"
        "69"
        "0001"
        "63"
        "0002"
        "2f68"
        "0000012c"
        "0000000a"
        "00000001"
        "01"
        "00000002"
        "0203"
    )
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_group_metadata_value_nulls_and_no_members() -> None:
    value = GroupMetadataValue("", 0, None, None, -1, ())
    expected = bytes.fromhex("0003000000000000ffffffffffffffffffffffff00000000")
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_group_metadata_value_v0_has_one_timeout() -> None:
    data = bytes.fromhex(
        "00000008" + b"consumer".hex() + "0000000100017200016100000001000161000163000168000075300000000000000000"
    )
    decoded = decode_group_metadata_value(data)
    assert decoded.current_state_timestamp == -1
    assert decoded.members == (MemberMetadataValue("a", "c", "h", 30000, 30000, b"", b"", None),)


def test_group_metadata_value_v1_has_both_timeouts() -> None:
    data = bytes.fromhex("0001000000000001ffffffff00000001000161000163000168000000640000000a0000000000000000")
    member = decode_group_metadata_value(data).members[0]
    assert (member.rebalance_timeout, member.session_timeout) == (100, 10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),
        ("BB", 2112),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 55357 * 31 + 56832),  # a surrogate pair: 0xD83D, 0xDE00
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafka_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("Aa", 50) == partition_for("BB", 50) == 2112 % 50
    negative = "group-with-negative-hash-x"
    h = java_string_hash(negative)
    assert h < 0
    assert partition_for(negative, 7) == abs(h) % 7


def test_subscribed_topics_from_consumer_protocol() -> None:
    data = bytes.fromhex("00010000000200016100026262ffffffff00000000")
    assert subscribed_topics(data) == frozenset({"a", "bb"})
    assert subscribed_topics(b"\x00") is None
