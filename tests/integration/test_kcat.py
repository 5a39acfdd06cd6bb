"""kcat (Debian's) against a broker process: -L, -P, -C."""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.slow


def kcat(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: scripts/test.sh installs it"
    return subprocess.run([path, *args], input=data, capture_output=True, timeout=60)


def test_metadata_produce_consume(broker) -> None:
    lines = b"".join(f"key{i}:value {i}\n".encode() for i in range(100))
    produced = kcat("-b", broker.bootstrap, "-P", "-t", "kc", "-K", ":", data=lines)
    assert produced.returncode == 0, produced.stderr
    listing = kcat("-b", broker.bootstrap, "-L", "-t", "kc")
    assert listing.returncode == 0, listing.stderr
    assert b'topic "kc" with 1 partitions' in listing.stdout
    consumed = kcat("-b", broker.bootstrap, "-C", "-t", "kc", "-e", "-f", "%k|%s|%o\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.decode().splitlines() == [f"key{i}|value {i}|{i}" for i in range(100)]


def test_balanced_consumer_commits_and_resumes(broker) -> None:
    """kcat -G (librdkafka 2.0.2: JoinGroup v5, OffsetCommit v7) reads what was produced, commits it at exit, and
    a second run of the same group reads only what came after."""
    produced = kcat("-b", broker.bootstrap, "-P", "-t", "kg", data=b"".join(f"m{i}\n".encode() for i in range(5)))
    assert produced.returncode == 0, produced.stderr
    group = ["-b", broker.bootstrap, "-G", "kgroup", "-X", "session.timeout.ms=6000", "-e", "-q", "kg"]
    first = kcat(*group, "-o", "beginning")
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().split() == [f"m{i}" for i in range(5)]
    assert kcat("-b", broker.bootstrap, "-P", "-t", "kg", data=b"m5\nm6\n").returncode == 0
    second = kcat(*group)
    assert second.returncode == 0, second.stderr
    assert second.stdout.decode().split() == ["m5", "m6"]
