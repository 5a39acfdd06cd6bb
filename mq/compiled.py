"""The modules of the request path that the build compiles with mypyc (``setup.py``), where a C compiler is at
hand: the same source, turned into C extension modules, which Python imports in place of the ``.py`` files beside
them. Without a compiler (or with ``MQ_PURE_PYTHON=1`` at install time) the package is pure Python and behaves the
same; the test suite runs these modules' tests both ways.

The list holds modules that run for every produce, fetch and offset commit (framing, the hand-written readers, batch
headers, record validation, the log and its indexes) and that nothing replaces at run time: an instance of a compiled
class takes no attribute its class does not declare, and compiled code calls compiled functions directly, past any
name a test might patch. Compiled code also checks the declared types of what it is handed (a ``bytearray``
parameter refuses ``bytes``). This module imports the standard library only, so that the build reads it without the
package's dependencies.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

COMPILED_MODULES = (
    "mq.protocol.frame_fields",
    "mq.protocol.framing",
    "mq.protocol.produce_request",
    "mq.protocol.produce_response",
    "mq.protocol.offset_commit",
    "mq.protocol.fetch_request",
    "mq.records.batch_header",
    "mq.records.varint",
    "mq.records.validation",
    "mq.storage.index_file",
    "mq.storage.offset_index",
    "mq.storage.time_index",
    "mq.storage.leader_epoch_cache",
    "mq.storage.log_segment",
    "mq.storage.partition_log",
)
"""Dotted names; the build compiles ``<name with / for .>.py``."""

GROUP = "mq.compiled"
"""The shared library of the compiled modules is ``mq.compiled__mypyc`` (mypyc's group name plus its suffix)."""


def native_modules() -> list[str]:
    """The modules of ``COMPILED_MODULES`` imported from a compiled extension in this process."""
    return [
        name
        for name in COMPILED_MODULES
        if (module := sys.modules.get(name)) is not None and not str(getattr(module, "__file__", "")).endswith(".py")
    ]


class _SourceOnly(importlib.abc.MetaPathFinder):
    """Finds the listed modules' ``.py`` files, passing over the compiled extensions beside them."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED_MODULES:
            return None
        leaf = fullname.rpartition(".")[2] + ".py"
        for entry in path or sys.path:
            source = Path(entry) / leaf
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def use_pure_python() -> None:
    """From now on this process imports the listed modules from their source (call it before anything imports
    them): the pure-Python fallback, as an install without a compiler has it."""
    if not any(isinstance(finder, _SourceOnly) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceOnly())
