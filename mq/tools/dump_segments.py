"""Kafka's DumpLogSegments over ``.log``, ``.index`` and ``.timeindex`` files, strictly read-only.

``dump_files`` walks the files in the order given and yields one event per output line (``Dumping``, batch and record
lines, index entries, ...); findings that Kafka prints at the end (index mismatches, non-consecutive offsets, time
index errors) and the corrupt entries it met are collected in a ``DumpReport``. Files are opened read-only and read
one entry at a time, so a segment of any size streams in bounded memory; no file is created, resized or locked.
"""

from __future__ import annotations

import bisect
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from mq.errors import CorruptRecordError, KafkaError
from mq.records import iter_records
from mq.records.batch_header import (
    HEADER_PREFIX_SIZE,
    LOG_OVERHEAD,
    MIN_SIZE_FIELD,
    BatchHeader,
    Codec,
    TimestampType,
    compute_crc,
    parse_header,
)
from mq.records.record import parse_control_key, parse_end_txn_marker
from mq.storage.entry_scan import scan_entries
from mq.storage.file_names import SNAPSHOT_SUFFIX, TXN_INDEX_SUFFIX, offset_from_file_name
from mq.storage.offset_index import read_offset_index, sanity_check_offset_index
from mq.storage.producer_snapshot import CorruptSnapshotError, decode_snapshot
from mq.storage.time_index import read_time_index, sanity_check_time_index
from mq.storage.txn_index import iter_aborted_txns

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
NO_TIMESTAMP = -1

_READ_BUFFER_BYTES = 1 << 20
_INDEXED_READ_BYTES = 1 << 13
"""Read from an indexed position, where the wanted entry is usually the first."""
_MIN_ENTRY_SIZE_FIELD = MIN_SIZE_FIELD[0]
"""The smallest size field of any format (an empty v0 message)."""

TIMESTAMP_TYPE_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "QUORUM_REASSIGNMENT", 3: "LEADER_CHANGE"}
"""Control record types as Kafka 2.8 names them; any other id is UNKNOWN."""
END_TXN_MARKER_TYPES = frozenset({0, 1})


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """The dump flags; ``print_data_log`` implies deep iteration."""

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data_log


# Events, one per output line, in output order.


@dataclass(frozen=True, slots=True)
class FileStarted:
    """``Dumping <path>``: every file named by ``--files``, as given."""

    path: str


@dataclass(frozen=True, slots=True)
class LogStarted:
    """``Starting offset: N``: the base offset a ``.log`` file's name carries."""

    path: str
    starting_offset: int


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One shallow entry: a v2 batch, or a v0/v1 message (possibly a compressed wrapper)."""

    path: str
    position: int
    base_offset: int
    """v2: the batch's first offset; v0/v1: the stored (last) offset."""
    last_offset: int
    count: int | None
    """v2 record count; None for v0/v1."""
    base_sequence: int
    last_sequence: int
    producer_id: int
    producer_epoch: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    timestamp_type: str
    max_timestamp: int
    size: int
    magic: int
    codec: str
    crc: int
    computed_crc: int

    @property
    def is_valid(self) -> bool:
        return self.crc == self.computed_crc


@dataclass(frozen=True, slots=True)
class ControlInfo:
    """What a control record says: its type and, for transaction markers, the coordinator epoch."""

    type_id: int
    coordinator_epoch: int | None

    @property
    def type_name(self) -> str:
        return CONTROL_TYPE_NAMES.get(self.type_id, "UNKNOWN")

    @property
    def is_end_txn_marker(self) -> bool:
        return self.type_id in END_TXN_MARKER_TYPES


@dataclass(frozen=True, slots=True)
class RecordEntry:
    """One record of a batch (deep iteration); ``batch_base_offset`` is the first offset of its batch."""

    batch: BatchEntry
    batch_base_offset: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc: int | None
    """The v0/v1 message checksum; None for v2 records, which have none."""
    is_valid: bool
    sequence: int
    header_keys: tuple[str, ...]
    control: ControlInfo | None
    print_data: bool
    """Whether ``--print-data-log`` asked for key and payload."""

    @property
    def key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        return -1 if self.value is None else len(self.value)


@dataclass(frozen=True, slots=True)
class InvalidBytes:
    """``Found N invalid bytes at the end of <file name>``: bytes after the last readable entry."""

    path: str
    count: int

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    path: str
    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimeIndexEntry:
    path: str
    timestamp: int
    offset: int


@dataclass(frozen=True, slots=True)
class IndexEmpty:
    path: str


