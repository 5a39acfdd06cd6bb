"""Names of log files and partition directories, as Kafka lays them out.

Segment files are named by the segment's base offset as 20 zero-padded digits (``00000000000000368769.log``);
a partition directory is ``<topic>-<partition>``, split at the last '-' since topics may contain '-'. Deleted
partitions are renamed ``<topic>-<partition>.<32 hex>-delete`` before removal.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from mq.errors import KafkaStorageError
from mq.topic_partition import TopicPartition

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"


def file_name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def log_file_name(directory: Path, offset: int) -> Path:
    return directory / file_name(offset, LOG_SUFFIX)


def index_file_name(directory: Path, offset: int) -> Path:
    return directory / file_name(offset, INDEX_SUFFIX)


def time_index_file_name(directory: Path, offset: int) -> Path:
    return directory / file_name(offset, TIME_INDEX_SUFFIX)


def txn_index_file_name(directory: Path, offset: int) -> Path:
    return directory / file_name(offset, TXN_INDEX_SUFFIX)


def snapshot_file_name(directory: Path, offset: int) -> Path:
    """A producer state snapshot, named by the offset it was taken at (not a segment's base offset)."""
    return directory / file_name(offset, SNAPSHOT_SUFFIX)


def offset_from_file_name(name: str) -> int:
    """The base offset a segment file is named by (``00000000000000000042.index`` -> 42)."""
    stem = Path(name).name.split(".", 1)[0]
    if not stem.isdigit():
        raise ValueError(f"{name} is not named by an offset")
    return int(stem)


def parse_partition_dir(directory: str | Path) -> TopicPartition:
    """``my-topic-3`` -> TopicPartition("my-topic", 3), with Kafka's error (naming the whole path) for anything else."""
    name = Path(directory).name
    base = name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX):
        if base.endswith(suffix) and "." in base:
            base = base[: base.rindex(".")]
    topic, sep, partition = base.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise KafkaStorageError(
            f"Found directory {directory}, '{name}' is not in the form of topic-partition or "
            "topic-partition.uniqueId-delete (if marked for deletion)."
        )
    return TopicPartition(topic, int(partition))


def delete_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<uuid hex>-delete``, the topic part shortened so the whole name fits in 255 bytes."""
    return _unique_dir_name(tp, DELETE_DIR_SUFFIX)


def future_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<uuid hex>-future``: a replica being copied into another log dir of the broker."""
    return _unique_dir_name(tp, FUTURE_DIR_SUFFIX)


def _unique_dir_name(tp: TopicPartition, kind: str) -> str:
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{kind}"
    return tp.topic[: 255 - len(suffix)] + suffix
