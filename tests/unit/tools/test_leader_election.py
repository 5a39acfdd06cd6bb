from __future__ import annotations

import pytest
from click.testing import CliRunner

from mq.cli.main import cli
from mq.client.admin import ElectionResult
from mq.errors import ErrorCode
from mq.tools.leader_election import ElectionType, failure_message, parse_election_type, render_election
from mq.topic_partition import TopicPartition as TP


@pytest.mark.parametrize(
    ("text", "kind"),
    [("preferred", 0), ("PREFERRED", 0), ("Preferred", 0), ("unclean", 1), ("UNCLEAN", 1), (" Unclean ", 1)],
)
def test_election_type_is_case_insensitive(text: str, kind: int) -> None:
    assert parse_election_type(text) == kind


def test_unknown_election_type() -> None:
    with pytest.raises(ValueError, match="Invalid election type 'both'"):
        parse_election_type("both")


def test_lines_for_each_outcome() -> None:
    results = {
        TP("foo", 1): ElectionResult(ErrorCode.NONE),
        TP("foo", 0): ElectionResult(ErrorCode.NONE),
        TP("bar", 0): ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed"),
        TP("foo", 2): ElectionResult(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "not in the isr"),
        TP("baz", 3): ElectionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    }
    lines, failed = render_election(ElectionType.PREFERRED, results)
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1",
        "Valid replica already elected for partitions bar-0",
        "Error completing leader election (PREFERRED) for partition: baz-3: UNKNOWN_TOPIC_OR_PARTITION",
        "Error completing leader election (PREFERRED) for partition: foo-2: PREFERRED_LEADER_NOT_AVAILABLE: "
        "not in the isr",
    ]
    assert failed == 2
    assert failure_message(failed) == "2 replica(s) could not be elected"


def test_unclean_lines_name_the_type() -> None:
    lines, failed = render_election(ElectionType.UNCLEAN, {TP("t", 0): ElectionResult(ErrorCode.NONE)})
    assert (lines, failed) == (["Successfully completed leader election (UNCLEAN) for partitions t-0"], 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--election-type", "preferred", "--all-topic-partitions"], 'Missing required argument "[bootstrap-server]"'),
        (["--bootstrap-server", "b", "--all-topic-partitions"], 'Missing required argument "[election-type]"'),
        (["--bootstrap-server", "b", "--election-type", "x", "--all-topic-partitions"], "Invalid election type"),
        (
            ["--bootstrap-server", "b", "--election-type", "preferred"],
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
        ),
        (
            ["--bootstrap-server", "b", "--election-type", "unclean", "--topic", "t", "--all-topic-partitions"],
            "One and only one of the following options is required",
        ),
        (
            ["--bootstrap-server", "b", "--election-type", "preferred", "--topic", "t"],
            "Both --topic and --partition are required",
        ),
        (
            ["--bootstrap-server", "b", "--election-type", "preferred", "--partition", "1"],
            "Both --topic and --partition are required",
        ),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["leader-election", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_json_file_errors_are_usage_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plan = tmp_path / "p.json"
    plan.write_text('{"partitions": [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 1}]}')
    args = ["--bootstrap-server", "b", "--election-type", "preferred", "--path-to-json-file", str(plan)]
    result = CliRunner().invoke(cli, ["leader-election", *args])
    assert result.exit_code == 2
    assert "Preferred replica election data contains duplicate partitions: [a,1]" in result.output
