"""The broker's logging: where its lines go, and the levels of its loggers (Kafka's Log4jController).

Without a log directory every line goes to stderr at INFO, in Kafka's layout ``[time] LEVEL message (logger)``.
With one (``mq server start --log-dir DIR`` or the ``LOG_DIR`` environment variable, Kafka's ``kafka.logs.dir``) the
logging config file (``config/logging.ini`` of the current directory, an operator's own, else the one shipped in the
package, ``mq/server/logging.ini``; Python's ``logging.config.fileConfig`` format, ``%(log_dir)s`` = DIR)
lays DIR out as Kafka does: server.log (root, also on stderr), controller.log (``kafka.controller``),
state-change.log (``state.change.logger``), log-cleaner.log (``kafka.log.LogCleaner``), kafka-request.log
(``kafka.request.logger``, WARNING unless raised), kafka-authorizer.log (``kafka.authorizer.logger``), each
rotated by size.

Levels carry Kafka's (log4j) names on the wire: OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE; FATAL is Python's
CRITICAL, TRACE a level below DEBUG, OFF one above CRITICAL. The root logger is named ``root``.
"""

from __future__ import annotations

import logging
import logging.config
import sys
from pathlib import Path

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
LOGGING_CONFIG = "config/logging.ini"
"""An operator's logging config file, read when a broker starts in the directory holding it."""
SHIPPED_LOGGING_CONFIG = Path(__file__).with_name("logging.ini")
"""The logging config shipped in the package: ``python -m mq.server.logging_config`` prints it."""
ROOT_LOGGER = "root"

TRACE = 5
OFF = logging.CRITICAL + 10
logging.addLevelName(TRACE, "TRACE")
logging.addLevelName(OFF, "OFF")

KAFKA_LEVELS = {
    "OFF": OFF,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}
"""Kafka's valid log levels (``LogLevelConfig.VALID_LOG_LEVELS``) and the Python level of each."""
_KAFKA_NAMES = {level: name for name, level in KAFKA_LEVELS.items()}


def default_logging_config() -> Path:
    """``config/logging.ini`` of the current directory, else the shipped one."""
    here = Path(LOGGING_CONFIG)
    return here if here.exists() else SHIPPED_LOGGING_CONFIG


def configure(log_dir: str | None, config_file: str | None = None) -> None:
    """Log to stderr only (``log_dir`` None), or to the files of ``config_file`` (default: ``default_logging_config``)
    in ``log_dir``, which is created."""
    if log_dir is None:
        handlers = [logging.StreamHandler(sys.stderr)]
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, handlers=handlers, force=True)
        return
    path = Path(config_file) if config_file is not None else default_logging_config()
    if not path.is_file():
        raise FileNotFoundError(f"logging config file {path} not found")
    directory = Path(log_dir)
    directory.mkdir(parents=True, exist_ok=True)
    logging.config.fileConfig(path, defaults={"log_dir": str(directory)}, disable_existing_loggers=False)


def kafka_level_name(level: int) -> str:
    """Kafka's name of a Python level (the nearest at or above it)."""
    return _KAFKA_NAMES.get(level) or next(_KAFKA_NAMES[v] for v in sorted(_KAFKA_NAMES) if v >= level)


def loggers() -> dict[str, str]:
    """Every logger the process has, ``root`` first, with its effective level's Kafka name (Log4jController's
    ``loggers``)."""
    levels = {ROOT_LOGGER: kafka_level_name(logging.root.level)}
    for name in sorted(logging.root.manager.loggerDict):
        logger = logging.root.manager.loggerDict[name]
        if isinstance(logger, logging.Logger):
            levels[name] = kafka_level_name(logger.getEffectiveLevel())
    return levels


def logger_exists(name: str) -> bool:
    """Whether ``name`` is the root logger or a logger the process created."""
    return name == ROOT_LOGGER or isinstance(logging.root.manager.loggerDict.get(name), logging.Logger)


def set_level(name: str, kafka_level: str) -> None:
    """Set a logger's level by its Kafka name (``logger_exists(name)`` and ``kafka_level`` in KAFKA_LEVELS)."""
    logger = logging.root if name == ROOT_LOGGER else logging.getLogger(name)
    logger.setLevel(KAFKA_LEVELS[kafka_level])


def unset_level(name: str) -> None:
    """Let a logger (not the root) take its level from its parents again."""
    logging.getLogger(name).setLevel(logging.NOTSET)


if __name__ == "__main__":
    sys.stdout.write(SHIPPED_LOGGING_CONFIG.read_text(encoding="utf-8"))
