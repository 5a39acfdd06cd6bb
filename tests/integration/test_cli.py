"""The installed ``mq`` command, run as a user runs it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mq.cli.main import COMMANDS


def run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)


def test_help_lists_every_command_with_one_line(mq_command: list[str]) -> None:
    result = run(mq_command, "--help")
    assert result.returncode == 0
    for name, (_, summary) in COMMANDS.items():
        assert f"{name}" in result.stdout
        assert summary.split()[0] in result.stdout


def test_every_command_has_help(mq_command: list[str]) -> None:
    for name in COMMANDS:
        result = run(mq_command, name, "--help")
        assert result.returncode == 0, result.stderr
        assert "Usage:" in result.stdout


def test_version(mq_command: list[str]) -> None:
    result = run(mq_command, "--version")
    assert result.returncode == 0
    assert result.stdout.startswith("mq, version 0.")


def test_unknown_command_is_a_usage_error(mq_command: list[str]) -> None:
    result = run(mq_command, "no-such-tool")
    assert result.returncode == 2
    assert "No such command 'no-such-tool'" in result.stderr


ADMIN_COMMANDS = {
    "topics": (["topics", "--list"], ["--timeout", "2"]),
    "topics-describe": (["topics", "--describe", "--topic", "t"], ["--timeout", "2"]),
    "consumer-groups": (["consumer-groups", "--list"], ["--timeout", "2000"]),  # Kafka's --timeout is in ms
    "consumer-groups-describe": (["consumer-groups", "--describe", "--group", "g"], ["--timeout", "2000"]),
    "get-offsets": (["get-offsets", "--topic", "t"], ["--timeout", "2"]),
    "leader-election": (
        ["leader-election", "--election-type", "preferred", "--all-topic-partitions"],
        ["--timeout", "2"],
    ),
    "preferred-replica-election": (["preferred-replica-election"], ["--timeout", "2"]),
    "consumer-offset-checker": (["consumer-offset-checker", "--group", "g"], ["--timeout", "2"]),
    "reassign-partitions": (["reassign-partitions", "--list"], []),  # Kafka's --timeout means something else
    "configs": (["configs", "--describe", "--topic", "t"], ["--timeout", "2"]),
    "acls": (["acls", "--list"], ["--timeout", "2"]),
    "delete-records": (["delete-records", "--offset-json-file", "OFFSETS"], ["--timeout", "2"]),
    "log-dirs": (["log-dirs", "--describe"], ["--timeout", "2"]),
    "broker-api-versions": (["broker-api-versions"], ["--timeout", "2"]),
    "server-status": (["server", "status"], ["--timeout", "2"]),
    "monitor": (["monitor", "--once", "--rules", "RULES"], ["--timeout", "2"]),
}
"""Every admin command: its arguments (OFFSETS: a delete-records offset file, RULES: a monitor rules file), and its
flag for a 2 s bound (none: --command-config's bound only)."""


@pytest.fixture
def silent_server() -> Iterator[str]:
    """host:port of a server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for connection in accepted:
        connection.close()


@pytest.mark.slow
@pytest.mark.parametrize("bound", ["flag", "command-config"])
def test_admin_commands_fail_within_their_bound_when_the_broker_never_answers(
    mq_command: list[str], silent_server: str, bound: str, tmp_path: Path
) -> None:
    properties = tmp_path / "admin.properties"
    properties.write_text("default.api.timeout.ms=2000\nrequest.timeout.ms=1000\nclient.id=ops\n", encoding="utf-8")
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}], "version": 1}', encoding="utf-8")
    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": [{"name": "o", "metric": "offline_partitions", "threshold": 0}]}', encoding="utf-8")
    files = {"OFFSETS": str(offsets), "RULES": str(rules)}
    runs = {
        name: [*(files.get(arg, arg) for arg in args), "--bootstrap-server", silent_server]
        + (flag if bound == "flag" else [])
        + (["--command-config", str(properties)] if bound == "command-config" or not flag else [])
        for name, (args, flag) in ADMIN_COMMANDS.items()
    }

    def timed(args: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.monotonic()
        result = subprocess.run([*mq_command, *args], capture_output=True, text=True, timeout=120)
        return result, time.monotonic() - started

    with ThreadPoolExecutor(3) as pool:
        results = dict(zip(runs, pool.map(timed, runs.values()), strict=True))
    for name, (result, elapsed) in results.items():
        assert result.returncode == 1, (name, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, (name, result.stderr)
        assert f"waiting for {silent_server} (no answer to ApiVersions)" in lines[0], name
        # the request timeout and the retries alone would wait minutes; the bound is 2 s (5 s for
        # consumer-groups, whose --timeout default wins over the file as in Kafka) plus process start-up
        assert elapsed < 30, (name, elapsed)
