"""Hand-built responses for the hot APIs (Produce, Fetch): byte runs plus file regions, in wire order.

Lengths are int16 (strings) or int32 (arrays, bytes) in classic versions, and unsigned varint of length + 1 in
flexible ones, where 0 means null and every structure ends with a tagged-field section: a count, then per field
(ascending tags) its tag, its size and its value, all counts, tags and sizes unsigned varints. A field whose value is
its default is left out, as Kafka leaves it out.

KIP-951's fields, which Produce (v10+) and Fetch (v12+ leader, v16+ endpoints) share, are tagged: a partition's
``current_leader`` (leader_id int32, leader_epoch int32, its own empty tagged-field section; default -1, -1) and the
body's ``node_endpoints`` ([node_id int32, host string, port int32, rack nullable string, tags]; default empty).
"""

from __future__ import annotations

from typing import Protocol

from mq.protocol.frame_fields import I16, I32
from mq.records.varint import encode_unsigned_varint

NO_LEADER = (-1, -1)
"""The default (leader_id, leader_epoch) of a ``current_leader``: not sent."""

NodeEndpoint = tuple[int, str, int, str | None]
"""(node_id, host, port, rack) of a broker named in ``node_endpoints``."""


class FileRegion(Protocol):
    """A byte range of an open file (what the log returns for a read)."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...


class ResponseWriter:
    """Accumulates byte runs and regions after a 4-byte size placeholder; ``size`` counts both."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.pieces: list[bytes | FileRegion] = []
        self.run = bytearray(b"\0\0\0\0")
        self.size = 0

    def array_length(self, n: int | None) -> None:
        if self.flexible:
            self.run += encode_unsigned_varint(0 if n is None else n + 1)
        else:
            self.run += I32.pack(-1 if n is None else n)

    def string(self, text: str | None) -> None:
        """A string, or null for None (nullable fields only)."""
        if text is None:
            self.run += encode_unsigned_varint(0) if self.flexible else I16.pack(-1)
            return
        data = text.encode("utf-8")
        self.run += encode_unsigned_varint(len(data) + 1) if self.flexible else I16.pack(len(data))
        self.run += data

    def records(self, records: bytes | FileRegion | None) -> None:
        if records is None:
            self.run += encode_unsigned_varint(0) if self.flexible else I32.pack(-1)
            return
        length = len(records) if isinstance(records, bytes) else records.length
        self.run += encode_unsigned_varint(length + 1) if self.flexible else I32.pack(length)
        if isinstance(records, bytes):
            self.run += records
        elif length:
            self._flush()
            self.pieces.append(records)
            self.size += length

    def tags(self) -> None:
        if self.flexible:
            self.run.append(0)

    def tagged(self, fields: list[tuple[int, bytes]]) -> None:
        """A tagged-field section holding ``fields`` ((tag, encoded value), ascending tags)."""
        self.run += encode_unsigned_varint(len(fields))
        for tag, value in fields:
            self.run += encode_unsigned_varint(tag) + encode_unsigned_varint(len(value)) + value

    def _flush(self) -> None:
        if self.run:
            self.pieces.append(bytes(self.run))
            self.size += len(self.run)
            self.run = bytearray()

    def finish(self) -> list[bytes | FileRegion]:
        """The framed response as pieces; the size prefix counts every piece after it."""
        self._flush()
        first = self.pieces[0]
        assert isinstance(first, bytes)
        self.pieces[0] = I32.pack(self.size - 4) + first[4:]
        return self.pieces

    def finish_bytes(self) -> bytes:
        """The framed response as one ``bytes``; only for responses without file regions."""
        self.run[:4] = I32.pack(len(self.run) - 4)
        assert not self.pieces
        return bytes(self.run)


def current_leader_value(leader: tuple[int, int]) -> bytes:
    """The encoded value of a ``current_leader`` tagged field."""
    return I32.pack(leader[0]) + I32.pack(leader[1]) + b"\0"


def node_endpoints_value(endpoints: list[NodeEndpoint]) -> bytes:
    """The encoded value of a ``node_endpoints`` tagged field."""
    w = ResponseWriter(flexible=True)
    w.run = bytearray()
    w.array_length(len(endpoints))
    for node_id, host, port, rack in endpoints:
        w.run += I32.pack(node_id)
        w.string(host)
        w.run += I32.pack(port)
        w.string(rack)
        w.tags()
    return bytes(w.run)
