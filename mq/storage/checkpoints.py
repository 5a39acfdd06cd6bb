"""Checkpoint files in Kafka's text format, written atomically.

::

    0                  <- format version
    2                  <- number of entries
    my-topic 0 1500    <- "<topic> <partition> <offset>" (leader epoch files: "<epoch> <start offset>")
    my-topic 1 1432

A write goes to ``<file>.tmp``, is fsynced, then renamed over the file, so a reader sees the old or the new file.
"""

from __future__ import annotations

import os
from pathlib import Path

from mq.errors import CorruptCheckpointError
from mq.topic_partition import TopicPartition

VERSION = 0
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _read_lines(path: Path) -> list[list[str]]:
    """The entry lines of a checkpoint file, each split on whitespace; [] for a missing or empty file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if not lines:
        return []
    if lines[0].strip() != str(VERSION):
        raise CorruptCheckpointError(f"Unrecognized version of the checkpoint file ({path}): {VERSION}")
    try:
        expected = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError(f"Malformed line in checkpoint file ({path}): '{lines[1:2]}'") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"Expected {expected} entries in checkpoint file ({path}), but found only {len(entries)}"
        )
    return entries


class OffsetCheckpointFile:
    """``topic partition offset`` entries: recovery points, log start offsets, high watermarks, cleaner offsets."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for fields in _read_lines(self.path):
            if len(fields) != 3 or not fields[1].isdigit() or not fields[2].lstrip("-").isdigit():
                raise CorruptCheckpointError(f"Malformed line in checkpoint file ({self.path}): '{' '.join(fields)}'")
            result[TopicPartition(fields[0], int(fields[1]))] = int(fields[2])
        return result

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in offsets.items()]
        write_atomically(self.path, "\n".join(lines) + "\n")


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` entries of one partition's leader epoch cache."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[tuple[int, int]]:
        result = []
        for fields in _read_lines(self.path):
            if len(fields) != 2 or not all(f.lstrip("-").isdigit() for f in fields):
                raise CorruptCheckpointError(f"Malformed line in checkpoint file ({self.path}): '{' '.join(fields)}'")
            result.append((int(fields[0]), int(fields[1])))
        return result

    def write(self, entries: list[tuple[int, int]]) -> None:
        lines = [str(VERSION), str(len(entries))] + [f"{epoch} {offset}" for epoch, offset in entries]
        write_atomically(self.path, "\n".join(lines) + "\n")
