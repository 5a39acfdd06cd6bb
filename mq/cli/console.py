"""``mq console-producer``, ``mq console-consumer`` and ``mq get-offsets``, with Kafka's flags and output."""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import click

from mq.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    admin_options,
    admin_settings,
    client_properties_file,
    isolation_level,
    zookeeper_store,
)
from mq.client.security import PLAINTEXT
from mq.errors import KafkaError
from mq.tools.client_properties import producer_settings
from mq.tools.console import (
    ConsoleError,
    Formatter,
    LineReader,
    group_consumer_settings,
    offset_lines,
    parse_partitions,
    parse_properties,
    read_properties_file,
    topic_filter,
    zookeeper_consumer_properties,
)
from mq.tools.old_client_keys import current_consumer_keys
from mq.topic_partition import TopicFilter, TopicPartition
from mq.zk.store import StoreError

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SETTINGS = {"help_option_names": ["-h", "--help"]}


CONSOLE_PRODUCER_OPTIONS = {
    "acks": ("request_required_acks",),
    "linger_ms": ("sync", "linger_ms"),
    "batch_size": ("batch_size",),
    "compression": ("compression_codec",),
    "retries": ("retries",),
    "retry_backoff_ms": ("retry_backoff_ms",),
    "request_timeout_ms": ("request_timeout_ms",),
}
"""Producer settings console-producer's options give; a setting of --producer.config wins over an option's
default (not over an option given)."""


def _warn(line: str) -> None:
    click.echo(line, err=True)


def _fail(message: str, code: int = EXIT_FAILED) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


@click.command("console-producer", context_settings=SETTINGS)
@click.option("--bootstrap-server", "--broker-list", "bootstrap", required=True, metavar="HOST:PORT[,...]")
@click.option("--topic", required=True)
@click.option("--property", "properties", multiple=True, metavar="K=V", help="parse.key, key.separator, ignore.error.")
@click.option("--compression-codec", type=click.Choice(CODECS), default="none", show_default=True)
@click.option("--request-required-acks", default="1", show_default=True, type=click.Choice(["0", "1", "-1", "all"]))
@click.option("--sync", is_flag=True, help="Wait for each message's acknowledgement.")
@click.option("--timeout", "linger_ms", default=1000, show_default=True, help="Linger time in ms.")
@click.option("--batch-size", default=16384, show_default=True)
@click.option("--message-send-max-retries", "retries", default=3, show_default=True)
@click.option("--retry-backoff-ms", default=100, show_default=True)
@click.option("--request-timeout-ms", default=1500, show_default=True)
@click.option(
    "--producer-property",
    "producer_properties",
    multiple=True,
    metavar="K=V",
    help="Producer config, e.g. client.id, security.protocol, sasl.mechanism (the options above win).",
)
@click.option(
    "--producer.config",
    "producer_config",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Producer config properties file (--producer-property wins).",
)
def console_producer(
    bootstrap: str,
    topic: str,
    properties: tuple[str, ...],
    producer_properties: tuple[str, ...],
    producer_config: str | None,
    **options: Any,
) -> None:
    """Read lines from standard input and produce each as a message.

    Exit codes: 0 when every line was acknowledged, 1 on a failed send or a bad line, 2 for bad usage.
    """
    from mq.client.sync import SyncProducer

    try:
        reader = LineReader.from_properties(parse_properties(properties))
        config = client_properties_file(producer_config) if producer_config else {}
        config.update(parse_properties(producer_properties))
        settings = producer_settings(config, _warn, frozenset({"producer.type"}), topic)
    except (ConsoleError, ValueError) as exc:
        _fail(str(exc), EXIT_USAGE)
    except ToolError as exc:
        _fail(str(exc), exc.exit_code)
    settings.pop("bootstrap_servers", None)
    options["sync"] = options["sync"] or config.get("producer.type", "").strip() == "sync"
    acks = options["request_required_acks"]
    given = {
        "acks": -1 if acks in ("-1", "all") else int(acks),
        "linger_ms": 0 if options["sync"] else options["linger_ms"],
        "batch_size": options["batch_size"],
        "compression": options["compression_codec"],
        "retries": options["retries"],
        "retry_backoff_ms": options["retry_backoff_ms"],
        "request_timeout_ms": options["request_timeout_ms"],
    }
    context = click.get_current_context()
    for name, value in given.items():
        sources = {context.get_parameter_source(option) for option in CONSOLE_PRODUCER_OPTIONS[name]}
        if sources != {click.core.ParameterSource.DEFAULT} or name not in settings:
            settings[name] = value
    pending = []
    try:
        with SyncProducer(bootstrap, **settings) as producer:
            prompt = sys.stdin.isatty()
            for number, raw in enumerate(_lines(prompt), start=1):
                key, value = reader.parse(raw, number)
                future = producer.send(topic, value, key)
                if options["sync"]:
                    future.result()
                else:
                    pending.append(future)
            producer.flush()
            for future in pending:
                future.result()
    except (ConsoleError, KafkaError, OSError) as exc:
        _fail(str(exc))


