"""The build: pyproject.toml declares the package; this adds the mypyc-compiled modules of ``mq/compiled.py`` as
optional extensions (a failed compilation leaves those modules pure Python). ``MQ_PURE_PYTHON=1`` builds none."""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any

from setuptools import setup


def compiled_extensions() -> list[Any]:
    if os.environ.get("MQ_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    listed = runpy.run_path(str(Path(__file__).parent / "mq" / "compiled.py"))
    paths = [name.replace(".", "/") + ".py" for name in listed["COMPILED_MODULES"]]
    extensions: list[Any] = mypycify(paths, group_name=listed["GROUP"])
    for extension in extensions:
        extension.optional = True  # no compiler, no extension: the module stays pure Python
    return extensions


setup(ext_modules=compiled_extensions())
