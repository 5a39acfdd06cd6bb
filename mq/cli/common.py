"""Conventions shared by every ``mq`` command: output format, one-line errors, exit codes.

Exit codes: 0 success, 1 the operation failed, 2 bad usage (click's own usage errors also exit 2).
A failure prints one line ``Error: <message>`` on stderr; ``-v`` / ``MQ_DEBUG=1`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from mq.client.security import SECURITY_KEYS, client_security
from mq.config import parse_properties
from mq.errors import ConfigError, KafkaError
from mq.zk.store import MetadataStore, StoreError

EXIT_FAILED = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


class ToolError(Exception):
    """A failure a command reports in one line; ``exit_code`` is 1 (failed) or 2 (usage)."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def default_format() -> str:
    """``table`` on a terminal, ``text`` when piped."""
    return "table" if sys.stdout.isatty() else "text"


def format_option(choices: tuple[str, ...] = ("text", "table", "json")) -> Callable[[F], F]:
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(choices),
        default=None,
        help="Output: text (Kafka's line formats), table (rich), json. Default: table on a terminal, text when piped.",
    )


def verbose_option() -> Callable[[F], F]:
    return click.option("-v", "--verbose", is_flag=True, help="Print a traceback on failure.")


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn ToolError, KafkaError, metadata store errors and OSError into one stderr line and the exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (ToolError, KafkaError, StoreError, OSError) as exc:
            if kwargs.get("verbose") or os.environ.get("MQ_DEBUG"):
                traceback.print_exc()
            code = exc.exit_code if isinstance(exc, ToolError) else EXIT_FAILED
            click.echo(f"Error: {exc}", err=True)
            sys.exit(code)

    return wrapper


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A rich table of string cells on standard output."""
    from rich.console import Console
    from rich.table import Table

    table = Table(*header)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def echo_json(document: Any) -> None:
    click.echo(json.dumps(document, separators=(",", ":")))


ADMIN_CLIENT_KEYS = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "default.api.timeout.ms": ("api_timeout_ms", int),
}
"""Admin client properties (``--command-config`` / ``--admin.config``) mq's admin client acts on, besides the
security keys (``mq.client.security``); the others are accepted and reported as ignored."""

DEFAULT_ADMIN_TIMEOUT_S = 30.0
"""How long an admin command waits for the brokers by default (Kafka's admin client: 60 s)."""


def admin_client_options(path: str | None) -> dict[str, Any]:
    """Keyword arguments for ``SyncAdmin`` from a Kafka-style admin client properties file (``security`` from its
    security keys); a bad value is bad usage."""
    if path is None:
        return {}
    properties = client_properties_file(path)
    try:
        options: dict[str, Any] = {"security": client_security(properties, path)}
    except ConfigError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None
    for key, value in properties.items():
        if key in ADMIN_CLIENT_KEYS:
            name, kind = ADMIN_CLIENT_KEYS[key]
            try:
                options[name] = kind(value)
            except ValueError:
                raise ToolError(f"invalid value '{value}' for {key} in {path}", EXIT_USAGE) from None
        elif key not in ("bootstrap.servers", "isolation.level") and key not in SECURITY_KEYS:
            click.echo(f"Warning: ignoring admin client property {key}", err=True)
    return options


def isolation_level(command_config: str | None) -> str:
    """The ``isolation.level`` of a ``--command-config`` file (Kafka's tools read end offsets with a consumer of its
    properties): ``read_committed`` makes the latest offset the last stable offset. A bad value is bad usage."""
    from mq.client.consumer import ISOLATION_LEVELS

    if command_config is None:
        return "read_uncommitted"
    value = client_properties_file(command_config).get("isolation.level", "read_uncommitted").strip()
    if value not in ISOLATION_LEVELS:
        raise ToolError(f"invalid value '{value}' for isolation.level in {command_config}", EXIT_USAGE)
    return value


def command_config_option(*names: str) -> Callable[[F], F]:
    """``--command-config FILE`` (or Kafka's other names for it, e.g. ``--admin.config``) as ``command_config``."""
    return click.option(
        *(names or ("--command-config",)),
        "command_config",
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="Admin client properties: request.timeout.ms, default.api.timeout.ms, client.id, and security "
        "(security.protocol, sasl.*, ssl.*).",
    )


def timeout_option() -> Callable[[F], F]:
    """``--timeout SECONDS`` as ``timeout``: the bound of each admin call, retries included."""
    return click.option(
        "--timeout",
        "timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        help="Fail when the brokers have not answered within this many seconds (default: default.api.timeout.ms "
        f"of --command-config, else {DEFAULT_ADMIN_TIMEOUT_S:g}).",
    )


def admin_options(*config_names: str) -> Callable[[F], F]:
    """``--command-config`` (named ``config_names`` if given) and ``--timeout SECONDS``: see ``admin_settings``."""

    def decorate(fn: F) -> F:
        return command_config_option(*config_names)(timeout_option()(fn))

    return decorate


def admin_settings(
    command_config: str | None, timeout_s: float | None = None, *, default_request_timeout_ms: int | None = None
) -> dict[str, Any]:
    """``SyncAdmin`` keyword arguments for an admin command: the properties of ``command_config``; each call is
    bounded by ``timeout_s`` when given, else by the file's ``default.api.timeout.ms``, else by 30 s, and a single
    request by the file's ``request.timeout.ms``, else by ``default_request_timeout_ms``, else by that bound."""
    options = admin_client_options(command_config)
    if timeout_s is not None:
        options["api_timeout_ms"] = max(1, round(timeout_s * 1000))
    options.setdefault("api_timeout_ms", round(DEFAULT_ADMIN_TIMEOUT_S * 1000))
    options.setdefault("request_timeout_ms", default_request_timeout_ms or options["api_timeout_ms"])
    return options


def client_properties_file(path: str) -> dict[str, str]:
    """A Kafka client properties file (``--producer.config``, ``--consumer.config``); unreadable or malformed is
    bad usage."""
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"), path)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}", EXIT_USAGE) from None
    except ConfigError as exc:
        raise ToolError(str(exc), EXIT_USAGE) from None


@contextlib.contextmanager
def zookeeper_store(connect: str) -> Iterator[MetadataStore]:
    """A ZooKeeper session for one command, closed at the end."""
    from mq.zk.zk_store import ZooKeeperStore

    store = ZooKeeperStore(connect, session_timeout_ms=30000)
    try:
        yield store
    finally:
        store.close()


def bootstrap_from_zookeeper(connect: str) -> str:
    """``host:port,...`` of the brokers registered in ``/brokers/ids`` of a ZooKeeper-mode cluster."""
    from mq.zk.kafka_zk_client import KafkaZkClient
    from mq.zk.zk_store import ZooKeeperStore

    store = ZooKeeperStore(connect, session_timeout_ms=30000)
    try:
        bootstrap = KafkaZkClient(store).bootstrap_servers()
    finally:
        store.close()
    if not bootstrap:
        raise ToolError(f"Exiting due to: no brokers are registered in {connect}.")
    return bootstrap
