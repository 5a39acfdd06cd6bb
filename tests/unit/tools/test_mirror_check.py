"""mq mirror --check: the partition digest's definition and the comparison verdicts."""

from __future__ import annotations

import hashlib
import struct

from mq.client.consumer import ConsumerRecord
from mq.tools.mirror_check import PartitionComparison, PartitionDigest
from mq.topic_partition import TopicPartition


def rec(offset: int, key: bytes | None, value: bytes | None, timestamp: int = 0) -> ConsumerRecord:
    return ConsumerRecord("t", 0, offset, timestamp, 0, key, value, (("h", b"x"),))


def test_digest_is_sha256_over_length_prefixed_keys_and_values_in_offset_order() -> None:
    digest = PartitionDigest()
    digest.update([rec(0, b"k1", b"value"), rec(1, None, b""), rec(2, b"", None)])
    expected = hashlib.sha256(
        struct.pack(">i", 2)
        + b"k1"
        + struct.pack(">i", 5)
        + b"value"
        + struct.pack(">i", -1)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
        + struct.pack(">i", -1)
    ).hexdigest()
    assert (digest.count, digest.hexdigest()) == (3, expected)


def test_digest_ignores_offsets_timestamps_and_headers_but_not_order_or_boundaries() -> None:
    def of(*records: ConsumerRecord) -> str:
        digest = PartitionDigest()
        digest.update(records)
        return digest.hexdigest()

    assert of(rec(0, b"a", b"1")) == of(rec(7, b"a", b"1", timestamp=99))
    assert of(rec(0, b"a", b"1"), rec(1, b"b", b"2")) != of(rec(0, b"b", b"2"), rec(1, b"a", b"1"))
    assert of(rec(0, b"ab", b"c")) != of(rec(0, b"a", b"bc"))
    assert of(rec(0, None, b"x")) != of(rec(0, b"", b"x"))
    empty = PartitionDigest()
    assert (empty.count, empty.hexdigest()) == (0, hashlib.sha256().hexdigest())


def test_comparison_lines_and_verdicts() -> None:
    tp = TopicPartition("t", 2)
    same = PartitionComparison(tp, 3, "ab", 3, "ab")
    assert same.same and same.line() == "t-2\tsource: 3 ab\ttarget: 3 ab\tOK"
    assert not PartitionComparison(tp, 3, "ab", 4, "cd").same
    assert not PartitionComparison(tp, 3, "ab", 3, "cd").same
    missing = PartitionComparison(tp, 0, "e3", None, None)
    assert not missing.same and missing.line() == "t-2\tsource: 0 e3\ttarget: missing\tDIFFERENT"
