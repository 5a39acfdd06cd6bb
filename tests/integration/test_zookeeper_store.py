"""The metadata tree on a real ZooKeeper (Debian's package) behaves as the in-process store does."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from conftest import ZooKeeperProcess

from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import BrokerRegistration, PartitionState
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, ConnectionLostError, NodeExistsError, NoNodeError, NotEmptyError
from mq.zk.zk_store import CLOSE_TIMEOUT_S, ZooKeeperStore

pytestmark = pytest.mark.slow


@pytest.fixture
def store(zookeeper):
    chroot = f"/mq-{uuid.uuid4().hex[:8]}"
    opened = ZooKeeperStore(zookeeper.connect + chroot, session_timeout_ms=4000)
    yield opened
    opened.close()


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_versions_and_errors(store: ZooKeeperStore) -> None:
    assert store.create("/a", b"1") == "/a"
    assert store.get("/a")[1].version == 0
    assert store.set("/a", b"2", version=0).version == 1
    with pytest.raises(BadVersionError):
        store.set("/a", b"3", version=0)
    with pytest.raises(NodeExistsError):
        store.create("/a")
    with pytest.raises(NoNodeError):
        store.get("/missing")
    store.create("/p/q/r", makepath=True)
    with pytest.raises(NotEmptyError):
        store.delete("/p")
    store.delete("/p", recursive=True)
    assert store.exists("/p") is None
    first = store.create("/seq/n_", sequence=True, makepath=True)
    assert first == "/seq/n_0000000000"


def test_ephemerals_end_with_the_session(zookeeper, store: ZooKeeperStore) -> None:
    chroot = store.client.chroot
    other = ZooKeeperStore(zookeeper.connect + chroot, session_timeout_ms=4000)
    other.create("/brokers/ids/1", b"x", ephemeral=True, makepath=True)
    assert store.get_children("/brokers/ids") == ["1"]
    other.close()
    assert wait_for(lambda: store.get_children("/brokers/ids") == [])


def test_watches_rearm_and_stop(store: ZooKeeperStore) -> None:
    seen: list[bytes | None] = []
    children: list[list[str]] = []
    changed = threading.Event()

    def data_watcher(data, stat):
        seen.append(data)
        changed.set()
        return data != b"stop"

    store.watch_data("/w", data_watcher)
    store.ensure_path("/kids")
    store.watch_children("/kids", lambda names: children.append(names) is None)
    store.create("/w", b"1")
    assert wait_for(lambda: b"1" in seen)
    store.set("/w", b"stop")
    assert wait_for(lambda: b"stop" in seen)
    store.set("/w", b"after")
    store.create("/kids/a")
    assert wait_for(lambda: ["a"] in children)
    time.sleep(0.3)
    assert b"after" not in seen


def test_admin_and_partition_state_on_zookeeper(store: ZooKeeperStore) -> None:
    zk = KafkaZkClient(store)
    zk.create_top_level_paths()
    zk.register_broker(BrokerRegistration(1, ["PLAINTEXT://127.0.0.1:9092"]))
    AdminZkClient(zk).create_topic("orders", 2, 1)
    assert zk.get_all_topics() == ["orders"]
    zk.create_partition_state("orders", 0, PartitionState(1, 0, [1], 1))
    assert zk.set_partition_state("orders", 0, PartitionState(1, 1, [1], 1), 0) == 1
    with pytest.raises(BadVersionError):
        zk.set_partition_state("orders", 0, PartitionState(1, 2, [1], 1), 0)
    assert zk.get_or_create_cluster_id() == zk.get_or_create_cluster_id()


def test_without_zookeeper_bounded_operations_fail_at_once_and_close_is_bounded(tmp_path) -> None:
    """A stopping broker bounds its ZooKeeper calls: with ``operation_timeout_s`` set they fail at once while the
    session has no connection, and closing the store does not wait for ZooKeeper."""
    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper").start()
    try:
        store = ZooKeeperStore(zookeeper.connect, session_timeout_ms=10000)
        store.create("/x", b"1")
        assert zookeeper.process is not None
        zookeeper.process.kill()
        zookeeper.process.wait(30)
        zookeeper.process = None
        store.operation_timeout_s = 1.0

        def lost() -> bool:
            try:
                store.get("/x")
            except ConnectionLostError:
                return True
            return False

        assert wait_for(lost)
        with pytest.raises(ConnectionLostError):
            store.set("/x", b"2")
        started = time.monotonic()
        store.close()
        assert time.monotonic() - started < CLOSE_TIMEOUT_S + 1.0
    finally:
        zookeeper.stop()
