"""Checkpoint files in Kafka's text format, written atomically.

::

    0                  <- format version
    2                  <- number of entries
    my-topic 0 1500    <- "<topic> <partition> <offset>" (leader epoch files: "<epoch> <start offset>")
    my-topic 1 1432

A write goes to ``<file>.tmp``, is fsynced, then renamed over the file (and the directory fsynced), so a reader
sees the old or the new file. Reading: a missing or empty file has no entries; errors carry Kafka's texts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from mq.errors import CorruptCheckpointError
from mq.topic_partition import TopicPartition

VERSION = 0
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


_INT = re.compile(r"[+-]?[0-9]+")


def _fields(line: str) -> list[str]:
    """``line`` split at runs of whitespace, trailing empty fields dropped (a leading one stays)."""
    fields = re.split(r"\s+", line)
    while fields and not fields[-1]:
        fields.pop()
    return fields


def _read_entries(path: Path, width: int, is_entry: Callable[[list[str]], bool]) -> list[list[str]]:
    """The entry lines of a checkpoint file, each split into ``width`` fields; [] for a missing or empty file (or
    one that ends after the version line). Raises CorruptCheckpointError with Kafka's texts."""
    location = os.path.abspath(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if not lines:
        return []

    def malformed(line: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"Malformed line in checkpoint file ({location}): '{line}'")

    if not _INT.fullmatch(lines[0]):
        raise malformed(lines[0])
    if int(lines[0]) != VERSION:
        raise CorruptCheckpointError(f"Unrecognized version of the checkpoint file ({location}): {VERSION}")
    if len(lines) < 2:
        return []
    if not _INT.fullmatch(lines[1]):
        raise malformed(lines[1])
    expected = int(lines[1])
    entries = []
    for line in lines[2:]:
        fields = _fields(line)
        if len(fields) != width or not is_entry(fields):
            raise malformed(line)
        entries.append(fields)
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file ({location}), but found only {len(entries)}"
        )
    return entries


class OffsetCheckpointFile:
    """``topic partition offset`` entries: recovery points, log start offsets, high watermarks, cleaner offsets."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        entries = _read_entries(self.path, 3, lambda f: bool(f[0]) and all(map(_INT.fullmatch, f[1:])))
        return {TopicPartition(topic, int(partition)): int(offset) for topic, partition, offset in entries}

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in offsets.items()]
        write_atomically(self.path, "\n".join(lines) + "\n")


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` entries of one partition's leader epoch cache."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[tuple[int, int]]:
        entries = _read_entries(self.path, 2, lambda f: all(map(_INT.fullmatch, f)))
        return [(int(epoch), int(offset)) for epoch, offset in entries]

    def write(self, entries: list[tuple[int, int]]) -> None:
        lines = [str(VERSION), str(len(entries))] + [f"{epoch} {offset}" for epoch, offset in entries]
        write_atomically(self.path, "\n".join(lines) + "\n")
