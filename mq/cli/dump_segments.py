"""``mq dump-segments``: Kafka's DumpLogSegments (``kafka-dump-log.sh``), rendered as Kafka 2.8's lines or NDJSON."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from mq.cli.common import EXIT_FAILED, handle_errors, verbose_option
from mq.tools.dump_segments import (
    DEFAULT_MAX_MESSAGE_SIZE,
    AbortedTxnEntry,
    BatchEntry,
    DumpOptions,
    DumpReport,
    Event,
    FileFailed,
    FileStarted,
    IndexEmpty,
    IndexEntry,
    InvalidBytes,
    LogStarted,
    ProducerSnapshotEntry,
    RecordEntry,
    SanityChecked,
    SnapshotCorrupt,
    TimeIndexEntry,
    UnknownFile,
    dump_files,
)

HELP = """Parse log segment, index and time index files and print their contents, as Kafka's DumpLogSegments does.

Files are chosen by suffix: .log (record batches of any message format and codec), .index, .timeindex, .txnindex
(aborted transactions), .snapshot (producer state); others are ignored. Files are only read, never created or changed, so this is safe on a log directory copied from a stopped or
crashed broker. Findings (index mismatches, non-consecutive offsets, time index errors, corrupt entries with their
position and stored/computed CRC) are printed on stderr after all files; with --format json every line, findings
included, is one JSON object on stdout with a "type" field.

When stdout is redirected and stderr is a terminal, a progress bar shows on stderr.

\b
Exit codes:
  0  the files were dumped (even if corruption was reported)
  1  a file could not be read, or an index failed --index-sanity-check
  2  bad usage
"""

_PROGRESS_STEP_BYTES = 1 << 20


class _DumpCommand(click.Command):
    """Accepts unambiguous abbreviations of long options (``--deep``, ``--print``), as Kafka's tools do."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self._expand_abbreviations(ctx, args))

    def _expand_abbreviations(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = sorted({name for param in self.get_params(ctx) for name in param.opts if name.startswith("--")})
        expanded: list[str] = []
        for i, arg in enumerate(args):
            if arg == "--":
                return expanded + args[i:]
            name, equals, value = arg.partition("=")
            if name.startswith("--") and name not in names:
                matches = [full for full in names if full.startswith(name)]
                if len(matches) == 1:
                    arg = matches[0] + equals + value
            expanded.append(arg)
        return expanded


def _split_files(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    files = [name.strip() for name in value.split(",") if name.strip()]
    if not files:
        raise click.BadParameter("names no file.", ctx, param)
    return files


@click.command("dump-segments", cls=_DumpCommand, help=HELP)
@click.option(
    "--files",
    required=True,
    callback=_split_files,
    metavar="FILE1,FILE2,...",
    help="REQUIRED: The comma separated list of data and index log files to be dumped.",
)
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="Print the records inside each batch (decompressed). Automatically set if --print-data-log is.",
)
@click.option("--print-data-log", is_flag=True, help="Print the key and payload of each record (UTF-8).")
@click.option("--verify-index-only", is_flag=True, help="Check .index/.timeindex entries without printing them.")
@click.option(
    "--index-sanity-check",
    is_flag=True,
    help="Only run the sanity check a broker runs on an index at startup: '<file> passed sanity check.'",
)
@click.option(
    "--max-message-size",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_MESSAGE_SIZE,
    show_default=True,
    help="Size of the largest entry; a larger size field is taken as corruption and reading the file stops there.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="text: Kafka 2.8's lines; json: one JSON object per line (NDJSON), with a 'type' field.",
)
@verbose_option()
@handle_errors
def dump_segments(
    files: list[str],
    deep_iteration: bool,
    print_data_log: bool,
    verify_index_only: bool,
    index_sanity_check: bool,
    max_message_size: int,
    output_format: str,
    verbose: bool,
) -> None:
    options = DumpOptions(
        deep_iteration=deep_iteration,
        print_data_log=print_data_log,
        verify_index_only=verify_index_only,
        index_sanity_check=index_sanity_check,
        max_message_size=max_message_size,
    )
    report = DumpReport()
    renderer = _JsonRenderer() if output_format == "json" else _TextRenderer()
    failed = False
    try:
        with _progress(files) as advance:
            for event in dump_files(files, options, report):
                renderer.event(event)
                advance(event)
                if isinstance(event, FileFailed) or (isinstance(event, SanityChecked) and not event.passed):
                    failed = True
        renderer.report(report)
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_closed()
    if failed:
        sys.exit(EXIT_FAILED)


def _stdout_closed() -> NoReturn:
    """The reader of stdout went away (``| head``): stop quietly."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_FAILED)


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def decode(data: bytes) -> str:
    """Kafka's default StringDecoder: UTF-8, malformed bytes replaced."""
    return data.decode("utf-8", errors="replace")


def batch_line(batch: BatchEntry) -> str:
    """Kafka 2.8's batch line (v2 fields, or ``offset:`` for a v0/v1 entry), ``isvalid`` last."""
    if batch.magic >= 2:
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {java_bool(batch.is_transactional)} isControl: {java_bool(batch.is_control)}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} size: {batch.size} "
        f"magic: {batch.magic} compresscodec: {batch.codec} crc: {batch.crc} isvalid: {java_bool(batch.is_valid)}"
    )


