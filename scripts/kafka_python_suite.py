#!/usr/bin/env python3
"""Run kafka-python's own integration suite against mq brokers and print what passed.

kafka-python's integration tests (``test/integration/`` of its source distribution) start a real Kafka from a
downloaded tarball through ``test/integration/fixtures.py``. This script:

1. takes the sdist of the installed kafka-python version from ``--cache`` (default ``~/.cache/mq``), downloading it
   there with ``pip download --no-binary :all:`` the first time;
2. unpacks its ``test/`` folder and ``pyproject.toml`` (pytest settings) into a temporary directory, adds the
   ``test/__init__.py`` the sdist leaves out (without it ``test`` is the standard library's package), and puts
   ``scripts/kafka_python_fixtures.py`` in place of ``fixtures.py``: the same fixtures, starting mq brokers (on
   ZooKeeper, as kafka-python starts Kafka before 4.0, or standalone with ``--standalone``) instead of Kafka;
3. runs pytest on ``test/integration`` with ``KAFKA_VERSION`` (default 2.8.0, the release mq follows), the tests
   unchanged except those deselected in ``NOT_APPLICABLE``;
4. prints each test's outcome, the tests that do not apply and why, and a closing ``N passed, N failed, N skipped``
   line. With ``--json FILE`` it also writes each test's outcome and message there.

Exit status: 0 when every test that applies passed or was skipped by kafka-python itself, else 1.
Usage: ``scripts/kafka_python_suite.py [--standalone] [--json FILE] [-- PYTEST ARGS]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from client_suite import print_outcomes, run_pytest, use_this_checkout

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "kafka_python_fixtures.py"
DEFAULT_CACHE = Path(os.environ.get("MQ_CACHE_DIR") or Path.home() / ".cache" / "mq")

NOT_APPLICABLE = {
    "test/integration/test_consumer_integration.py::test_kafka_version_infer": (
        "asserts that kafka-python infers KAFKA_VERSION (2.8) from ApiVersions; mq keeps Kafka 2.8's ZooKeeper-era "
        "semantics but advertises the newer request versions that clients up to 4.x send (DescribeAcls v3, "
        "JoinGroup v9, ListOffsets v7, ...), from which kafka-python infers a 3.x broker"
    ),
}
"""Tests of kafka-python's suite that do not apply to mq as a ZooKeeper-mode Kafka 2.8 broker, and why
(deselected). The tests kafka-python skips itself for KAFKA_VERSION 2.8 (KRaft-only APIs of Kafka 4.x) are reported
as skipped."""


def sdist(version: str, cache: Path) -> Path:
    """The kafka-python ``version`` sdist in ``cache``, downloaded with pip when it is not there yet."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"kafka_python-{version}.tar.gz")) + sorted(cache.glob(f"kafka-python-{version}.tar.gz"))
    if found:
        return found[0]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    command += ["--no-binary", ":all:", "--no-deps", "--dest", str(cache), f"kafka-python=={version}"]
    subprocess.run(command, check=True)
    found = sorted(cache.glob(f"kafka*python-{version}.tar.gz"))
    if not found:
        raise SystemExit(f"pip download left no kafka-python {version} sdist in {cache}")
    return found[0]


def unpack(archive: Path, into: Path) -> None:
    """Extract the sdist's ``test/`` tree and ``pyproject.toml`` into ``into``, with mq's fixtures in place."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, path = member.name.partition("/")
            if path == "pyproject.toml" or path.startswith("test/"):
                member.name = path
                members.append(member)
        tar.extractall(into, members=members, filter="data")
    if not (into / "test" / "integration" / "fixtures.py").exists():
        raise SystemExit(f"{archive.name} has no test/integration/fixtures.py: not a suite this script knows")
    (into / "test" / "__init__.py").touch()
    shutil.copyfile(FIXTURES, into / "test" / "integration" / "fixtures.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kafka-python", default=importlib.metadata.version("kafka-python"), metavar="VERSION")
    parser.add_argument("--kafka-version", default="2.8.0", help="KAFKA_VERSION the tests target (default 2.8.0)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"sdist cache (default {DEFAULT_CACHE})")
    parser.add_argument("--standalone", action="store_true", help="standalone brokers instead of ZooKeeper mode")
    parser.add_argument("--mq", default=f"{shlex.quote(sys.executable)} -m mq", help="the command that runs mq")
    parser.add_argument("--json", type=Path, help="write {node id: [outcome, message]} here")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    options = parser.parse_args(argv)
    use_this_checkout()  # for the brokers and fixtures started below
    archive = sdist(options.kafka_python, options.cache)
    with tempfile.TemporaryDirectory(prefix="kafka-python-suite-") as work:
        root = Path(work)
        unpack(archive, root)
        env = {key: value for key, value in os.environ.items() if key not in ("KAFKA_URI", "ZOOKEEPER_URI")}
        env["PYTHONPATH"] = os.pathsep.join([str(root), env["PYTHONPATH"]])
        env["KAFKA_VERSION"] = options.kafka_version
        env["MQ_COMMAND"] = options.mq
        env["MQ_STANDALONE"] = "1" if options.standalone else "0"
        command = [sys.executable, "-m", "pytest", "test/integration", "-p", "no:cacheprovider", "-q"]
        for test in NOT_APPLICABLE:
            command += ["--deselect", test]
        command += options.pytest_args
        print(
            f"kafka-python {options.kafka_python} integration suite, KAFKA_VERSION={options.kafka_version}, "
            f"{'standalone' if options.standalone else 'ZooKeeper-mode'} mq brokers",
            flush=True,
        )
        results = run_pytest(command, root, env)
    return print_outcomes(results, NOT_APPLICABLE, options.json)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
