"""Record keys and values of ``__consumer_offsets`` in Kafka's binary formats, and the group-to-partition rule.

Every key and value starts with an int16 schema version; strings are int16-length UTF-8 (-1 = null), byte fields
int32-length, arrays int32-counted. None of these schemas is flexible.

Keys::

    version 0/1  OffsetCommitKey    group string, topic string, partition int32
    version 2    GroupMetadataKey   group string

Offset commit values (version 3 is written, version 1 when an expire timestamp is set; 0-3 are read)::

    v0, v2  offset int64, metadata string, commit_timestamp int64
    v1      offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    v3      offset int64, leader_epoch int32, metadata string, commit_timestamp int64

Group metadata values (version 3 is written; 0-3 are read)::

    protocol_type string, generation int32, protocol nullable string, leader nullable string,
    current_state_timestamp int64 (v2+),
    members [member_id string, group_instance_id nullable string (v3+), client_id string, client_host string,
             rebalance_timeout int32 (v1+), session_timeout int32, subscription bytes, assignment bytes]

A null value (tombstone) deletes the key's offset or group.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INT_MIN = -(2**31)


class FormatError(ValueError):
    """A key or value that is truncated or has a schema version this module does not read."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    """Only version 1 stores it; -1 otherwise."""


@dataclass(frozen=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...] = ()


# --- primitives --------------------------------------------------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode("utf-8")
    return _I16.pack(len(data)) + data


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise FormatError(f"truncated: {size} bytes wanted at {self.position} of {len(self.data)}")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nullable_string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self._take(length).decode("utf-8")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise FormatError(f"null string at {self.position}")
        return value

    def bytes_(self) -> bytes:
        length = self.int32()
        return b"" if length < 0 else self._take(length)


# --- keys ----------------------------------------------------------------------------------------------------------


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(key.group) + _string(key.topic) + _I32.pack(key.partition)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    reader = _Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupMetadataKey(reader.string())
    raise FormatError(f"unknown __consumer_offsets key version {version}")


# --- offset commit values ------------------------------------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 3, or version 1 when the commit carries an expire timestamp (a v2-v4 OffsetCommit retention time)."""
    if value.expire_timestamp >= 0:
        return b"".join(
            [
                _I16.pack(1),
                _I64.pack(value.offset),
                _string(value.metadata),
                _I64.pack(value.commit_timestamp),
                _I64.pack(value.expire_timestamp),
            ]
        )
    return b"".join(
        [
            _I16.pack(OFFSET_COMMIT_VALUE_VERSION),
            _I64.pack(value.offset),
            _I32.pack(value.leader_epoch),
            _string(value.metadata),
            _I64.pack(value.commit_timestamp),
        ]
    )


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    reader = _Reader(data)
    version = reader.int16()
    if version not in (0, 1, 2, 3):
        raise FormatError(f"unknown offset commit value version {version}")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


# --- group metadata values -----------------------------------------------------------------------------------------


def _encode_member(member: MemberMetadataValue) -> bytes:
    return b"".join(
        [
            _string(member.member_id),
            _string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _I32.pack(member.rebalance_timeout),
            _I32.pack(member.session_timeout),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    )


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    return b"".join(
        [
            _I16.pack(GROUP_METADATA_VALUE_VERSION),
            _string(value.protocol_type),
            _I32.pack(value.generation),
            _string(value.protocol),
            _string(value.leader),
            _I64.pack(value.current_state_timestamp),
            _I32.pack(len(value.members)),
            *(_encode_member(m) for m in value.members),
        ]
    )


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    reader = _Reader(data)
    version = reader.int16()
    if version not in (0, 1, 2, 3):
        raise FormatError(f"unknown group metadata value version {version}")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(max(reader.int32(), 0)):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        session_or_rebalance = reader.int32()
        if version >= 1:
            rebalance_timeout, session_timeout = session_or_rebalance, reader.int32()
        else:
            rebalance_timeout = session_timeout = session_or_rebalance
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        members.append(
            MemberMetadataValue(
                member_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
                instance_id,
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))


# --- partitioning --------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``h = 31 * h + c`` over UTF-16 code units, in signed 32-bit arithmetic; cached,
    as every request of a group asks for its partition again."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: Kafka's ``Utils.abs(groupId.hashCode) % partitions``, where
    ``Utils.abs`` maps Integer.MIN_VALUE to 0."""
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions


def subscribed_topics(subscription: bytes) -> frozenset[str] | None:
    """The topics of a consumer-protocol subscription (int16 version, then an int32-counted array of topic
    strings); None when the bytes do not parse."""
    reader = _Reader(subscription)
    try:
        reader.int16()
        return frozenset(reader.string() for _ in range(max(reader.int32(), 0)))
    except (FormatError, UnicodeDecodeError):
        return None
