"""Security keys of the tools' client properties files (--command-config, --producer.config): a TLS + SASL broker is
reached with them, and a bad value is one line of bad usage."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from client_fakes import SASL_PASSWORD, FakeBroker, metadata_handler, sasl_broker

from mq.cli.common import EXIT_USAGE, ToolError, admin_client_options
from mq.cli.main import cli
from mq.protocol.api_keys import ApiKey
from mq.tools.certs import make_certs
from tests.tls_helpers import server_context


@contextmanager
def broker_thread(broker: FakeBroker) -> Iterator[FakeBroker]:
    """``broker`` serving on a loop of its own thread, for a blocking tool run in the test's thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
        yield broker
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_command_config_reaches_a_sasl_ssl_broker(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    broker = sasl_broker(enabled=("SCRAM-SHA-256",), ssl_context=server_context(certs.broker))
    broker.handlers[ApiKey.METADATA] = metadata_handler([broker], {"orders": [0]})
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="alice" password="{SASL_PASSWORD}";\n'
        f"ssl.truststore.location={certs.ca}\n"
        "ssl.truststore.type=PEM\n"
    )
    with broker_thread(broker):
        result = CliRunner().invoke(
            cli,
            ["topics", "--bootstrap-server", f"127.0.0.1:{broker.port}", "--list", "--command-config", str(config)],
        )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["orders"]
    assert [b.mechanism for _, b in broker.of(ApiKey.SASL_HANDSHAKE)] == ["SCRAM-SHA-256"] * broker.connections


def test_admin_client_options_take_security_without_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\nrequest.timeout.ms=5\n"
    )
    options = admin_client_options(str(config))
    assert options["request_timeout_ms"] == 5
    assert (options["security"].protocol, options["security"].username) == ("SASL_PLAINTEXT", "u")
    assert capsys.readouterr().err == ""
    config.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(ToolError) as info:
        admin_client_options(str(config))
    assert info.value.exit_code == EXIT_USAGE
    assert str(info.value).startswith(f"security.protocol SASL_SSL needs sasl.mechanism in {config}")


@pytest.mark.parametrize(
    ("command", "config_flag"),
    [
        (["topics", "--list"], "--command-config"),
        (["console-producer", "--topic", "t"], "--producer.config"),
        (["console-consumer", "--topic", "t"], "--consumer.config"),
    ],
)
def test_bad_security_value_is_one_line_of_bad_usage(tmp_path: Path, command: list[str], config_flag: str) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.truststore.location=/nonexistent/truststore.pem\n")
    result = CliRunner().invoke(cli, [*command, "--bootstrap-server", "127.0.0.1:1", config_flag, str(config)])
    assert result.exit_code == EXIT_USAGE, result.output
    [line] = result.output.splitlines()
    assert line.startswith("Error: ")
    assert "cannot read ssl.truststore.location /nonexistent/truststore.pem" in line