@dataclass(frozen=True, slots=True)
class SanityChecked:
    """Outcome of ``--index-sanity-check``; ``message`` says why it failed."""

    path: str
    message: str | None = None

    @property
    def passed(self) -> bool:
        return self.message is None


@dataclass(frozen=True, slots=True)
class AbortedTxnEntry:
    """One aborted transaction of a ``.txnindex`` file."""

    path: str
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer of a ``.snapshot`` file; the last batch fields are None when it has no batch (last offset < 0)."""

    path: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    current_txn_first_offset: int | None
    first_sequence: int | None
    last_sequence: int | None
    last_offset: int | None
    offset_delta: int | None
    timestamp: int | None


@dataclass(frozen=True, slots=True)
class SnapshotCorrupt:
    """A ``.snapshot`` file that fails its version, CRC or layout check (Kafka prints the message and goes on)."""

    path: str
    message: str


@dataclass(frozen=True, slots=True)
class UnknownFile:
    path: str


@dataclass(frozen=True, slots=True)
class FileFailed:
    """A file that could not be read; the dump goes on with the next one."""

    path: str
    message: str


Event = (
    FileStarted
    | LogStarted
    | BatchEntry
    | RecordEntry
    | InvalidBytes
    | IndexEntry
    | TimeIndexEntry
    | IndexEmpty
    | SanityChecked
    | AbortedTxnEntry
    | ProducerSnapshotEntry
    | SnapshotCorrupt
    | UnknownFile
    | FileFailed
)


@dataclass(frozen=True, slots=True)
class CorruptEntry:
    """An entry that failed its checks at ``position``; the CRCs are set for a checksum mismatch."""

    position: int
    message: str
    stored_crc: int | None = None
    computed_crc: int | None = None


OffsetPairs = dict[str, deque[tuple[int, int]]]


@dataclass
class DumpReport:
    """Findings printed after all files, keyed by absolute file path, each list in Kafka's print order.

    Kafka prepends index mismatches and offset gaps (newest first) and appends the time index findings.
    """

    index_mismatches: OffsetPairs = field(default_factory=dict)
    """(index offset, log offset); log offset -1 when no entry is readable at the indexed position."""
    time_index_mismatches: OffsetPairs = field(default_factory=dict)
    """(index timestamp, max timestamp of the records of the indexed entry)."""
    time_index_out_of_order: OffsetPairs = field(default_factory=dict)
    """(index timestamp, previously indexed timestamp)."""
    offsets_not_found: OffsetPairs = field(default_factory=dict)
    """(indexed offset, last offset of the first entry at or after it, or -1)."""
    non_consecutive_offsets: OffsetPairs = field(default_factory=dict)
    """(offset, the offset that follows it)."""
    corrupt_entries: dict[str, list[CorruptEntry]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (
            self.index_mismatches
            or self.time_index_mismatches
            or self.time_index_out_of_order
            or self.offsets_not_found
            or self.non_consecutive_offsets
            or self.corrupt_entries
        )

    def add_index_mismatch(self, path: str, index_offset: int, log_offset: int) -> None:
        _pairs(self.index_mismatches, path).appendleft((index_offset, log_offset))

    def add_non_consecutive(self, path: str, offset: int, next_offset: int) -> None:
        _pairs(self.non_consecutive_offsets, path).appendleft((offset, next_offset))

    def add_time_index_mismatch(self, path: str, index_timestamp: int, log_timestamp: int) -> None:
        _pairs(self.time_index_mismatches, path).append((index_timestamp, log_timestamp))

    def add_time_index_out_of_order(self, path: str, index_timestamp: int, previous_timestamp: int) -> None:
        _pairs(self.time_index_out_of_order, path).append((index_timestamp, previous_timestamp))

    def add_offset_not_found(self, path: str, indexed_offset: int, log_offset: int) -> None:
        _pairs(self.offsets_not_found, path).append((indexed_offset, log_offset))

    def add_corrupt_entry(self, path: str, entry: CorruptEntry) -> None:
        self.corrupt_entries.setdefault(os.path.abspath(path), []).append(entry)


def _pairs(pairs: OffsetPairs, path: str) -> deque[tuple[int, int]]:
    return pairs.setdefault(os.path.abspath(path), deque())


def dump_files(paths: Sequence[str], options: DumpOptions, report: DumpReport) -> Iterator[Event]:
    """Events for each file in turn, by suffix; a file that cannot be read yields ``FileFailed`` and the walk goes on."""
    for path in paths:
        yield FileStarted(path)
        suffix = os.path.splitext(path)[1]
        try:
            if suffix == LOG_SUFFIX:
                yield from dump_log(path, options, report)
            elif suffix == INDEX_SUFFIX:
                yield from dump_index(path, options, report)
            elif suffix == TIME_INDEX_SUFFIX:
                yield from dump_time_index(path, options, report)
            elif suffix == TXN_INDEX_SUFFIX:
                yield from dump_txn_index(path)
            elif suffix == SNAPSHOT_SUFFIX:
                yield from dump_producer_snapshot(path)
            else:
                yield UnknownFile(path)
        except OSError as exc:
            yield FileFailed(path, f"cannot read {exc.filename or path}: {exc.strerror or exc}")
        except (ValueError, KafkaError) as exc:
            yield FileFailed(path, f"cannot read {path}: {exc}")


def _base_offset(path: str) -> int:
    """The offset a segment file's name carries (``00000000000000000042.log`` -> 42)."""
    name = os.path.basename(path)
    try:
        return offset_from_file_name(name)
    except ValueError:
        raise ValueError(f"{name} is not named after a base offset (20 digits and a suffix)") from None