def _lines(prompt: bool) -> Any:
    while True:
        if prompt:
            click.echo(">", nl=False)
        line = sys.stdin.readline()
        if not line:
            return
        yield line.rstrip("\n").rstrip("\r")


@click.command("console-consumer", context_settings=SETTINGS)
@click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]")
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[,...][/CHROOT]",
    help="Consume as a ZooKeeper-coordinated (Kafka 0.8) consumer; also zookeeper.connect of --consumer.config.",
)
@click.option(
    "--delete-consumer-offsets",
    is_flag=True,
    help="With --zookeeper: delete the group's /consumers/<group> (its offsets) before starting.",
)
@click.option("--topic", help="The topic to consume.")
@click.option("--whitelist", "--include", "whitelist", help="Regular expression of the topics to consume.")
@click.option("--blacklist", help="With --zookeeper: regular expression of the topics not to consume (0.8's flag).")
@click.option("--group", help="Consume as a member of this consumer group (committing offsets).")
@click.option("--partition", type=int, help="Consume only this partition.")
@click.option("--offset", default="latest", show_default=True, help="earliest, latest or an offset (with --partition).")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (a group: when it has none).")
@click.option("--max-messages", type=int, help="Exit after this many messages.")
@click.option("--timeout-ms", type=int, help="Exit when no message arrives for this long.")
@click.option(
    "--property", "properties", multiple=True, metavar="K=V", help="print.key, print.timestamp, key.separator, ..."
)
@click.option(
    "--consumer-property",
    "consumer_properties",
    multiple=True,
    metavar="K=V",
    help="Consumer config, e.g. group.id, enable.auto.commit, session.timeout.ms.",
)
@click.option(
    "--consumer.config",
    "consumer_config",
    type=click.Path(exists=True, dir_okay=False),
    help="Consumer config properties file (--consumer-property wins).",
)
@click.option(
    "--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]), default="read_uncommitted"
)
def console_consumer(
    bootstrap: str | None,
    zookeeper: str | None,
    delete_consumer_offsets: bool,
    topic: str | None,
    whitelist: str | None,
    blacklist: str | None,
    group: str | None,
    partition: int | None,
    offset: str,
    from_beginning: bool,
    max_messages: int | None,
    timeout_ms: int | None,
    properties: tuple[str, ...],
    consumer_properties: tuple[str, ...],
    consumer_config: str | None,
    isolation_level: str,
) -> None:
    """Print messages of a topic (every partition, or --partition), or of every topic --whitelist matches.

    With --group (or a group.id consumer property) the consumer joins that group, consumes the partitions it is
    assigned starting at the group's committed offsets, and commits as it goes and at exit. Without a group it reads
    the partitions directly and commits nothing. As Kafka's consumer, it asks the broker to create a --topic that
    does not exist unless the consumer property allow.auto.create.topics is false. Prints "Processed a total of N messages" on stderr at exit.

    With --zookeeper (or zookeeper.connect in --consumer.config and no --bootstrap-server) it is a member of a
    ZooKeeper-coordinated group as Kafka 0.8's console consumer: the group is --group or group.id, else a generated
    console-consumer-<n> whose /consumers/<group> is deleted at exit; with --from-beginning a group that has offsets
    in ZooKeeper is refused unless --delete-consumer-offsets; consumer.timeout.ms stops it as --timeout-ms does.
    Consumer keys are Kafka 0.8's (auto.offset.reset smallest|largest, auto.commit.enable, offsets.storage, ...).
    --whitelist or --blacklist (this mode only) subscribe the member to a regex, as Kafka 0.8 registers it: every
    existing and later created topic it matches (--blacklist: does not match), internal topics only with
    exclude.internal.topics=false. --partition and --offset are not available in this mode.
    Exit codes: 0 normally (also after --timeout-ms, --max-messages, ^C or SIGTERM: the records in hand are printed
    and counted first), 1 on a failed fetch, 2 for bad usage.
    """
    from mq.client.admin import AsyncAdmin
    from mq.client.consumer import AsyncConsumer
    from mq.client.sync import SyncAdmin, SyncConsumer, SyncGroupConsumer

    if sum(option is not None for option in (topic, whitelist, blacklist)) != 1:
        _fail("Exactly one of whitelist/blacklist/topic is required.", EXIT_USAGE)
    try:
        formatter = Formatter.from_properties(parse_properties(properties))
        config = read_properties_file(consumer_config) if consumer_config else {}
        config.update(parse_properties(consumer_properties))
    except (ConsoleError, OSError) as exc:
        _fail(str(exc), EXIT_USAGE)
    printer = _Printer(formatter, max_messages, timeout_ms)
    if bootstrap is None and (zookeeper is not None or "zookeeper.connect" in config):
        if partition is not None or offset != "latest":
            _fail("--partition and --offset are not available with --zookeeper.", EXIT_USAGE)
        try:
            subscription: list[str] | TopicFilter = (
                [topic] if topic is not None else TopicFilter(whitelist or blacklist or "", blacklist is not None)
            )
        except ValueError as exc:
            _fail(str(exc), EXIT_USAGE)
        _consume_from_zookeeper(
            zookeeper, subscription, group, config, from_beginning, delete_consumer_offsets, printer
        )
        return
    if bootstrap is None:
        _fail("Exactly one of --bootstrap-server and --zookeeper is required.", EXIT_USAGE)
    if blacklist is not None:
        _fail("--blacklist is only available with --zookeeper.", EXIT_USAGE)
    assert bootstrap is not None
    try:
        config = current_consumer_keys(config, _warn)
        if printer.timeout_ms is None and int(config.get("consumer.timeout.ms", "-1")) >= 0:
            printer.timeout_ms = int(config["consumer.timeout.ms"])
    except ValueError as exc:
        _fail(f"Invalid value for consumer.timeout.ms: {exc}", EXIT_USAGE)
    if partition is not None and topic is None:
        _fail("The topic is required when partition is specified.", EXIT_USAGE)
    if offset != "latest" and partition is None:
        _fail("The partition is required when offset is specified.", EXIT_USAGE)
    if from_beginning and offset != "latest":
        _fail("Options --from-beginning and --offset cannot be specified together.", EXIT_USAGE)
    try:
        settings = group_consumer_settings(group, config, from_beginning)
        pattern = topic_filter(whitelist) if whitelist is not None else None
    except (ConsoleError, OSError) as exc:
        _fail(str(exc), EXIT_USAGE)
    settings.setdefault("isolation_level", isolation_level)
    if "group_id" in settings and partition is not None:
        _fail("Options --group and --partition cannot be specified together.", EXIT_USAGE)
    try:
        if "group_id" in settings:
            with SyncGroupConsumer(bootstrap, **settings) as group_consumer:
                if pattern is not None:
                    group_consumer.subscribe(pattern=pattern)
                elif topic is not None:
                    group_consumer.subscribe([topic])
                printer.run(group_consumer)
        else:
            allow_create = settings.get("allow_auto_create_topics", True)
            security = settings.get("security", PLAINTEXT)
            with SyncConsumer(
                bootstrap,
                auto_offset_reset="earliest",
                isolation_level=isolation_level,
                allow_auto_create_topics=allow_create,
                security=security,
            ) as consumer:
                if pattern is not None:
                    with SyncAdmin(bootstrap, security=security) as admin:
                        topics = admin.call(AsyncAdmin.describe_topics, None)
                    matching = [t for t in topics if pattern.fullmatch(t.name) and not t.is_internal]
                    tps = [TopicPartition(t.name, p.partition) for t in matching for p in t.partitions]
                else:
                    assert topic is not None
                    found = consumer.call(AsyncConsumer.partitions_for, topic)
                    tps = [TopicPartition(topic, p) for p in (found if partition is None else [partition])]
                consumer.assign(tps)
                if from_beginning or offset == "earliest":
                    consumer.seek_to_beginning(*tps)
                elif offset == "latest":
                    consumer.seek_to_end(*tps)
                else:
                    try:
                        consumer.seek(tps[0], int(offset))
                    except ValueError:
                        _fail(f"Invalid offset '{offset}'", EXIT_USAGE)
                printer.run(consumer)
    except KeyboardInterrupt:
        pass
    except (KafkaError, OSError) as exc:
        click.echo(f"Processed a total of {printer.processed} messages", err=True)
        _fail(str(exc))
    click.echo(f"Processed a total of {printer.processed} messages", err=True)


