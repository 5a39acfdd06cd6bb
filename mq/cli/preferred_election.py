"""``mq preferred-replica-election``: move leadership back to each partition's preferred (first) replica."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from mq.cli.common import EXIT_FAILED, EXIT_USAGE, admin_options, admin_settings, handle_errors
from mq.tools.preferred_election import (
    ElectionCommandError,
    parse_election_json,
    render_admin_election,
    start_preferred_election,
)
from mq.topic_partition import TopicPartition


@click.command("preferred-replica-election", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", metavar="HOST:PORT[,...][/CHROOT]", help="The cluster's ZooKeeper.")
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Brokers to ask (ElectLeaders) instead.")
@admin_options("--admin.config", "--command-config")
@click.option(
    "--path-to-json-file",
    type=click.Path(dir_okay=False),
    help='{"partitions": [{"topic": T, "partition": P}]}; default: all partitions.',
)
@handle_errors
def preferred_replica_election(
    zookeeper: str | None,
    bootstrap_server: str | None,
    command_config: str | None,
    timeout: float | None,
    path_to_json_file: str | None,
) -> None:
    """Ask the controller to make each partition's preferred replica its leader.

    Exit codes: 0 when the election was started (ZooKeeper) or completed (bootstrap server), 1 when it could not be
    (one already in progress, bad JSON, partitions whose preferred replica could not lead), 2 for bad usage.
    """
    from mq.zk.kafka_zk_client import KafkaZkClient
    from mq.zk.zk_store import ZooKeeperStore

    if (zookeeper is None) == (bootstrap_server is None):
        raise click.UsageError("Exactly one of --zookeeper and --bootstrap-server is required.")
    try:
        wanted = parse_election_json(Path(path_to_json_file).read_text(encoding="utf-8")) if path_to_json_file else None
    except OSError as exc:
        click.echo(f"Error: cannot read {path_to_json_file}: {exc.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    except ElectionCommandError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    if bootstrap_server is not None:
        _elect_through_brokers(bootstrap_server, admin_settings(command_config, timeout), wanted)
        return
    assert zookeeper is not None
    store = ZooKeeperStore(zookeeper, session_timeout_ms=30000)
    try:
        outcome = start_preferred_election(KafkaZkClient(store), wanted)
    except ElectionCommandError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_FAILED)
    finally:
        store.close()
    for line in outcome.lines:
        click.echo(line)


def _elect_through_brokers(
    bootstrap_server: str, settings: dict[str, Any], wanted: list[TopicPartition] | None
) -> None:
    from mq.client.admin import AsyncAdmin
    from mq.client.sync import SyncAdmin

    with SyncAdmin(bootstrap_server, **settings) as admin:
        results = admin.call(AsyncAdmin.elect_leaders, wanted)
    lines, failed = render_admin_election(results)
    for line in lines:
        click.echo(line)
    if failed:
        click.echo(f"Error: {failed} preferred replica(s) could not be elected", err=True)
        sys.exit(EXIT_FAILED)
