"""What the scripts that run a Kafka client's own test suite against mq share (``kafka_python_suite.py``,
``aiokafka_suite.py``) and what their fixtures modules share (``kafka_python_fixtures.py``, ``aiokafka_fixtures.py``,
which import it from ``scripts/`` on ``PYTHONPATH``):

- ``use_this_checkout``: this checkout's ``mq`` and ``scripts/`` on ``sys.path`` and ``PYTHONPATH``, so the brokers
  and fixtures started run this code;
- ``run_pytest``: pytest with a junit report, read back as each test's outcome;
- ``print_outcomes``: each test's outcome, the tests deselected as not applicable with the reason, the optional
  ``--json`` file and the closing ``N passed, N failed, N skipped`` line; its exit status is 0 when nothing failed;
- ``LoggedProcess``: a child (``mq server start``, ZooKeeper) with its output in a file, waited for until it listens.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 60.0

log = logging.getLogger(__name__)


def use_this_checkout() -> None:
    """Put this checkout (for ``mq``) and ``scripts/`` (for this module) first on ``sys.path`` and ``PYTHONPATH``."""
    paths = [str(HERE.parent), str(HERE)]
    sys.path[:0] = paths
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, os.environ.get("PYTHONPATH")]))


def node_id(case: ElementTree.Element) -> str:
    """pytest's node id of a junit ``testcase``: ``test/integration/test_x.py[::Class]::name``."""
    parts = case.get("classname", "").split(".")
    module_end = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1) + 1
    path = "/".join(parts[:module_end]) + ".py"
    return "::".join([path, *parts[module_end:], case.get("name", "")])


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """Each test's outcome (passed, failed, error, skipped) and message from pytest's junit report."""
    results: dict[str, tuple[str, str]] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome, message = ("failed" if tag == "failure" else tag), element.get("message", "")
                break
        name = node_id(case)
        if outcome == "error" and results.get(name, ("", ""))[0] in ("passed", "failed"):
            name += " (teardown)"
        results[name] = (outcome, message)
    return results


def run_pytest(command: list[str], root: Path, env: Mapping[str, str]) -> dict[str, tuple[str, str]] | None:
    """Run pytest (``command``, without its report options) in ``root``; each test's outcome, or None when pytest
    wrote no report.

    The tests that failed are run once more, on their own (their module's brokers started afresh): one that passes
    then is ``flaky``, with the first failure as its message (these suites hold timing assertions, such as a first
    poll answered within 2 s, that a loaded machine can miss); one that fails again keeps its first failure."""
    results = _run_once(command, root, env, "report.xml")
    if not results:
        return results
    failed = sorted({name.removesuffix(" (teardown)") for name, (outcome, _) in results.items() if outcome in BAD})
    if failed:
        print(f"running {len(failed)} failed test(s) again: {' '.join(failed)}", flush=True)
        again = _run_once([*command, *failed], root, env, "report-again.xml") or {}
        for name in failed:
            if again.get(name, ("failed", ""))[0] == "passed" and f"{name} (teardown)" not in again:
                first = results[name] if name in results else results[f"{name} (teardown)"]
                results.pop(f"{name} (teardown)", None)
                results[name] = ("flaky", f"failed, then passed on its own: {first[1]}")
    return results


BAD = ("failed", "error")
"""The outcomes that fail a run."""


def _run_once(command: list[str], root: Path, env: Mapping[str, str], name: str) -> dict[str, tuple[str, str]] | None:
    report = root / name
    command = [*command, f"--junitxml={report}", "-o", "junit_family=xunit1", "--rootdir", str(root)]
    subprocess.run(command, cwd=root, env=dict(env), check=False)
    return outcomes(report) if report.exists() else None


def print_outcomes(
    results: dict[str, tuple[str, str]] | None, not_applicable: Mapping[str, str], json_path: Path | None
) -> int:
    """Print each outcome and the closing counts, write ``json_path``; 0 when every test run passed, was flaky or
    skipped."""
    if results is None:
        print("pytest wrote no report")
        return 1
    counts = {"passed": 0, "flaky": 0, "failed": 0, "skipped": 0}
    print()
    for name, (outcome, message) in sorted(results.items()):
        counts["failed" if outcome == "error" else outcome] += 1
        print(f"{outcome.upper():<14} {name}" + (f"  ({message.splitlines()[0][:150]})" if message else ""))
    for name, reason in not_applicable.items():
        print(f"{'NOT APPLICABLE':<14} {name}  ({reason})")
        results[name] = ("not applicable", reason)
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    print(f"\n{len(not_applicable)} not applicable")
    print(", ".join(f"{count} {outcome}" for outcome, count in counts.items()))
    return 0 if counts["failed"] == 0 else 1


def free_port() -> int:
    """A loopback port free now (another process may take it before it is used)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


class LoggedProcess:
    """A child process whose output goes to a file; ``dump_logs`` logs that file."""

    def __init__(self, args: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.log_path = Path(log_path)
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)

    @classmethod
    def listening_on(cls, args: list[str], log_path: Path, host: str, port: int) -> LoggedProcess:
        """Start ``args`` and wait until ``host:port`` accepts connections; RuntimeError (with its output) when it
        exits or does not listen within ``START_TIMEOUT``."""
        child = cls(args, log_path)
        deadline = time.monotonic() + START_TIMEOUT
        while not listening(host, port):
            if not child.running():
                raise RuntimeError(f"mq exited with {child.process.returncode}:\n{child.output()}")
            if time.monotonic() > deadline:
                child.stop()
                raise RuntimeError(f"mq did not listen within {START_TIMEOUT}s:\n{child.output()}")
            time.sleep(0.05)
        return child

    def running(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def dump_logs(self) -> None:
        log.info("%s:\n%s", self.log_path, self.output())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
