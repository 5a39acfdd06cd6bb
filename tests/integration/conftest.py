"""Fixtures for tests that run real processes: ``mq server start`` as a user starts it, on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class BrokerProcess:
    """One broker process with its own log directory; ``start``/``stop``/``kill`` as an operator would."""

    command: list[str]
    data_dir: Path
    port: int = field(default_factory=free_port)
    overrides: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "kafka-logs"

    @property
    def stderr_path(self) -> Path:
        return self.data_dir / "broker.stderr"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [*self.command, "server", "start"]
        for item in [
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            f"log.dirs={self.log_dir}",
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.replication.factor=1",
            *self.overrides,
        ]:
            args += ["--override", item]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "ab") as err:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=self.data_dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.stderr_path.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"broker did not listen within {timeout}s:\n{self.stderr_path.read_text()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self.process = None
        return code

    def kill(self) -> None:
        """kill -9: no shutdown at all."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.process = None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture
def broker_factory(mq_command: list[str], tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Makes (unstarted) broker processes; all still running are stopped after the test."""
    made: list[BrokerProcess] = []

    def make(name: str = "broker", overrides: list[str] | None = None) -> BrokerProcess:
        process = BrokerProcess(mq_command, tmp_path / name, overrides=list(overrides or []))
        made.append(process)
        return process

    yield make
    for process in made:
        if process.process is not None:
            process.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A standalone broker process on a free port, stopped cleanly after the test."""
    return broker_factory().start()
