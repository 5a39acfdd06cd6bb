"""Shared test fixtures. With MQ_PURE_PYTHON=1 the tests import the modules the build compiles
(``mq.compiled``) from their source: the pure-Python fallback, tested as the compiled ones are."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from mq.compiled import use_pure_python

if os.environ.get("MQ_PURE_PYTHON"):
    use_pure_python()


@pytest.fixture(scope="session")
def mq_command() -> list[str]:
    """The installed ``mq`` console script, as a user runs it."""
    script = Path(sys.executable).with_name("mq")
    if script.exists():
        return [str(script)]
    found = shutil.which("mq")
    if found is None:
        pytest.fail("the mq console script is not installed: run `pip install -e .`")
    return [found]
