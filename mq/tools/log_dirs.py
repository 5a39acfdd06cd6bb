"""``mq log-dirs --describe``: Kafka's LogDirsCommand (kafka-log-dirs.sh).

Output: two lines, then one JSON document on one line, keys in the order Kafka's tool prints them::

    Querying brokers for log directories information
    Received log directory information from brokers 0,1
    {"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/x","error":null,"partitions":[{"partition":"t-0",
    "size":123,"offsetLag":0,"isFuture":false}]}]}]}

``error`` is null or the class name of Kafka's exception for the directory's error (an offline directory:
``org.apache.kafka.common.errors.KafkaStorageException``); ``--topic-list`` keeps only those topics' replicas.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from mq.client.admin import LogDirDescription
from mq.errors import ErrorCode
from mq.tools.kafka_exceptions import exception_class

QUERYING = "Querying brokers for log directories information"


class BrokerListError(ValueError):
    """``--broker-list`` is malformed or names brokers the cluster does not have."""


def parse_broker_list(text: str) -> list[int]:
    """``0,1,2`` as broker ids (empty items are skipped, as Kafka's tool does)."""
    try:
        return sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        raise BrokerListError(f"Invalid --broker-list {text!r}: expected broker ids like 0,1,2") from None


def parse_topic_list(text: str) -> set[str]:
    return {item.strip() for item in text.split(",") if item.strip()}


def brokers_to_query(wanted: Sequence[int], cluster: Collection[int]) -> list[int]:
    """The brokers to ask: ``wanted`` (all of ``cluster`` when empty); a broker the cluster lacks is an error with
    Kafka's message."""
    missing = sorted(set(wanted) - set(cluster))
    if missing:
        raise BrokerListError(
            "ERROR: The given brokers do not exist from --broker-list: "
            f"{','.join(map(str, missing))}. Current existent brokers: {','.join(map(str, sorted(cluster)))}"
        )
    return list(wanted) if wanted else sorted(cluster)


def received_line(brokers: Sequence[int]) -> str:
    return f"Received log directory information from brokers {','.join(map(str, brokers))}"


def log_dirs_document(
    descriptions: Mapping[int, Sequence[LogDirDescription]], topics: Collection[str] = ()
) -> dict[str, Any]:
    """Kafka's JSON document of the brokers' log directories, replicas of ``topics`` only when given."""
    return {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": d.log_dir,
                        "error": None if d.error == ErrorCode.NONE else exception_class(d.error),
                        "partitions": [
                            {
                                "partition": str(tp),
                                "size": info.size_bytes,
                                "offsetLag": info.offset_lag,
                                "isFuture": info.is_future,
                            }
                            for tp, info in d.replicas
                            if not topics or tp.topic in topics
                        ],
                    }
                    for d in dirs
                ],
            }
            for broker, dirs in descriptions.items()
        ],
    }


def render_document(document: Mapping[str, Any]) -> str:
    """The document on one line, as Jackson writes it (no spaces)."""
    return json.dumps(document, separators=(",", ":"))