def record_line(record: RecordEntry) -> str:
    """Kafka 2.8's record line: ``| `` and the superset of record and batch fields, then control or data fields."""
    batch = record.batch
    crc = "null" if record.crc is None else str(record.crc)
    parts = [
        f"| offset: {record.offset} isValid: {java_bool(record.is_valid)} crc: {crc} keySize: {record.key_size} "
        f"valueSize: {record.value_size} {batch.timestamp_type}: {record.timestamp} "
        f"baseOffset: {record.batch_base_offset} lastOffset: {batch.last_offset} "
        f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
        f"producerEpoch: {batch.producer_epoch} partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"batchSize: {batch.size} magic: {batch.magic} compressType: {batch.codec} position: {batch.position}"
    ]
    if batch.magic >= 2:
        parts.append(f" sequence: {record.sequence} headerKeys: [{','.join(record.header_keys)}]")
    else:
        parts.append(f" crc: {crc} isvalid: {java_bool(record.is_valid)}")
    control = record.control
    if control is not None:
        if control.is_end_txn_marker:
            parts.append(f" endTxnMarker: {control.type_name} coordinatorEpoch: {control.coordinator_epoch}")
        else:
            parts.append(f" controlType: {control.type_name}({control.type_id})")
    elif record.print_data:
        if record.key is not None:
            parts.append(f" key: {decode(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {decode(record.value)}")
    return "".join(parts)


def snapshot_line(entry: ProducerSnapshotEntry) -> str:
    """Kafka 2.8's producer line; ``currentTxnFirstOffset`` prints as a Scala Option, the batch part only if any."""
    txn = "None" if entry.current_txn_first_offset is None else f"Some({entry.current_txn_first_offset})"
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn} "
    )
    if entry.last_offset is not None:
        line += (
            f"firstSequence: {entry.first_sequence} lastSequence: {entry.last_sequence} "
            f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}"
        )
    return line


def report_lines(report: DumpReport) -> Iterator[str]:
    """The findings, in Kafka's order and wording, then the corrupt entries."""
    for path, pairs in report.index_mismatches.items():
        yield f"Mismatches in :{path}"
        yield from (f"  Index offset: {index}, log offset: {log}" for index, log in pairs)
    for path, pairs in report.time_index_mismatches.items():
        yield f"Found timestamp mismatch in :{path}"
        yield from (f"  Index timestamp: {index}, log timestamp: {log}" for index, log in pairs)
    for path, pairs in report.time_index_out_of_order.items():
        yield f"Found out of order timestamp in :{path}"
        yield from (f"  Index timestamp: {index}, Previously indexed timestamp: {prev}" for index, prev in pairs)
    for pairs in report.offsets_not_found.values():
        yield "The following indexed offsets are not found in the log."
        yield from (f"Indexed offset: {indexed}, found log offset: {log}" for indexed, log in pairs)
    for path, pairs in report.non_consecutive_offsets.items():
        yield f"Non-consecutive offsets in {path}"
        yield from (f"  {first} is followed by {second}" for first, second in pairs)
    for path, entries in report.corrupt_entries.items():
        yield f"Corrupt entries in {path}"
        yield from (f"  position: {entry.position} {entry.message}" for entry in entries)


