"""Hostile clients cannot exhaust the broker: size prefixes with no body cost no memory, connections over the
limits are closed at accept, idle ones are closed, and running out of file descriptors neither floods the log nor
stops the broker answering the clients it has."""

from __future__ import annotations

import contextlib
import resource
import selectors
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import BrokerProcess
from kafka import KafkaConsumer, KafkaProducer
from waiting import wait_for
from wire import recv_exactly

pytestmark = pytest.mark.slow

MB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def connect(broker: BrokerProcess, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10, source_address=(source, 0))


def send_api_versions(sock: socket.socket) -> None:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    sock.sendall(struct.pack(">i", len(body)) + body)


def api_versions(sock: socket.socket) -> int:
    """Send ApiVersions v0 and return the error code of the answer."""
    send_api_versions(sock)
    return read_api_versions(sock)


def read_api_versions(sock: socket.socket) -> int:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    response = recv_exactly(sock, size)
    assert struct.unpack_from(">i", response)[0] == 7  # correlation id
    return int(struct.unpack_from(">h", response, 4)[0])


def new_client_served(broker: BrokerProcess) -> bool:
    with connect(broker) as sock:
        try:
            return api_versions(sock) == 0
        except ConnectionError:
            return False


def answers(socks: list[socket.socket]) -> set[socket.socket]:
    """The sockets among ``socks`` (each sent one ApiVersions) on which an answer has arrived; it is read."""
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        ready = [key.fileobj for key, _ in selector.select(timeout=0.2)]
    answered = {sock for sock in ready if isinstance(sock, socket.socket)}
    for sock in answered:
        assert read_api_versions(sock) == 0
    return answered


def collect(answered: set[socket.socket], socks: list[socket.socket]) -> int:
    """Add to ``answered`` the sockets of ``socks`` answered since; return how many it holds."""
    answered |= answers(socks)
    return len(answered)


def closed_by_broker(socks: list[socket.socket]) -> set[socket.socket]:
    """The sockets the broker has closed (readable with EOF or reset); none of them has been sent anything."""
    closed: set[socket.socket] = set()
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        for key, _ in selector.select(timeout=0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if sock.recv(1, socket.MSG_PEEK) == b"":
                    closed.add(sock)
            except ConnectionError:
                closed.add(sock)
    return closed


def open_many(broker: BrokerProcess, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    return [connect(broker, source) for _ in range(count)]


@pytest.fixture
def more_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 16384)), hard))


