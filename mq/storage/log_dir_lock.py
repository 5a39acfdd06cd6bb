"""The ``.lock`` file of a log directory: held (``flock``) by the one process that owns the directory.

Kafka's ``.lock`` is empty; mq's holder also writes who it is, one ``key=value`` per line (``pid``, ``started``
as ISO-8601 UTC, ``command``), so a refused start can name the running broker. Readers ignore keys they do not know
and treat an empty file as an unknown holder (a Kafka broker, or an mq broker before this record existed). The
lock goes with the process: a crashed holder leaves a stale record and no lock, and the next holder overwrites it.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from mq.errors import KafkaStorageError

LOCK_FILE = ".lock"


class LogDirInUseError(KafkaStorageError):
    """Another process holds a log directory's lock."""

    def __init__(self, directory: Path, holder: Mapping[str, str]) -> None:
        if "pid" in holder:
            since = f" (started {holder['started']})" if "started" in holder else ""
            message = f"log directory {directory} is in use by mq server pid {holder['pid']}{since}"
        else:  # Kafka's words for a holder that left no record
            message = (
                f"Failed to acquire lock on file .lock in {directory}. A Kafka instance in another process or thread "
                "is using this directory."
            )
        super().__init__(message)
        self.directory = directory
        self.holder = dict(holder)


def holder_record() -> str:
    """This process's record: pid, start time (now) and command line."""
    started = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    command = " ".join(sys.orig_argv).replace("\n", " ")
    return f"pid={os.getpid()}\nstarted={started}\ncommand={command}\n"


def parse_holder(text: str) -> dict[str, str]:
    """The ``key=value`` lines of a lock file (malformed lines are skipped)."""
    fields = (line.partition("=") for line in text.splitlines())
    return {key.strip(): value.strip() for key, sep, value in fields if sep and key.strip()}


def _read_holder(fd: int) -> dict[str, str]:
    return parse_holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))


class LogDirLocks:
    """The locks of a set of log directories, taken all or none; ``release`` gives them back."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    @classmethod
    def acquire(cls, directories: Iterable[Path]) -> LogDirLocks:
        """Lock each directory (it must exist) and record this process in its ``.lock``; raises LogDirInUseError
        naming the holder, after releasing the locks already taken, when one is held."""
        record = holder_record().encode("utf-8")
        fds: list[int] = []
        try:
            for directory in directories:
                fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise LogDirInUseError(directory, holder) from None
                fds.append(fd)
                os.ftruncate(fd, 0)
                os.pwrite(fd, record, 0)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return cls(fds)

    def release(self) -> None:
        """Unlock (the record stays, stale, until the next holder overwrites it)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)


def check_free(directories: Iterable[Path]) -> None:
    """Raise LogDirInUseError when a process holds one of the existing ``directories``; creates and writes
    nothing (a directory without ``.lock`` is free)."""
    for directory in directories:
        try:
            fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raise LogDirInUseError(directory, _read_holder(fd)) from None
        finally:
            os.close(fd)