def _consume_from_zookeeper(
    zookeeper: str | None,
    subscription: list[str] | TopicFilter,
    group: str | None,
    config: dict[str, str],
    from_beginning: bool,
    delete_offsets: bool,
    printer: _Printer,
) -> None:
    """Kafka 0.8's console consumer: a member of a ZooKeeper-coordinated group subscribed to a topic or a filter."""
    from mq.client.zk_consumer import ConsumerRebalanceFailedError, ZkConsumerConfig, ZookeeperConsumer
    from mq.zk import paths
    from mq.zk.consumer_groups import ConsumerIdTakenError, ZkConsumerGroups

    try:
        properties, generated = zookeeper_consumer_properties(zookeeper, group, config, from_beginning)
        zk_config = ZkConsumerConfig.from_properties(properties)
        security = group_consumer_settings(None, config, False).get("security", PLAINTEXT)
    except (ConsoleError, ValueError) as exc:
        _fail(str(exc), EXIT_USAGE)
    if printer.timeout_ms is None and zk_config.consumer_timeout_ms >= 0:
        printer.timeout_ms = zk_config.consumer_timeout_ms
    with zookeeper_store(zk_config.zookeeper_connect) as store:
        groups = ZkConsumerGroups(store)
        if delete_offsets:
            groups.delete_group(zk_config.group_id)
        elif from_beginning and store.exists(paths.consumer_offsets(zk_config.group_id)) is not None:
            _fail(
                f"Found previous offset information for this group {zk_config.group_id}. Please use "
                "--delete-consumer-offsets to delete previous offsets metadata"
            )
    try:
        try:
            with ZookeeperConsumer(zk_config, subscription, security=security) as consumer:
                printer.run(consumer)
        except KeyboardInterrupt:
            pass
        except (ConsumerIdTakenError, ConsumerRebalanceFailedError, KafkaError, StoreError, OSError, ValueError) as exc:
            click.echo(f"Processed a total of {printer.processed} messages", err=True)
            _fail(str(exc))
    finally:
        if generated:
            with zookeeper_store(zk_config.zookeeper_connect) as store:
                ZkConsumerGroups(store).delete_group(zk_config.group_id)
    click.echo(f"Processed a total of {printer.processed} messages", err=True)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Printer:
    """Polls a consumer and prints each record until --max-messages or --timeout-ms says stop, or SIGINT (^C) or
    SIGTERM does: as Kafka's shutdown hook, a signal ends the loop once the records in hand are printed (a poll waits
    at most 200 ms), so every printed record is counted and the consumer closes (and commits) normally."""

    def __init__(self, formatter: Formatter, max_messages: int | None, timeout_ms: int | None) -> None:
        self.formatter = formatter
        self.max_messages = max_messages
        self.timeout_ms = timeout_ms
        self.processed = 0

    def run(self, consumer: Any) -> None:
        stopping: list[int] = []
        previous = {signum: signal.signal(signum, lambda s, _: stopping.append(s)) for signum in STOP_SIGNALS}
        try:
            self._print(consumer, stopping)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _print(self, consumer: Any, stopping: list[int]) -> None:
        idle_since = time.monotonic()
        out = sys.stdout
        while not stopping and (self.max_messages is None or self.processed < self.max_messages):
            wanted = 500 if self.max_messages is None else min(500, self.max_messages - self.processed)
            records = consumer.poll(timeout_ms=200, max_records=wanted)
            if not records:
                if self.timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= self.timeout_ms:
                    return
                continue
            idle_since = time.monotonic()
            for record in records:
                out.write(self.formatter.format_record(record))
                self.processed += 1
            out.flush()


