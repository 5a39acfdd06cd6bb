"""The admin tools that ask the brokers once (delete-records, log-dirs, broker-api-versions): the whole exchange,
connecting included, finishes within ``--timeout`` (``admin_settings``), or the tool fails with one line, exit 1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from mq.cli.common import EXIT_USAGE, ToolError, admin_settings
from mq.client.admin import AsyncAdmin
from mq.client.cluster import ApiTimeoutError

T = TypeVar("T")


def run_admin(
    bootstrap_server: str, command_config: str | None, timeout: float | None, work: Callable[[AsyncAdmin], Awaitable[T]]
) -> T:
    """Run ``work`` on an admin client of ``bootstrap_server``, bounded as a whole (connecting included) as
    ``admin_settings`` bounds one admin call; no answer within it is a ToolError naming what was awaited."""
    options = admin_settings(command_config, timeout)
    bound_ms = options.pop("api_timeout_ms")

    async def run() -> T:
        try:
            admin = AsyncAdmin(bootstrap_server, **options)
        except ValueError as exc:
            raise ToolError(str(exc), EXIT_USAGE) from None
        try:
            return await admin.cluster.bounded(work(admin), bound_ms)
        finally:
            await admin.close()

    try:
        return asyncio.run(run())
    except ApiTimeoutError as exc:
        raise ToolError(str(exc)) from None
