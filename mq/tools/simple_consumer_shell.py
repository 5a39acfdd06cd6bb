"""Kafka 0.8's SimpleConsumerShell: what it checks before reading one partition, and the lines it prints.

Stdout holds, per message, ``next offset = <offset + 1>`` (with --print-offsets) and the formatter's rendering
(Kafka's DefaultMessageFormatter: the value and a newline unless ``print.key`` and friends say more); with
--no-wait-at-logend a fetch at the end of the log ends the run with ``Terminating. Reached the end of partition
(<topic>, <p>) at offset <o>``. Refusals are ``Error: ...`` lines on stderr in Kafka's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

EARLIEST = -2
LATEST = -1
USE_LEADER_REPLICA = -1
DEFAULT_CLIENT_ID = "SimpleConsumerShell"
DEFAULT_FORMATTER = "kafka.tools.DefaultMessageFormatter"
NO_OP_FORMATTER = "NoOpMessageFormatter"


class ShellError(Exception):
    """A refusal of the shell, as Kafka's SimpleConsumerShell words it (exit code 1)."""


class PartitionLike(Protocol):
    @property
    def partition(self) -> int: ...

    @property
    def leader(self) -> int: ...

    @property
    def replicas(self) -> tuple[int, ...]: ...


def fetch_broker(topic: str, partition: int, replica: int, partitions: Sequence[PartitionLike]) -> int:
    """The broker to read ``partition`` from: its leader for ``replica`` -1, else ``replica`` when it holds the
    partition. mq's brokers serve fetches from a partition's leader only, so another replica is refused."""
    found = next((p for p in partitions if p.partition == partition), None)
    if found is None:
        raise ShellError(f"partition {partition} does not exist for topic {topic}")
    if replica == USE_LEADER_REPLICA:
        if found.leader < 0:
            raise ShellError(
                f"user specifies to fetch from leader for partition ({topic}, {partition}) which has not been "
                "elected yet"
            )
        return found.leader
    if replica not in found.replicas:
        raise ShellError(f"replica {replica} does not exist for partition ({topic}, {partition})")
    if replica != found.leader:
        raise ShellError(
            f"replica {replica} of partition ({topic}, {partition}) is not its leader ({found.leader}), and mq's "
            "brokers serve fetches from the leader only"
        )
    return replica


def check_start_offset(offset: int) -> None:
    """-2 (earliest), -1 (latest) or an offset; anything below -2 is refused with Kafka's message."""
    if offset < EARLIEST:
        raise ShellError(f"Invalid starting offset: {offset}")


def prints_messages(formatter: str) -> bool:
    """Whether ``--formatter`` renders messages (the default formatter) or prints nothing (NoOpMessageFormatter);
    another class cannot be loaded by mq."""
    name = formatter.rsplit(".", 1)[-1].rsplit("$", 1)[-1]
    if name == "DefaultMessageFormatter":
        return True
    if name == NO_OP_FORMATTER:
        return False
    raise ValueError(f"cannot load formatter class {formatter}: DefaultMessageFormatter and {NO_OP_FORMATTER} only")


def next_offset_line(offset: int) -> str:
    """--print-offsets: printed before each message, the offset after it."""
    return f"next offset = {offset + 1}\n"


def end_of_log_line(topic: str, partition: int, offset: int) -> str:
    """--no-wait-at-logend: printed when a fetch at ``offset`` finds no message."""
    return f"Terminating. Reached the end of partition ({topic}, {partition}) at offset {offset}\n"
