"""``mq server start`` / ``stop`` / ``status``: run a broker in the foreground or as a daemon, stop it by signal,
report its health."""

from __future__ import annotations

import asyncio
import configparser
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from mq.cli.common import (
    DEFAULT_ADMIN_TIMEOUT_S,
    EXIT_FAILED,
    EXIT_USAGE,
    ToolError,
    admin_options,
    echo_json,
    handle_errors,
)
from mq.config import BrokerConfig
from mq.server.logging_config import LOG_FORMAT, LOGGING_CONFIG, configure

DEFAULT_CONFIG = "config/server.properties"


def _load(config_file: str | None, overrides: tuple[str, ...], quiet: bool = False) -> BrokerConfig:
    """The broker's config; its warnings (renamed and unused keys) are logged unless ``quiet``."""
    path = config_file if config_file is not None else (DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None)
    config_log = logging.getLogger("mq.config")
    level = config_log.level
    if quiet:
        config_log.setLevel(logging.ERROR)
    try:
        return BrokerConfig.load(path, overrides)
    finally:
        config_log.setLevel(level)


def _configure_logging(log_file: str | None, log_dir: str | None, logging_config: str | None) -> None:
    """stderr only, the files of the logging config in ``log_dir``, and ``log_file`` (all of the root's lines)."""
    try:
        configure(log_dir, logging_config)
    except (OSError, ValueError, KeyError, RuntimeError, configparser.Error) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ToolError(f"cannot set up logging: {first_line}") from None
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        logging.root.addHandler(handler)


@click.group("server")
def server() -> None:
    """Run an mq broker."""


@server.command("start")
@click.argument("config_file", required=False, type=click.Path(dir_okay=False))
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="Set a broker key (repeatable).")
@click.option("--daemon", is_flag=True, help="Detach and run in the background.")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Also log to this file (daemon default: server.log).")
@click.option(
    "--log-dir",
    envvar="LOG_DIR",
    type=click.Path(file_okay=False),
    help="Write server.log, controller.log, state-change.log, ... here (env LOG_DIR; default: stderr only).",
)
@click.option(
    "--logging-config",
    type=click.Path(dir_okay=False, exists=True),
    help=f"The logging config file used with --log-dir (default: {LOGGING_CONFIG} if present, else the shipped one).",
)
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def start(
    config_file: str | None,
    overrides: tuple[str, ...],
    daemon: bool,
    log_file: str | None,
    log_dir: str | None,
    logging_config: str | None,
    verbose: bool,
) -> None:
    """Start a broker with CONFIG_FILE (default: config/server.properties, else built-in defaults).

    Runs in the foreground until SIGTERM or SIGINT, then shuts down cleanly. A log directory another broker holds
    refuses the start with that broker's pid, and the running broker's files are left untouched. --daemon returns
    once the broker is up, or prints why it could not start. Exit codes: 0 after a clean shutdown (daemon: once
    started), 1 if the broker could not start, 2 for bad usage. With --log-dir (or LOG_DIR) the logging config file
    lays out Kafka's log files there: server.log, controller.log, state-change.log, log-cleaner.log, kafka-request.log,
    kafka-authorizer.log (a daemon's standard error goes to server.out there).
    """
    if daemon:
        _configure_logging(None, None, None)  # before the config, whose warnings are logged
        config = _load(config_file, overrides)
        default_log = Path(log_dir) / "server.out" if log_dir else config.log_dir_paths[0].parent / "server.log"
        logging_args = ["--log-dir", log_dir] if log_dir else []
        logging_args += ["--logging-config", logging_config] if logging_config else []
        _start_daemon(config_file, overrides, log_file or str(default_log), config, logging_args)
        return
    _configure_logging(log_file, log_dir, logging_config)
    config = _load(config_file, overrides)
    from mq.server.allocator import keep_request_memory
    from mq.server.broker import new_event_loop, run
    from mq.server.collector import tune_collector

    keep_request_memory()
    tune_collector()
    with asyncio.Runner(loop_factory=lambda: new_event_loop(config.event_loop)) as runner:
        runner.run(run(config))


