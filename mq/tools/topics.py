"""``mq topics`` logic: Kafka's TopicCommand semantics over an admin connection, returning data.

``--topic`` selects by regex for every action but create (whole-name match, commas become ``|``, spaces and
surrounding quotes dropped). Describe prints Kafka 2.8's lines; configs shown are those whose source is not a
default (topic overrides and broker settings from the properties file), as the bootstrap-server path does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mq.topic_partition import INTERNAL_TOPICS

ACTIONS = ("create", "alter", "delete", "list", "describe")
REPORT_FLAGS = ("under_replicated_partitions", "unavailable_partitions", "topics_with_overrides")


class TopicCommandError(Exception):
    """A usage or operation error, worded as Kafka's tool words it."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: list[PartitionDescription]
    configs: dict[str, str] = field(default_factory=dict)
    """Configs whose source is not the default."""
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        if not self.partitions:
            return 0
        first = self.partitions[0]
        return len(first.replicas) - len(first.adding)


class TopicAdmin(Protocol):
    """What ``mq topics`` needs from an admin connection."""

    def list_topic_names(self) -> list[str]: ...

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]: ...

    def live_brokers(self) -> set[int]: ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None,
        config: Mapping[str, str],
    ) -> None: ...

    def create_partitions(self, name: str, total: int, assignment: Sequence[Sequence[int]] | None) -> None: ...

    def delete_topic(self, name: str) -> None: ...


def topic_pattern(argument: str) -> re.Pattern[str]:
    """Kafka's ``--topic`` whitelist: trimmed, quotes stripped, spaces removed, commas as alternatives."""
    text = argument.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    text = text.replace(" ", "").replace(",", "|")
    try:
        return re.compile(text)
    except re.error as exc:
        raise TopicCommandError(f"Invalid topic regex {argument!r}: {exc}", usage=True) from None


def select(names: Iterable[str], argument: str | None, exclude_internal: bool = False) -> list[str]:
    pattern = None if argument is None else topic_pattern(argument)
    return sorted(
        n
        for n in names
        if (pattern is None or pattern.fullmatch(n)) and not (exclude_internal and n in INTERNAL_TOPICS)
    )


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``1:2,3:4`` -> {0: [1, 2], 1: [3, 4]}: commas separate partitions, colons replicas (first = preferred)."""
    assignment: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            replicas = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise TopicCommandError(
                f"Invalid replica assignment '{text}': broker ids must be integers", usage=True
            ) from None
        if len(set(replicas)) != len(replicas):
            duplicates = sorted({b for b in replicas if replicas.count(b) > 1})
            raise TopicCommandError(
                f"Partition replica lists may not contain duplicate entries: {','.join(map(str, duplicates))}"
            )
        assignment[index] = replicas
    return assignment


def parse_configs(items: Iterable[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TopicCommandError(f"Invalid topic config '{item}': expected name=value", usage=True)
        configs[key.strip()] = value.strip()
    return configs


def validate_options(action: str | None, options: Mapping[str, object]) -> str:
    """Kafka's option rules; returns the action. ``options`` maps option names (underscored) to values."""
    chosen = [a for a in ACTIONS if options.get(a)]
    if len(chosen) != 1:
        raise TopicCommandError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete", usage=True
        )
    action = chosen[0]

    def given(name: str) -> bool:
        value = options.get(name)
        return value not in (None, False, (), [])

    def forbid(name: str, allowed: Sequence[str]) -> None:
        if given(name) and action not in allowed:
            flag = name.replace("_", "-")
            raise TopicCommandError(f'Option "[{flag}]" can\'t be used with option "[{action}]"', usage=True)

    forbid("config", ("create", "alter"))
    forbid("delete_config", ("alter",))
    forbid("partitions", ("create", "alter"))
    forbid("replication_factor", ("create",))
    forbid("replica_assignment", ("create", "alter"))
    for flag in REPORT_FLAGS:
        forbid(flag, ("describe",))
    if sum(1 for flag in REPORT_FLAGS if given(flag)) > 1:
        raise TopicCommandError(
            "Only one of --under-replicated-partitions, --unavailable-partitions, --topics-with-overrides may be given",
            usage=True,
        )
    if action in ("create", "alter", "delete") and not given("topic"):
        raise TopicCommandError('Missing required argument "[topic]"', usage=True)
    if action == "create" and given("replica_assignment") and (given("partitions") or given("replication_factor")):
        raise TopicCommandError(
            'Option "[replica-assignment]" can\'t be used with option "[partitions]" or "[replication-factor]"',
            usage=True,
        )
    if action == "alter" and given("config"):
        raise TopicCommandError(
            "Altering topic configuration from this script is not supported with --bootstrap-server; "
            "use mq configs or the AlterConfigs API",
            usage=True,
        )
    if action == "alter" and not given("partitions"):
        raise TopicCommandError('Missing required argument "[partitions]"', usage=True)
    return action


def describe_lines(
    topic: TopicDescription,
    *,
    live_brokers: set[int],
    under_replicated: bool = False,
    unavailable: bool = False,
    with_overrides: bool = False,
) -> list[str]:
    """Kafka 2.8 describe output for one topic (header line, then partition lines), honouring report flags."""
    configs = ",".join(f"{k}={v}" for k, v in topic.configs.items())
    header = f"Topic: {topic.name}"
    if topic.topic_id:
        header += f"\tTopicId: {topic.topic_id}"
    header += (
        f"\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: {topic.replication_factor}\tConfigs: {configs}"
    )
    if with_overrides:
        return [header] if topic.configs else []
    lines = [] if (under_replicated or unavailable) else [header]
    for p in sorted(topic.partitions, key=lambda p: p.partition):
        if under_replicated and len(p.isr) >= len(p.replicas):
            continue
        if unavailable and p.leader >= 0 and p.leader in live_brokers:
            continue
        leader = str(p.leader) if p.leader >= 0 else "none"
        line = (
            f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
        if p.adding or p.removing:
            line += f"\tAdding Replicas: {','.join(map(str, p.adding))}\tRemoving Replicas: {','.join(map(str, p.removing))}"
        lines.append(line)
    return lines


def created_lines(name: str) -> list[str]:
    """What create prints: the metric-name collision warning for names with '.' or '_', then the result."""
    lines = []
    if "." in name or "_" in name:
        lines.append(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
            "collide. To avoid issues it is best to use either, but not both."
        )
    lines.append(f"Created topic {name}.")
    return lines
