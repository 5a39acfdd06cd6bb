"""``mq server status`` logic: one broker's (or cluster's) health from Metadata, DescribeCluster and DescribeLogDirs,
plus what only the broker's host can tell (process start, free disk space, established connections).

A partition is offline when it has no leader (leader -1) and under-replicated when its ISR is smaller than its
replica set; the status is healthy when no partition is either. Facts that cannot be known are None (``unknown``):
Kafka's protocol carries neither the server's version nor its uptime, so a remote broker's come only from its
Prometheus metrics endpoint (``process_start_time_seconds`` and the sum of ``*connection_count`` samples).
"""

from __future__ import annotations

import datetime
import os
import shutil
import urllib.request
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq.client.admin import AsyncAdmin, ClusterDescription, LogDirDescription
from mq.client.cluster import TopicMetadata
from mq.errors import ErrorCode
from mq.storage.log_dir_lock import LOCK_FILE, parse_holder
from mq.tools.kafka_exceptions import exception_class
from mq.topic_partition import TopicPartition

UNKNOWN = "unknown"
TCP_ESTABLISHED = "01"
"""The ``st`` column of ``/proc/net/tcp`` for an established connection."""


@dataclass(frozen=True)
class PartitionHealth:
    """Partitions each broker leads, and the under-replicated and offline ones (sorted)."""

    led: dict[int, int]
    under_replicated: list[TopicPartition]
    offline: list[TopicPartition]


@dataclass(frozen=True)
class LogDirUsage:
    broker: int
    log_dir: str
    size_bytes: int
    """Sum of the sizes of the current and future replicas in the directory (0 when it is offline)."""
    error: str | None
    free_bytes: int | None = None
    total_bytes: int | None = None
    """Free and total bytes of the directory's file system, known when the directory is on this host."""

    @property
    def used_percent(self) -> float | None:
        if self.free_bytes is None or not self.total_bytes:
            return None
        return 100.0 * (self.total_bytes - self.free_bytes) / self.total_bytes


@dataclass(frozen=True)
class LocalProcess:
    """The broker process of a local config: its pid and start time (from its log dir's lock record)."""

    pid: int
    started: datetime.datetime | None


@dataclass
class ServerStatus:
    cluster_id: str | None
    controller_id: int
    brokers: list[int]
    health: PartitionHealth
    log_dirs: list[LogDirUsage]
    version: str | None = None
    started: datetime.datetime | None = None
    connections: int | None = None
    local_broker: int | None = None
    """The id of the broker whose config was given (None: a remote ``--bootstrap-server``)."""

    @property
    def healthy(self) -> bool:
        return not self.health.under_replicated and not self.health.offline


def partition_health(topics: Iterable[TopicMetadata]) -> PartitionHealth:
    led: dict[int, int] = {}
    under: list[TopicPartition] = []
    offline: list[TopicPartition] = []
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            if p.leader < 0:
                offline.append(tp)
            else:
                led[p.leader] = led.get(p.leader, 0) + 1
            if len(p.isr) < len(p.replicas):
                under.append(tp)
    return PartitionHealth(dict(sorted(led.items())), sorted(under), sorted(offline))


def log_dir_usage(descriptions: Mapping[int, Sequence[LogDirDescription]], local: bool) -> list[LogDirUsage]:
    """One entry per broker and log directory; with ``local``, the free space of directories found on this host."""
    usage = []
    for broker, dirs in sorted(descriptions.items()):
        for d in dirs:
            free = total = None
            if local and Path(d.log_dir).is_dir():
                disk = shutil.disk_usage(d.log_dir)
                free, total = disk.free, disk.total
            usage.append(
                LogDirUsage(
                    broker,
                    d.log_dir,
                    sum(info.size_bytes for _, info in d.replicas),
                    None if d.error == ErrorCode.NONE else exception_class(d.error),
                    free,
                    total,
                )
            )
    return usage


async def query(
    admin: AsyncAdmin,
) -> tuple[ClusterDescription, list[TopicMetadata], dict[int, tuple[LogDirDescription, ...]]]:
    """The cluster, every topic's partitions and every broker's log directories."""
    cluster = await admin.describe_cluster()
    topics = await admin.describe_topics()
    dirs = await admin.describe_log_dir_descriptions([b.node_id for b in cluster.brokers])
    return cluster, topics, dirs