def test_size_prefixes_without_bodies_cost_no_memory(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(overrides=["socket.request.max.bytes=209715200"]).start()
    assert broker.process is not None
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("t", b"before").get(timeout=30)
    before = rss_bytes(broker.process.pid)
    attackers = open_many(broker, 20)
    for sock in attackers:
        sock.sendall(struct.pack(">i", 100 * MB) + b"\0" * 100)
    producer.send("t", b"during").get(timeout=30)  # a normal client is served meanwhile
    consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    values: list[bytes] = []
    assert wait_for(
        lambda: values.extend(r.value for rs in consumer.poll(500).values() for r in rs) or len(values) >= 2
    )
    assert values == [b"before", b"during"]
    growth = rss_bytes(broker.process.pid) - before
    assert growth < 200 * MB, f"RSS grew by {growth // MB} MB for 20 size prefixes of 100 MB"
    assert not closed_by_broker(attackers)  # waiting for their bodies, not dropped
    consumer.close()
    producer.close()
    for sock in attackers:
        sock.close()


def test_at_max_connections_new_connections_wait_until_one_closes(
    broker_factory: Callable[..., BrokerProcess], more_files: None
) -> None:
    broker = broker_factory(overrides=["max.connections=200"]).start()
    established = connect(broker)
    assert api_versions(established) == 0
    flood = open_many(broker, 500)  # the kernel completes them all; the broker accepts 199 more
    for sock in flood:
        send_api_versions(sock)
    answered: set[socket.socket] = set()
    assert wait_for(lambda: collect(answered, flood) >= 199)
    time.sleep(0.5)
    answered |= answers(flood)
    assert len(answered) == 199 and not closed_by_broker(flood)  # the others wait, neither served nor closed
    assert api_versions(established) == 0
    for sock in list(answered)[:100]:
        sock.close()
    waiting = [sock for sock in flood if sock not in answered]
    now_answered: set[socket.socket] = set()
    assert wait_for(lambda: collect(now_answered, waiting) >= 100)
    time.sleep(0.5)
    assert collect(now_answered, waiting) == 100  # one accepted for each that closed
    assert "max.connections (200) are open" in broker.stderr()


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets ``pid`` has open; a descriptor it closes while they are read is not one."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):
            target = fd.readlink().name
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def connections_served(pid: int, port: int) -> int:
    """Established connections to ``port`` that ``pid`` has accepted (from the kernel's TCP tables): neither a
    connection its peer closed (CLOSE_WAIT until the broker closes it) nor one waiting in the backlog."""
    established = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                established.add(fields[9])
    return len(established & socket_inodes(pid))


def test_five_thousand_idle_connections_against_max_connections_of_a_thousand(
    broker_factory: Callable[..., BrokerProcess], more_files: None
) -> None:
    broker = broker_factory(overrides=["max.connections=1000"]).start()
    assert broker.process is not None
    pid = broker.process.pid
    established = connect(broker)
    assert api_versions(established) == 0
    served_before, rss_before = connections_served(pid, broker.port), rss_bytes(pid)
    flood: list[socket.socket] = []

    def open_idle(count: int) -> None:
        """Idle connections: they connect (or keep trying, once the backlog is full) and send nothing."""
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", broker.port))
            flood.append(sock)

    # Up to the limit in steps the broker keeps up with: a burst beyond the listen backlog would lose connections to
    # SYN cookies (the kernel completes them on the client's side only), which could never reach the broker.
    while len(flood) < 999:
        open_idle(min(100, 999 - len(flood)))
        assert wait_for(lambda: connections_served(pid, broker.port) - served_before >= len(flood))
    open_idle(5000 - len(flood))
    time.sleep(1)
    assert connections_served(pid, broker.port) - served_before == 999
    for _ in range(10):
        assert api_versions(established) == 0
    assert rss_bytes(pid) - rss_before < 100 * MB
    for sock in flood:
        sock.close()
    assert wait_for(lambda: new_client_served(broker))
    assert wait_for(lambda: connections_served(pid, broker.port) <= served_before + 1)


def test_max_connections_per_ip_and_its_overrides(broker_factory: Callable[..., BrokerProcess]) -> None:
    overrides = ["max.connections.per.ip=3", "max.connections.per.ip.overrides=127.0.0.2:5"]
    broker = broker_factory(overrides=overrides).start()
    default_ip = open_many(broker, 5, source="127.0.0.3")  # not 127.0.0.1, where the start-up probe came from
    overridden_ip = open_many(broker, 7, source="127.0.0.2")
    assert wait_for(lambda: len(closed_by_broker(default_ip)) == 2 and len(closed_by_broker(overridden_ip)) == 2)
    served = [sock for sock in default_ip + overridden_ip if sock not in closed_by_broker(default_ip + overridden_ip)]
    assert len(served) == 8
    assert all(api_versions(sock) == 0 for sock in served)


def test_idle_connections_are_closed(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(overrides=["connections.max.idle.ms=500"]).start()
    idle = connect(broker)
    active = connect(broker)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # a request every 100 ms keeps a connection open
        assert api_versions(active) == 0
        time.sleep(0.1)
    assert wait_for(lambda: bool(closed_by_broker([idle])), timeout=10)
    assert api_versions(active) == 0


def test_running_out_of_file_descriptors_is_logged_rarely_and_clients_are_served(
    broker_factory: Callable[..., BrokerProcess], more_files: None
) -> None:
    broker = broker_factory().start()
    assert broker.process is not None
    established = connect(broker)
    assert api_versions(established) == 0
    _, hard = resource.prlimit(broker.process.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(broker.process.pid, resource.RLIMIT_NOFILE, (256, hard))
    flood = open_many(broker, 600)  # the broker accepts until it has no descriptor left; the rest wait in the backlog
    assert wait_for(lambda: "Too many open files" in broker.stderr())
    for _ in range(20):  # established clients are answered while accept keeps failing
        assert api_versions(established) == 0
        time.sleep(0.1)
    reports = [  # about accept, not about the files other parts of the broker could not open meanwhile
        line for line in broker.stderr().splitlines() if "Too many open files" in line and "files: '" not in line
    ]
    assert 1 <= len(reports) <= 3, f"{len(reports)} log lines about it"
    for sock in flood:
        sock.close()
    assert wait_for(lambda: new_client_served(broker))