@click.command("get-offsets", context_settings=SETTINGS)
@click.option("--bootstrap-server", "--broker-list", "bootstrap", required=True, metavar="HOST:PORT[,...]")
@click.option("--topic", required=True)
@click.option("--partitions", default="", help="Comma-separated partition ids (default: all).")
@click.option(
    "--time", "timestamp", default="-1", show_default=True, help="-1 latest, -2 earliest, or a timestamp in ms."
)
@click.option(
    "--offsets",
    "max_offsets",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Kafka 0.8's number of offsets per partition; mq's brokers answer one (ListOffsets v1 and later).",
)
@click.option(
    "--max-wait-ms",
    type=click.IntRange(min=1),
    help="Kafka 0.8's metadata timeout: bounds each call as --timeout does (--timeout wins).",
)
@admin_options()
def get_offsets(
    bootstrap: str,
    topic: str,
    partitions: str,
    timestamp: str,
    max_offsets: int,
    max_wait_ms: int | None,
    command_config: str | None,
    timeout: float | None,
) -> None:
    """Print topic:partition:offset for the latest, earliest or first offset at a time, per partition.

    --offsets N asked 0.8's brokers for up to N offsets (the log end and segment starts before --time, newest
    first, printed comma-separated); mq's brokers answer ListOffsets v1 and later with one offset per partition,
    so the line holds that one and a note on stderr says so.
    Exit codes: 0 success, 1 the topic or a partition does not exist, 2 bad usage.
    """
    from mq.client.admin import AsyncAdmin
    from mq.client.sync import SyncAdmin

    try:
        when = int(timestamp)
        wanted = parse_partitions(partitions)
    except (ValueError, ConsoleError) as exc:
        _fail(f"Invalid --time or --partitions: {exc}", EXIT_USAGE)
    if timeout is None and max_wait_ms is not None:
        timeout = max_wait_ms / 1000
    try:
        settings = admin_settings(command_config, timeout)
        isolation = isolation_level(command_config)
    except ToolError as exc:
        _fail(str(exc), exc.exit_code)
    if max_offsets > 1:
        click.echo(f"Note: --offsets {max_offsets}: the broker answers one offset per partition", err=True)
    try:
        with SyncAdmin(bootstrap, **settings) as admin:
            [metadata] = admin.call(AsyncAdmin.describe_topics, [topic])
            existing = {p.partition: p for p in metadata.partitions}
            chosen = sorted(existing) if wanted is None else wanted
            missing = [p for p in chosen if p not in existing]
            if missing:
                _fail(f"partition {missing[0]} does not exist")
            leaderless = [p for p in chosen if existing[p].leader < 0]
            for p in leaderless:
                click.echo(f"Error: partition {p} does not have a leader. Skip getting offsets", err=True)
            asked = {TopicPartition(topic, p): when for p in chosen if p not in leaderless}
            found = admin.call(AsyncAdmin.list_offsets, asked, isolation) if asked else {}
    except KafkaError as exc:
        _fail(str(exc))
    offsets = {tp.partition: result.offset for tp, result in found.items()}
    for line in offset_lines(topic, offsets):
        click.echo(line)
