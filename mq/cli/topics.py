"""``mq topics``: create, alter, delete, list or describe topics, with Kafka's kafka-topics flags and output; and
``mq create-topic`` / ``mq list-topic``, Kafka 0.8.0's kafka-create-topic.sh and kafka-list-topic.sh."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import click

from mq.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    admin_options,
    admin_settings,
    default_format,
    format_option,
    handle_errors,
    zookeeper_store,
)
from mq.tools.topics import (
    CREATION_SUCCEEDED,
    ClientTopicAdmin,
    TopicCommandError,
    TopicsOutcome,
    ZkTopicAdmin,
    list_topic_lines,
    parse_replica_assignment,
    run_topics,
)


@click.command("topics", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (the AdminClient path).")
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[,...][/CHROOT]",
    help="Write the metadata tree directly, as Kafka's ZooKeeper-mode tool.",
)
@click.option("--create", is_flag=True, help="Create a topic.")
@click.option("--alter", is_flag=True, help="Add partitions to matching topics.")
@click.option("--delete", is_flag=True, help="Delete matching topics.")
@click.option("--list", "list_", is_flag=True, help="List topic names.")
@click.option("--describe", is_flag=True, help="Describe matching topics' partitions and config overrides.")
@click.option("--topic", metavar="NAME|REGEX", help="Topic name (create) or regex whitelist (other actions).")
@click.option("--partitions", type=int, help="Partitions (create) or new total (alter).")
@click.option("--replication-factor", type=int, help="Replicas per partition (create).")
@click.option(
    "--replica-assignment", metavar="B1:B2,B3:B4", help="Replica lists per partition, preferred leader first."
)
@click.option(
    "--config", multiple=True, metavar="NAME=VALUE", help="Topic config override (create, alter with --zookeeper)."
)
@click.option(
    "--delete-config",
    "--deleteConfig",
    "delete_config",
    multiple=True,
    metavar="NAME",
    help="Remove a topic config override (alter, --zookeeper; --deleteConfig is 0.8.1's spelling).",
)
@click.option("--if-exists", is_flag=True, help="alter/delete/describe: do nothing when no topic matches.")
@click.option("--if-not-exists", is_flag=True, help="create: do nothing when the topic exists.")
@click.option(
    "--under-replicated-partitions", is_flag=True, help="describe: partitions whose ISR is smaller than their replicas."
)
@click.option("--unavailable-partitions", is_flag=True, help="describe: partitions without a live leader.")
@click.option("--topics-with-overrides", is_flag=True, help="describe: only topics with config overrides.")
@click.option("--exclude-internal", is_flag=True, help="list/describe: leave out internal topics.")
@admin_options()
@format_option()
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
def topics(**options: Any) -> None:
    """Create, delete, describe, or change a topic.

    Exit codes: 0 success, 1 the operation failed (printed as "Error while executing topic command : ..."),
    2 bad usage.
    """
    options["list"] = options.pop("list_")
    output_format = options.pop("output_format") or default_format()
    verbose = options.pop("verbose")
    command_config, timeout = options.pop("command_config"), options.pop("timeout")
    if (options["bootstrap_server"] is None) == (options["zookeeper"] is None):
        click.echo("Error: Only one of --bootstrap-server or --zookeeper must be specified", err=True)
        sys.exit(EXIT_USAGE)
    try:
        if options["zookeeper"] is not None:
            from mq.zk.zk_store import ZooKeeperStore

            store = ZooKeeperStore(options["zookeeper"], session_timeout_ms=30000)
            try:
                outcome = run_topics(ZkTopicAdmin(store), {**options, "zookeeper": True})
            finally:
                store.close()
        else:
            from mq.client.sync import SyncAdmin

            with SyncAdmin(options["bootstrap_server"], **admin_settings(command_config, timeout)) as admin:
                outcome = run_topics(ClientTopicAdmin(admin), {**options, "zookeeper": False})
    except ToolError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except TopicCommandError as exc:
        if exc.usage:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        _fail(str(exc), verbose)
    except Exception as exc:
        _fail(str(exc), verbose)
    _render(outcome, output_format, bool(options["describe"]))


def _fail(message: str, verbose: bool) -> None:
    if verbose:
        import traceback

        traceback.print_exc()
    click.echo(f"Error while executing topic command : {message}", err=True)
    sys.exit(EXIT_FAILED)


def _render(outcome: TopicsOutcome, output_format: str, describe: bool) -> None:
    if output_format == "json":
        document: Any = [asdict(t) for t in outcome.topics] if describe else outcome.names or outcome.lines
        click.echo(json.dumps(document))
        return
    if output_format == "table" and describe and outcome.topics:
        from rich.console import Console
        from rich.table import Table

        table = Table("Topic", "Partition", "Leader", "Replicas", "Isr", "Configs")
        for topic in outcome.topics:
            configs = ",".join(f"{k}={v}" for k, v in topic.configs.items())
            for p in topic.partitions:
                leader = str(p.leader) if p.leader is not None and p.leader >= 0 else "none"
                table.add_row(
                    topic.name,
                    str(p.partition),
                    leader,
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                    configs,
                )
        Console().print(table)
        return
    for line in outcome.lines:
        click.echo(line)


@click.command("create-topic", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", required=True, metavar="HOST:PORT[,...][/CHROOT]")
@click.option("--topic", required=True, help="The topic to be created.")
@click.option("--partition", "partitions", type=int, default=1, show_default=True, help="Number of partitions.")
@click.option("--replica", "replicas", type=int, default=1, show_default=True, help="Replication factor.")
@click.option(
    "--replica-assignment-list", default="", metavar="B1:B2,B3:B4", help="Replica lists per partition (manual)."
)
def create_topic(zookeeper: str, topic: str, partitions: int, replicas: int, replica_assignment_list: str) -> None:
    """Create a topic in ZooKeeper (Kafka 0.8.0's kafka-create-topic.sh; kafka-topics --create since 0.8.1).

    Prints "creation succeeded!" or "creation failed because of <message>".
    Exit codes: 0 success, 1 the creation failed, 2 bad usage.
    """
    try:
        manual = parse_replica_assignment(replica_assignment_list) if replica_assignment_list else None
        with zookeeper_store(zookeeper) as store:
            ZkTopicAdmin(store).create_topic(topic, partitions, replicas, manual, {})
    except Exception as exc:
        click.echo(f"creation failed because of {exc}")
        sys.exit(EXIT_FAILED)
    click.echo(CREATION_SUCCEEDED)


@click.command("list-topic", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", required=True, metavar="HOST:PORT[,...][/CHROOT]")
@click.option("--topic", help="The topic to list (default: every topic).")
@click.option("--under-replicated-partitions", is_flag=True, help="Only partitions whose ISR is smaller.")
@click.option("--unavailable-partitions", is_flag=True, help="Only partitions without a live leader.")
@handle_errors
def list_topic(
    zookeeper: str, topic: str | None, under_replicated_partitions: bool, unavailable_partitions: bool
) -> None:
    """List topics' partitions with leader, replicas and ISR (Kafka 0.8.0's kafka-list-topic.sh; kafka-topics
    --describe since 0.8.1): one "topic: T<TAB>partition: P<TAB>leader: L<TAB>replicas: R<TAB>isr: I" line each.

    Exit codes: 0 success, 1 the operation failed, 2 bad usage.
    """
    with zookeeper_store(zookeeper) as store:
        lines = list_topic_lines(
            ZkTopicAdmin(store),
            topic,
            under_replicated=under_replicated_partitions,
            unavailable=unavailable_partitions,
        )
    for line in lines:
        click.echo(line)
