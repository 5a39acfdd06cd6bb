"""The shipped logging config: Kafka's log files in a log dir, size rotation, and the run-time levels of loggers."""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from mq.errors import ErrorCode, KafkaError
from mq.protocol.configs import AlterConfigOp, ConfigSource
from mq.server import logging_config
from mq.server.handlers.configs import _alter_log_levels, describe_broker_loggers
from mq.server.logging_config import SHIPPED_LOGGING_CONFIG, default_logging_config

NAMED = ("kafka.controller", "state.change.logger", "kafka.request.logger", "kafka.authorizer.logger")
NAMED += ("kafka.log.LogCleaner", "kafka.admin")


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """The process's logging as it was: handlers, levels and propagation of the root and the named loggers."""
    root_handlers, root_level = list(logging.root.handlers), logging.root.level
    yield
    for logger in [logging.root, *(logging.getLogger(n) for n in NAMED)]:
        for handler in list(logger.handlers):
            if handler not in root_handlers:
                handler.close()
        logger.handlers = []
        if logger is not logging.root:
            logger.setLevel(logging.NOTSET)
            logger.propagate = True
    logging.root.handlers = root_handlers
    logging.root.setLevel(root_level)


def read(path: Path) -> str:
    for handler in logging.root.handlers + [h for n in NAMED for h in logging.getLogger(n).handlers]:
        handler.flush()
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_each_concern_has_its_own_file_in_the_log_dir(tmp_path: Path, restored_logging: None) -> None:
    logging_config.configure(str(tmp_path / "logs"))
    logging.getLogger("mq.server.broker").info("broker line")
    logging.getLogger("kafka.admin").info("admin line")
    logging.getLogger("kafka.controller").info("controller line")
    logging.getLogger("state.change.logger").info("state line")
    logging.getLogger("kafka.log.LogCleaner").info("cleaner line")
    logging.getLogger("kafka.authorizer.logger").info("authorizer line")
    logging.getLogger("kafka.request.logger").info("request line at INFO")
    logging.getLogger("kafka.request.logger").warning("request line at WARNING")
    logs = tmp_path / "logs"
    expected = {
        "server.log": ["INFO broker line (mq.server.broker)", "INFO admin line (kafka.admin)"],
        "controller.log": ["INFO controller line (kafka.controller)"],
        "state-change.log": ["INFO state line (state.change.logger)"],
        "log-cleaner.log": ["INFO cleaner line (kafka.log.LogCleaner)"],
        "kafka-authorizer.log": ["INFO authorizer line (kafka.authorizer.logger)"],
        "kafka-request.log": ["WARNING request line at WARNING (kafka.request.logger)"],
    }
    for name, lines in expected.items():
        assert [line.split("] ", 1)[1] for line in read(logs / name).splitlines()] == lines, name


def test_files_roll_by_size_and_keep_their_backups(tmp_path: Path, restored_logging: None) -> None:
    logging_config.configure(str(tmp_path))
    handler = next(h for h in logging.root.handlers if isinstance(h, logging.handlers.RotatingFileHandler))
    assert (handler.maxBytes, handler.backupCount) == (100 * 1024 * 1024, 10)
    handler.maxBytes, handler.backupCount = 200, 2
    for i in range(20):
        logging.getLogger("mq.test").info("line %02d %s", i, "x" * 40)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("server.log"))
    assert names == ["server.log", "server.log.1", "server.log.2"]
    assert "line 19" in read(tmp_path / "server.log")
    assert "line 00" not in "".join(read(tmp_path / n) for n in names)  # older than the backups kept


def test_a_missing_logging_config_is_reported(tmp_path: Path, restored_logging: None) -> None:
    with pytest.raises(FileNotFoundError, match="nope.ini"):
        logging_config.configure(str(tmp_path), str(tmp_path / "nope.ini"))


def change(name: str, op: AlterConfigOp, value: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, config_operation=int(op), value=value)


def test_broker_loggers_are_described_and_set_with_kafka_level_names(restored_logging: None) -> None:
    logging.root.setLevel(logging.INFO)
    controller = logging.getLogger("kafka.controller")
    described = {e["name"]: e for e in describe_broker_loggers()}
    assert next(iter(described)) == "root"
    assert described["kafka.controller"]["value"] == "INFO"
    assert described["kafka.controller"]["config_source"] == ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
    _alter_log_levels([change("kafka.controller", AlterConfigOp.SET, "TRACE")], validate_only=False)
    assert controller.isEnabledFor(logging_config.TRACE)
    assert {e["name"]: e["value"] for e in describe_broker_loggers()}["kafka.controller"] == "TRACE"
    _alter_log_levels([change("kafka.controller", AlterConfigOp.SET, "OFF")], validate_only=True)
    assert controller.isEnabledFor(logging_config.TRACE)  # validate only: unchanged
    _alter_log_levels([change("kafka.controller", AlterConfigOp.SET, "WARN")], validate_only=False)
    assert not controller.isEnabledFor(logging.INFO)
    _alter_log_levels([change("kafka.controller", AlterConfigOp.DELETE)], validate_only=False)
    assert controller.getEffectiveLevel() == logging.INFO  # the root's again


@pytest.mark.parametrize(
    ("bad", "code", "message"),
    [
        (change("no.such.logger", AlterConfigOp.SET, "DEBUG"), ErrorCode.INVALID_CONFIG, "Logger no.such.logger"),
        (change("kafka.controller", AlterConfigOp.SET, "debug"), ErrorCode.INVALID_CONFIG, "not a supported log"),
        (change("root", AlterConfigOp.DELETE), ErrorCode.INVALID_REQUEST, "Removing the log level of the root"),
        (change("kafka.controller", AlterConfigOp.APPEND, "DEBUG"), ErrorCode.INVALID_REQUEST, "APPEND operation"),
    ],
)
def test_bad_logger_changes_are_refused_and_change_nothing(
    bad: SimpleNamespace, code: ErrorCode, message: str, restored_logging: None
) -> None:
    controller = logging.getLogger("kafka.controller")
    with pytest.raises(KafkaError, match=message) as raised:
        _alter_log_levels([change("kafka.controller", AlterConfigOp.SET, "DEBUG"), bad], validate_only=False)
    assert raised.value.code == code
    assert controller.level == logging.NOTSET


def test_the_shipped_logging_config_is_package_data_an_operators_copy_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_logging_config() == SHIPPED_LOGGING_CONFIG
    assert SHIPPED_LOGGING_CONFIG.parent == Path(logging_config.__file__).parent
    own = tmp_path / "config" / "logging.ini"
    own.parent.mkdir()
    own.write_text(SHIPPED_LOGGING_CONFIG.read_text(encoding="utf-8"), encoding="utf-8")
    assert default_logging_config() == Path("config/logging.ini")
