"""mq state-change-log-merger: several brokers' state-change logs merged by time, filtered by topic, partitions and
time; bad input is one line and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mq.cli.state_change_merger import state_change_log_merger

CONTROLLER = [
    "[2026-11-26 10:00:00,100] INFO [Controller id=1 epoch=1] Changed partition t-0 from NewPartition to "
    "OnlinePartition with state LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0) (state.change.logger)",
    "[2026-11-26 10:00:00,110] INFO [Controller id=1 epoch=1] Sending LeaderAndIsr request to broker 2 with 0 "
    "become-leader and 1 become-follower partitions (state.change.logger)",
    "[2026-11-26 10:00:02,000] INFO [Controller id=1 epoch=1] Changed partition my-topic-10 from OnlinePartition to "
    "OnlinePartition with state LeaderAndIsr(leader=2, leaderEpoch=1, isr=List(2), zkVersion=1) (state.change.logger)",
]
BROKER = [
    "[2026-11-26 10:00:00,105] INFO [Broker id=2] Follower t-0 starts at leader epoch 0 from offset 0 with high "
    "watermark 0. Previous leader epoch was -1. (state.change.logger)",
    "[2026-11-26 10:00:01,000] TRACE Broker 2 cached leader info [t,1] for partition (state.change.logger)",
    "a continuation line without a timestamp t-0",
]


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "state-change.log", tmp_path / "state-change.log.1"
    first.write_text("\n".join(CONTROLLER) + "\n")
    second.write_text("\n".join(BROKER) + "\n")
    return first, second


def run(*args: str) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(state_change_log_merger, list(args))
    return result.exit_code, result.stdout.splitlines(), result.stderr


def test_lines_of_every_file_come_out_in_time_order(logs: tuple[Path, Path]) -> None:
    code, lines, _ = run("--logs", f"{logs[0]},{logs[1]}")
    assert code == 0
    assert lines == [CONTROLLER[0], BROKER[0], BROKER[1], CONTROLLER[2]]  # lines naming no partition are left out


def test_files_are_found_by_regex_in_their_directory(logs: tuple[Path, Path]) -> None:
    code, lines, _ = run("--logs-regex", f"{logs[0].parent}/state-change.log.*")
    assert code == 0
    assert lines == [CONTROLLER[0], BROKER[0], BROKER[1], CONTROLLER[2]]


def test_topic_partitions_and_time_window_filter_lines(logs: tuple[Path, Path]) -> None:
    both = f"{logs[0]},{logs[1]}"
    assert run("--logs", both, "--topic", "t")[1] == [CONTROLLER[0], BROKER[0], BROKER[1]]
    assert run("--logs", both, "--topic", "t", "--partitions", "1")[1] == [BROKER[1]]
    assert run("--logs", both, "--topic", "my-topic", "--partitions", "10")[1] == [CONTROLLER[2]]
    window = ("--start-time", "2026-11-26 10:00:00,105", "--end-time", "2026-11-26 10:00:01,000")
    assert run("--logs", both, *window)[1] == [BROKER[0], BROKER[1]]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, 'exactly one of the two options "logs" or "logs-regex"'),
        (["--logs", "a", "--logs-regex", "b"], 2, 'exactly one of the two options "logs" or "logs-regex"'),
        (["--logs", "a", "--partitions", "0"], 2, 'The option "topic" needs to be provided'),
        (["--logs", "a", "--topic", "t", "--partitions", "0,1,0"], 2, "contains repeated entries: 0"),
        (["--logs", "a", "--topic", "t", "--partitions", "x"], 2, "Invalid partitions 'x'"),
        (["--logs", "a", "--start-time", "2026-11-26T10:00:00"], 2, "Invalid --start-time"),
        (["--logs", "/no/such/state-change.log"], 1, "cannot read /no/such/state-change.log"),
        (["--logs-regex", "/no/such/dir/state.*"], 2, "cannot list /no/such/dir"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(args: list[str], code: int, message: str) -> None:
    exit_code, lines, stderr = run(*args)
    assert (exit_code, lines) == (code, [])
    assert len(stderr.splitlines()) == 1
    assert message in stderr
