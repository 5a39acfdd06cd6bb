"""``mq topics``: create, alter, delete, list or describe topics, with Kafka's kafka-topics flags and output."""

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
)
from mq.tools.topics import ClientTopicAdmin, TopicCommandError, TopicsOutcome, ZkTopicAdmin, run_topics


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
