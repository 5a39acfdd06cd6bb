"""The transaction index (``<base offset>.txnindex``): the aborted transactions whose ABORT markers a segment holds.

The file is a plain sequence of 34-byte big-endian entries, no header::

    0  int16  version              0
    2  int64  producer_id
    10 int64  first_offset         first offset of the aborted transaction (possibly in an earlier segment)
    18 int64  last_offset          offset of the ABORT marker
    26 int64  last_stable_offset   the partition's LSO once the marker was written

Entries are appended in increasing ``last_offset`` order. A file whose length is not a multiple of 34 ends in a
partial entry (a crash during an append): readers ignore it, as Kafka does, and opening the index for appends cuts
it off so the next entry starts on an entry boundary. As in Kafka the file is created only by the first append.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mq.errors import CorruptIndexError

ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = ABORTED_TXN.size
ABORTED_TXN_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    def encode(self) -> bytes:
        return ABORTED_TXN.pack(
            self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def iter_aborted_txns(data: bytes, path: str | Path = "") -> Iterator[AbortedTxn]:
    """The whole entries of a transaction index's bytes, in order (a partial tail is not an entry).

    CorruptIndexError naming ``path`` on reaching an entry of a version above 0.
    """
    whole = len(data) - len(data) % ABORTED_TXN_SIZE
    for version, producer_id, first, last, lso in ABORTED_TXN.iter_unpack(memoryview(data)[:whole]):
        if version > ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version} in transaction index "
                f"{os.path.abspath(path)}, current version is {ABORTED_TXN_VERSION}"
            )
        yield AbortedTxn(producer_id, first, last, lso, version)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted: list[AbortedTxn]
    complete: bool
    """True when an entry's last stable offset reached the fetch's upper bound: later segments need no search."""


class TransactionIndex:
    """One segment's transaction index, kept in memory (it is small: one entry per aborted transaction) and
    appended to its file. Not thread-safe: the owning log serialises calls."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        self._entries = list(iter_aborted_txns(data, path))
        if len(data) % ABORTED_TXN_SIZE:
            self._truncate_file(len(self._entries) * ABORTED_TXN_SIZE)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    @property
    def last_offset(self) -> int | None:
        return self._entries[-1].last_offset if self._entries else None

    def append(self, txn: AbortedTxn) -> None:
        """Append (and write, not fsync) an entry; ValueError unless its last offset is above the previous one's."""
        last = self.last_offset
        if last is not None and txn.last_offset <= last:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is not "
                f"greater than current last offset {last} of index {self.path.absolute()}"
            )
        with open(self.path, "ab") as out:
            out.write(txn.encode())
        self._entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping the fetch range [``fetch_offset``, ``upper_bound_offset``): those whose
        last offset is at or past the start and whose first offset is before the end. The search stops at the first
        entry whose last stable offset is at or past the upper bound: no later transaction can overlap."""
        found = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (the log is truncated to end before it)."""
        keep = next((i for i, txn in enumerate(self._entries) if txn.last_offset >= offset), len(self._entries))
        if keep < len(self._entries):
            del self._entries[keep:]
            self._truncate_file(keep * ABORTED_TXN_SIZE)

    def reset(self) -> None:
        """Drop every entry (the segment is being rebuilt by recovery)."""
        self._entries.clear()
        self._truncate_file(0)

    def sanity_check(self) -> None:
        """CorruptIndexError when an entry's marker lies before the segment's base offset."""
        for txn in self._entries:
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path.absolute()} is less than start "
                    f"offset {self.base_offset}"
                )

    def flush(self) -> None:
        """fsync the file, if it exists."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _truncate_file(self, size: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, size)
