"""``__transaction_state`` keys and values: vectors built by hand from Kafka's TransactionLogKey/Value schemas."""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.protocol.consumer_offsets import FormatError, partition_for
from mq.protocol.transaction_log import (
    TransactionLogValue,
    TransactionState,
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from mq.topic_partition import TopicPartition

TS = 1_700_000_000_000
ONGOING = TransactionLogValue(
    producer_id=1000,
    producer_epoch=2,
    transaction_timeout_ms=60000,
    state=TransactionState.ONGOING,
    partitions=(TopicPartition("t", 0), TopicPartition("u", 3), TopicPartition("t", 1)),
    last_update_timestamp_ms=TS,
    start_timestamp_ms=TS - 1000,
)
FIXED = struct.pack(">qhib", 1000, 2, 60000, 1)
TIMES = struct.pack(">qq", TS, TS - 1000)


def test_key() -> None:
    assert encode_transaction_log_key("txn-1") == bytes.fromhex("00000005") + b"txn-1"
    assert decode_transaction_log_key(bytes.fromhex("00000005") + b"txn-1") == "txn-1"
    with pytest.raises(FormatError, match="key version 1"):
        decode_transaction_log_key(bytes.fromhex("00010005") + b"txn-1")
    with pytest.raises(FormatError):
        decode_transaction_log_key(bytes.fromhex("00000005") + b"txn")


def test_value_v0_bytes() -> None:
    expected = (
        b"\x00\x00"
        + FIXED
        + struct.pack(">i", 2)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 1)
        + b"u"
        + struct.pack(">ii", 1, 3)
        + TIMES
    )
    assert encode_transaction_log_value(ONGOING) == expected
    decoded = decode_transaction_log_value(expected)
    assert decoded.partitions == (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 3))
    assert decoded == replace(ONGOING, partitions=decoded.partitions)


def test_value_v1_bytes_with_tagged_fields() -> None:
    value = replace(ONGOING, previous_producer_id=999, client_transaction_version=2)
    expected = (
        b"\x00\x01"
        + FIXED
        + b"\x03"  # 2 topics, compact
        + b"\x02t\x03"
        + struct.pack(">ii", 0, 1)
        + b"\x00"
        + b"\x02u\x02"
        + struct.pack(">i", 3)
        + b"\x00"
        + TIMES
        + b"\x02"  # two tagged fields: previous producer id (tag 0) and client transaction version (tag 2)
        + b"\x00\x08"
        + struct.pack(">q", 999)
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )
    assert encode_transaction_log_value(value, version=1) == expected
    decoded = decode_transaction_log_value(expected)
    assert (decoded.previous_producer_id, decoded.next_producer_id, decoded.client_transaction_version) == (999, -1, 2)
    assert set(decoded.partitions) == set(value.partitions)
    assert encode_transaction_log_value(value, version=0) == encode_transaction_log_value(ONGOING, version=0)


def test_unknown_tags_are_skipped() -> None:
    data = encode_transaction_log_value(ONGOING, version=1)
    with_unknown = data[:-1] + b"\x01" + b"\x09\x03abc"
    assert decode_transaction_log_value(with_unknown) == decode_transaction_log_value(data)


@pytest.mark.parametrize(("version", "null"), [(0, b"\xff\xff\xff\xff"), (1, b"\x00")])
def test_empty_transactions_write_a_null_partition_array(version: int, null: bytes) -> None:
    empty = TransactionLogValue(1, 0, 60000, TransactionState.EMPTY, (), TS, -1)
    data = encode_transaction_log_value(empty, version)
    assert data == struct.pack(">h", version) + struct.pack(">qhib", 1, 0, 60000, 0) + null + struct.pack(
        ">qq", TS, -1
    ) + (b"\x00" if version else b"")
    assert decode_transaction_log_value(data) == empty
    with pytest.raises(ValueError, match="EMPTY"):
        encode_transaction_log_value(
            TransactionLogValue(1, 0, 60000, TransactionState.EMPTY, ONGOING.partitions, TS, -1)
        )


def test_every_state_round_trips() -> None:
    for state in TransactionState:
        value = TransactionLogValue(
            5, 1, 100, state, () if state == TransactionState.EMPTY else ONGOING.partitions[:1], TS, TS
        )
        for version in (0, 1):
            assert decode_transaction_log_value(encode_transaction_log_value(value, version)) == value
    assert [int(s) for s in TransactionState] == list(range(8))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x02" + FIXED + b"\xff\xff\xff\xff" + TIMES, "value version 2"),
        (b"\x00\x00" + struct.pack(">qhib", 1, 0, 1, 9) + b"\xff\xff\xff\xff" + TIMES, "unknown transaction state 9"),
        (b"\x00\x00" + FIXED + b"\xff\xff\xff\xff" + TIMES[:-1], "malformed"),
        (b"\x00\x00" + FIXED + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", 5) + TIMES, "run past the end"),
    ],
)
def test_malformed_values(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        decode_transaction_log_value(data)


def test_partition_of_a_transactional_id() -> None:
    # Java: "txn-1".hashCode() == ((((116 * 31 + 120) * 31 + 110) * 31 + 45) * 31 + 49) == 110810510
    assert partition_for("txn-1", 50) == 10


@given(st.binary(max_size=80))
def test_any_bytes_decode_or_raise_format_error(data: bytes) -> None:
    for decode in (decode_transaction_log_key, decode_transaction_log_value):
        with contextlib.suppress(FormatError):
            decode(data)


@given(st.binary(max_size=12), st.integers(min_value=0, max_value=1))
def test_truncated_values_raise_format_error(cut: bytes, version: int) -> None:
    data = encode_transaction_log_value(replace(ONGOING, next_producer_id=5), version)
    truncated = data[: max(len(data) - len(cut) - 1, 0)]
    with pytest.raises(FormatError):
        decode_transaction_log_value(truncated)
