"""``mq leader-election``: Kafka's LeaderElectionCommand (ElectLeaders through the brokers).

The partitions come from ``--topic``/``--partition``, a JSON file (``{"partitions": [{"topic": T, "partition":
P}]}``) or all of them (None: the controller picks every eligible partition). Output lines follow Kafka; the
"Valid replica already elected" line lists the partitions whose election was not needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

from mq.client.admin import ElectionResult
from mq.errors import ErrorCode
from mq.topic_partition import TopicPartition


class ElectionType(IntEnum):
    """ElectLeaders' election type."""

    PREFERRED = 0
    UNCLEAN = 1


def parse_election_type(text: str) -> ElectionType:
    """``preferred`` or ``unclean`` in any case; ValueError otherwise."""
    try:
        return ElectionType[text.strip().upper()]
    except KeyError:
        raise ValueError(f"Invalid election type {text!r}: use PREFERRED or UNCLEAN") from None


def election_outcomes(
    results: Mapping[TopicPartition, ElectionResult],
) -> tuple[list[TopicPartition], list[TopicPartition], list[tuple[TopicPartition, ElectionResult]]]:
    """The partitions elected, those whose election was not needed, and those that failed, each sorted."""
    ordered = sorted(results.items())
    succeeded = [tp for tp, r in ordered if r.error == ErrorCode.NONE]
    noop = [tp for tp, r in ordered if r.error == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [(tp, r) for tp, r in ordered if r.error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
    return succeeded, noop, failed


def failure_detail(result: ElectionResult) -> str:
    return f"{result.error.name}: {result.message}" if result.message else result.error.name


def render_election(
    election_type: ElectionType, results: Mapping[TopicPartition, ElectionResult]
) -> tuple[list[str], int]:
    """Kafka's lines for an ElectLeaders answer and the number of partitions that could not be elected."""
    succeeded, noop, failed = election_outcomes(results)
    kind = election_type.name
    lines = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({kind}) for partitions {', '.join(map(str, succeeded))}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(map(str, noop))}")
    for tp, result in failed:
        lines.append(f"Error completing leader election ({kind}) for partition: {tp}: {failure_detail(result)}")
    return lines, len(failed)


def failure_message(failed: int) -> str:
    return f"{failed} replica(s) could not be elected"
