"""The modules the build compiles (``mq.compiled``): loaded compiled or from source as the run asks, and never a
compiled module older than the source it was built from (an edit after ``pip install -e .`` needs a rebuild)."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
from pathlib import Path

import mq
from mq.compiled import COMPILED_MODULES, native_modules

PACKAGE_ROOT = Path(mq.__file__).parent.parent


def _source(name: str) -> Path:
    return PACKAGE_ROOT / (name.replace(".", "/") + ".py")


def _extension(name: str) -> Path | None:
    source = _source(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        built = source.with_name(source.stem + suffix)
        if built.exists():
            return built
    return None


def test_the_listed_modules_load_compiled_where_built_unless_the_run_asks_for_source() -> None:
    for name in COMPILED_MODULES:
        importlib.import_module(name)
    built = {name for name in COMPILED_MODULES if _extension(name) is not None}
    assert set(native_modules()) == (set() if os.environ.get("MQ_PURE_PYTHON") else built)


def test_no_compiled_module_is_older_than_its_source() -> None:
    stale = [
        name
        for name in COMPILED_MODULES
        if (built := _extension(name)) is not None and built.stat().st_mtime < _source(name).stat().st_mtime
    ]
    assert not stale, f"compiled before their source last changed (run `python3 -m pip install -e .`): {stale}"
