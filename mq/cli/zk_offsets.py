"""Kafka's ZooKeeper offset tools for ZooKeeper-coordinated groups: ``mq export-zk-offsets``, ``mq import-zk-offsets``,
``mq update-offsets-in-zk`` and ``mq verify-consumer-rebalance``, with their flags and lines."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import click

from mq.cli.common import EXIT_FAILED, EXIT_USAGE, ToolError, handle_errors, zookeeper_store
from mq.tools.console import ConsoleError, read_properties_file
from mq.tools.export_zk_offsets import export_lines
from mq.tools.import_zk_offsets import OffsetsFileError, import_offsets
from mq.tools.update_offsets_in_zk import USAGE, WHICH, UpdateOffsetsError, update_offsets
from mq.tools.verify_consumer_rebalance import verify
from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient

SETTINGS = {"help_option_names": ["-h", "--help"]}
ZK_METAVAR = "HOST:PORT[,...][/CHROOT]"


@click.command("export-zk-offsets", context_settings=SETTINGS)
@click.option("--zkconnect", default="localhost:2181", show_default=True, metavar=ZK_METAVAR)
@click.option("--group", "groups", multiple=True, help="Group to export (repeatable; default: every group).")
@click.option("--output-file", required=True, type=click.Path(dir_okay=False), help="File to write.")
@handle_errors
def export_zk_offsets(zkconnect: str, groups: tuple[str, ...], output_file: str) -> None:
    """Write the committed offsets of ZooKeeper-coordinated groups to a file, one line per partition:
    /consumers/<group>/offsets/<topic>/<partition>:<offset>.

    Exit codes: 0 success, 1 the operation failed, 2 bad usage.
    """
    with zookeeper_store(zkconnect) as store:
        lines = export_lines(ZkConsumerGroups(store), groups)
    Path(output_file).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


@click.command("import-zk-offsets", context_settings=SETTINGS)
@click.option("--zkconnect", default="localhost:2181", show_default=True, metavar=ZK_METAVAR)
@click.option("--input-file", "--inputfile", "input_file", required=True, type=click.Path(dir_okay=False))
@handle_errors
def import_zk_offsets(zkconnect: str, input_file: str) -> None:
    """Write the offsets of a file of /consumers/<group>/offsets/<topic>/<partition>:<offset> lines (as
    export-zk-offsets writes them; reading stops at the first empty line) into ZooKeeper.

    Nothing is written when a line is malformed or names a partition that does not exist.
    Exit codes: 0 success, 1 the file was refused or the operation failed, 2 bad usage.
    """
    text = Path(input_file).read_text(encoding="utf-8")
    with zookeeper_store(zkconnect) as store:
        try:
            import_offsets(ZkConsumerGroups(store), KafkaZkClient(store), text)
        except OffsetsFileError as exc:
            raise ToolError(f"{input_file}: {exc}") from None


@click.command("update-offsets-in-zk", context_settings=SETTINGS)
@click.argument("arguments", nargs=-1, metavar="[earliest | latest] CONSUMER_PROPERTIES TOPIC")
@handle_errors
def update_offsets_in_zk(arguments: tuple[str, ...]) -> None:
    """Set a ZooKeeper-coordinated group's offsets of TOPIC to each partition's earliest or latest offset. The group
    and ZooKeeper come from group.id and zookeeper.connect of CONSUMER_PROPERTIES.

    Exit codes: 0 success, 1 the operation failed (no such topic, a partition without leader), 2 bad usage.
    """
    from mq.client.admin import AsyncAdmin
    from mq.client.sync import SyncAdmin

    if len(arguments) != 3 or arguments[0] not in WHICH:
        click.echo(USAGE, err=True)
        sys.exit(EXIT_USAGE)
    which, properties_file, topic = arguments
    try:
        properties = read_properties_file(properties_file)
    except (ConsoleError, OSError) as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    missing = [k for k in ("zookeeper.connect", "group.id") if not properties.get(k)]
    if missing:
        raise ToolError(f"{properties_file} has no {missing[0]}", EXIT_USAGE)
    with zookeeper_store(properties["zookeeper.connect"]) as store:
        zk = KafkaZkClient(store)
        bootstrap = zk.bootstrap_servers()
        if not bootstrap:
            raise ToolError("no brokers are registered in ZooKeeper")
        with SyncAdmin(bootstrap) as admin:

            def list_offsets(asked: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
                found = admin.call(AsyncAdmin.list_offsets, asked)
                return {tp: result.offset for tp, result in found.items()}

            try:
                lines = update_offsets(ZkConsumerGroups(store), zk, properties["group.id"], topic, which, list_offsets)
            except UpdateOffsetsError as exc:
                raise ToolError(str(exc)) from None
    for line in lines:
        click.echo(line)


@click.command("verify-consumer-rebalance", context_settings=SETTINGS)
@click.option(
    "--zookeeper.connect", "zookeeper_connect", default="localhost:2181", show_default=True, metavar=ZK_METAVAR
)
@click.option("--group", required=True, help="The ZooKeeper-coordinated consumer group.")
@handle_errors
def verify_consumer_rebalance(zookeeper_connect: str, group: str) -> None:
    """Check that every partition of the topics a ZooKeeper-coordinated group subscribes to is owned by a thread of
    a registered consumer. Prints "Rebalance operation successful !" or, after the problems (on stderr),
    "Rebalance operation failed !".

    Exit codes: 0 the rebalance is complete, 1 it is not (or the operation failed), 2 bad usage.
    """
    with zookeeper_store(zookeeper_connect) as store:
        check = verify(ZkConsumerGroups(store), KafkaZkClient(store), group)
    for problem in check.problems:
        click.echo(problem, err=True)
    click.echo(check.verdict)
    if not check.ok:
        sys.exit(EXIT_FAILED)
