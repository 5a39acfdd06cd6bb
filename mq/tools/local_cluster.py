"""A local cluster for development: one ZooKeeper (Debian package) and N ``mq server`` brokers on loopback.

Everything lives under one base directory (default ``./mq-cluster``)::

    cluster.json                 ports and process ids (the state ``stop`` and ``status`` act on)
    zookeeper/zoo.cfg            standalone ZooKeeper config; data in zookeeper/data, output in zookeeper/zookeeper.log
    broker-<id>/kafka-logs       the broker's log dir (meta.properties, partitions, checkpoints)
    broker-<id>/server.log       the broker's stderr (its log)

Brokers get ``broker.id`` 1..N, ``zookeeper.connect`` to the local ZooKeeper and their own
``listeners=PLAINTEXT://127.0.0.1:<port>``, and ``metrics.listener=http://127.0.0.1:<metrics_port>`` (recorded in
``cluster.json``; an ``--override`` of it wins). Processes run in their own sessions, so they outlive the command
that started them. A stopped cluster started again keeps its data and ports.

    python -m mq.tools.local_cluster start N [--base-dir DIR] [--port P] [--zookeeper-port P] [--override k=v]
    python -m mq.tools.local_cluster stop|status [N] [--base-dir DIR]

Exit codes: 0 on success (``status``: everything recorded runs), 1 on a failed operation (``status``: something
recorded is not running), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.errors import KafkaError
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

ZOOKEEPER_CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
STATE_FILE = "cluster.json"
DEFAULT_BASE_DIR = "mq-cluster"


class ClusterError(Exception):
    """A failed operation, worded for the operator."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie has exited; our own exited children are reaped here)."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
        return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except (ProcessLookupError, FileNotFoundError):
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class BrokerState:
    broker_id: int
    port: int
    pid: int = 0
    metrics_port: int = 0
    """Its ``metrics.listener`` port (chosen free at its first start; 0 until then)."""


@dataclass
class ClusterState:
    """What ``cluster.json`` records; a pid of 0 means not started by us (or stopped)."""

    zookeeper_port: int
    brokers: list[BrokerState]
    zookeeper_pid: int = 0


@dataclass
class ProcessStatus:
    name: str
    address: str
    pid: int
    running: bool