def local_process(pid_path: Path, log_dirs: Sequence[Path]) -> LocalProcess | None:
    """The running broker of a config: the pid in its pid file, else its log dir's lock holder; None when neither
    names a live process."""
    holder = parse_holder(_read(log_dirs[0] / LOCK_FILE)) if log_dirs else {}
    text = _read(pid_path).strip() or holder.get("pid", "")
    if not text.isdigit() or not _alive(int(text)):
        return None
    pid = int(text)
    started = None
    if holder.get("pid") == str(pid) and "started" in holder:
        try:
            started = datetime.datetime.fromisoformat(holder["started"])
        except ValueError:
            started = None
    return LocalProcess(pid, started)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def established_connections(pid: int, port: int, proc: Path = Path("/proc")) -> int | None:
    """Established TCP connections the process ``pid`` accepted on ``port`` (its sockets whose local port is the
    listener's); None when ``/proc`` cannot be read (another user's process, not Linux)."""
    try:
        inodes = {
            os.readlink(fd)[len("socket:[") : -1]
            for fd in (proc / str(pid) / "fd").iterdir()
            if _link(fd).startswith("socket:[")
        }
    except OSError:
        return None
    count = 0
    for table in ("tcp", "tcp6"):
        for line in _read(proc / "net" / table).splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != TCP_ESTABLISHED or fields[9] not in inodes:
                continue
            if int(fields[1].rpartition(":")[2], 16) == port:
                count += 1
    return count


def _link(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def parse_metrics(text: str) -> tuple[float | None, int | None]:
    """``process_start_time_seconds`` and the sum of ``*connection_count`` samples of a Prometheus text page."""
    started: float | None = None
    connections: float | None = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value_text = line.rpartition(" ")
        name = name_part.partition("{")[0].strip()
        try:
            value = float(value_text)
        except ValueError:
            continue
        if name == "process_start_time_seconds":
            started = value
        elif name.endswith("connection_count"):
            connections = (connections or 0.0) + value
    return started, None if connections is None else int(connections)


def read_metrics(url: str, timeout_s: float) -> tuple[float | None, int | None]:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return parse_metrics(response.read().decode("utf-8", "replace"))


def _since(started: datetime.datetime, now: datetime.datetime) -> str:
    seconds = max(0, int((now - started).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return (f"{days}d " if days else "") + f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def _partitions(tps: Collection[TopicPartition]) -> str:
    return ",".join(map(str, tps)) if tps else "none"


def status_lines(status: ServerStatus, now: datetime.datetime) -> list[str]:
    """``Key: value`` lines, one log directory per line."""
    h = status.health
    lines = [
        f"Cluster id: {status.cluster_id or UNKNOWN}",
        f"Brokers: {','.join(map(str, status.brokers))}",
    ]
    if status.local_broker is not None:
        lines.append(f"Broker id: {status.local_broker}")
    lines += [
        f"Controller: {status.controller_id}",
        f"Version: {status.version or UNKNOWN}",
        f"Uptime: {_since(status.started, now) if status.started else UNKNOWN}"
        + (f" (started {status.started.isoformat()})" if status.started else ""),
        f"Connections: {UNKNOWN if status.connections is None else status.connections}",
        "Partitions led: " + (", ".join(f"broker {b}: {n}" for b, n in h.led.items()) or "none"),
        f"Under-replicated partitions: {len(h.under_replicated)} ({_partitions(h.under_replicated)})",
        f"Offline partitions: {len(h.offline)} ({_partitions(h.offline)})",
    ]
    for d in status.log_dirs:
        line = f"Log dir: broker {d.broker} {d.log_dir} size {d.size_bytes} bytes"
        if d.free_bytes is not None and d.used_percent is not None:
            line += f", {d.free_bytes} bytes free of {d.total_bytes} ({d.used_percent:.1f}% used)"
        if d.error:
            line += f", error {d.error}"
        lines.append(line)
    lines.append(f"Status: {'healthy' if status.healthy else 'unhealthy'}")
    return lines


def status_document(status: ServerStatus, now: datetime.datetime) -> dict[str, Any]:
    h = status.health
    return {
        "cluster_id": status.cluster_id,
        "brokers": status.brokers,
        "broker_id": status.local_broker,
        "controller_id": status.controller_id,
        "version": status.version,
        "started": status.started.isoformat() if status.started else None,
        "uptime_seconds": int((now - status.started).total_seconds()) if status.started else None,
        "connections": status.connections,
        "partitions_led": {str(b): n for b, n in h.led.items()},
        "under_replicated_partitions": [str(tp) for tp in h.under_replicated],
        "offline_partitions": [str(tp) for tp in h.offline],
        "log_dirs": [
            {
                "broker": d.broker,
                "log_dir": d.log_dir,
                "size_bytes": d.size_bytes,
                "free_bytes": d.free_bytes,
                "total_bytes": d.total_bytes,
                "error": d.error,
            }
            for d in status.log_dirs
        ],
        "healthy": status.healthy,
    }