class _TextRenderer:
    """Kafka's lines on stdout; unknown files, failures and findings on stderr."""

    def __init__(self) -> None:
        self._out = sys.stdout

    def event(self, event: Event) -> None:
        line: str | None = None
        if isinstance(event, RecordEntry):
            line = record_line(event)
        elif isinstance(event, BatchEntry):
            line = batch_line(event)
        elif isinstance(event, IndexEntry):
            line = f"offset: {event.offset} position: {event.position}"
        elif isinstance(event, TimeIndexEntry):
            line = f"timestamp: {event.timestamp} offset: {event.offset}"
        elif isinstance(event, FileStarted):
            line = f"Dumping {event.path}"
        elif isinstance(event, AbortedTxnEntry):
            line = (
                f"version: {event.version} producerId: {event.producer_id} firstOffset: {event.first_offset} "
                f"lastOffset: {event.last_offset} lastStableOffset: {event.last_stable_offset}"
            )
        elif isinstance(event, ProducerSnapshotEntry):
            line = snapshot_line(event)
        elif isinstance(event, SnapshotCorrupt):
            self._err(event.message)
        elif isinstance(event, LogStarted):
            line = f"Starting offset: {event.starting_offset}"
        elif isinstance(event, InvalidBytes):
            line = f"Found {event.count} invalid bytes at the end of {event.file_name}"
        elif isinstance(event, IndexEmpty):
            line = f"{event.path} is empty."
        elif isinstance(event, SanityChecked):
            if event.passed:
                line = f"{event.path} passed sanity check."
            else:
                self._err(f"{event.path} failed sanity check: {event.message}")
        elif isinstance(event, UnknownFile):
            self._err(f"Ignoring unknown file {event.path}")
        elif isinstance(event, FileFailed):
            self._err(f"Error: {event.message}")
        if line is not None:
            self._out.write(line + "\n")

    def _err(self, line: str) -> None:
        self._out.flush()
        click.echo(line, err=True)

    def report(self, report: DumpReport) -> None:
        self._out.flush()
        for line in report_lines(report):
            click.echo(line, err=True)


def event_document(event: Event) -> dict[str, Any]:
    """The JSON object for one event (the same facts as its text line)."""
    if isinstance(event, RecordEntry):
        return record_document(event)
    if isinstance(event, BatchEntry):
        return batch_document(event)
    if isinstance(event, IndexEntry):
        return {"type": "index_entry", "file": event.path, "offset": event.offset, "position": event.position}
    if isinstance(event, TimeIndexEntry):
        return {"type": "time_index_entry", "file": event.path, "timestamp": event.timestamp, "offset": event.offset}
    if isinstance(event, FileStarted):
        return {"type": "file", "file": event.path}
    if isinstance(event, LogStarted):
        return {"type": "log_start", "file": event.path, "startingOffset": event.starting_offset}
    if isinstance(event, InvalidBytes):
        return {"type": "invalid_bytes", "file": event.path, "count": event.count}
    if isinstance(event, IndexEmpty):
        return {"type": "index_empty", "file": event.path}
    if isinstance(event, SanityChecked):
        return {"type": "sanity_check", "file": event.path, "passed": event.passed, "message": event.message}
    if isinstance(event, AbortedTxnEntry):
        return {
            "type": "aborted_txn",
            "file": event.path,
            "version": event.version,
            "producerId": event.producer_id,
            "firstOffset": event.first_offset,
            "lastOffset": event.last_offset,
            "lastStableOffset": event.last_stable_offset,
        }
    if isinstance(event, ProducerSnapshotEntry):
        return {
            "type": "producer_snapshot_entry",
            "file": event.path,
            "producerId": event.producer_id,
            "producerEpoch": event.producer_epoch,
            "coordinatorEpoch": event.coordinator_epoch,
            "currentTxnFirstOffset": event.current_txn_first_offset,
            "firstSequence": event.first_sequence,
            "lastSequence": event.last_sequence,
            "lastOffset": event.last_offset,
            "offsetDelta": event.offset_delta,
            "timestamp": event.timestamp,
        }
    if isinstance(event, SnapshotCorrupt):
        return {"type": "snapshot_corrupt", "file": event.path, "message": event.message}
    if isinstance(event, UnknownFile):
        return {"type": "unknown_file", "file": event.path}
    return {"type": "error", "file": event.path, "message": event.message}


def batch_document(batch: BatchEntry) -> dict[str, Any]:
    return {
        "type": "batch",
        "file": batch.path,
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.count,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "position": batch.position,
        "timestampType": batch.timestamp_type,
        "maxTimestamp": batch.max_timestamp,
        "size": batch.size,
        "magic": batch.magic,
        "compresscodec": batch.codec,
        "crc": batch.crc,
        "isvalid": batch.is_valid,
    }


