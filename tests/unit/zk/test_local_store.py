from __future__ import annotations

from pathlib import Path

import pytest

from mq.zk.local_store import LocalStore
from mq.zk.store import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, Stat


def test_create_get_set_versions(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "tree.json")
    assert store.create("/a", b"1") == "/a"
    data, stat = store.get("/a")
    assert (data, stat.version) == (b"1", 0)
    assert store.set("/a", b"2", version=0).version == 1
    with pytest.raises(BadVersionError):
        store.set("/a", b"3", version=0)
    assert store.set("/a", b"4").version == 2
    with pytest.raises(NodeExistsError):
        store.create("/a")


def test_parents_must_exist_unless_makepath(tmp_path: Path) -> None:
    store = LocalStore(None)
    with pytest.raises(NoNodeError):
        store.create("/x/y/z")
    store.create("/x/y/z", b"d", makepath=True)
    assert store.get_children("/x") == ["y"]
    store.ensure_path("/x/y/z")
    store.ensure_path("/p/q")
    assert store.exists("/p/q") is not None


def test_sequential_nodes_count_from_the_parent() -> None:
    store = LocalStore(None)
    store.ensure_path("/config/changes")
    first = store.create("/config/changes/config_change_", b"a", sequence=True)
    second = store.create("/config/changes/config_change_", b"b", sequence=True)
    assert first == "/config/changes/config_change_0000000000"
    assert second == "/config/changes/config_change_0000000001"
    store.delete(first)
    assert store.create("/config/changes/config_change_", sequence=True).endswith("0000000003")


def test_delete_rules() -> None:
    store = LocalStore(None)
    store.create("/t/p/0", makepath=True)
    with pytest.raises(NotEmptyError):
        store.delete("/t")
    with pytest.raises(BadVersionError):
        store.delete("/t/p/0", version=3)
    store.delete("/t", recursive=True)
    assert store.exists("/t") is None and store.get_children("/") == []


def test_persisted_across_restarts_without_ephemerals(tmp_path: Path) -> None:
    path = tmp_path / "tree.json"
    store = LocalStore(path)
    store.create("/brokers/topics/orders", b'{"version":3}', makepath=True)
    store.set("/brokers/topics/orders", b'{"version":3,"x":1}')
    store.create("/brokers/ids", makepath=True)
    store.create("/brokers/ids/0", b"me", ephemeral=True)
    czxid = store.get("/brokers/topics/orders")[1].czxid
    reopened = LocalStore(path)
    data, stat = reopened.get("/brokers/topics/orders")
    assert data == b'{"version":3,"x":1}' and stat.version == 1 and stat.czxid == czxid
    assert reopened.exists("/brokers/ids/0") is None
    assert reopened.create("/fresh") and reopened.get("/fresh")[1].czxid > czxid
    assert not path.with_name("tree.json.tmp").exists()


def test_ephemerals_vanish_on_close_and_cannot_have_children() -> None:
    store = LocalStore(None)
    store.create("/controller", b"x", ephemeral=True)
    assert store.get("/controller")[1].ephemeral_owner != 0
    with pytest.raises(NoNodeError):
        store.create("/controller/child")
    store.close()
    assert store.exists("/controller") is None


def test_data_watch_fires_until_it_returns_false() -> None:
    store = LocalStore(None)
    seen: list[bytes | None] = []

    def watcher(data: bytes | None, stat: Stat | None) -> bool:
        seen.append(data)
        return data != b"stop"

    store.watch_data("/w", watcher)
    store.create("/w", b"1")
    store.set("/w", b"stop")
    store.set("/w", b"after")
    assert seen == [None, b"1", b"stop"]


def test_data_watch_sees_deletion() -> None:
    store = LocalStore(None)
    store.create("/w", b"1")
    seen: list[tuple[bytes | None, Stat | None]] = []
    store.watch_data("/w", lambda data, stat: seen.append((data, stat)) is None)
    store.delete("/w")
    assert seen[-1] == (None, None)


def test_children_watch() -> None:
    store = LocalStore(None)
    store.ensure_path("/brokers/ids")
    seen: list[list[str]] = []
    store.watch_children("/brokers/ids", lambda children: seen.append(children) is None)
    store.create("/brokers/ids/1", ephemeral=True)
    store.create("/brokers/ids/2", ephemeral=True)
    store.delete("/brokers/ids/1")
    assert seen == [[], ["1"], ["1", "2"], ["2"]]


def test_invalid_paths() -> None:
    store = LocalStore(None)
    for bad in ("nope", "/a/", "/a//b"):
        with pytest.raises(ValueError):
            store.create(bad)


def test_a_batch_is_written_once_at_its_end_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "tree.json"
    store = LocalStore(path)
    writes: list[int] = []
    real_write = store._write

    def counting_write() -> None:
        writes.append(1)
        real_write()

    store._write = counting_write  # type: ignore[method-assign]
    with store.batch():
        for p in range(50):
            store.create(f"/brokers/topics/t/partitions/{p}/state", b"{}", makepath=True)
        with store.batch():
            store.set("/brokers/topics/t/partitions/0/state", b"[0]")
        assert writes == [] and LocalStore(path).exists("/brokers/topics/t") is None  # nothing written yet
    assert writes == [1]
    store.create("/outside", b"x")
    assert writes == [1, 1]  # outside a batch every write is persisted at once
    reopened = LocalStore(path)
    assert reopened.get("/brokers/topics/t/partitions/0/state")[0] == b"[0]"
    assert len(reopened.get_children("/brokers/topics/t/partitions")) == 50
