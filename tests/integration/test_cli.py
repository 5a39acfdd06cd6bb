"""The installed ``mq`` command, run as a user runs it."""

from __future__ import annotations

import subprocess

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
