"""Kafka 0.8 runbooks as an operator types them: one ZooKeeper from the Debian package and two brokers started
with ``mq server start`` from copies of the seed-era server.properties (only ports, log dirs and broker.id
changed), per test module. Each runbook line runs through the shell as written, ``mq <tool>`` standing for
``bin/kafka-<tool>.sh`` / ``bin/kafka-run-class.sh kafka.tools.<Tool>``; ``{zk}``, ``{broker0}``, ``{broker1}`` and
``{dir}`` stand for the addresses and working directory of this cluster (``localhost:2181``, ``localhost:9092``, ...
in the runbooks)."""

from __future__ import annotations

import importlib.util
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SEED_ERA = Path(__file__).parents[1] / "data"
INTEGRATION = Path(__file__).parents[1] / "integration"


def _integration_helpers() -> Any:
    """tests/integration/conftest.py as a module of its own name (its ZooKeeperProcess and free_port)."""
    if str(INTEGRATION) not in sys.path:
        sys.path.insert(0, str(INTEGRATION))  # its own imports (waiting) resolve there
    spec = importlib.util.spec_from_file_location("integration_process_helpers", INTEGRATION / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


HELPERS = _integration_helpers()


def seed_copy(name: str, target: Path, replacements: dict[str, str]) -> Path:
    """Copy the seed-era ``name`` (server/producer/consumer.properties) to ``target``, replacing whole lines."""
    lines = (SEED_ERA / f"seed_era_{name}").read_text(encoding="utf-8").splitlines()
    for old, new in replacements.items():
        assert old in lines, f"{old!r} is not a line of the seed-era {name}"
        lines[lines.index(old)] = new
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


@dataclass
class SeedBroker:
    """A broker process started as ``mq server start <config>`` from a copy of the seed-era server.properties."""

    broker_id: int
    config: Path
    port: int
    log_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, mq: str, cwd: Path, timeout: float = 30.0) -> None:
        with open(cwd / f"server-{self.broker_id}.out", "ab") as out:
            self.process = subprocess.Popen(
                [mq, "server", "start", str(self.config)], stdout=out, stderr=subprocess.STDOUT, cwd=cwd
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (cwd / f"server-{self.broker_id}.out").read_text()
            if (self.log_dir / "meta.properties").exists() and listening(self.port):
                return
            time.sleep(0.05)
        raise RuntimeError(f"broker {self.broker_id} did not start")

    def kill(self) -> None:
        """``kill -9 <pid>`` of this broker (the quickstart's fault-tolerance step)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.process = None


def listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


class RunningLine:
    """A runbook line left running in the foreground (a console consumer): its stdout lines arrive on a queue;
    ``interrupt`` is the operator's ^C (SIGINT to its process group)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def read_lines(self, count: int, timeout: float = 30.0) -> list[str]:
        """The next ``count`` lines it prints (fewer if it prints no more within ``timeout``)."""
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while len(got) < count:
            try:
                got.append(self.lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        return got

    def interrupt(self, timeout: float = 30.0) -> tuple[int, str]:
        """^C: SIGINT to the command the shell runs (a terminal's foreground job; the shell itself waits for
        it); returns the line's exit code and standard error."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        assert children, "the line has already ended"
        for child in children:
            os.kill(int(child), signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise
        self._reader.join(5)
        return self.process.returncode, err


@dataclass
class Runbook:
    """One ZooKeeper and two seed-era brokers (ids 0 and 1, as the quickstart's first two servers), and the shell
    that runs runbook lines against them in ``dir``."""

    dir: Path
    zookeeper: Any
    brokers: list[SeedBroker]
    mq: str

    @property
    def zk(self) -> str:
        return self.zookeeper.connect  # type: ignore[no-any-return]

    def line(self, text: str) -> str:
        return text.format(zk=self.zk, broker0=self.brokers[0].address, broker1=self.brokers[1].address, dir=self.dir)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{Path(self.mq).parent}{os.pathsep}{os.environ['PATH']}"}

    def add_broker(self, broker_id: int) -> SeedBroker:
        """Start broker ``broker_id`` from ``config/server.properties`` (id 0) or a copy of it,
        ``config/server-<id>.properties``, with its own port and log dir."""
        port = HELPERS.free_port()
        log_dir = self.dir / f"kafka-logs-{broker_id}"
        name = "server.properties" if broker_id == 0 else f"server-{broker_id}.properties"
        config = seed_copy(
            "server.properties",
            self.dir / "config" / name,
            {
                "broker.id=0": f"broker.id={broker_id}",
                "port=9092": f"port={port}",
                "advertised.port=9092": f"advertised.port={port}",
                "log.dirs=/tmp/kafka-logs": f"log.dirs={log_dir}",
                "zookeeper.connect=127.0.0.1:2181": f"zookeeper.connect={self.zk}",
            },
        )
        broker = SeedBroker(broker_id, config, port, log_dir)
        self.brokers.append(broker)
        broker.start(self.mq, self.dir)
        return broker

    def sh(self, text: str, stdin: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run a runbook line to its end."""
        return subprocess.run(
            self.line(text),
            shell=True,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.dir,
            env=self.env,
        )

    def out(self, text: str, stdin: str | None = None) -> list[str]:
        """Run a line that must succeed; its stdout lines."""
        done = self.sh(text, stdin)
        assert done.returncode == 0, f"{self.line(text)}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        return done.stdout.splitlines()

    def start(self, text: str) -> RunningLine:
        """Start a line that runs until interrupted."""
        process = subprocess.Popen(
            self.line(text),
            shell=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.dir,
            env=self.env,
            start_new_session=True,
        )
        return RunningLine(process)


@pytest.fixture(scope="module")
def runbook(tmp_path_factory: pytest.TempPathFactory, mq_command: list[str]) -> Iterator[Runbook]:
    """ZooKeeper and the seed-era brokers 0 and 1 (``config/server.properties`` and ``config/server-1.properties``),
    killed after the module; ``config/producer.properties`` and ``config/consumer.properties`` are the seed-era
    client files with this cluster's addresses."""
    base = tmp_path_factory.mktemp("runbook")
    zookeeper = HELPERS.ZooKeeperProcess(base / "zookeeper").start()
    (base / "config").mkdir()
    book = Runbook(base, zookeeper, [], mq_command[0])
    try:
        book.add_broker(0)
        book.add_broker(1)
        seed_copy(
            "producer.properties",
            base / "config" / "producer.properties",
            {"metadata.broker.list=127.0.0.1:9092": book.line("metadata.broker.list={broker0},{broker1}")},
        )
        seed_copy(
            "consumer.properties",
            base / "config" / "consumer.properties",
            {"zookeeper.connect=127.0.0.1:2181": book.line("zookeeper.connect={zk}")},
        )
        yield book
    finally:
        for broker in book.brokers:  # a clean stop is not what these tests check: the last broker's controlled
            if broker.process is not None:  # shutdown would wait out the seed's 3 x 5 s retries
                broker.kill()
        zookeeper.stop()
