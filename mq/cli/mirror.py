"""``mq mirror``: Kafka's MirrorMaker flags, continuous copying without loss, and ``--check``."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any

import click

from mq.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    bootstrap_from_zookeeper,
    client_properties_file,
    handle_errors,
    verbose_option,
)
from mq.client.zk_consumer import ConsumerRebalanceFailedError
from mq.errors import KafkaError
from mq.tools.mirror_maker import (
    MirrorError,
    MirrorMaker,
    MirrorOptions,
    MirrorStats,
    SendFailure,
    ZkSourceConfig,
    load_handler,
    load_rebalance_listener,
    source_config,
    target_config,
    topic_filter,
    topic_pattern,
)
from mq.zk.consumer_groups import ConsumerIdTakenError
from mq.zk.store import StoreError

SETTINGS = {"help_option_names": ["-h", "--help"]}


def _report(line: str) -> None:
    click.echo(line, err=True)


def _flag(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ToolError(f"--abort.on.send.failure must be true or false, not {value!r}", EXIT_USAGE)
    return value.lower() == "true"


@click.command("mirror", context_settings=SETTINGS)
@click.option(
    "--consumer.config",
    "consumer_configs",
    multiple=True,
    required=True,
    metavar="FILE",
    help="Source cluster consumer properties (bootstrap.servers, group.id, ...; or Kafka 0.8's zookeeper.connect, "
    "group.id, ...); repeat for several sources.",
)
@click.option("--producer.config", "producer_config", required=True, metavar="FILE", help="Target producer properties.")
@click.option("--whitelist", "--include", "whitelist", help="Regex of the topics to mirror (commas separate too).")
@click.option("--blacklist", help="Regex of topics not to mirror.")
@click.option(
    "--num.streams",
    "num_streams",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Group consumers per source cluster (a ZooKeeper source: threads of its registration).",
)
@click.option(
    "--offset.commit.interval.ms",
    "commit_interval_ms",
    type=click.IntRange(min=1),
    help="How often acknowledged source offsets are committed (--exactly-once: how often the transactions "
    "commit)  [default: 60000; 1000 with --exactly-once]",
)
@click.option(
    "--abort.on.send.failure",
    "abort_on_send_failure",
    default="true",
    show_default=True,
    metavar="true|false",
    help="Stop without committing when a record cannot be delivered (false: skip it and go on).",
)
@click.option("--message.handler", "message_handler", metavar="MODULE:FUNCTION", help="Maps a record to records.")
@click.option("--message.handler.args", "message_handler_args", help="Passed once to the handler factory.")
@click.option(
    "--consumer.rebalance.listener",
    "rebalance_listener",
    metavar="MODULE:ATTRIBUTE",
    help="An object with on_partitions_revoked/on_partitions_assigned, called after the mirror's own handling.",
)
@click.option("--rebalance.listener.args", "rebalance_listener_args", help="Passed once to the listener factory.")
@click.option("--new.consumer", "new_consumer", is_flag=True, hidden=True, help="Accepted and ignored, as Kafka 2.x.")
@click.option(
    "--num.producers",
    "num_producers",
    type=click.IntRange(min=1),
    help="Kafka 0.8's producer threads: accepted; mq's mirror sends through one producer.",
)
@click.option(
    "--queue.size",
    "queue_size",
    type=click.IntRange(min=1),
    help="Kafka 0.8's data channel size: accepted; mq's mirror holds at most max.poll.records per stream.",
)
@click.option(
    "--target.replication.factor",
    "replication_factor",
    type=int,
    default=-1,
    help="Replication factor of target topics the mirror creates (default: the target broker's default).",
)
@click.option("--no-create-topics", is_flag=True, help="Do not create missing target topics.")
@click.option(
    "--exactly-once",
    is_flag=True,
    help="Copy each source partition in transactions that also record its position on the target (read_committed "
    "consumers of the target see every record once).",
)
@click.option(
    "--transactional.id.prefix",
    "transactional_id_prefix",
    metavar="PREFIX",
    help="With --exactly-once: prefix of the transactional ids, one per source partition  [default: "
    "mq-mirror-<group.id>-]",
)
@click.option("--check", is_flag=True, help="Compare source and target partitions instead of mirroring.")
@verbose_option()
@handle_errors
def mirror(
    consumer_configs: tuple[str, ...],
    producer_config: str,
    whitelist: str | None,
    blacklist: str | None,
    num_streams: int,
    commit_interval_ms: int | None,
    abort_on_send_failure: str,
    message_handler: str | None,
    message_handler_args: str | None,
    rebalance_listener: str | None,
    rebalance_listener_args: str | None,
    new_consumer: bool,
    num_producers: int | None,
    queue_size: int | None,
    replication_factor: int,
    no_create_topics: bool,
    exactly_once: bool,
    transactional_id_prefix: str | None,
    check: bool,
    verbose: bool,
) -> None:
    """Continuously copy data between Kafka clusters.

    Consumes the topics matching --whitelist (minus --blacklist) from each source cluster as the consumer group of
    its --consumer.config and produces every record, with its key, value, headers and timestamp, to the same topic
    and partition number of the --producer.config cluster (by key when the target has fewer partitions), creating
    missing target topics with the source's partition count. Source offsets are committed only after the target
    acknowledged every record before them (every --offset.commit.interval.ms, on rebalance and at exit), so a
    crash re-sends records but never skips one. Source records removed before they were mirrored (retention,
    deleted records, a recreated topic) are reported on stderr as GAP lines and counted. SIGTERM or SIGINT stops
    cleanly. A summary line ends on stderr.

    --exactly-once copies each source partition with its own transactional producer (transactional id
    <prefix><topic>-<partition>) whose transactions also write the source position to the compacted topic
    mq-copy-positions on the target cluster (--offset.commit.interval.ms apart). A restarted or new owner of a partition
    fences the previous one, completes or aborts its open transaction and resumes from the position on the
    target (else the source group's committed offset, else auto.offset.reset): consumers of the target with
    isolation.level=read_committed see every source record exactly once, whatever crashed. Needs group sources
    (bootstrap.servers) and a target that serves transactions; the source group's offsets follow for monitoring.

    A --consumer.config naming zookeeper.connect and no bootstrap.servers (Kafka 0.8's consumer.properties) makes
    that source a ZooKeeper-coordinated consumer as Kafka 0.8's MirrorMaker ran: registered in /consumers/<group>/ids
    with the --whitelist or --blacklist regex and --num.streams threads, offsets in ZooKeeper (offsets.storage=kafka:
    in the brokers), auto.commit.enable forced off; a position out of range is reset by its auto.offset.reset
    (smallest|largest) without a GAP line.

    --check reads every partition of the matching topics in the source and the target (committed records only,
    as read_committed) and prints one line per partition: record count and sha256 over length-prefixed keys and
    values in offset order on each side.
    Partition p is compared with partition p, so a target topic with fewer partitions (records placed by key)
    differs.

    Exit codes: 0 stopped cleanly (--check: every partition the same), 1 a send failed with
    --abort.on.send.failure true, a stream failed, or (--check) a partition differs, 2 bad usage.
    """
    if num_producers is not None:
        _report("Note: --num.producers is not needed: mq's mirror sends through one producer, in order per partition.")
    if queue_size is not None:
        _report("Note: --queue.size is not needed: each mq mirror stream holds at most max.poll.records records.")
    try:
        pattern = topic_pattern(whitelist, blacklist)
        sources = [source_config(client_properties_file(path), _report) for path in consumer_configs]
        target = target_config(client_properties_file(producer_config), _report)
        handler = load_handler(message_handler, message_handler_args) if message_handler else None
        if message_handler_args is not None and message_handler is None:
            raise MirrorError("--message.handler.args needs --message.handler", usage=True)
        listener = load_rebalance_listener(rebalance_listener, rebalance_listener_args) if rebalance_listener else None
        if rebalance_listener_args is not None and rebalance_listener is None:
            raise MirrorError("--rebalance.listener.args needs --consumer.rebalance.listener", usage=True)
        if exactly_once and any(isinstance(source, ZkSourceConfig) for source in sources):
            raise MirrorError("--exactly-once needs sources with bootstrap.servers (group consumers)", usage=True)
        if transactional_id_prefix is not None and not exactly_once:
            raise MirrorError("--transactional.id.prefix needs --exactly-once", usage=True)
    except MirrorError as exc:
        raise ToolError(str(exc), EXIT_USAGE if exc.usage else EXIT_FAILED) from None
    if commit_interval_ms is None:
        commit_interval_ms = 1000 if exactly_once else 60_000
    if check:
        if len(sources) != 1:
            raise ToolError("--check compares one --consumer.config source with the target", EXIT_USAGE)
        source = sources[0]
        if isinstance(source, ZkSourceConfig):
            _check({"bootstrap_servers": bootstrap_from_zookeeper(source.consumer.zookeeper_connect)}, target, pattern)
        else:
            _check(source.consumer, target, pattern)
        return
    options = MirrorOptions(
        sources,
        target,
        pattern,
        num_streams=num_streams,
        offset_commit_interval_ms=commit_interval_ms,
        abort_on_send_failure=_flag(abort_on_send_failure),
        handler=handler,
        rebalance_listener=listener,
        create_topics=not no_create_topics,
        target_replication_factor=replication_factor,
        topic_filter=topic_filter(whitelist, blacklist),
        exactly_once=exactly_once,
        transactional_id_prefix=transactional_id_prefix,
    )
    _run(options)


def _check(source: dict[str, Any], target: dict[str, Any], pattern: Any) -> None:
    from mq.tools.mirror_check import compare

    comparisons = asyncio.run(compare(source, target, pattern))
    for comparison in comparisons:
        click.echo(comparison.line())
    different = [c for c in comparisons if not c.same]
    click.echo(f"{len(comparisons)} partitions compared, {len(different)} different", err=True)
    if different:
        sys.exit(EXIT_FAILED)


def _run(options: MirrorOptions) -> None:
    try:
        maker = MirrorMaker(options, _report)
    except ValueError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    failure = False
    with _progress(maker.stats):
        try:
            asyncio.run(maker.run())
        except SendFailure as exc:
            _report(f"ERROR: a record could not be mirrored: {exc}")
            _report("Exiting on send failure, skip committing offsets.")
            failure = True
        except (
            KafkaError,
            MirrorError,
            OSError,
            StoreError,
            ConsumerIdTakenError,
            ConsumerRebalanceFailedError,
        ) as exc:
            _report(f"ERROR: {exc}")
            _report("Mirror maker thread exited abnormally, stopping the whole mirror maker.")
            failure = True
    _report(maker.stats.summary())
    if failure:
        sys.exit(EXIT_FAILED)


def _progress(stats: MirrorStats) -> Any:
    """A rich status line (records, records/s, MB/s, lag, gaps) on a terminal; nothing when stderr is piped."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    last = {"time": time.monotonic(), "records": 0, "bytes": 0, "rate": 0.0, "mbps": 0.0}

    def render() -> Text:
        current = stats
        now = time.monotonic()
        elapsed = now - last["time"]
        if elapsed >= 1.0:
            last["rate"] = (current.records - last["records"]) / elapsed
            last["mbps"] = (current.bytes - last["bytes"]) / elapsed / 1e6
            last.update(time=now, records=current.records, bytes=current.bytes)
        return Text(
            f"mirrored {current.records} records  {last['rate']:.0f} records/s  {last['mbps']:.1f} MB/s  "
            f"lag {current.lag}  gaps {current.gaps}"
        )

    return Live(get_renderable=render, console=Console(stderr=True), refresh_per_second=2, transient=True)
