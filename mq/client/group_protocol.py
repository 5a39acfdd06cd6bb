"""Kafka's ConsumerProtocol: the "consumer" protocol type's Subscription and Assignment bytes.

JoinGroup carries a member's Subscription as the metadata of each protocol (one per assignor) it offers; SyncGroup
carries the leader's Assignment for each member. Both are big-endian, non-flexible structs behind an int16 version:

  Subscription  version:int16 topics:[string] user_data:nullable bytes
                (v1+) owned_partitions:[topic:string partitions:[int32]]  (v2+) generation_id:int32
                (v3+) rack_id:nullable string
  Assignment    version:int16 assigned_partitions:[topic:string partitions:[int32]] user_data:nullable bytes

Arrays are an int32 count (-1 is null, read as empty), strings an int16 length, bytes an int32 length (-1 null).
A newer version than the ones described is read as the highest one known and its trailing fields are ignored, as
Kafka's own clients do; so members of any client and version can read each other's bytes.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from mq.errors import ErrorCode, KafkaError
from mq.topic_partition import TopicPartition

PROTOCOL_TYPE = "consumer"
HIGHEST_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(KafkaError):
    """Subscription or Assignment bytes that cannot be read."""

    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 1


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None
    version: int = 1


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, value: int) -> None:
        self.parts.append(_I16.pack(value))

    def int32(self, value: int) -> None:
        self.parts.append(_I32.pack(value))

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode("utf-8")
        self.int16(len(data))
        self.parts.append(data)

    def bytes_(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        self.parts.append(value)

    def topic_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """[topic:string partitions:[int32]], topics in first-seen order, partitions in the given order."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        self.int32(len(by_topic))
        for topic, ids in by_topic.items():
            self.string(topic)
            self.int32(len(ids))
            self.parts.extend(_I32.pack(p) for p in ids)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise ConsumerProtocolError(f"consumer protocol data truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def string(self) -> str | None:
        size = self.int16()
        return None if size < 0 else bytes(self._take(size)).decode("utf-8")

    def bytes_(self) -> bytes | None:
        size = self.int32()
        return None if size < 0 else bytes(self._take(size))

    def array_size(self) -> int:
        return max(0, self.int32())

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() or "" for _ in range(self.array_size()))

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        result: list[TopicPartition] = []
        for _ in range(self.array_size()):
            topic = self.string() or ""
            result.extend(TopicPartition(topic, self.int32()) for _ in range(self.array_size()))
        return tuple(result)

    def version(self) -> int:
        version = self.int16()
        if version < 0:
            raise ConsumerProtocolError(f"consumer protocol version {version} is not valid")
        return version


def encode_subscription(subscription: Subscription) -> bytes:
    version = subscription.version
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"subscription version {version} is not between 0 and {HIGHEST_VERSION}")
    out = _Writer()
    out.int16(version)
    out.int32(len(subscription.topics))
    for topic in subscription.topics:
        out.string(topic)
    out.bytes_(subscription.user_data)
    if version >= 1:
        out.topic_partitions(subscription.owned_partitions)
    if version >= 2:
        out.int32(subscription.generation_id)
    if version >= 3:
        out.string(subscription.rack_id)
    return out.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = reader.version()
    topics = reader.strings()
    user_data = reader.bytes_()
    owned = reader.topic_partitions() if version >= 1 else ()
    generation_id = reader.int32() if version >= 2 else -1
    rack_id = reader.string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation_id, rack_id, version)


def encode_assignment(assignment: Assignment) -> bytes:
    if not 0 <= assignment.version <= HIGHEST_VERSION:
        raise ValueError(f"assignment version {assignment.version} is not between 0 and {HIGHEST_VERSION}")
    out = _Writer()
    out.int16(assignment.version)
    out.topic_partitions(assignment.partitions)
    out.bytes_(assignment.user_data)
    return out.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    """An empty byte string (what a coordinator sends a member the leader gave nothing) is an empty assignment."""
    if not data:
        return Assignment(())
    reader = _Reader(data)
    version = reader.version()
    partitions = reader.topic_partitions()
    user_data = reader.bytes_()
    return Assignment(partitions, user_data, version)
