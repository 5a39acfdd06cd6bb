"""The metadata tree in a real ZooKeeper ensemble through kazoo: cluster mode's MetadataStore.

``connect`` is Kafka's ``zookeeper.connect`` (``host:port[,host:port][/chroot]``); a missing chroot is created. Watches use kazoo's re-arming
DataWatch and ChildrenWatch recipes, whose callbacks run on kazoo's thread. Ephemeral nodes live as long as the
session; a closed store ends the session, so they disappear at once.

Callers are the controller's thread and the broker's metadata threads, never the event loop, so an operation
made while the session has no connection waits, queued by kazoo, until ZooKeeper returns; one in flight when the
connection drops fails with ConnectionLostError. With ``operation_timeout_s`` set (a stopping broker sets it, as it
must finish within a bound) an operation fails at once while disconnected and waits at most that long for its
answer.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError as KazooBadVersion
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.exceptions import NodeExistsError as KazooNodeExists
from kazoo.exceptions import NoNodeError as KazooNoNode
from kazoo.exceptions import NotEmptyError as KazooNotEmpty
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from mq.zk.store import (
    BadVersionError,
    ChildrenWatcher,
    ConnectionLostError,
    DataWatcher,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Stat,
)

CLOSE_TIMEOUT_S = 3.0
"""Longest wait for the session to close; past it the store is left to the process's exit."""


@contextmanager
def _translated(path: str) -> Iterator[None]:
    try:
        yield
    except (ConnectionLoss, SessionExpiredError, ConnectionClosedError, KazooTimeoutError) as exc:
        raise ConnectionLostError(f"{path}: {type(exc).__name__}") from None
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
        self.operation_timeout_s: float | None = None
        """Longest wait for one operation's answer; None: until kazoo gives the connection up."""

    def _connected(self, path: str) -> AbstractContextManager[None]:
        """``_translated``, after failing fast when bounded (``operation_timeout_s``) and not connected."""
        if self.operation_timeout_s is not None and not self.client.connected:
            raise ConnectionLostError(f"{path}: ZooKeeper is not connected")
        return _translated(path)

    def _answer(self, result: Any) -> Any:
        return result.get(timeout=self.operation_timeout_s)

    def get(self, path: str) -> tuple[bytes, Stat]:
        with self._connected(path):
            data, stat = self._answer(self.client.get_async(path))
        return bytes(data or b""), _stat(stat)

    def exists(self, path: str) -> Stat | None:
        with self._connected(path):
            stat = self._answer(self.client.exists_async(path))
        return None if stat is None else _stat(stat)

    def get_children(self, path: str) -> list[str]:
        with self._connected(path):
            return sorted(self._answer(self.client.get_children_async(path)))

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False, makepath: bool = False
    ) -> str:
        with self._connected(path):
            created: str = self._answer(
                self.client.create_async(path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath)
            )
        return created

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        with self._connected(path):
            return _stat(self._answer(self.client.set_async(path, data, version=version)))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        with self._connected(path):
            if recursive:  # kazoo deletes the children one by one; unbounded
                self.client.delete(path, recursive=True)
            else:
                self._answer(self.client.delete_async(path, version=version))

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
        """End the session (its ephemeral nodes go at once); gives up after ``CLOSE_TIMEOUT_S`` when ZooKeeper is
        unreachable, leaving the session to expire (and kazoo's threads, which are daemons, to the process's exit:
        its exit hook, which would wait for them, is removed)."""

        def stop() -> None:
            self.client.stop()
            self.client.close()

        closer = threading.Thread(target=stop, name="zookeeper-close", daemon=True)
        closer.start()
        closer.join(CLOSE_TIMEOUT_S)
        if closer.is_alive():
            atexit.unregister(self.client.handler.stop)
