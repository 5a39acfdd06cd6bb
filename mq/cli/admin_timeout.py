"""``--timeout`` of the admin tools that ask the brokers once (delete-records, log-dirs, broker-api-versions): the
whole exchange, connecting included, finishes within it, or the tool fails with one line and exit code 1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from mq.cli.common import EXIT_USAGE, ToolError, admin_client_options
from mq.client.admin import AsyncAdmin

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0


def timeout_option() -> Callable[[F], F]:
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_TIMEOUT_S,
        show_default=True,
        help="Seconds to wait for the brokers' answers before failing.",
    )


def run_admin(
    bootstrap_server: str, command_config: str | None, timeout: float, work: Callable[[AsyncAdmin], Awaitable[T]]
) -> T:
    """Run ``work`` on an admin client of ``bootstrap_server`` (its request timeout defaults to ``timeout``; the
    ``--command-config`` file may set it lower); no answer within ``timeout`` seconds is a ToolError."""
    options: dict[str, Any] = {
        "request_timeout_ms": max(1, int(timeout * 1000)),
        **admin_client_options(command_config),
    }

    async def run() -> T:
        try:
            admin = AsyncAdmin(bootstrap_server, **options)
        except ValueError as exc:
            raise ToolError(str(exc), EXIT_USAGE) from None
        try:
            async with asyncio.timeout(timeout):
                return await work(admin)
        finally:
            await admin.close()

    try:
        return asyncio.run(run())
    except TimeoutError:
        raise ToolError(f"no answer from {bootstrap_server} within {timeout:g} s") from None