def record_document(record: RecordEntry) -> dict[str, Any]:
    batch = record.batch
    document: dict[str, Any] = {
        "type": "record",
        "file": batch.path,
        "offset": record.offset,
        "isValid": record.is_valid,
        "crc": record.crc,
        "keySize": record.key_size,
        "valueSize": record.value_size,
        "timestampType": batch.timestamp_type,
        "timestamp": record.timestamp,
        "baseOffset": record.batch_base_offset,
        "lastOffset": batch.last_offset,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "batchSize": batch.size,
        "magic": batch.magic,
        "compressType": batch.codec,
        "position": batch.position,
        "sequence": record.sequence,
        "headerKeys": list(record.header_keys),
    }
    control = record.control
    if control is not None:
        if control.is_end_txn_marker:
            document["endTxnMarker"] = control.type_name
            document["coordinatorEpoch"] = control.coordinator_epoch
        else:
            document["controlType"] = control.type_name
            document["controlTypeId"] = control.type_id
    elif record.print_data:
        if record.key is not None:
            document["key"] = decode(record.key)
        if record.value is not None:
            document["payload"] = decode(record.value)
    return document


def report_documents(report: DumpReport) -> Iterator[dict[str, Any]]:
    """One JSON object per finding, in the order of the text report."""
    for path, pairs in report.index_mismatches.items():
        for index, log in pairs:
            yield {"type": "index_mismatch", "file": path, "indexOffset": index, "logOffset": log}
    for path, pairs in report.time_index_mismatches.items():
        for index, log in pairs:
            yield {"type": "time_index_mismatch", "file": path, "indexTimestamp": index, "logTimestamp": log}
    for path, pairs in report.time_index_out_of_order.items():
        for index, prev in pairs:
            yield {
                "type": "time_index_out_of_order",
                "file": path,
                "indexTimestamp": index,
                "previousIndexTimestamp": prev,
            }
    for path, pairs in report.offsets_not_found.items():
        for indexed, log in pairs:
            yield {"type": "indexed_offset_not_found", "file": path, "indexedOffset": indexed, "logOffset": log}
    for path, pairs in report.non_consecutive_offsets.items():
        for first, second in pairs:
            yield {"type": "non_consecutive_offsets", "file": path, "offset": first, "nextOffset": second}
    for path, entries in report.corrupt_entries.items():
        for entry in entries:
            yield {
                "type": "corrupt_entry",
                "file": path,
                "position": entry.position,
                "message": entry.message,
                "storedCrc": entry.stored_crc,
                "computedCrc": entry.computed_crc,
            }


class _JsonRenderer:
    """NDJSON on stdout, findings included; a file that cannot be read also gets its one line on stderr."""

    def __init__(self) -> None:
        self._out = sys.stdout

    def _write(self, document: dict[str, Any]) -> None:
        self._out.write(json.dumps(document, separators=(",", ":")) + "\n")

    def event(self, event: Event) -> None:
        self._write(event_document(event))
        if isinstance(event, FileFailed):
            self._out.flush()
            click.echo(f"Error: {event.message}", err=True)

    def report(self, report: DumpReport) -> None:
        for document in report_documents(report):
            self._write(document)


@contextmanager
def _progress(files: Sequence[str]) -> Iterator[Callable[[Event], None]]:
    """A callable fed every event: a byte progress bar on stderr when it is a terminal and stdout is not."""
    if not sys.stderr.isatty() or sys.stdout.isatty():
        yield lambda _event: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    sizes: dict[str, int] = {}
    for path in files:
        try:
            sizes[path] = os.stat(path).st_size
        except OSError:
            sizes[path] = 0
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        redirect_stdout=False,
    )
    task = progress.add_task("dump-segments", total=sum(sizes.values()) or None)
    state = {"done": 0, "current": 0, "shown": 0}

    def advance(event: Event) -> None:
        if isinstance(event, FileStarted):
            state["done"] += state["current"]
            state["current"] = sizes.get(event.path, 0)
            progress.update(task, completed=state["done"], description=os.path.basename(event.path))
        elif isinstance(event, BatchEntry):
            completed = state["done"] + event.position + event.size
            if completed - state["shown"] >= _PROGRESS_STEP_BYTES:
                state["shown"] = completed
                progress.update(task, completed=completed)

    with progress:
        yield advance