def _start_daemon(
    config_file: str | None, overrides: tuple[str, ...], log_file: str, config: BrokerConfig, logging_args: list[str]
) -> None:
    """Start the broker detached, its standard error (logs and a failure's ``Error:`` line) appended to
    ``log_file``; return once it wrote its pid file, or fail with the first error line it logged."""
    from mq.server.broker import pid_file
    from mq.storage.log_dir_lock import check_free

    check_free(config.log_dir_paths)  # refused here, a second start writes nothing, not even to the log file
    command = [sys.executable, "-m", "mq", "server", "start"]
    command += [config_file] if config_file else []
    for item in overrides:
        command += ["--override", item]
    command += logging_args
    log_path = Path(log_file)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    marker = pid_file(config)
    with open(os.devnull, "rb") as stdin, open(log_path, "ab") as log:
        start_offset = log.tell()
        process = subprocess.Popen(command, stdin=stdin, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            cause = _first_error(log_path, start_offset)
            detail = f": {cause}" if cause else ""
            raise ToolError(
                f"the broker exited with code {process.returncode} during start-up{detail} (see {log_file})"
            )
        if marker.exists() and marker.read_text().strip() == str(process.pid):
            click.echo(f"mq broker started in the background (pid {process.pid}, log {log_file})")
            return
        time.sleep(0.1)
    raise ToolError(f"the broker did not finish starting within 60 s; see {log_file}")


def _first_error(log_path: Path, offset: int) -> str | None:
    """The first ``Error: ...`` line (the one-line failure) or ERROR log line written after ``offset``."""
    with open(log_path, "rb") as log:
        log.seek(offset)
        lines = log.read().decode("utf-8", "replace").splitlines()
    for line in lines:
        if line.startswith("Error: "):
            return line.removeprefix("Error: ")
    return next((line for line in lines if " ERROR " in line), None)


@server.command("stop")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="The broker's config file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="As given to start.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for a clean shutdown.")
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def stop(config_file: str | None, overrides: tuple[str, ...], timeout: float, verbose: bool) -> None:
    """Send SIGTERM to the broker of this config and wait for its clean shutdown.

    Exit codes: 0 once it has stopped, 1 if no broker runs for this config or it did not stop in time.
    """
    from mq.server.broker import pid_file

    config = _load(config_file, overrides, quiet=True)
    marker = pid_file(config)
    pid: int | None
    try:
        pid = int(marker.read_text().strip())
    except (FileNotFoundError, ValueError):
        pid = _lock_holder(config)
    if pid is None:
        raise ToolError("No mq server to stop")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        marker.unlink(missing_ok=True)
        raise ToolError("No mq server to stop") from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            click.echo(f"mq broker stopped (pid {pid})")
            return
        time.sleep(0.1)
    raise ToolError(f"the broker (pid {pid}) did not stop within {timeout:g} s")


def _lock_holder(config: BrokerConfig) -> int | None:
    """The pid an mq broker holding the config's log dirs recorded in their lock (when its pid file is gone)."""
    from mq.storage.log_dir_lock import LogDirInUseError, check_free

    try:
        check_free(config.log_dir_paths)
    except LogDirInUseError as exc:
        pid = exc.holder.get("pid", "")
        return int(pid) if pid.isdigit() else None
    return None


@server.command("status")
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]", help="A remote broker (default: the local config's).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="The local broker's config file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="As given to start.")
@click.option("--metrics-url", metavar="URL", help="The broker's Prometheus metrics page, for uptime and connections.")
@click.option("--format", "output_format", type=click.Choice(("text", "json")), default="text", show_default=True)
@admin_options()
@click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")
@handle_errors
def status(
    bootstrap_server: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    metrics_url: str | None,
    output_format: str,
    command_config: str | None,
    timeout: float | None,
    verbose: bool,
) -> None:
    """Print the health of a broker and its cluster: broker ids, controller, mq version, uptime, connections,
    partitions led, under-replicated (ISR smaller than the replicas) and offline (no leader) partitions, and the size
    of each log directory (with its free space when it is on this host).

    Without --bootstrap-server the broker of the local config (--config, default config/server.properties) is asked
    on its listener (it must be running: its pid file or log dir lock names a live process), and its process tells
    the version, uptime (its log dir's lock record) and established connections; a remote broker's uptime and connections come from --metrics-url only, else read "unknown".

    Exit codes: 0 healthy, 1 a partition is offline or under-replicated or the broker did not answer within
    --timeout, 2 bad usage.
    """
    import datetime

    from mq.cli.admin_timeout import run_admin
    from mq.cli.main import package_version
    from mq.server.broker import pid_file, stored_broker_id
    from mq.tools import server_status as tool

    local = None
    process = None
    connections = None
    if bootstrap_server is None:
        config = _load(config_file, overrides, quiet=True)
        listener = config.bound_listeners()[0]
        if listener.port == 0:
            raise ToolError("the config's listener has port 0: give --bootstrap-server", EXIT_USAGE)
        bootstrap_server = f"{listener.host or '127.0.0.1'}:{listener.port}"
        process = tool.local_process(pid_file(config), config.log_dir_paths)
        if process is None:
            raise ToolError(f"No mq server runs for this config (no live pid in {pid_file(config)})")
        local = config
        connections = tool.established_connections(process.pid, listener.port)  # before this command's connection
    cluster, topics, dirs = run_admin(bootstrap_server, command_config, timeout, tool.query)
    started = None if process is None else process.started
    if metrics_url is not None:
        try:
            start_seconds, metric_connections = tool.read_metrics(metrics_url, timeout or DEFAULT_ADMIN_TIMEOUT_S)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot read {metrics_url}: {exc}") from None
        if start_seconds is not None:
            started = datetime.datetime.fromtimestamp(start_seconds, datetime.UTC).replace(microsecond=0)
        connections = metric_connections if metric_connections is not None else connections
    result = tool.ServerStatus(
        cluster.cluster_id,
        cluster.controller_id,
        [b.node_id for b in cluster.brokers],
        tool.partition_health(topics),
        tool.log_dir_usage(dirs, local=local is not None),
        version=None if local is None else package_version(),
        started=started,
        connections=connections,
        local_broker=None
        if local is None
        else (local.broker_id if local.broker_id >= 0 else stored_broker_id(local.log_dir_paths)),
    )
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    if output_format == "json":
        echo_json(tool.status_document(result, now))
    else:
        for line in tool.status_lines(result, now):
            click.echo(line)
    if not result.healthy:
        sys.exit(EXIT_FAILED)
