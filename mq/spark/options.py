"""The ``mq`` data source's options, validated once on the driver (names and rules as Spark's Kafka source).

Option names are case-insensitive (Spark hands them over lowercased). Read: ``kafka.bootstrap.servers`` (or
``bootstrap.servers``), exactly one of ``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets``,
``endingOffsets`` (batch only), ``startingTimestamp`` > ``startingOffsetsByTimestamp`` > ``startingOffsets`` in
precedence (likewise for ending), ``startingOffsetsByTimestampStrategy`` (error|latest), ``maxOffsetsPerTrigger``,
``minPartitions``, ``maxRecordsPerPartition``, ``failOnDataLoss``, ``includeHeaders``, ``kafkaConsumer.pollTimeoutMs``, ``commitToGroup`` and
the client keys ``kafka.client.id``, ``kafka.isolation.level``, ``kafka.request.timeout.ms``,
``kafka.max.partition.fetch.bytes``, ``kafka.fetch.max.bytes``. Write: the bootstrap servers, ``topic``,
``kafka.acks``, ``kafka.linger.ms``, ``kafka.batch.size``, ``kafka.compression.type``, ``kafka.client.id``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mq.protocol.list_offsets import EARLIEST, LATEST
from mq.spark.offsets import (
    OffsetSpec,
    parse_assign,
    parse_global_timestamp,
    parse_offset_spec,
    parse_subscribe,
    parse_timestamp_spec,
)
from mq.topic_partition import TopicPartition

DEFAULT_CLIENT_ID = "mq-spark"
START_EARLIEST = OffsetSpec("earliest")
END_LATEST = OffsetSpec("latest")


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Connection settings every executor and the driver use to open their own clients."""

    bootstrap_servers: str
    client_id: str = DEFAULT_CLIENT_ID
    request_timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ReadOptions:
    client: ClientOptions
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: OffsetSpec = START_EARLIEST
    ending: OffsetSpec = END_LATEST
    timestamp_strategy: str = "error"
    """What a starting time with no record at or after it gives: ``error`` or ``latest``."""
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    commit_to_group: str | None = None
    isolation_level: str = "read_uncommitted"
    max_partition_fetch_bytes: int = 1024 * 1024
    fetch_max_bytes: int = 50 * 1024 * 1024
    poll_timeout_ms: int = 120_000
    """How long an executor waits for records it knows exist before failing (``kafkaConsumer.pollTimeoutMs``)."""


@dataclass(frozen=True, slots=True)
class WriteOptions:
    client: ClientOptions
    topic: str | None = None
    """Overrides the ``topic`` column when set."""
    acks: int = -1
    linger_ms: int = 5
    batch_size: int = 256 * 1024
    compression: str = "none"


