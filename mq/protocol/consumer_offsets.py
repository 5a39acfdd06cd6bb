"""Record keys and values of ``__consumer_offsets`` in Kafka's binary formats, and the group-to-partition rule.

Every key and value starts with an int16 schema version; strings are int16-length UTF-8 (-1 = null), byte fields
int32-length, arrays int32-counted. None of these schemas is flexible.

Keys::

    version 0/1  OffsetCommitKey    group string, topic string, partition int32
    version 2    GroupMetadataKey   group string
    version 3-8  ConsumerGroupKey   group string, member_id string (5, 7 and 8 only): a consumer-protocol group's
                 metadata (3), partition metadata (4, read and ignored), member metadata (5), target assignment
                 metadata (6) and member (7), current member assignment (8)

Offset commit values (version 3 is written, version 1 when an expire timestamp is set; 0-3 are read)::

    v0, v2  offset int64, metadata string, commit_timestamp int64
    v1      offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    v3      offset int64, leader_epoch int32, metadata string, commit_timestamp int64

Group metadata values (version 3 is written; 0-3 are read)::

    protocol_type string, generation int32, protocol nullable string, leader nullable string,
    current_state_timestamp int64 (v2+),
    members [member_id string, group_instance_id nullable string (v3+), client_id string, client_host string,
             rebalance_timeout int32 (v1+), session_timeout int32, subscription bytes, assignment bytes]

Consumer-protocol group values are flexible (version 0 is written and read): compact strings (uvarint length + 1,
0 = null), compact arrays (uvarint count + 1), 16-byte uuids, and a tagged-field section (read and skipped) closing
each struct. Partitions are ``[topic_id uuid, partitions [int32], tags]``::

    3  epoch int32
    5  instance_id, rack_id nullable strings, client_id, client_host strings, subscribed_topic_names [string],
       subscribed_topic_regex nullable string, rebalance_timeout_ms int32, server_assignor nullable string
    6  assignment_epoch int32
    7  topic_partitions [partitions]
    8  member_epoch int32, previous_member_epoch int32, state int8, assigned [partitions],
       pending_revocation [partitions]

A null value (tombstone) deletes the key's offset, group or record.
"""

from __future__ import annotations

import functools
import struct
import uuid
from dataclasses import dataclass

from mq.records.varint import encode_unsigned_varint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
_MEMBER_KEYED = (
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
)

_I8 = struct.Struct(">b")
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
class ConsumerGroupKey:
    """A consumer-protocol group's record key; ``record`` is its key version (3-8)."""

    record: int
    group: str
    member_id: str | None = None


TopicIdPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
"""(topic id, partitions) pairs."""


@dataclass(frozen=True)
class ConsumerGroupEpochValue:
    """Record 3 (the group epoch) or 6 (the target assignment's epoch)."""

    epoch: int


@dataclass(frozen=True)
class ConsumerGroupMemberValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True)
class TargetAssignmentMemberValue:
    partitions: TopicIdPartitions


@dataclass(frozen=True)
class CurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    """Kafka's MemberState: 0 stable, 1 unrevoked partitions, 2 unreleased partitions."""
    assigned: TopicIdPartitions
    pending_revocation: TopicIdPartitions


ConsumerGroupValue = (
    ConsumerGroupEpochValue | ConsumerGroupMemberValue | TargetAssignmentMemberValue | CurrentMemberAssignmentValue
)


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

    def int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 28:
                raise FormatError(f"unsigned varint over 5 bytes at {self.position}")

    def compact_nullable_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length < 0 else self._take(length).decode("utf-8")

    def compact_string(self) -> str:
        value = self.compact_nullable_string()
        if value is None:
            raise FormatError(f"null string at {self.position}")
        return value

    def compact_count(self) -> int:
        return max(self.uvarint() - 1, 0)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


# --- keys ----------------------------------------------------------------------------------------------------------


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(key.group) + _string(key.topic) + _I32.pack(key.partition)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group)


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    member = _string(key.member_id) if key.record in _MEMBER_KEYED else b""
    return _I16.pack(key.record) + _string(key.group) + member


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey:
    reader = _Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupMetadataKey(reader.string())
    if CONSUMER_GROUP_METADATA <= version <= CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        group = reader.string()
        return ConsumerGroupKey(version, group, reader.string() if version in _MEMBER_KEYED else None)
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


# --- consumer-protocol group values -------------------------------------------------------------------------------

_NO_TAGS = b"\x00"


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode("utf-8")
    return encode_unsigned_varint(len(data) + 1) + data


def _compact_array(items: list[bytes]) -> bytes:
    return encode_unsigned_varint(len(items) + 1) + b"".join(items)


def _topic_partitions(partitions: TopicIdPartitions) -> bytes:
    return _compact_array(
        [topic_id.bytes + _compact_array([_I32.pack(p) for p in ps]) + _NO_TAGS for topic_id, ps in partitions]
    )


def _read_topic_partitions(reader: _Reader) -> TopicIdPartitions:
    result = []
    for _ in range(reader.compact_count()):
        topic_id = reader.uuid()
        ps = tuple(reader.int32() for _ in range(reader.compact_count()))
        reader.skip_tags()
        result.append((topic_id, ps))
    return tuple(result)


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    """Version 0 of the value's record."""
    if isinstance(value, ConsumerGroupEpochValue):
        body = _I32.pack(value.epoch)
    elif isinstance(value, ConsumerGroupMemberValue):
        body = b"".join(
            [
                _compact_string(value.instance_id),
                _compact_string(value.rack_id),
                _compact_string(value.client_id),
                _compact_string(value.client_host),
                _compact_array([_compact_string(t) for t in value.subscribed_topic_names]),
                _compact_string(value.subscribed_topic_regex),
                _I32.pack(value.rebalance_timeout_ms),
                _compact_string(value.server_assignor),
            ]
        )
    elif isinstance(value, TargetAssignmentMemberValue):
        body = _topic_partitions(value.partitions)
    else:
        body = b"".join(
            [
                _I32.pack(value.member_epoch),
                _I32.pack(value.previous_member_epoch),
                _I8.pack(value.state),
                _topic_partitions(value.assigned),
                _topic_partitions(value.pending_revocation),
            ]
        )
    return _I16.pack(0) + body + _NO_TAGS


def decode_consumer_group_value(record: int, data: bytes) -> ConsumerGroupValue | None:
    """The value of a record 3-8 key (None for record 4, which this broker does not use)."""
    reader = _Reader(data)
    version = reader.int16()
    if version != 0:
        raise FormatError(f"unknown consumer group record {record} value version {version}")
    value: ConsumerGroupValue
    if record in (CONSUMER_GROUP_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA):
        value = ConsumerGroupEpochValue(reader.int32())
    elif record == CONSUMER_GROUP_MEMBER_METADATA:
        value = ConsumerGroupMemberValue(
            reader.compact_nullable_string(),
            reader.compact_nullable_string(),
            reader.compact_string(),
            reader.compact_string(),
            tuple(reader.compact_string() for _ in range(reader.compact_count())),
            reader.compact_nullable_string(),
            reader.int32(),
            reader.compact_nullable_string(),
        )
    elif record == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMemberValue(_read_topic_partitions(reader))
    elif record == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        value = CurrentMemberAssignmentValue(
            reader.int32(),
            reader.int32(),
            reader.int8(),
            _read_topic_partitions(reader),
            _read_topic_partitions(reader),
        )
    else:
        return None
    reader.skip_tags()
    return value


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
