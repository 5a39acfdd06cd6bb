"""The metadata store interface: a ZooKeeper-shaped tree of znodes with versions, ephemerals and watches.

Both backends implement it: ``LocalStore`` (standalone mode, in-process, persisted as one file) and the ZooKeeper
backend (cluster mode). Semantics follow ZooKeeper: ``version`` counts data changes from 0; ``version=-1`` means
"any"; sequential nodes get a 10-digit zero-padded suffix from their parent's counter; a data watch fires with
``(None, None)`` once its node is deleted; a watch stays registered until its callback returns False.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass

DataWatcher = Callable[[bytes | None, "Stat | None"], bool | None]
ChildrenWatcher = Callable[[list[str]], bool | None]


class StoreError(Exception):
    """Base of metadata store failures."""


class NoNodeError(StoreError):
    pass


class NodeExistsError(StoreError):
    pass


class BadVersionError(StoreError):
    pass


class NotEmptyError(StoreError):
    pass


class ConnectionLostError(StoreError):
    """The store is out of reach (no session connection); the operation was not sent."""


@dataclass(frozen=True)
class Stat:
    version: int
    """Number of data changes since creation."""
    czxid: int
    """Creation transaction id; a broker's registration czxid is its broker epoch."""
    mzxid: int
    ctime_ms: int
    mtime_ms: int
    ephemeral_owner: int
    num_children: int
    cversion: int
    """Number of child changes; sequential suffixes count from it."""


class MetadataStore(ABC):
    @abstractmethod
    def get(self, path: str) -> tuple[bytes, Stat]:
        """Data and stat of ``path``; NoNodeError if absent."""

    @abstractmethod
    def exists(self, path: str) -> Stat | None: ...

    @abstractmethod
    def get_children(self, path: str) -> list[str]:
        """Child names, sorted; NoNodeError if absent."""

    @abstractmethod
    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False, makepath: bool = False
    ) -> str:
        """Create ``path`` (with a sequence suffix when asked) and return the path created."""

    @abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Replace the data if the node's version equals ``version`` (or always for -1)."""

    @abstractmethod
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...

    @abstractmethod
    def watch_data(self, path: str, watcher: DataWatcher) -> None:
        """Call ``watcher`` now with the current data and after every change, until it returns False."""

    @abstractmethod
    def watch_children(self, path: str, watcher: ChildrenWatcher) -> None:
        """Call ``watcher`` now with the current children and after every change, until it returns False."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; this session's ephemeral nodes disappear."""

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group the calling thread's writes: a store may persist them once, at the end (ZooKeeper writes each at
        once)."""
        yield

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing parents with empty data."""
        if self.exists(path) is None:
            with contextlib.suppress(NodeExistsError):
                self.create(path, makepath=True)

    def get_or_none(self, path: str) -> bytes | None:
        try:
            return self.get(path)[0]
        except NoNodeError:
            return None
