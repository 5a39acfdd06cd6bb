"""The file operations the export's commit protocol needs, on whatever file system Spark writes the output to.

``HadoopFileSystem`` goes through the JVM's Hadoop FileSystem of the session (``file:``, ``hdfs:``, object stores
with their connectors), so the driver commits output wherever the executors wrote it. Paths are strings in the
file system's own syntax; ``rename`` of a file is atomic on local and HDFS file systems.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class OutputFileSystem(Protocol):
    def exists(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        """(name, is directory) of the entries of ``path``; empty when it does not exist."""
        ...

    def list_files(self, path: str) -> list[str]:
        """Files under ``path``, recursively, as paths relative to it."""
        ...

    def mkdirs(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None:
        """Move a file; raises OSError when the file system refuses."""
        ...

    def delete(self, path: str) -> None:
        """Remove a file or a whole directory; nothing when it does not exist."""
        ...

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, text: str) -> None:
        """Create (or replace) ``path`` with ``text``; not atomic, see ``publish_text``."""
        ...


def join(*parts: str) -> str:
    return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts) if p)


def publish_text(fs: OutputFileSystem, path: str, text: str) -> None:
    """Write ``path`` atomically: a hidden temporary file next to it, then a rename."""
    directory, _, name = path.rpartition("/")
    temporary = join(directory, f".{name}.tmp")
    fs.write_text(temporary, text)
    fs.rename(temporary, path)


class HadoopFileSystem:
    """``OutputFileSystem`` through the session's Hadoop configuration (driver side only)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm: Any = spark.sparkContext._jvm
        self._jvm = jvm
        self._fs = jvm.org.apache.hadoop.fs.Path(root).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def qualify(self, path: str) -> str:
        """``path`` made absolute with its scheme (``file:/...``): the form the other methods are given."""
        return str(self._fs.makeQualified(self._path(path)).toString())

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        if not self.exists(path):
            return []
        return [(s.getPath().getName(), bool(s.isDirectory())) for s in self._fs.listStatus(self._path(path))]

    def list_files(self, path: str) -> list[str]:
        files: list[str] = []
        pending = [""]
        while pending:
            relative = pending.pop()
            for name, is_dir in self.list_dir(join(path, relative)):
                child = join(relative, name) if relative else name
                (pending if is_dir else files).append(child)
        return sorted(files)

    def mkdirs(self, path: str) -> None:
        if not self._fs.mkdirs(self._path(path)):
            raise OSError(f"cannot create directory {path}")

    def rename(self, source: str, target: str) -> None:
        if not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"cannot rename {source} to {target}")

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def read_text(self, path: str) -> str:
        stream = self._fs.open(self._path(path))
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
