"""mq mirror's command line: usage errors are one stderr line and exit 2, before any connection."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mq.cli.main import cli


@pytest.fixture
def configs(tmp_path: Path) -> tuple[str, str]:
    consumer = tmp_path / "consumer.properties"
    consumer.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\n")
    producer = tmp_path / "producer.properties"
    producer.write_text("bootstrap.servers=127.0.0.1:2\n")
    return str(consumer), str(producer)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "Exactly one of whitelist or blacklist is required."),
        (["--whitelist", "a", "--message.handler", "nowhere"], "--message.handler must be module:function"),
        (["--whitelist", "a", "--message.handler.args", "x"], "--message.handler.args needs --message.handler"),
        (["--whitelist", "a", "--abort.on.send.failure", "maybe"], "--abort.on.send.failure must be true or false"),
        (["--whitelist", "a", "--consumer.config", "/no/such/file"], "cannot read /no/such/file"),
        (["--whitelist", "a", "--transactional.id.prefix", "p-"], "--transactional.id.prefix needs --exactly-once"),
    ],
)
def test_usage_errors(configs: tuple[str, str], extra: list[str], message: str) -> None:
    consumer, producer = configs
    result = CliRunner().invoke(cli, ["mirror", "--consumer.config", consumer, "--producer.config", producer, *extra])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(f"Error: {message}")


def test_check_compares_one_source(configs: tuple[str, str]) -> None:
    consumer, producer = configs
    argv = ["mirror", "--check", "--consumer.config", consumer, "--consumer.config", consumer]
    result = CliRunner().invoke(cli, [*argv, "--producer.config", producer, "--whitelist", "t"])
    assert result.exit_code == 2
    assert "--check compares one --consumer.config source with the target" in result.output


def test_mirror_is_listed() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert "mirror  " in result.output and "Continuously copy data between Kafka clusters." in result.output


def test_exactly_once_needs_group_sources(configs: tuple[str, str], tmp_path: Path) -> None:
    _, producer = configs
    zookeeper_source = tmp_path / "zk-consumer.properties"
    zookeeper_source.write_text("zookeeper.connect=127.0.0.1:1\ngroup.id=g\n")
    argv = ["mirror", "--consumer.config", str(zookeeper_source), "--producer.config", producer, "--whitelist", "t"]
    result = CliRunner().invoke(cli, [*argv, "--exactly-once"])
    assert result.exit_code == 2
    assert "--exactly-once needs sources with bootstrap.servers" in result.output
