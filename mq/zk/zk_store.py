"""The metadata tree in a real ZooKeeper ensemble through kazoo: cluster mode's MetadataStore.

``connect`` is Kafka's ``zookeeper.connect`` (``host:port[,host:port][/chroot]``); a missing chroot is created. Watches use kazoo's re-arming
DataWatch and ChildrenWatch recipes, whose callbacks run on kazoo's thread. Ephemeral nodes live as long as the
session; a closed store ends the session, so they disappear at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError as KazooBadVersion
from kazoo.exceptions import NodeExistsError as KazooNodeExists
from kazoo.exceptions import NoNodeError as KazooNoNode
from kazoo.exceptions import NotEmptyError as KazooNotEmpty
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from mq.zk.store import (
    BadVersionError,
    ChildrenWatcher,
    DataWatcher,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Stat,
)


@contextmanager
def _translated(path: str) -> Iterator[None]:
    try:
        yield
    except KazooNoNode:
        raise NoNodeError(path) from None
    except KazooNodeExists:
        raise NodeExistsError(path) from None
    except KazooBadVersion:
        raise BadVersionError(path) from None
    except KazooNotEmpty:
        raise NotEmptyError(path) from None


def _stat(stat: Any) -> Stat:
    return Stat(
        stat.version,
        stat.czxid,
        stat.mzxid,
        stat.ctime,
        stat.mtime,
        stat.ephemeralOwner,
        stat.numChildren,
        stat.cversion,
    )


class ZooKeeperStore(MetadataStore):
    def __init__(
        self, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None
    ) -> None:
        start_timeout = (connection_timeout_ms or session_timeout_ms) / 1000
        hosts, slash, chroot = connect.partition("/")
        if slash and chroot:
            root = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
            root.start(timeout=start_timeout)
            root.ensure_path("/" + chroot)
            root.stop()
            root.close()
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self.client.start(timeout=start_timeout)

    def get(self, path: str) -> tuple[bytes, Stat]:
        with _translated(path):
            data, stat = self.client.get(path)
        return bytes(data or b""), _stat(stat)

    def exists(self, path: str) -> Stat | None:
        stat = self.client.exists(path)
        return None if stat is None else _stat(stat)

    def get_children(self, path: str) -> list[str]:
        with _translated(path):
            return sorted(self.client.get_children(path))

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False, makepath: bool = False
    ) -> str:
        with _translated(path):
            created: str = self.client.create(path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath)
        return created

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        with _translated(path):
            return _stat(self.client.set(path, data, version=version))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        with _translated(path):
            self.client.delete(path, version=version, recursive=recursive)

    def watch_data(self, path: str, watcher: DataWatcher) -> None:
        def relay(data: bytes | None, stat: Any, *_: Any) -> bool:
            return (
                watcher(
                    None if data is None and stat is None else bytes(data or b""), None if stat is None else _stat(stat)
                )
                is not False
            )

        DataWatch(self.client, path, relay)

    def watch_children(self, path: str, watcher: ChildrenWatcher) -> None:
        def relay(children: list[str]) -> bool:
            return watcher(sorted(children)) is not False

        ChildrenWatch(self.client, path, relay)

    def on_new_session(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on kazoo's thread) once a new session replaces an expired one: this session's
        ephemeral nodes are gone and must be created again. Watches set through this store re-arm by themselves."""
        expired = False

        def listener(state: str) -> None:
            nonlocal expired
            if state == KazooState.LOST:
                expired = True
            elif state == KazooState.CONNECTED and expired:
                expired = False
                callback()

        self.client.add_listener(listener)

    def close(self) -> None:
        self.client.stop()
        self.client.close()
