"""The log dir lock: one holder at a time, named in a refusal; a check that writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mq.storage.log_dir_lock import LOCK_FILE, LogDirInUseError, LogDirLocks, check_free, parse_holder

HOLD = """
import sys, time
from pathlib import Path
from mq.storage.log_dir_lock import LogDirLocks
LogDirLocks.acquire([Path(sys.argv[1])])
print("held", flush=True)
time.sleep(60)
"""


def test_a_held_dir_names_its_holder_and_the_check_changes_nothing(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        record = (tmp_path / LOCK_FILE).read_text(encoding="utf-8")
        assert parse_holder(record)["pid"] == str(holder.pid)
        with pytest.raises(LogDirInUseError, match=f"is in use by mq server pid {holder.pid} \\(started "):
            check_free([tmp_path])
        with pytest.raises(LogDirInUseError) as refused:
            LogDirLocks.acquire([tmp_path])
        assert refused.value.holder["pid"] == str(holder.pid)
        assert (tmp_path / LOCK_FILE).read_text(encoding="utf-8") == record
    finally:
        holder.kill()
        holder.wait()
    check_free([tmp_path])  # the lock went with the process
    locks = LogDirLocks.acquire([tmp_path])
    assert parse_holder((tmp_path / LOCK_FILE).read_text(encoding="utf-8"))["pid"] == str(os.getpid())
    locks.release()


def test_a_lock_without_a_record_refuses_in_kafkas_words(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).touch()
    locks = LogDirLocks.acquire([tmp_path])
    (tmp_path / LOCK_FILE).write_text("")
    try:
        with pytest.raises(LogDirInUseError, match="Failed to acquire lock on file .lock in"):
            check_free([tmp_path])
    finally:
        locks.release()


def test_locks_are_all_or_none(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    held = LogDirLocks.acquire([second])
    with pytest.raises(LogDirInUseError):
        LogDirLocks.acquire([first, second])
    held.release()
    LogDirLocks.acquire([first]).release()  # the failed attempt let go of the first dir
    assert check_free([tmp_path / "missing"]) is None
