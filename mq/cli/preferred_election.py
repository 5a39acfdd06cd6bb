"""``mq preferred-replica-election``: move leadership back to each partition's preferred (first) replica."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mq.cli.common import EXIT_FAILED, EXIT_USAGE
from mq.tools.preferred_election import ElectionCommandError, parse_election_json, start_preferred_election


@click.command("preferred-replica-election", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", required=True, metavar="HOST:PORT[,...][/CHROOT]", help="The cluster's ZooKeeper.")
@click.option(
    "--path-to-json-file",
    type=click.Path(dir_okay=False),
    help='{"partitions": [{"topic": T, "partition": P}]}; default: all partitions.',
)
def preferred_replica_election(zookeeper: str, path_to_json_file: str | None) -> None:
    """Ask the controller to make each partition's preferred replica its leader.

    Exit codes: 0 when the election was started, 1 when it could not be (one already in progress, bad JSON),
    2 for bad usage.
    """
    from mq.zk.kafka_zk_client import KafkaZkClient
    from mq.zk.zk_store import ZooKeeperStore

    try:
        wanted = parse_election_json(Path(path_to_json_file).read_text(encoding="utf-8")) if path_to_json_file else None
    except OSError as exc:
        click.echo(f"Error: cannot read {path_to_json_file}: {exc.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    except ElectionCommandError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
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