@dataclass
class LocalCluster:
    """The cluster under ``base_dir``. ``start``/``stop``/``status`` as the command does; ``kill_broker`` and
    ``start_broker`` for failover experiments. Process identity is checked by command line, never by pid alone."""

    base_dir: Path
    overrides: list[str] = field(default_factory=list)
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)

    @property
    def state_path(self) -> Path:
        return self.base_dir / STATE_FILE

    @property
    def zookeeper_dir(self) -> Path:
        return self.base_dir / "zookeeper"

    def broker_dir(self, broker_id: int) -> Path:
        return self.base_dir / f"broker-{broker_id}"

    def load(self) -> ClusterState | None:
        try:
            raw = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        brokers = [BrokerState(**b) for b in raw.pop("brokers")]
        return ClusterState(brokers=brokers, **raw)

    def save(self, state: ClusterState) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        temp = self.state_path.with_suffix(".tmp")
        temp.write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
        temp.replace(self.state_path)

    def state(self) -> ClusterState:
        state = self.load()
        if state is None:
            raise ClusterError(f"No cluster under {self.base_dir} (no {STATE_FILE})")
        return state

    # --- identity of our processes ------------------------------------------------------------------------------

    def zookeeper_running(self, state: ClusterState) -> bool:
        config = str(self.zookeeper_dir / "zoo.cfg")
        return state.zookeeper_pid > 0 and config in _cmdline(state.zookeeper_pid)

    def broker_running(self, broker: BrokerState) -> bool:
        log_dirs = f"log.dirs={self.broker_dir(broker.broker_id) / 'kafka-logs'}"
        return broker.pid > 0 and log_dirs in _cmdline(broker.pid)

    @staticmethod
    def bootstrap(state: ClusterState) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in state.brokers)

    @staticmethod
    def zookeeper_connect(state: ClusterState) -> str:
        return f"127.0.0.1:{state.zookeeper_port}"

    # --- start --------------------------------------------------------------------------------------------------

    def start(self, count: int, *, first_port: int = 0, zookeeper_port: int = 0, timeout: float = 60.0) -> ClusterState:
        """Start ZooKeeper and brokers 1..count, wait until all are registered in ``/brokers/ids`` and each one's
        metadata names the controller and every broker.

        Ports of 0 pick free ones; brokers get ``first_port``, ``first_port + 1``, ... otherwise. On failure
        everything this call started is stopped again."""
        state = self.load()
        if state is None:
            state = ClusterState(
                zookeeper_port=zookeeper_port or free_port(),
                brokers=[
                    BrokerState(i, first_port + i - 1 if first_port else free_port()) for i in range(1, count + 1)
                ],
            )
        elif len(state.brokers) != count:
            raise ClusterError(
                f"The cluster under {self.base_dir} has {len(state.brokers)} brokers; "
                f"start it with that number or use another --base-dir"
            )
        if self.zookeeper_running(state) or any(self.broker_running(b) for b in state.brokers):
            raise ClusterError(f"A cluster already runs under {self.base_dir}; stop it first")
        self.save(state)
        try:
            self._start_zookeeper(state, timeout)
            for broker in state.brokers:
                self._spawn_broker(state, broker)
            self._wait_registered(state, [b.broker_id for b in state.brokers], timeout)
        except BaseException:
            self.stop()
            raise
        return state

    def _start_zookeeper(self, state: ClusterState, timeout: float) -> None:
        if not Path(ZOOKEEPER_CLASSPATH.split(":")[0]).exists():
            raise ClusterError("ZooKeeper is not installed (Debian package zookeeper: apt-get install zookeeper)")
        if _port_open(state.zookeeper_port):
            raise ClusterError(f"Port {state.zookeeper_port} (ZooKeeper) is already in use")
        data = self.zookeeper_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.zookeeper_dir / "zoo.cfg"
        # Brokers get the session timeout they ask for (zookeeper.session.timeout.ms) from 1 s to 60 s.
        config.write_text(
            "tickTime=500\n"
            f"dataDir={data.resolve()}\n"
            f"clientPort={state.zookeeper_port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=60000\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr,stat,ruok\n",
            encoding="utf-8",
        )
        command = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", ZOOKEEPER_CLASSPATH]
        command += ["org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        state.zookeeper_pid = self._spawn(command, self.zookeeper_dir / "zookeeper.log")
        self.save(state)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(state.zookeeper_pid):
                log = self.zookeeper_dir / "zookeeper.log"
                raise ClusterError(f"ZooKeeper exited during start-up; {log}:\n{_tail(log)}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", state.zookeeper_port), 0.5) as s:
                s.sendall(b"srvr")
                if b"Mode:" in s.recv(1024):
                    self.log(f"zookeeper: {self.zookeeper_connect(state)} (pid {state.zookeeper_pid})")
                    return
            time.sleep(0.1)
        raise ClusterError(f"ZooKeeper did not answer within {timeout:g} s")

    @staticmethod
    def _spawn(command: list[str], output: Path) -> int:
        """Start a process in its own session (it outlives us), stdout and stderr appended to ``output``."""
        with open(os.devnull, "rb") as stdin, open(output, "ab") as out:
            process = subprocess.Popen(command, stdin=stdin, stdout=out, stderr=out, start_new_session=True)
        return process.pid

    def _spawn_broker(self, state: ClusterState, broker: BrokerState) -> None:
        if _port_open(broker.port):
            raise ClusterError(f"Port {broker.port} (broker {broker.broker_id}) is already in use")
        directory = self.broker_dir(broker.broker_id)
        directory.mkdir(parents=True, exist_ok=True)
        if not broker.metrics_port or _port_open(broker.metrics_port):
            broker.metrics_port = free_port()
        settings = [
            f"broker.id={broker.broker_id}",
            f"listeners=PLAINTEXT://127.0.0.1:{broker.port}",
            f"metrics.listener=http://127.0.0.1:{broker.metrics_port}",
            f"log.dirs={directory / 'kafka-logs'}",
            f"zookeeper.connect={self.zookeeper_connect(state)}",
            f"offsets.topic.replication.factor={min(3, len(state.brokers))}",
            "group.initial.rebalance.delay.ms=0",
            *self.overrides,
        ]
        command = [sys.executable, "-m", "mq", "server", "start"]
        for item in settings:
            command += ["--override", item]
        broker.pid = self._spawn(command, directory / "server.log")
        self.save(state)

    def _wait_registered(self, state: ClusterState, broker_ids: list[int], timeout: float) -> None:
        store = ZooKeeperStore(self.zookeeper_connect(state), connection_timeout_ms=int(timeout * 1000))
        try:
            zk = KafkaZkClient(store)
            deadline = time.monotonic() + timeout
            while True:
                registered = zk.get_all_brokers()
                if all(i in registered for i in broker_ids):
                    break
                for broker in state.brokers:
                    if broker.broker_id in broker_ids and not _alive(broker.pid):
                        log = self.broker_dir(broker.broker_id) / "server.log"
                        raise ClusterError(f"Broker {broker.broker_id} exited during start-up; {log}:\n{_tail(log)}")
                if time.monotonic() > deadline:
                    missing = sorted(set(broker_ids) - set(registered))
                    raise ClusterError(f"Brokers {missing} did not register within {timeout:g} s")
                time.sleep(0.1)
        finally:
            store.close()
        for broker in state.brokers:
            if broker.broker_id in broker_ids:
                self._wait_ready(broker, {b.broker_id for b in state.brokers if _alive(b.pid)}, timeout)
                self.log(f"broker {broker.broker_id}: 127.0.0.1:{broker.port} (pid {broker.pid})")

    def _wait_ready(self, broker: BrokerState, expected: set[int], timeout: float) -> None:
        """Wait until the broker's own metadata (DescribeCluster) names a controller and every running broker:
        before that, clients that bootstrap from it cannot find the controller (CreateTopics waits)."""
        admin = SyncAdmin(f"127.0.0.1:{broker.port}", request_timeout_ms=5000)
        try:
            deadline = time.monotonic() + timeout
            while True:
                with contextlib.suppress(KafkaError, OSError):
                    described = admin.call(AsyncAdmin.describe_cluster)
                    known = {b.node_id for b in described.brokers}
                    if described.controller_id in known and expected <= known:
                        return
                if time.monotonic() > deadline:
                    raise ClusterError(f"Broker {broker.broker_id} did not learn the cluster within {timeout:g} s")
                time.sleep(0.1)
        finally:
            admin.close()

    def start_broker(self, broker_id: int, timeout: float = 60.0) -> None:
        """Start one broker of a running cluster again (after ``kill_broker`` or a crash) and wait for it."""
        state = self.state()
        broker = next(b for b in state.brokers if b.broker_id == broker_id)
        if self.broker_running(broker):
            raise ClusterError(f"Broker {broker_id} already runs")
        # A killed broker's registration lasts until a peer finds its port closed (or its ZooKeeper session
        # expires); registering sooner fails.
        store = ZooKeeperStore(self.zookeeper_connect(state), connection_timeout_ms=int(timeout * 1000))
        try:
            zk = KafkaZkClient(store)
            deadline = time.monotonic() + timeout
            while broker_id in zk.get_all_brokers():
                if time.monotonic() > deadline:
                    raise ClusterError(f"Broker {broker_id} is still registered after {timeout:g} s")
                time.sleep(0.1)
        finally:
            store.close()
        self._spawn_broker(state, broker)
        self._wait_registered(state, [broker_id], timeout)

    def kill_broker(self, broker_id: int) -> None:
        """``kill -9`` a broker: no shutdown at all. Returns once the process is gone."""
        state = self.state()
        broker = next(b for b in state.brokers if b.broker_id == broker_id)
        if not self.broker_running(broker):
            raise ClusterError(f"Broker {broker_id} is not running")
        os.kill(broker.pid, signal.SIGKILL)
        self._wait_gone(broker.pid, 10.0)
        broker.pid = 0
        self.save(state)

    # --- stop and status ----------------------------------------------------------------------------------------

    @staticmethod
    def _wait_gone(pid: int, timeout: float) -> bool:
        """Wait until ``pid`` has exited (reaping it if it is our child)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.05)
        return False

    def _terminate(self, name: str, pid: int, timeout: float) -> bool:
        """SIGTERM and wait; SIGKILL if it does not exit in time. True if it stopped cleanly."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if self._wait_gone(pid, timeout):
            self.log(f"{name}: stopped (pid {pid})")
            return True
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self._wait_gone(pid, 10.0)
        self.log(f"{name}: did not stop within {timeout:g} s; killed (pid {pid})")
        return False

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the brokers one at a time (SIGTERM: a controlled shutdown each), then ZooKeeper.

        True if every process stopped cleanly (none needed SIGKILL)."""
        state = self.state()
        clean = True
        for broker in state.brokers:
            if self.broker_running(broker):
                clean &= self._terminate(f"broker {broker.broker_id}", broker.pid, timeout)
            broker.pid = 0
            self.save(state)
        if self.zookeeper_running(state):
            clean &= self._terminate("zookeeper", state.zookeeper_pid, timeout)
        state.zookeeper_pid = 0
        self.save(state)
        return clean

    def status(self) -> list[ProcessStatus]:
        state = self.state()
        rows = [
            ProcessStatus(
                "zookeeper", self.zookeeper_connect(state), state.zookeeper_pid, self.zookeeper_running(state)
            )
        ]
        rows += [
            ProcessStatus(f"broker {b.broker_id}", f"127.0.0.1:{b.port}", b.pid, self.broker_running(b))
            for b in state.brokers
        ]
        return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cluster.sh", description="Start, stop or list a local ZooKeeper + N brokers cluster."
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("count", nargs="?", type=int, help="number of brokers (start: required)")
    parser.add_argument("--base-dir", default=DEFAULT_BASE_DIR, help=f"state and data (default ./{DEFAULT_BASE_DIR})")
    parser.add_argument("--port", type=int, default=0, help="first broker port (default: free ports)")
    parser.add_argument("--zookeeper-port", type=int, default=0, help="ZooKeeper port (default: a free port)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="broker key, all brokers")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each step (default 60)")
    args = parser.parse_args(argv)
    if args.action == "start" and (args.count is None or args.count < 1):
        parser.error("start needs the number of brokers, at least 1")
    cluster = LocalCluster(Path(args.base_dir).resolve(), overrides=args.override)
    try:
        if args.count is not None and args.action != "start" and len(cluster.state().brokers) != args.count:
            parser.error(f"the cluster under {cluster.base_dir} has {len(cluster.state().brokers)} brokers")
        if args.action == "start":
            state = cluster.start(
                args.count, first_port=args.port, zookeeper_port=args.zookeeper_port, timeout=args.timeout
            )
            print(cluster.bootstrap(state), flush=True)
            return 0
        if args.action == "stop":
            return 0 if cluster.stop(args.timeout) else 1
        rows = cluster.status()
        for row in rows:
            state_word = f"running (pid {row.pid})" if row.running else "stopped"
            print(f"{row.name:<10} {row.address:<16} {state_word}")
        return 0 if all(row.running for row in rows) else 1
    except ClusterError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
