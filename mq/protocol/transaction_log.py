"""Record keys and values of ``__transaction_state`` in Kafka's binary formats.

Every key and value starts with an int16 schema version. The partition of a transactional id is chosen as a group's
is (``consumer_offsets.partition_for``: Kafka's ``abs(hashCode) % partitions`` on both topics).

Key, version 0 (the only one)::

    transactional_id string

Value, version 0 (not flexible; what Kafka writes unless ``transaction.version`` >= 1, and all that Kafka before
4.0 reads)::

    producer_id int64, producer_epoch int16, transaction_timeout_ms int32, state int8,
    partitions nullable array [topic string, partition_ids array [int32]],
    last_update_timestamp_ms int64, start_timestamp_ms int64

Value, version 1 (flexible): the same fields, strings and arrays compact (unsigned varint of length + 1, 0 = null),
each partitions entry followed by an empty tagged-field section, and after the last field the value's tagged fields
(each uvarint tag, uvarint size, data; a field at its default is left out; unknown tags are skipped)::

    tag 0 previous_producer_id int64 (default -1)   tag 1 next_producer_id int64 (default -1)
    tag 2 client_transaction_version int16 (default 0)

Version 0 cannot carry the tagged fields: encoding drops them. An ``EMPTY`` transaction's partitions are written
as a null array (read back as none); a null value (tombstone) removes the transactional id.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from mq.protocol.consumer_offsets import FormatError
from mq.protocol.frame_fields import FIELD_ERRORS, I16, I32, I64, count, length, skip_tagged_fields, string, uvarint
from mq.records.varint import encode_unsigned_varint
from mq.topic_partition import TopicPartition

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSIONS = (0, 1)

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2


class TransactionState(IntEnum):
    """A transaction's state as stored (Kafka's ``TransactionState`` ids)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: tuple[TopicPartition, ...]
    """In stored order: grouped by topic, topics in order of first appearance."""
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


# --- keys ----------------------------------------------------------------------------------------------------------


def encode_transaction_log_key(transactional_id: str) -> bytes:
    return I16.pack(TRANSACTION_LOG_KEY_VERSION) + _string(transactional_id, False)


def decode_transaction_log_key(data: bytes) -> str:
    """The transactional id of a key; FormatError for another version or truncated bytes."""
    try:
        version = I16.unpack_from(data)[0]
        if version != TRANSACTION_LOG_KEY_VERSION:
            raise FormatError(f"unknown __transaction_state key version {version}")
        return string(data, 2, False, len(data))[0]
    except FormatError:
        raise
    except FIELD_ERRORS as exc:
        raise FormatError(f"malformed __transaction_state key: {exc}") from exc


# --- values --------------------------------------------------------------------------------------------------------


def _string(value: str, flexible: bool) -> bytes:
    data = value.encode("utf-8")
    return (encode_unsigned_varint(len(data) + 1) if flexible else I16.pack(len(data))) + data


def _array_length(n: int | None, flexible: bool) -> bytes:
    if flexible:
        return encode_unsigned_varint(0 if n is None else n + 1)
    return I32.pack(-1 if n is None else n)


def _grouped(partitions: tuple[TopicPartition, ...]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def _tagged_fields(value: TransactionLogValue) -> bytes:
    fields = []
    if value.previous_producer_id != -1:
        fields.append((_TAG_PREVIOUS_PRODUCER_ID, I64.pack(value.previous_producer_id)))
    if value.next_producer_id != -1:
        fields.append((_TAG_NEXT_PRODUCER_ID, I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        fields.append((_TAG_CLIENT_TRANSACTION_VERSION, I16.pack(value.client_transaction_version)))
    out = bytearray(encode_unsigned_varint(len(fields)))
    for tag, data in fields:
        out += encode_unsigned_varint(tag) + encode_unsigned_varint(len(data)) + data
    return bytes(out)


def encode_transaction_log_value(value: TransactionLogValue, version: int = 0) -> bytes:
    """The value in ``version`` (0 or 1); ValueError for another version or an EMPTY state with partitions."""
    if version not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise ValueError(f"unknown __transaction_state value version {version}")
    flexible = version >= 1
    out = bytearray(I16.pack(version))
    out += I64.pack(value.producer_id) + I16.pack(value.producer_epoch) + I32.pack(value.transaction_timeout_ms)
    out.append(int(value.state))
    if value.state == TransactionState.EMPTY:
        if value.partitions:
            raise ValueError(f"a transaction in state {value.state.name} has no partitions: {value.partitions}")
        out += _array_length(None, flexible)
    else:
        by_topic = _grouped(value.partitions)
        out += _array_length(len(by_topic), flexible)
        for topic, ids in by_topic.items():
            out += _string(topic, flexible) + _array_length(len(ids), flexible)
            out += b"".join(I32.pack(p) for p in ids)
            if flexible:
                out.append(0)
    out += I64.pack(value.last_update_timestamp_ms) + I64.pack(value.start_timestamp_ms)
    if flexible:
        out += _tagged_fields(value)
    return bytes(out)


def decode_transaction_log_value(data: bytes) -> TransactionLogValue:
    """A value of version 0 or 1; FormatError for another version, an unknown state or truncated bytes."""
    try:
        return _decode_value(data)
    except FormatError:
        raise
    except FIELD_ERRORS as exc:
        raise FormatError(f"malformed __transaction_state value: {exc}") from exc


def _decode_value(data: bytes) -> TransactionLogValue:
    end = len(data)
    version = I16.unpack_from(data)[0]
    if version not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise FormatError(f"unknown __transaction_state value version {version}")
    flexible = version >= 1
    producer_id, epoch, timeout = (
        I64.unpack_from(data, 2)[0],
        I16.unpack_from(data, 10)[0],
        I32.unpack_from(data, 12)[0],
    )
    try:
        state = TransactionState(data[16])
    except ValueError:
        raise FormatError(f"unknown transaction state {data[16]}") from None
    position = 17
    partitions: list[TopicPartition] = []
    topics, position = length(data, position, flexible, I32)
    for _ in range(max(topics, 0)):
        topic, position = string(data, position, flexible, end)
        n, position = count(data, position, flexible)
        if position + 4 * n > end:
            raise FormatError(f"{n} partition ids of {topic} run past the end")
        partitions += (TopicPartition(topic, p) for (p,) in I32.iter_unpack(data[position : position + 4 * n]))
        position += 4 * n
        if flexible:
            position = skip_tagged_fields(data, position, end)
    last_update, start = I64.unpack_from(data, position)[0], I64.unpack_from(data, position + 8)[0]
    previous, following, client_version = -1, -1, 0
    if flexible:
        fields, position = uvarint(data, position + 16)
        for _ in range(fields):
            tag, position = uvarint(data, position)
            size, position = uvarint(data, position)
            if position + size > end:
                raise FormatError(f"tagged field {tag} runs past the end")
            if tag == _TAG_PREVIOUS_PRODUCER_ID:
                previous = I64.unpack_from(data, position)[0]
            elif tag == _TAG_NEXT_PRODUCER_ID:
                following = I64.unpack_from(data, position)[0]
            elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                client_version = I16.unpack_from(data, position)[0]
            position += size
    return TransactionLogValue(
        producer_id,
        epoch,
        timeout,
        state,
        tuple(partitions),
        last_update,
        start,
        previous,
        following,
        client_version,
    )
