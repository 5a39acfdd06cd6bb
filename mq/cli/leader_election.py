"""``mq leader-election``: elect the preferred leader, or any live replica for leaderless partitions."""

from __future__ import annotations

from pathlib import Path

import click

from mq.cli.common import EXIT_FAILED, EXIT_USAGE, ToolError, admin_options, admin_settings, handle_errors
from mq.tools.leader_election import failure_message, parse_election_type, render_election
from mq.tools.preferred_election import ElectionCommandError, parse_election_json
from mq.topic_partition import TopicPartition


@click.command("leader-election", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to connect to (required).")
@admin_options("--admin.config", "--command-config")
@click.option("--election-type", metavar="PREFERRED|UNCLEAN", help="Kind of election (any case; required).")
@click.option("--topic", help="Topic of the one partition to elect (with --partition).")
@click.option("--partition", type=int, help="Partition to elect (with --topic).")
@click.option("--all-topic-partitions", is_flag=True, help="Elect every eligible partition.")
@click.option(
    "--path-to-json-file",
    type=click.Path(dir_okay=False),
    help='Partitions to elect: {"partitions": [{"topic": T, "partition": P}]}.',
)
@handle_errors
def leader_election(
    bootstrap_server: str | None,
    command_config: str | None,
    timeout: float | None,
    election_type: str | None,
    topic: str | None,
    partition: int | None,
    all_topic_partitions: bool,
    path_to_json_file: str | None,
) -> None:
    """Run a preferred or unclean leader election through the controller.

    Exit codes: 0 every listed partition has a valid leader, 1 some could not be elected, 2 bad usage.
    """
    if bootstrap_server is None:
        raise ToolError('Missing required argument "[bootstrap-server]"', EXIT_USAGE)
    if election_type is None:
        raise ToolError('Missing required argument "[election-type]"', EXIT_USAGE)
    try:
        kind = parse_election_type(election_type)
    except ValueError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    sources = [topic is not None or partition is not None, all_topic_partitions, path_to_json_file is not None]
    if sum(sources) != 1:
        raise ToolError(
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
            EXIT_USAGE,
        )
    wanted: list[TopicPartition] | None = None
    if topic is not None or partition is not None:
        if topic is None or partition is None:
            raise ToolError("Both --topic and --partition are required to elect one partition", EXIT_USAGE)
        wanted = [TopicPartition(topic, partition)]
    elif path_to_json_file is not None:
        try:
            wanted = parse_election_json(Path(path_to_json_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ToolError(f"cannot read {path_to_json_file}: {exc.strerror}", EXIT_USAGE) from None
        except ElectionCommandError as exc:
            raise ToolError(str(exc), EXIT_USAGE) from None

    from mq.client.admin import AsyncAdmin
    from mq.client.sync import SyncAdmin

    with SyncAdmin(bootstrap_server, **admin_settings(command_config, timeout)) as admin:
        results = admin.call(AsyncAdmin.elect_leaders, wanted, int(kind))
    lines, failed = render_election(kind, results)
    for line in lines:
        click.echo(line)
    if failed:
        raise ToolError(failure_message(failed), EXIT_FAILED)
