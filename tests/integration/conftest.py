"""Fixtures for tests that run real processes on free loopback ports: ``mq server start`` as a user starts it,
and ZooKeeper from the Debian package."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

EVENT_LOOP_OVERRIDE = [f"event.loop={loop}"] if (loop := os.environ.get("MQ_TEST_EVENT_LOOP")) else []
"""The brokers' event loop is the configured default unless MQ_TEST_EVENT_LOOP names one (uvloop or asyncio)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortTakenError(RuntimeError):
    """The broker could not listen on its port: another process took it."""


FAILED = pytest.StashKey[bool]()
"""Set on a test item whose call failed (its brokers' logs are then printed)."""

LOG_TAIL_LINES = 150
"""Lines of each broker's log printed after a failed test."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@dataclass
class BrokerProcess:
    """One broker process with its own log directory; ``start``/``stop``/``kill`` as an operator would."""

    command: list[str]
    data_dir: Path
    port: int = field(default_factory=free_port)
    overrides: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    started: bool = False
    """Whether it has listened once (its port is then its own: a restart keeps it)."""

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
        """Start and wait until it listens. A first start whose port another process took meanwhile (``free_port``
        only found it free) is retried on a new port."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"the broker on port {self.port} is already running")  # a second would be left behind
        for _ in range(3):
            try:
                return self._start(timeout)
            except PortTakenError:
                if self.started:
                    raise
                self.port = free_port()
        return self._start(timeout)

    def _start(self, timeout: float) -> BrokerProcess:
        args = [*self.command, "server", "start"]
        for item in [
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            f"log.dirs={self.log_dir}",
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.replication.factor=1",
            "controlled.shutdown.retry.backoff.ms=500",  # a stopping cluster's last brokers retry without waiting 5 s
            *EVENT_LOOP_OVERRIDE,
            *self.overrides,
        ]:
            args += ["--override", item]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "ab") as err:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=self.data_dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                text = self.stderr_path.read_text()
                failure = PortTakenError if text.rstrip().endswith("Address already in use") else RuntimeError
                raise failure(f"broker exited with {self.process.returncode}:\n{text}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                self.started = True
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"broker did not listen within {timeout}s:\n{self.stderr_path.read_text()}")

    def terminate(self) -> None:
        """Send SIGTERM (a clean shutdown begins) without waiting for it."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        assert self.process is not None
        self.terminate()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()  # leave no broker behind, then report the hang
            self.process.wait(10)
            self.process = None
            raise
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
def broker_factory(
    mq_command: list[str], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., BrokerProcess]]:
    """Makes (unstarted) broker processes; all still running are stopped after the test, all at once (one at a time,
    the last brokers of a cluster wait out controlled-shutdown retries for partitions nobody else can lead). After a
    failed test, the end of each broker's log is printed (pytest shows it with the failure)."""
    made: list[BrokerProcess] = []

    def make(name: str = "broker", overrides: list[str] | None = None) -> BrokerProcess:
        process = BrokerProcess(mq_command, tmp_path / name, overrides=list(overrides or []))
        made.append(process)
        return process

    yield make
    running = [process for process in made if process.process is not None]
    for process in running:
        process.terminate()
    for process in running:
        process.stop()
    if request.node.stash.get(FAILED, False):
        for process in made:
            if process.stderr_path.exists():
                lines = process.stderr().splitlines()[-LOG_TAIL_LINES:]
                print(f"--- {process.data_dir.name} ({process.bootstrap}): the last {len(lines)} lines of its log ---")
                print("\n".join(lines))


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A standalone broker process on a free port, stopped cleanly after the test."""
    return broker_factory().start()


ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


@dataclass
class ZooKeeperProcess:
    """A standalone ZooKeeper from the Debian package, on a free loopback port with its own data dir; ``settings``
    are added to its zoo.cfg (e.g. ``maxSessionTimeout``, 20 ticks = 10 s by default)."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    settings: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ZooKeeperProcess:
        if not ZOOKEEPER_JAR.exists():
            pytest.fail("ZooKeeper is not installed: scripts/test.sh installs the Debian package zookeeper")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "tickTime=500\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            "minSessionTimeout=1000\n"
            "forceSync=no\n" + "".join(f"{key}={value}\n" for key, value in self.settings.items()),
            encoding="utf-8",
        )
        classpath = f"{ZOOKEEPER_JAR}:/usr/share/java/slf4j-simple.jar"
        with open(self.data_dir / "zookeeper.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-cp",
                    classpath,
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    str(config),
                ],
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"srvr")
                    if b"Mode:" in s.recv(1024):
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("ZooKeeper did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper for the test session; each test uses its own chroot."""
    process = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper")).start()
    yield process
    process.stop()


@pytest.fixture
def private_zookeeper(tmp_path: Path) -> Iterator[Callable[..., ZooKeeperProcess]]:
    """Starts ZooKeepers of this test alone (``settings`` go to zoo.cfg), for tests that stop them with SIGSTOP:
    each gets SIGCONT before it is stopped after the test."""
    started: list[ZooKeeperProcess] = []

    def start(settings: dict[str, str] | None = None) -> ZooKeeperProcess:
        process = ZooKeeperProcess(tmp_path / f"private-zookeeper-{len(started)}", settings=dict(settings or {}))
        started.append(process)
        return process.start()

    yield start
    for process in started:
        if process.process is not None:
            os.kill(process.process.pid, signal.SIGCONT)
            process.stop()


def start_cluster(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess], overrides: list[str]
) -> tuple[str, list[BrokerProcess]]:
    """Brokers 1, 2 and 3 on the session's ZooKeeper under a fresh chroot, with 4 s ZooKeeper sessions (a killed
    broker is noticed within seconds) and ``overrides``. Returns the chrooted connect string and the brokers
    (index = id - 1)."""
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    brokers = [
        broker_factory(
            f"broker{i}",
            [f"zookeeper.connect={connect}", f"broker.id={i}", "zookeeper.session.timeout.ms=4000", *overrides],
        ).start()
        for i in (1, 2, 3)
    ]
    return connect, brokers


@pytest.fixture
def cluster_on(
    broker_factory: Callable[..., BrokerProcess],
) -> Callable[[ZooKeeperProcess, list[str]], tuple[str, list[BrokerProcess]]]:
    """``start_cluster`` on a given ZooKeeper (e.g. a private one) with ``overrides``."""
    return lambda zookeeper, overrides: start_cluster(zookeeper, broker_factory, overrides)


@pytest.fixture
def cluster(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> tuple[str, list[BrokerProcess]]:
    """The 3-broker cluster of ``start_cluster`` with the default configuration."""
    return start_cluster(zookeeper, broker_factory, [])


@pytest.fixture
def throttled_cluster(
    zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> Iterator[tuple[list[BrokerProcess], KafkaZkClient]]:
    """The 3-broker cluster for replication throttle tests: quota windows of 2 x 1 s, so a rate takes effect within
    about a second. Yields the brokers and a ZooKeeper client on their chroot, once all three are registered."""
    connect, brokers = start_cluster(
        zookeeper,
        broker_factory,
        ["replication.quota.window.num=2", "replication.quota.window.size.seconds=1"],
    )
    store = ZooKeeperStore(connect)
    zk = KafkaZkClient(store)
    assert wait_for(lambda: sorted(zk.get_all_brokers()) == [1, 2, 3])
    yield brokers, zk
    store.close()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession with the mq data source registered, one per test module (stopped after it)."""
    from mq.spark import session

    spark_session = session("local[2]", "mq-tests")
    yield spark_session
    spark_session.stop()
