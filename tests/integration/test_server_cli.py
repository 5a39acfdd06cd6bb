"""``mq server start`` / ``stop`` as an operator runs them."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_daemon_start_and_stop(mq_command: list[str], tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'logs'}\n", encoding="utf-8")
    started = subprocess.run(
        [*mq_command, "server", "start", str(config), "--daemon"], capture_output=True, text=True, timeout=90
    )
    assert started.returncode == 0, started.stderr
    assert "started in the background" in started.stdout
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    stopped = subprocess.run(
        [*mq_command, "server", "stop", "--config", str(config)], capture_output=True, text=True, timeout=90
    )
    assert stopped.returncode == 0, stopped.stderr
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    again = subprocess.run(
        [*mq_command, "server", "stop", "--config", str(config)], capture_output=True, text=True, timeout=30
    )
    assert again.returncode == 1 and again.stderr.strip() == "Error: No mq server to stop"


def test_sigterm_shuts_down_cleanly(broker) -> None:
    assert broker.stop() == 0
    assert (broker.log_dir / ".kafka_cleanshutdown").exists()
    assert "stopped" in broker.stderr()


def test_bad_config_is_one_clear_line(mq_command: list[str], tmp_path: Path) -> None:
    config = tmp_path / "bad.properties"
    config.write_text("log.segmnt.bytes=10\n", encoding="utf-8")
    result = subprocess.run([*mq_command, "server", "start", str(config)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"Error: unknown broker config key 'log.segmnt.bytes' in {config}; did you mean log.segment.bytes?"
    )


def test_a_tls_listener_without_a_keystore_is_refused_not_served_in_plaintext(
    mq_command: list[str], tmp_path: Path
) -> None:
    args = [*mq_command, "server", "start", "--override", f"log.dirs={tmp_path / 'logs'}"]
    result = subprocess.run(
        [*args, "--override", "listeners=SSL://127.0.0.1:0"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "Error: listener SSL: a TLS listener needs ssl.keystore.location or ssl.keystore.certificate.chain"
    )
    assert not (tmp_path / "logs").exists()


def test_wrong_flag_is_a_usage_error(mq_command: list[str]) -> None:
    result = subprocess.run(
        [*mq_command, "server", "start", "--no-such-flag"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "Error: No such option '--no-such-flag'."


def _owned(directory: Path) -> tuple[set[str], dict[str, bytes]]:
    """What a refused start could spoil: the file names, the lock, pid file and meta.properties (the running broker
    itself rewrites its checkpoints now and then)."""
    names = {str(p.relative_to(directory)) for p in directory.rglob("*")}
    return names, {name: (directory / name).read_bytes() for name in (".lock", "mq-server.pid", "meta.properties")}


def test_a_second_start_is_refused_and_leaves_the_running_broker_alone(mq_command: list[str], tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    logs = tmp_path / "logs"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={logs}\n", encoding="utf-8")
    started = subprocess.run(
        [*mq_command, "server", "start", str(config), "--daemon"], capture_output=True, text=True, timeout=90
    )
    assert started.returncode == 0, started.stderr
    pid = (logs / "mq-server.pid").read_text().strip()
    try:
        before = _owned(logs)
        log_size = (tmp_path / "server.log").stat().st_size
        for daemon in ([], ["--daemon"]):
            again = subprocess.run(
                [*mq_command, "server", "start", str(config), *daemon], capture_output=True, text=True, timeout=90
            )
            assert again.returncode == 1
            [line] = again.stderr.splitlines()
            assert re.fullmatch(
                rf"Error: log directory {re.escape(str(logs))} is in use by mq server pid {pid} "
                r"\(started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)",
                line,
            ), line
            assert _owned(logs) == before
        written = (tmp_path / "server.log").read_bytes()[log_size:].decode()
        assert "shutting down" not in written and "Error" not in written, written
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        stopped = subprocess.run(
            [*mq_command, "server", "stop", "--config", str(config)], capture_output=True, text=True, timeout=90
        )
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"mq broker stopped (pid {pid})"
    assert not (logs / "mq-server.pid").exists()


def test_a_failed_daemon_start_says_why(mq_command: list[str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                *mq_command,
                "server",
                "start",
                "--daemon",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"log.dirs={tmp_path / 'logs'}",
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert result.returncode == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: the broker exited with code 1 during start-up: ")
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line
