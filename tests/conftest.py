"""Shared test fixtures."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


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
