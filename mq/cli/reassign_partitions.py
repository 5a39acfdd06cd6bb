"""``mq reassign-partitions``: move partition replicas between brokers, as kafka-reassign-partitions does."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mq.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    admin_settings,
    command_config_option,
    handle_errors,
)
from mq.client.admin import AsyncAdmin
from mq.tools import reassign_partitions as tool
from mq.tools.reassign_partitions import Assignment, PartitionProgress, ReassignCommandError

if TYPE_CHECKING:
    from rich.table import Table

    from mq.client.sync import SyncAdmin
    from mq.zk.kafka_zk_client import KafkaZkClient

ACTIONS = ("generate", "execute", "verify", "cancel", "list")


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}", EXIT_USAGE) from None


def _usage(message: str) -> ToolError:
    return ToolError(message, EXIT_USAGE)


def _check_usage(action: str, options: dict[str, object], zookeeper: bool) -> None:
    """Kafka's option rules: each action's required file, and options only some actions accept."""
    needs = {
        "generate": ("topics-to-move-json-file", "broker-list"),
        "execute": ("reassignment-json-file",),
        "verify": ("reassignment-json-file",),
        "cancel": ("reassignment-json-file",),
        "list": (),
    }
    for name in needs[action]:
        if options[name] is None:
            raise _usage(f'Missing required argument "[{name}]"')
    allowed = {
        "throttle": ("execute",),
        "replica-alter-log-dirs-throttle": ("execute",),
        "additional": ("execute",),
        "wait": ("execute",),
        "disable-rack-aware": ("generate",),
        "preserve-throttles": ("verify", "cancel"),
        "broker-list": ("generate",),
        "topics-to-move-json-file": ("generate",),
        "reassignment-json-file": ("execute", "verify", "cancel"),
    }
    for name, actions in allowed.items():
        value = options[name]
        if value not in (None, False, -1) and action not in actions:
            raise _usage(f'Option "[{name}]" can\'t be used with action "[{action}]"')
    if zookeeper and action in ("cancel", "list"):
        raise _usage(f'Option "[zookeeper]" can\'t be used with action "[{action}]"; use --bootstrap-server')


@click.command("reassign-partitions", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", metavar="HOST:PORT[,...][/CHROOT]", help="Work on the cluster's ZooKeeper (2.5 output).")
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="Work through the brokers' admin APIs.")
@command_config_option()
@click.option("--generate", "do_generate", is_flag=True, help="Propose an assignment of the topics to the brokers.")
@click.option("--execute", "do_execute", is_flag=True, help="Start the reassignment of --reassignment-json-file.")
@click.option("--verify", "do_verify", is_flag=True, help="Report each partition's status; clear throttles when done.")
@click.option("--cancel", "do_cancel", is_flag=True, help="Revert the partitions' ongoing reassignments.")
@click.option("--list", "do_list", is_flag=True, help="List ongoing reassignments.")
@click.option("--reassignment-json-file", type=click.Path(dir_okay=False), help="Target replicas per partition.")
@click.option("--topics-to-move-json-file", type=click.Path(dir_okay=False), help="Topics for --generate.")
@click.option("--broker-list", metavar="0,1,2", help="Brokers --generate spreads the topics over.")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore broker racks in --generate.")
@click.option("--throttle", type=int, default=-1, show_default=True, help="Replication limit in bytes/s (execute).")
@click.option(
    "--replica-alter-log-dirs-throttle",
    type=int,
    default=-1,
    show_default=True,
    help="Limit in bytes/s of moving replicas between the log dirs of a broker (execute).",
)
@click.option("--additional", is_flag=True, help="Execute even though other reassignments are running.")
@click.option("--preserve-throttles", is_flag=True, help="Verify or cancel without removing throttles.")
@click.option("--wait", is_flag=True, help="After --execute, show progress until done, then verify.")
@click.option("--wait-interval", type=float, default=1.0, show_default=True, help="Seconds between progress polls.")
@click.option(
    "--timeout",
    "log_dir_timeout_ms",
    type=int,
    default=10000,
    show_default=True,
    metavar="MS",
    help="Kafka's wait for replica moves between log directories to begin; accepted, mq moves none (each admin "
    "call is bounded by default.api.timeout.ms of --command-config, else 30 s).",
)
@handle_errors
def reassign_partitions(
    zookeeper: str | None,
    bootstrap_server: str | None,
    command_config: str | None,
    do_generate: bool,
    do_execute: bool,
    do_verify: bool,
    do_cancel: bool,
    do_list: bool,
    reassignment_json_file: str | None,
    topics_to_move_json_file: str | None,
    broker_list: str | None,
    disable_rack_aware: bool,
    throttle: int,
    replica_alter_log_dirs_throttle: int,
    additional: bool,
    preserve_throttles: bool,
    wait: bool,
    wait_interval: float,
    log_dir_timeout_ms: int,
) -> None:
    """Generate, execute, verify, cancel or list partition reassignments.

    --wait (beyond Kafka) follows an --execute: per partition, the bytes its new replicas hold against the leader's
    log size (DescribeLogDirs on each broker) and how many of them have joined the ISR (a replica joins once it has
    caught up with the leader's log end); the rate is bytes copied per second since the first poll and the ETA
    extrapolates it. A rich display on a terminal, a plain line per poll when piped; it ends by running --verify.

    Exit codes: 0 success (verify: nothing failed, some may still be in progress), 1 the operation failed or a
    partition ended with other replicas than requested, 2 bad usage.
    """
    chosen = [
        a for a, flag in zip(ACTIONS, (do_generate, do_execute, do_verify, do_cancel, do_list), strict=True) if flag
    ]
    if len(chosen) != 1:
        raise _usage("Command must include exactly one action: --generate, --execute, --verify, --cancel, or --list")
    action = chosen[0]
    if bootstrap_server is None and zookeeper is None:
        raise _usage("Please specify --bootstrap-server")
    if bootstrap_server is not None and zookeeper is not None:
        click.echo(
            "Warning: ignoring deprecated --zookeeper option because --bootstrap-server was specified.  The "
            "--zookeeper option will be removed in a future version of Kafka.",
            err=True,
        )
        zookeeper = None
    options: dict[str, object] = {
        "topics-to-move-json-file": topics_to_move_json_file,
        "broker-list": broker_list,
        "reassignment-json-file": reassignment_json_file,
        "throttle": throttle,
        "replica-alter-log-dirs-throttle": replica_alter_log_dirs_throttle,
        "additional": additional,
        "wait": wait,
        "disable-rack-aware": disable_rack_aware,
        "preserve-throttles": preserve_throttles,
    }
    _check_usage(action, options, zookeeper is not None)
    topics: list[str] = []
    brokers: list[int] = []
    target: Assignment = {}
    moves: tool.ReplicaMoves = {}
    try:
        if action == "generate":
            assert topics_to_move_json_file is not None and broker_list is not None
            topics = tool.parse_topics_to_move(_read(topics_to_move_json_file))
            brokers = tool.parse_broker_list(broker_list)
        elif action != "list":
            assert reassignment_json_file is not None
            text = _read(reassignment_json_file)
            target = tool.parse_reassignment(text)
            moves = tool.parse_log_dir_moves(text) if action in ("execute", "verify") else {}
        if zookeeper is not None:
            if moves:
                raise ToolError("bootstrap-server needs to be provided when replica reassignments are present.")
            ok = _zookeeper(
                zookeeper,
                action,
                target,
                throttle,
                wait,
                wait_interval,
                lambda zk: tool.zk_generate(zk, topics, brokers, not disable_rack_aware),
            )
        else:
            assert bootstrap_server is not None
            ok = _bootstrap(
                bootstrap_server,
                command_config,
                action,
                target,
                throttle=throttle,
                moves=moves,
                log_dir_throttle=replica_alter_log_dirs_throttle,
                additional=additional,
                preserve_throttles=preserve_throttles,
                wait=wait,
                wait_interval=wait_interval,
                generate=lambda admin: tool.generate(
                    admin.replicas(topics),
                    topics,
                    brokers,
                    _racks(admin),
                    rack_aware=not disable_rack_aware,
                ),
            )
    except ReassignCommandError as exc:
        raise ToolError(str(exc)) from None
    if not ok:
        sys.exit(EXIT_FAILED)


def _echo(lines: Sequence[str]) -> None:
    for line in lines:
        click.echo(line)


def _racks(admin: tool.SyncReassignAdmin) -> dict[int, str | None]:
    return {b.node_id: b.rack for b in admin.admin.call(AsyncAdmin.describe_cluster).brokers}


def _zookeeper(
    connect: str,
    action: str,
    target: Assignment,
    throttle: int,
    wait: bool,
    interval: float,
    generate: Callable[..., list[str]],
) -> bool:
    from mq.zk.kafka_zk_client import KafkaZkClient
    from mq.zk.zk_store import ZooKeeperStore

    store = ZooKeeperStore(connect, session_timeout_ms=30000)
    try:
        zk = KafkaZkClient(store)
        if action == "generate":
            _echo(generate(zk))
            return True
        if action == "verify":
            lines, ok = tool.zk_verify(zk, target)
            _echo(lines)
            return ok
        original = tool.zk_assignment(zk, {tp.topic for tp in target})
        lines, started = tool.zk_execute(zk, target, throttle)
        _echo(lines)
        if not (started and wait):
            return started or throttle >= 0
        with _brokers_of(zk) as sync:
            reader = None if sync is None else tool.SyncReassignAdmin(sync).log_sizes
            _follow(lambda: tool.zk_progress(zk, target, original, reader), interval)
        lines, ok = tool.zk_verify(zk, target)
        _echo(lines)
        return ok
    finally:
        store.close()


@contextlib.contextmanager
def _brokers_of(zk: KafkaZkClient) -> Iterator[SyncAdmin | None]:
    """An admin client on the registered brokers' PLAINTEXT endpoints (None when there are none)."""
    from mq.client.sync import SyncAdmin

    endpoints = [r.host_port() for r in zk.get_all_brokers().values()]
    bootstrap = ",".join(f"{host}:{port}" for host, port in filter(None, endpoints))
    if not bootstrap:
        yield None
        return
    with SyncAdmin(bootstrap) as sync:
        yield sync


def _bootstrap(
    bootstrap_server: str,
    command_config: str | None,
    action: str,
    target: Assignment,
    *,
    throttle: int,
    moves: tool.ReplicaMoves,
    log_dir_throttle: int,
    additional: bool,
    preserve_throttles: bool,
    wait: bool,
    wait_interval: float,
    generate: Callable[[tool.SyncReassignAdmin], list[str]],
) -> bool:
    from mq.client.sync import SyncAdmin

    with SyncAdmin(bootstrap_server, **admin_settings(command_config)) as sync:
        admin = tool.SyncReassignAdmin(sync)
        if action == "generate":
            _echo(generate(admin))
            return True
        if action == "list":
            _echo(tool.list_lines(admin.ongoing()))
            return True
        if action == "verify":
            lines, ok = tool.verify(admin, target, preserve_throttles, moves)
            _echo(lines)
            return ok
        if action == "cancel":
            lines, ok = tool.cancel(admin, target, preserve_throttles)
            _echo(lines)
            return ok
        original = admin.replicas({tp.topic for tp in target})
        lines, ok = tool.execute(admin, target, throttle, additional, moves, log_dir_throttle)
        _echo(lines)
        if not (ok and wait):
            return ok
        _follow(lambda: tool.admin_progress(admin, target, original), wait_interval)
        lines, ok = tool.verify(admin, target, moves=moves)
        _echo(lines)
        return ok


def _follow(poll: Callable[[], list[PartitionProgress]], interval: float) -> None:
    """Poll until every partition is done: a rich live table on a terminal, a plain summary line otherwise."""
    start = time.monotonic()
    meter = tool.RateMeter()

    def observe() -> tuple[list[PartitionProgress], float, float | None]:
        items = poll()
        now = time.monotonic()
        copied = tool.copied_total(items)
        return items, now - start, None if copied is None else meter.rate(now, copied)

    if not sys.stdout.isatty():
        while True:
            items, elapsed, rate = observe()
            click.echo(tool.progress_line(items, elapsed, rate))
            if all(p.done for p in items):
                return
            time.sleep(interval)
    from rich.console import Console
    from rich.live import Live

    with Live(console=Console(), refresh_per_second=4) as live:
        while True:
            items, elapsed, rate = observe()
            live.update(_table(items, elapsed, rate))
            if all(p.done for p in items):
                return
            time.sleep(interval)


def _table(items: Sequence[PartitionProgress], elapsed: float, rate: float | None = None) -> Table:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table(title=tool.progress_line(items, elapsed, rate), title_justify="left")
    for column in ("Partition", "Target", "Replicas", "New replicas in sync", "Copied", "", "State"):
        table.add_column(column)
    for p in items:
        if p.total_bytes:
            total, completed = p.total_bytes, p.copied_bytes or 0
        else:
            total, completed = max(len(p.joining), 1), len(p.in_sync) if p.joining else int(p.done)
        copied = "?" if p.total_bytes is None else f"{p.copied_bytes}/{p.total_bytes} B"
        table.add_row(
            str(p.tp),
            ",".join(map(str, p.target)),
            ",".join(map(str, p.replicas)),
            f"{len(p.in_sync)}/{len(p.joining)}",
            copied,
            ProgressBar(total=total, completed=completed, width=20),
            "done" if p.done else "catching up" if len(p.in_sync) < len(p.joining) else "moving leadership",
        )
    return table
