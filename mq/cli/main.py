"""The ``mq`` command: a click group whose subcommands load lazily from one module each."""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import PackageNotFoundError, version

import click

# name -> ("module:attribute", one-line help shown by `mq --help` without importing the module)
COMMANDS: dict[str, tuple[str, str]] = {
    "server": ("mq.cli.server:server", "Start, stop or check the status of an mq broker."),
    "topics": ("mq.cli.topics:topics", "Create, delete, describe, or change a topic."),
    "create-topic": ("mq.cli.topics:create_topic", "Create a topic (Kafka 0.8.0's kafka-create-topic.sh)."),
    "list-topic": ("mq.cli.topics:list_topic", "List topics' partitions (Kafka 0.8.0's kafka-list-topic.sh)."),
    "configs": ("mq.cli.configs:configs", "Describe or alter the dynamic config of topics, brokers, clients, users."),
    "acls": ("mq.cli.acls:acls", "Add, remove or list ACLs (the rules of the broker's authorizer)."),
    "console-producer": ("mq.cli.console:console_producer", "Read lines from standard input and produce them."),
    "console-consumer": ("mq.cli.console:console_consumer", "Print the messages of a topic to standard output."),
    "preferred-replica-election": (
        "mq.cli.preferred_election:preferred_replica_election",
        "Move leadership back to each partition's preferred replica.",
    ),
    "reassign-partitions": (
        "mq.cli.reassign_partitions:reassign_partitions",
        "Generate, execute, verify, cancel or list partition reassignments.",
    ),
    "leader-election": ("mq.cli.leader_election:leader_election", "Elect preferred or unclean leaders of partitions."),
    "get-offsets": ("mq.cli.console:get_offsets", "Print the latest, earliest or by-time offset of partitions."),
    "simple-consumer-shell": (
        "mq.cli.simple_consumer_shell:simple_consumer_shell",
        "Print the messages of one partition from an offset (Kafka 0.8's SimpleConsumerShell).",
    ),
    "consumer-groups": (
        "mq.cli.consumer_groups:consumer_groups",
        "List, describe or delete consumer groups; reset or delete their offsets.",
    ),
    "consumer-offset-checker": (
        "mq.cli.offset_checker:consumer_offset_checker",
        "Check the committed offsets and lag of a consumer group.",
    ),
    "export-zk-offsets": (
        "mq.cli.zk_offsets:export_zk_offsets",
        "Write the offsets of ZooKeeper-coordinated consumer groups to a file.",
    ),
    "import-zk-offsets": (
        "mq.cli.zk_offsets:import_zk_offsets",
        "Write a file of offsets (as export-zk-offsets writes it) into ZooKeeper.",
    ),
    "update-offsets-in-zk": (
        "mq.cli.zk_offsets:update_offsets_in_zk",
        "Set a ZooKeeper group's offsets of a topic to the earliest or latest offsets.",
    ),
    "verify-consumer-rebalance": (
        "mq.cli.zk_offsets:verify_consumer_rebalance",
        "Check that every partition of a ZooKeeper group is owned by a registered consumer.",
    ),
    "transactions": (
        "mq.cli.transactions:transactions",
        "List, describe, find hanging and abort transactions (Kafka's kafka-transactions).",
    ),
    "mirror": ("mq.cli.mirror:mirror", "Continuously copy data between Kafka clusters."),
    "perf": ("mq.cli.perf:perf", "Measure producer or consumer throughput and latency (Kafka's perf tests)."),
    "replay-log-producer": (
        "mq.cli.replay:replay_log_producer",
        "Copy a window of a topic's records to another topic, rate-limited and resumable.",
    ),
    "dump-segments": (
        "mq.cli.dump_segments:dump_segments",
        "Parse log segment, index and time index files and print their contents.",
    ),
    "export": ("mq.cli.export:export", "Export topics to Parquet with Spark, exactly once across restarts."),
    "segments-to-parquet": (
        "mq.cli.segments_to_parquet:segments_to_parquet",
        "Write the records of a copied log directory's segment files to Parquet with Spark.",
    ),
    "delete-records": ("mq.cli.delete_records:delete_records", "Delete the records of partitions below given offsets."),
    "log-dirs": ("mq.cli.log_dirs:log_dirs", "Describe the log directories of brokers and the replicas in them."),
    "state-change-log-merger": (
        "mq.cli.state_change_merger:state_change_log_merger",
        "Merge several brokers' state-change logs into one history in time order.",
    ),
    "broker-api-versions": (
        "mq.cli.broker_api_versions:broker_api_versions",
        "Print the API versions each broker supports and which this client can use.",
    ),
    "jmx-tool": ("mq.cli.jmx_tool:jmx_tool", "Print MBean values from a broker's metrics endpoint (Kafka's JmxTool)."),
    "monitor": ("mq.cli.monitor:monitor", "Evaluate alarm rules (lag, group status, replicas, disk) and notify."),
}


def package_version() -> str:
    try:
        return version("mq")
    except PackageNotFoundError:
        return "unknown"


class LazyGroup(click.Group):
    """Lists every command from COMMANDS and imports a command's module only when it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attribute = entry[0].partition(":")
        command: click.Command = getattr(importlib.import_module(module_name), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_version(), "--version", prog_name="mq")
def cli() -> None:
    """mq: a Kafka-compatible message broker and the operator's toolkit around it."""


def main() -> None:
    """Console entry point: a usage error prints one line and exits 2; a failed operation exits 1.

    The protocol library registers strategies with the testing library hypothesis whenever that is importable, which
    costs a second and a half of CPU at every start in a directory without hypothesis' cache (a broker's, say); the
    command has no use for them, so an ``mq`` process never imports it."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        result = cli.main(standalone_mode=False)
    except click.UsageError as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)