def client_options(options: Mapping[str, str]) -> ClientOptions:
    opts = _lower(options)
    servers = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not servers:
        raise ValueError("option kafka.bootstrap.servers is required (host:port[,host:port...])")
    return ClientOptions(
        bootstrap_servers=servers,
        client_id=opts.get("kafka.client.id", DEFAULT_CLIENT_ID),
        request_timeout_ms=_positive(opts, "kafka.request.timeout.ms", 30_000),
    )


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate the options of a batch (``streaming=False``) or streaming read."""
    opts = _lower(options)
    client = client_options(opts)
    chosen = [name for name in ("subscribe", "subscribepattern", "assign") if opts.get(name, "").strip()]
    if len(chosen) != 1:
        raise ValueError("exactly one of the options subscribe, subscribePattern, assign must be given")
    subscribe = tuple(parse_subscribe(opts["subscribe"])) if "subscribe" in chosen else None
    pattern = opts["subscribepattern"] if "subscribepattern" in chosen else None
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"subscribePattern: invalid regular expression {pattern!r}: {exc}") from None
    assign = tuple(parse_assign(opts["assign"])) if "assign" in chosen else None

    starting = _position(opts, "starting", "latest" if streaming else "earliest")
    if streaming:
        given = [k for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp") if k in opts]
        if given:
            raise ValueError(f"option {given[0]} is not valid in streaming queries")
        ending = OffsetSpec("latest")
    else:
        ending = _position(opts, "ending", "latest")
        _check_batch_bounds(starting, ending)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    isolation = opts.get("kafka.isolation.level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ValueError(f"kafka.isolation.level must be read_uncommitted or read_committed, not {isolation!r}")
    max_per_trigger = _optional_positive(opts, "maxOffsetsPerTrigger")
    if max_per_trigger is not None and not streaming:
        max_per_trigger = None  # Spark ignores it in batch queries
    return ReadOptions(
        client=client,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_optional_positive(opts, "minPartitions"),
        max_records_per_partition=_optional_positive(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=_boolean(opts, "failOnDataLoss", True),
        include_headers=_boolean(opts, "includeHeaders", False),
        commit_to_group=opts.get("committogroup") or None,
        isolation_level=isolation,
        max_partition_fetch_bytes=_positive(opts, "kafka.max.partition.fetch.bytes", 1024 * 1024),
        fetch_max_bytes=_positive(opts, "kafka.fetch.max.bytes", 50 * 1024 * 1024),
        poll_timeout_ms=_positive(opts, "kafkaConsumer.pollTimeoutMs", 120_000),
    )


def include_headers(options: Mapping[str, str]) -> bool:
    """``includeHeaders``, which decides the schema."""
    return _boolean(_lower(options), "includeHeaders", False)


def write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _lower(options)
    acks_text = opts.get("kafka.acks", "all").strip().lower()
    if acks_text not in ("all", "-1", "0", "1"):
        raise ValueError(f"kafka.acks must be all, -1, 0 or 1, not {acks_text!r}")
    compression = opts.get("kafka.compression.type", "none").strip().lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise ValueError(f"kafka.compression.type must be none, gzip, snappy, lz4 or zstd, not {compression!r}")
    return WriteOptions(
        client=client_options(opts),
        topic=opts.get("topic") or None,
        acks=-1 if acks_text == "all" else int(acks_text),
        linger_ms=_non_negative(opts, "kafka.linger.ms", 5),
        batch_size=_positive(opts, "kafka.batch.size", 256 * 1024),
        compression=compression,
    )


def _position(opts: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """``{which}Timestamp`` wins over ``{which}OffsetsByTimestamp``, which wins over ``{which}Offsets``."""
    if opts.get(f"{which}timestamp", "").strip():
        return parse_global_timestamp(opts[f"{which}timestamp"], f"{which}Timestamp")
    if opts.get(f"{which}offsetsbytimestamp", "").strip():
        return parse_timestamp_spec(opts[f"{which}offsetsbytimestamp"], f"{which}OffsetsByTimestamp")
    return parse_offset_spec(opts.get(f"{which}offsets", default), f"{which}Offsets")


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting.kind == "latest":
        raise ValueError("startingOffsets can't be latest for batch queries")
    if ending.kind == "earliest":
        raise ValueError("endingOffsets can't be earliest for batch queries")
    for tp, offset in starting.offsets if starting.kind == "offsets" else ():
        if offset == LATEST:
            raise ValueError(f"startingOffsets for {tp} can't be latest (-1) for batch queries")
    for tp, offset in ending.offsets if ending.kind == "offsets" else ():
        if offset == EARLIEST:
            raise ValueError(f"endingOffsets for {tp} can't be earliest (-2) for batch queries")


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _boolean(opts: Mapping[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, not {text!r}")
    return text.strip().lower() == "true"


def _integer(opts: Mapping[str, str], name: str) -> int | None:
    text = opts.get(name.lower())
    if text is None or not text.strip():
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"option {name} must be an integer, not {text!r}") from None


def _optional_positive(opts: Mapping[str, str], name: str) -> int | None:
    value = _integer(opts, name)
    if value is not None and value <= 0:
        raise ValueError(f"option {name} must be positive, not {value}")
    return value


def _positive(opts: Mapping[str, str], name: str, default: int) -> int:
    value = _optional_positive(opts, name)
    return default if value is None else value


def _non_negative(opts: Mapping[str, str], name: str, default: int) -> int:
    value = _integer(opts, name)
    if value is None:
        return default
    if value < 0:
        raise ValueError(f"option {name} must not be negative, not {value}")
    return value