def _sibling(path: str, suffix: str) -> str:
    """The file of the same segment with another suffix, in the same directory."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, name.split(".", 1)[0] + suffix)


# Reading a .log file


@dataclass(frozen=True, slots=True)
class _Entry:
    position: int
    header: BatchHeader
    """Parsed over ``data`` (its ``position`` is where the entry starts in ``data``)."""
    data: bytes


@dataclass(frozen=True, slots=True)
class _Unreadable:
    """An entry that cannot be parsed; reading goes on at ``next_position``, or stops when it is None."""

    position: int
    message: str
    next_position: int | None


class _LogReader:
    """Read-only access to one ``.log`` file: runs of entries through the storage scanner, and one entry at a position
    (buffered) with the reason when it cannot be read."""

    def __init__(self, path: str, max_message_size: int) -> None:
        self._file: BinaryIO = open(path, "rb", buffering=_READ_BUFFER_BYTES)  # noqa: SIM115 - closed by close()
        self.size = os.fstat(self._file.fileno()).st_size
        self._max_message_size = max_message_size

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> _LogReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def read_entry(self, position: int) -> _Entry | _Unreadable | None:
        """The entry at ``position``; None when the file ends first (no whole entry left there)."""
        if position >= self.size - HEADER_PREFIX_SIZE:
            return None
        self._file.seek(position)
        prefix = self._file.read(HEADER_PREFIX_SIZE)
        if len(prefix) < HEADER_PREFIX_SIZE:
            return None
        size_field = int.from_bytes(prefix[8:12], "big", signed=True)
        magic = prefix[16]
        if size_field < _MIN_ENTRY_SIZE_FIELD:
            message = f"record size {size_field} is smaller than the minimum record overhead ({_MIN_ENTRY_SIZE_FIELD})"
            return _Unreadable(position, message, None)
        size = size_field + LOG_OVERHEAD
        if position + size > self.size:
            return None
        if size > self._max_message_size:
            message = f"record size {size} exceeds the largest allowable {self._max_message_size} (--max-message-size)"
            return _Unreadable(position, message, None)
        if magic not in MIN_SIZE_FIELD:
            return _Unreadable(position, f"invalid magic {magic}; skipped {size} bytes", position + size)
        if size_field < MIN_SIZE_FIELD[magic]:
            message = (
                f"record size {size_field} is smaller than the minimum size of a magic {magic} entry "
                f"({MIN_SIZE_FIELD[magic]})"
            )
            return _Unreadable(position, message, None)
        data = prefix + self._file.read(size - HEADER_PREFIX_SIZE)
        if len(data) < size:
            return None
        header = parse_header(data)
        if header is None:
            return None
        return _Entry(position, header, data)

    def entries(self, position: int = 0, read_chunk: int = _READ_BUFFER_BYTES) -> Iterator[_Entry | _Unreadable]:
        """Entries from ``position`` on, skipping unreadable ones where the size field allows it: the storage scanner
        reads the whole entries, ``read_entry`` says why it stopped at bytes it cannot parse and where to go on."""
        while True:
            try:
                for chunk, chunk_position, header in scan_entries(
                    self._file.fileno(), self.size, read_chunk, self._max_message_size, position
                ):
                    position = chunk_position + header.end_position
                    yield _Entry(chunk_position + header.position, header, chunk)
                return
            except CorruptRecordError:
                entry = self.read_entry(position)
            if entry is None:
                return
            yield entry
            if isinstance(entry, _Entry):
                position += entry.header.size
            elif entry.next_position is None:
                return
            else:
                position = entry.next_position


def _batch_entry(path: str, entry: _Entry) -> BatchEntry:
    header = entry.header
    v2 = header.magic >= 2
    return BatchEntry(
        path=path,
        position=entry.position,
        base_offset=header.offset,
        last_offset=header.last_offset,
        count=header.records_count if v2 else None,
        base_sequence=header.base_sequence,
        last_sequence=header.last_sequence,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        timestamp_type=TIMESTAMP_TYPE_NAMES[header.timestamp_type],
        max_timestamp=header.max_timestamp,
        size=header.size,
        magic=header.magic,
        codec=_codec_name(header),
        crc=header.crc,
        computed_crc=compute_crc(entry.data, header),
    )


def _codec_name(header: BatchHeader) -> str:
    codec_id = header.attributes & 0x07
    return Codec(codec_id).name if codec_id in Codec._value2member_map_ else f"UNKNOWN({codec_id})"


def _control_info(key: bytes | None, value: bytes | None) -> ControlInfo:
    type_id = parse_control_key(key or b"")
    epoch = parse_end_txn_marker(value or b"") if type_id in END_TXN_MARKER_TYPES else None
    return ControlInfo(type_id, epoch)


def dump_log(path: str, options: DumpOptions, report: DumpReport) -> Iterator[Event]:
    """Batch lines (and record lines when deep) of one ``.log`` file, then its trailing invalid bytes."""
    starting_offset = _base_offset(path)
    with _LogReader(path, options.max_message_size) as reader:
        yield LogStarted(path, starting_offset)
        previous_offset: int | None = None
        end = 0
        for entry in reader.entries():
            if isinstance(entry, _Unreadable):
                report.add_corrupt_entry(path, CorruptEntry(entry.position, entry.message))
                end = entry.position if entry.next_position is None else entry.next_position
                continue
            batch = _batch_entry(path, entry)
            end = entry.position + entry.header.size
            if not batch.is_valid:
                message = f"offset: {batch.last_offset} stored crc: {batch.crc} computed crc: {batch.computed_crc}"
                report.add_corrupt_entry(path, CorruptEntry(batch.position, message, batch.crc, batch.computed_crc))
            yield batch
            if not options.deep:
                continue
            try:
                for record in _records(batch, entry, options.print_data_log):
                    if previous_offset is not None and record.offset != previous_offset + 1:
                        report.add_non_consecutive(path, previous_offset, record.offset)
                    previous_offset = record.offset
                    yield record
            except Exception as exc:  # any decoding failure of damaged bytes is reported, not raised
                report.add_corrupt_entry(path, CorruptEntry(batch.position, f"records cannot be read: {exc}"))
        trailing = reader.size - end
        if trailing > 0:
            yield InvalidBytes(path, trailing)


def _records(batch: BatchEntry, entry: _Entry, print_data: bool) -> Iterator[RecordEntry]:
    """The records of one entry, decompressed; ``batch_base_offset`` of v0/v1 is the first inner offset."""
    base_offset: int | None = batch.base_offset if batch.magic >= 2 else None
    for record in iter_records(entry.data, entry.header):
        if base_offset is None:
            base_offset = record.offset
        legacy = batch.magic < 2
        yield RecordEntry(
            batch=batch,
            batch_base_offset=base_offset,
            offset=record.offset,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            crc=record.crc if legacy else None,
            is_valid=record.is_valid if legacy else True,
            sequence=record.sequence,
            header_keys=tuple(key for key, _ in record.headers),
            control=_control_info(record.key, record.value) if batch.is_control else None,
            print_data=print_data,
        )


# Index files


def _live_entries(entries: Sequence[tuple[int, int]], base_offset: int, key: int) -> Iterator[tuple[int, int]]:
    """Entries up to the first one after the first whose offset (at ``key``) is the base offset: a zero-filled slot."""
    for i, entry in enumerate(entries):
        if i > 0 and entry[key] == base_offset:
            return
        yield entry


def _last_offset_at(reader: _LogReader, position: int) -> int:
    """Last offset of the entry at ``position``, or -1 when no whole entry can be read there."""
    entry = reader.read_entry(position) if position >= 0 else None
    return entry.header.last_offset if isinstance(entry, _Entry) else -1


def dump_index(path: str, options: DumpOptions, report: DumpReport) -> Iterator[Event]:
    """Entries of an offset index, each checked against the last offset of the entry it points at."""
    base_offset = _base_offset(path)
    entries = read_offset_index(path, base_offset)
    if not entries:
        yield IndexEmpty(path)
        return
    if options.index_sanity_check:
        yield _sanity_check(path, base_offset, sanity_check_offset_index)
        return
    with _LogReader(_sibling(path, LOG_SUFFIX), options.max_message_size) as reader:
        for offset, position in _live_entries(entries, base_offset, 0):
            log_offset = _last_offset_at(reader, position)
            if log_offset != offset:
                report.add_index_mismatch(path, offset, log_offset)
            if not options.verify_index_only:
                yield IndexEntry(path, offset, position)


def _sanity_check(path: str, base_offset: int, check: Callable[[str, int], None]) -> SanityChecked:
    try:
        check(path, base_offset)
    except KafkaError as exc:
        return SanityChecked(path, str(exc))
    return SanityChecked(path)


def dump_time_index(path: str, options: DumpOptions, report: DumpReport) -> Iterator[Event]:
    """Entries of a time index, each checked against the max timestamp of the records of the entry it names."""
    base_offset = _base_offset(path)
    if options.index_sanity_check:
        yield _sanity_check(path, base_offset, sanity_check_time_index)
        return
    entries = read_time_index(path, base_offset)
    index_path = _sibling(path, INDEX_SUFFIX)
    offset_index = (
        list(_live_entries(read_offset_index(index_path, base_offset), base_offset, 0))
        if os.path.exists(index_path)
        else []
    )
    indexed_offsets = [offset for offset, _ in offset_index]
    previous_timestamp = NO_TIMESTAMP
    with _LogReader(_sibling(path, LOG_SUFFIX), options.max_message_size) as reader:
        for timestamp, offset in _live_entries(entries, base_offset, 1):
            slot = bisect.bisect_right(indexed_offsets, offset) - 1
            start = offset_index[slot][1] if slot >= 0 else 0
            found = _first_entry_reaching(reader, start, offset)
            if found is None:
                report.add_offset_not_found(path, offset, -1)
            elif found.header.last_offset != offset:
                report.add_offset_not_found(path, offset, found.header.last_offset)
            else:
                log_timestamp = _max_record_timestamp(found)
                if log_timestamp != timestamp:
                    report.add_time_index_mismatch(path, timestamp, log_timestamp)
                if previous_timestamp >= timestamp:
                    report.add_time_index_out_of_order(path, timestamp, previous_timestamp)
            if not options.verify_index_only:
                yield TimeIndexEntry(path, timestamp, offset)
            previous_timestamp = timestamp


def _first_entry_reaching(reader: _LogReader, position: int, offset: int) -> _Entry | None:
    """The first readable entry from ``position`` whose last offset is at least ``offset``."""
    for entry in reader.entries(position, _INDEXED_READ_BYTES):
        if isinstance(entry, _Entry) and entry.header.last_offset >= offset:
            return entry
    return None


def _max_record_timestamp(entry: _Entry) -> int:
    """Largest record timestamp in the entry; -1 when it has no records or they cannot be read."""
    try:
        return max((record.timestamp for record in iter_records(entry.data, entry.header)), default=NO_TIMESTAMP)
    except Exception:  # damaged records have no timestamp to compare
        return NO_TIMESTAMP


# Transaction index and producer state snapshot


def dump_txn_index(path: str) -> Iterator[Event]:
    """Aborted transactions of a ``.txnindex`` file (whole 34-byte entries; a partial tail is not an entry)."""
    with open(path, "rb") as file:
        data = file.read()
    for txn in iter_aborted_txns(data, path):
        yield AbortedTxnEntry(
            path, txn.version, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
        )


def dump_producer_snapshot(path: str) -> Iterator[Event]:
    """Producers of a ``.snapshot`` file once its version and CRC check out; otherwise one ``SnapshotCorrupt``."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        entries = decode_snapshot(data)
    except CorruptSnapshotError as exc:
        yield SnapshotCorrupt(path, str(exc))
        return
    for entry in entries:
        has_batch = entry.has_batch
        yield ProducerSnapshotEntry(
            path=path,
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_first_offset=entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None,
            first_sequence=entry.first_sequence if has_batch else None,
            last_sequence=entry.last_sequence if has_batch else None,
            last_offset=entry.last_offset if has_batch else None,
            offset_delta=entry.offset_delta if has_batch else None,
            timestamp=entry.timestamp if has_batch else None,
        )
