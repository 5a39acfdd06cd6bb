"""Usage errors of ``mq export`` and ``mq segments-to-parquet``: one line on stderr and exit 2, before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mq.cli.main import cli


@pytest.mark.parametrize(
    ("partition_by", "message"),
    [
        ("day", "Error: --partition-by: cannot partition by day: choose from topic, partition, date"),
        ("topic,date,topic", "Error: --partition-by: a column is named twice in 'topic,date,topic'"),
    ],
)
def test_bad_partition_columns(tmp_path: Path, partition_by: str, message: str) -> None:
    export = ["export", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--to", str(tmp_path / "out")]
    segments = ["segments-to-parquet", "--log-dir", str(tmp_path), "--to", str(tmp_path / "out")]
    for args in (export, segments):
        result = CliRunner().invoke(cli, [*args, "--partition-by", partition_by])
        assert result.exit_code == 2
        assert result.stderr.strip() == message


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--bootstrap-server", "b:9092", "--to", "out"],
        ["export", "--bootstrap-server", "b:9092", "--topic", "t", "--to", "out", "--max-offsets-per-chunk", "0"],
        ["export", "--bootstrap-server", "b:9092", "--topic", "t", "--to", "out", "--format", "csv"],
        ["segments-to-parquet", "--log-dir", "/no/such/dir", "--to", "out"],
    ],
)
def test_click_usage_errors(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "Error:" in result.stderr
