"""``mq delete-records``: Kafka's DeleteRecordsCommand (kafka-delete-records.sh).

The offset JSON file::

    {"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}

(``version`` defaults to 1, the only one; offset -1 means the high watermark). Output, one line per partition in the
file's order after two header lines::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0\tlow_watermark: 3
    partition: t-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: <message>
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from mq.client.admin import DeletedRecords
from mq.errors import ErrorCode
from mq.tools.kafka_exceptions import exception_text
from mq.topic_partition import TopicPartition

EXECUTING = "Executing records delete operation"
COMPLETED = "Records delete operation completed:"


class OffsetJsonError(ValueError):
    """The offset JSON file is not valid (bad usage)."""


def parse_offset_json(text: str) -> list[tuple[TopicPartition, int]]:
    """The (partition, offset) pairs of an offset JSON file, in its order; duplicates are an error."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        raise OffsetJsonError("The input string is not a valid JSON") from None
    if not isinstance(document, dict):
        raise OffsetJsonError("The input string is not a valid JSON object")
    version = document.get("version", 1)
    if version != 1:
        raise OffsetJsonError(f"Not supported version field value {version}")
    partitions = document.get("partitions")
    if not isinstance(partitions, list):
        raise OffsetJsonError("Missing partitions field")
    pairs = [_entry(item) for item in partitions]
    duplicates = [tp for tp, count in Counter(tp for tp, _ in pairs).items() if count > 1]
    if duplicates:
        raise OffsetJsonError(f"Offset json file contains duplicate topic partitions: {','.join(map(str, duplicates))}")
    return pairs


def _entry(item: Any) -> tuple[TopicPartition, int]:
    if not isinstance(item, dict):
        raise OffsetJsonError(f"Invalid partition entry {json.dumps(item)}")
    topic, partition, offset = item.get("topic"), item.get("partition"), item.get("offset")
    if (
        not isinstance(topic, str)
        or not isinstance(partition, int)
        or not isinstance(offset, int)
        or isinstance(partition, bool)
        or isinstance(offset, bool)
    ):
        raise OffsetJsonError(f"Invalid partition entry {json.dumps(item)}: needs topic, partition and offset")
    return TopicPartition(topic, partition), offset


def render_deleted(
    requested: Sequence[tuple[TopicPartition, int]], results: Mapping[TopicPartition, DeletedRecords]
) -> tuple[list[str], int]:
    """Kafka's per-partition result lines and how many partitions failed."""
    lines = []
    failed = 0
    for tp, _ in requested:
        result = results[tp]
        if result.error == ErrorCode.NONE:
            lines.append(f"partition: {tp}\tlow_watermark: {result.low_watermark}")
        else:
            failed += 1
            lines.append(f"partition: {tp}\terror: {exception_text(result.error)}")
    return lines, failed
