"""The metadata tree in-process, for a standalone broker: ZooKeeper semantics, persisted as one JSON file.

Every mutation of a persistent node rewrites the file atomically (``.tmp`` + fsync + rename), so the tree survives
a crash exactly as of the last completed call; inside ``batch()`` (one controller event, say) the calling thread's
mutations are written once, when the outermost batch ends, so the tree survives as of the last completed batch. Ephemeral nodes belong to this process's session and are never
written to the file. Watchers run on the calling thread after the mutation, outside the lock.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

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

SESSION_ID = 1
FORMAT_VERSION = 1


@dataclass
class _Node:
    data: bytes
    version: int
    czxid: int
    mzxid: int
    ctime_ms: int
    mtime_ms: int
    ephemeral: bool
    cversion: int = 0
    children: set[str] = field(default_factory=set)


def _parent(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def _check_path(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise ValueError(f"invalid znode path {path!r}")


class LocalStore(MetadataStore):
    """A ZooKeeper-shaped tree kept in memory and in ``path`` (None: memory only)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.RLock()
        self._zxid = 0
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0, 0, False)}
        self._data_watchers: dict[str, list[DataWatcher]] = {}
        self._children_watchers: dict[str, list[ChildrenWatcher]] = {}
        self._batch = threading.local()
        self._dirty = False
        if path is not None and path.exists():
            self._load(path)

    # --- persistence -------------------------------------------------------------------------------------------

    def _load(self, path: Path) -> None:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown metadata file version in {path}")
        self._zxid = int(document["zxid"])
        for node_path, n in sorted(document["nodes"].items()):
            node = _Node(
                base64.b64decode(n["data"]), n["version"], n["czxid"], n["mzxid"], n["ctime"], n["mtime"], False
            )
            node.cversion = n["cversion"]
            self._nodes[node_path] = node
            if node_path != "/":
                self._nodes[_parent(node_path)].children.add(node_path.rsplit("/", 1)[1])

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        depth = getattr(self._batch, "depth", 0)
        self._batch.depth = depth + 1
        try:
            yield
        finally:
            self._batch.depth = depth
            if depth == 0:
                with self._lock:
                    if self._dirty:
                        self._write()

    def _save(self) -> None:
        """Persist now, or at the end of the calling thread's batch."""
        self._dirty = True
        if getattr(self._batch, "depth", 0) == 0:
            self._write()

    def _write(self) -> None:
        self._dirty = False
        if self._path is None:
            return
        nodes = {
            p: {
                "data": base64.b64encode(n.data).decode("ascii"),
                "version": n.version,
                "czxid": n.czxid,
                "mzxid": n.mzxid,
                "ctime": n.ctime_ms,
                "mtime": n.mtime_ms,
                "cversion": n.cversion,
            }
            for p, n in self._nodes.items()
            if not n.ephemeral
        }
        text = json.dumps({"version": FORMAT_VERSION, "zxid": self._zxid, "nodes": nodes}, separators=(",", ":"))
        tmp = self._path.with_name(self._path.name + ".tmp")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self._path)

    # --- reads -------------------------------------------------------------------------------------------------

    def _stat(self, node: _Node) -> Stat:
        owner = SESSION_ID if node.ephemeral else 0
        return Stat(
            node.version, node.czxid, node.mzxid, node.ctime_ms, node.mtime_ms, owner, len(node.children), node.cversion
        )

    def _node(self, path: str) -> _Node:
        _check_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def get(self, path: str) -> tuple[bytes, Stat]:
        with self._lock:
            node = self._node(path)
            return node.data, self._stat(node)

    def exists(self, path: str) -> Stat | None:
        with self._lock:
            _check_path(path)
            node = self._nodes.get(path)
            return None if node is None else self._stat(node)

    def get_children(self, path: str) -> list[str]:
        with self._lock:
            return sorted(self._node(path).children)

    # --- writes ------------------------------------------------------------------------------------------------

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False, makepath: bool = False
    ) -> str:
        with self._lock:
            _check_path(path)
            parent_path = _parent(path)
            created: list[str] = []
            if parent_path not in self._nodes:
                if not makepath:
                    raise NoNodeError(parent_path)
                created.extend(self._make_parents(parent_path))
            parent = self._nodes[parent_path]
            if parent.ephemeral:
                raise NoNodeError(f"{parent_path} is ephemeral and cannot have children")
            if sequence:
                path = f"{path}{parent.cversion:010d}"
            if path in self._nodes:
                raise NodeExistsError(path)
            self._add(path, data, ephemeral)
            created.append(path)
            if not ephemeral:
                self._save()
        for new_path in created:
            self._fire_data(new_path)
            self._fire_children(_parent(new_path))
        return path

    def _make_parents(self, path: str) -> list[str]:
        missing: list[str] = []
        while path not in self._nodes:
            missing.append(path)
            path = _parent(path)
        for new_path in reversed(missing):
            self._add(new_path, b"", False)
        return list(reversed(missing))

    def _add(self, path: str, data: bytes, ephemeral: bool) -> None:
        self._zxid += 1
        now = int(time.time() * 1000)
        self._nodes[path] = _Node(bytes(data), 0, self._zxid, self._zxid, now, now, ephemeral)
        parent = self._nodes[_parent(path)]
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        with self._lock:
            node = self._node(path)
            if version != -1 and version != node.version:
                raise BadVersionError(f"{path}: expected version {version}, found {node.version}")
            self._zxid += 1
            node.data = bytes(data)
            node.version += 1
            node.mzxid = self._zxid
            node.mtime_ms = int(time.time() * 1000)
            stat = self._stat(node)
            if not node.ephemeral:
                self._save()
        self._fire_data(path)
        return stat

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        with self._lock:
            node = self._node(path)
            if path == "/":
                raise ValueError("cannot delete the root")
            if version != -1 and version != node.version:
                raise BadVersionError(f"{path}: expected version {version}, found {node.version}")
            if node.children and not recursive:
                raise NotEmptyError(path)
            removed = self._remove(path)
            self._save()
        for gone in removed:
            self._fire_data(gone)
            self._fire_children(gone)
        self._fire_children(_parent(path))

    def _remove(self, path: str) -> list[str]:
        removed: list[str] = []
        for child in sorted(self._nodes[path].children):
            removed.extend(self._remove(f"{path.rstrip('/')}/{child}"))
        del self._nodes[path]
        parent = self._nodes[_parent(path)]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        removed.append(path)
        return removed

    def close(self) -> None:
        """Drop this session's ephemeral nodes, as a closed ZooKeeper session does."""
        with self._lock:
            ephemerals = [p for p, n in self._nodes.items() if n.ephemeral]
        for path in ephemerals:
            with contextlib.suppress(NoNodeError):
                self.delete(path)

    # --- watches -----------------------------------------------------------------------------------------------

    def watch_data(self, path: str, watcher: DataWatcher) -> None:
        if self._call_data(path, watcher):
            with self._lock:
                self._data_watchers.setdefault(path, []).append(watcher)

    def watch_children(self, path: str, watcher: ChildrenWatcher) -> None:
        if self._call_children(path, watcher):
            with self._lock:
                self._children_watchers.setdefault(path, []).append(watcher)

    def _call_data(self, path: str, watcher: DataWatcher) -> bool:
        with self._lock:
            node = self._nodes.get(path)
            data, stat = (None, None) if node is None else (node.data, self._stat(node))
        return watcher(data, stat) is not False

    def _call_children(self, path: str, watcher: ChildrenWatcher) -> bool:
        with self._lock:
            node = self._nodes.get(path)
            children = [] if node is None else sorted(node.children)
        return watcher(children) is not False

    def _fire(
        self, registry: dict[str, list[Callable[..., bool | None]]], path: str, call: Callable[..., bool]
    ) -> None:
        with self._lock:
            watchers = list(registry.get(path, ()))
        keep = [w for w in watchers if call(path, w)]
        with self._lock:
            current = registry.get(path, [])
            registry[path] = [w for w in current if w in keep or w not in watchers]
            if not registry[path]:
                del registry[path]

    def _fire_data(self, path: str) -> None:
        self._fire(self._data_watchers, path, self._call_data)

    def _fire_children(self, path: str) -> None:
        self._fire(self._children_watchers, path, self._call_children)
