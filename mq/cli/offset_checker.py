"""``mq consumer-offset-checker``: Kafka's ConsumerOffsetChecker columns over committed offsets in the broker."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from typing import Any

import click

from mq.cli.common import (
    EXIT_USAGE,
    ToolError,
    admin_options,
    admin_settings,
    default_format,
    format_option,
    handle_errors,
    print_table,
    zookeeper_store,
)
from mq.cli.consumer_groups import sampling_sleep, status_options
from mq.client.admin import GroupDescription
from mq.client.cluster import BrokerMetadata
from mq.tools import consumer_groups, offset_checker
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import MetadataStore


@click.command("consumer-offset-checker", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--group", required=True, help="Consumer group.")
@click.option("--topic", metavar="T1,T2", help="Comma-separated topics (default: the group's topics).")
@click.option("--broker-info", is_flag=True, help="Print broker info.")
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to.")
@click.option(
    "--zookeeper",
    "--zkconnect",
    "zookeeper",
    metavar="HOST:PORT[,...][/CHROOT]",
    help="ZooKeeper of a cluster: the brokers are found in /brokers/ids; a group under /consumers is read there.",
)
@click.option(
    "--socket.timeout.ms",
    "socket_timeout_ms",
    type=click.IntRange(min=1),
    help="Request timeout in ms (default: request.timeout.ms of --command-config, else 6000).",
)
@admin_options()
@click.option("--verbose", is_flag=True, help="Add lagSeconds after Owner in text output.")
@status_options()
@format_option()
@handle_errors
def consumer_offset_checker(**options: Any) -> None:
    """Check the offset of your consumers.

    \b
    With --zookeeper (or 0.8.0's --zkconnect) a ZooKeeper-coordinated group (/consumers/<group>) is checked as
    Kafka 0.8 does: offsets from the broker where it has them, else from /consumers/<group>/offsets, owners from
    /consumers/<group>/owners (the consumer thread id); topics are those with offsets or owners.

    \b
    Columns: Group Topic Pid Offset logSize Lag Owner (Offset and Lag "unknown" without a committed offset, Owner
    "none" without an active member). Beyond Kafka: lagSeconds (now minus the timestamp of the first unconsumed
    record, 0 without lag) in table and json output and with --verbose; --status rates each partition over
    --samples samples --interval seconds apart (see mq consumer-groups --help). Lag is never negative.

    \b
    Exit codes: 0 success, 1 the operation failed, 2 bad usage.
    """
    output_format = options["output_format"] or default_format()
    if (options["bootstrap_server"] is None) == (options["zookeeper"] is None):
        raise ToolError("Only one of --bootstrap-server or --zookeeper must be specified", EXIT_USAGE)
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(zookeeper_store(options["zookeeper"])) if options["zookeeper"] else None
        report, brokers, extra = _check(options, output_format, store)
    _render(report, brokers, extra, output_format)


def _check(
    options: dict[str, Any], output_format: str, store: MetadataStore | None
) -> tuple[consumer_groups.GroupOffsets, list[BrokerMetadata], bool]:
    from mq.client.admin import AsyncAdmin
    from mq.client.sync import SyncAdmin

    bootstrap = options["bootstrap_server"]
    if store is not None:
        bootstrap = KafkaZkClient(store).bootstrap_servers()
        if not bootstrap:
            raise ToolError(f"Exiting due to: no brokers are registered in {options['zookeeper']}.")
    settings = admin_settings(options["command_config"], options["timeout"], default_request_timeout_ms=6000)
    if options["socket_timeout_ms"] is not None:
        settings["request_timeout_ms"] = options["socket_timeout_ms"]
    with SyncAdmin(bootstrap, **settings) as sync:
        groups = None if store is None else ZkConsumerGroups(store)
        admin: consumer_groups.ClientGroupAdmin
        if groups is not None and groups.exists(options["group"]):
            from mq.tools.zk_groups import ZkGroupAdmin

            admin = ZkGroupAdmin(sync, groups)
        else:
            admin = consumer_groups.ClientGroupAdmin(sync)
        topics = offset_checker.parse_topics(options["topic"])
        group = options["group"]

        def collect(description: GroupDescription) -> consumer_groups.GroupOffsets:
            return offset_checker.check(admin, description, topics)

        if options["status"]:
            samples = options["samples"]
            sleep = sampling_sleep(group, samples, output_format)
            report = consumer_groups.sample_offsets(admin, group, samples, options["interval"], collect, sleep)
        else:
            report = collect(admin.describe_groups([group])[0])
        extra = options["verbose"] or options["status"] or output_format != "text"
        if extra:
            report = consumer_groups.with_lag_seconds(admin, report)
        brokers: list[BrokerMetadata] = (
            list(sync.call(AsyncAdmin.describe_cluster).brokers) if options["broker_info"] else []
        )
    return report, brokers, extra


def _render(
    report: consumer_groups.GroupOffsets, brokers: list[BrokerMetadata], extra: bool, output_format: str
) -> None:
    if output_format == "json":
        document: dict[str, Any] = asdict(report)
        if brokers:
            document["brokers"] = [{"id": b.node_id, "host": b.host, "port": b.port} for b in brokers]
        click.echo(json.dumps(document))
        return
    if output_format == "table":
        print_table(*offset_checker.cells(report, extra))
    else:
        for line in offset_checker.lines(report, extra):
            click.echo(line)
    if brokers:
        for line in offset_checker.broker_lines(brokers):
            click.echo(line)
