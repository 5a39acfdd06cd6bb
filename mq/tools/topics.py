"""``mq topics`` logic: Kafka's TopicCommand semantics over an admin connection, returning data.

``--topic`` selects by regex for every action but create (whole-name match, commas become ``|``, spaces and
surrounding quotes dropped). Describe prints Kafka 2.8's lines; configs shown are those whose source is not a
default (topic overrides and broker settings from the properties file), as the bootstrap-server path does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from mq.client.admin import AsyncAdmin, NewTopic
from mq.client.sync import SyncAdmin
from mq.errors import TopicExistsError
from mq.protocol.configs import ConfigSource, ResourceType
from mq.topic_partition import INTERNAL_TOPICS
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import MetadataStore

T = TypeVar("T")

ACTIONS = ("create", "alter", "delete", "list", "describe")
ALTER_CONFIG_WITH_BOOTSTRAP_SERVER = (
    'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]" (the kafka-configs CLI'
    " supports altering topic configs with a --bootstrap-server option)"
)
"""Kafka 2.8's kafka-topics refusal of ``--alter --config`` with ``--bootstrap-server``."""
CONFIG_DEPRECATION = (
    "WARNING: Altering topic configuration from this script has been deprecated and may be removed in future releases.\n"
    "         Going forward, please use kafka-configs.sh for this functionality"
)
PARTITIONS_WARNING = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of the messages "
    "will be affected"
)
DELETE_NOTE = "Note: This will have no impact if delete.topic.enable is not set to true."
REPORT_FLAGS = ("under_replicated_partitions", "unavailable_partitions", "topics_with_overrides")


class TopicCommandError(Exception):
    """A usage or operation error, worded as Kafka's tool words it."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int | None
    """None: no leader is known at all (ZooKeeper mode: no state znode yet)."""
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

    def delete_topic(self, name: str) -> bool | None:
        """Delete (or mark for deletion); False when it was already marked."""
        ...

    def marked_for_deletion(self) -> set[str]: ...

    def alter_config(self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str]) -> None: ...


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
    zookeeper = bool(options.get("zookeeper"))
    if action == "alter" and given("config") and not zookeeper:
        raise TopicCommandError(ALTER_CONFIG_WITH_BOOTSTRAP_SERVER, usage=True)
    if given("delete_config") and not zookeeper:
        raise TopicCommandError('Option "[delete-config]" can\'t be used with option "[bootstrap-server]"', usage=True)
    if action == "alter" and not (given("partitions") or given("config") or given("delete_config")):
        raise TopicCommandError('Missing required argument "[partitions]"', usage=True)
    if action == "create" and zookeeper and not given("replica_assignment"):
        for required in ("partitions", "replication_factor"):
            if not given(required):
                raise TopicCommandError(f'Missing required argument "[{required.replace("_", "-")}]"', usage=True)
    return action


def describe_lines(
    topic: TopicDescription,
    *,
    live_brokers: set[int],
    under_replicated: bool = False,
    unavailable: bool = False,
    with_overrides: bool = False,
    zookeeper: bool = False,
    marked_for_deletion: bool = False,
) -> list[str]:
    """Kafka 2.8 describe output for one topic (header line, then partition lines), honouring report flags."""
    configs = ",".join(f"{k}={v}" for k, v in topic.configs.items())
    header = f"Topic: {topic.name}"
    if topic.topic_id:
        header += f"\tTopicId: {topic.topic_id}"
    header += (
        f"\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: {topic.replication_factor}\tConfigs: {configs}"
    )
    if marked_for_deletion:
        header += "\tMarkedForDeletion: true"
    if with_overrides:
        return [header] if topic.configs else []
    lines = [] if (under_replicated or unavailable) else [header]
    for p in sorted(topic.partitions, key=lambda p: p.partition):
        if under_replicated and len(p.isr) >= len(p.replicas):
            continue
        if unavailable and p.leader is not None and p.leader >= 0 and p.leader in live_brokers:
            continue
        shown = p.leader is not None and (p.leader >= 0 or zookeeper)
        leader = str(p.leader) if shown else "none"
        line = (
            f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
        if p.adding or p.removing:
            line += f"\tAdding Replicas: {','.join(map(str, p.adding))}\tRemoving Replicas: {','.join(map(str, p.removing))}"
        if marked_for_deletion:
            line += "\tMarkedForDeletion: true"
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


CREATION_SUCCEEDED = "creation succeeded!"
"""Kafka 0.8.0's kafka-create-topic.sh line on success; a failure prints ``creation failed because of <message>``."""


def list_topic_lines(
    admin: TopicAdmin, topic: str | None, *, under_replicated: bool = False, unavailable: bool = False
) -> list[str]:
    """Kafka 0.8.0's kafka-list-topic.sh: ``topic: T\tpartition: P\tleader: L\treplicas: R\tisr: I`` per partition
    (topics sorted, leader ``none`` without a partition state), ``topic T doesn't exist!`` for a named topic that
    does not, ``no topics exist!`` when there are none. With report flags only the partitions that match one of them:
    ISR smaller than the replicas, or no leader / a leader that is not a live broker."""
    names = [topic] if topic else sorted(admin.list_topic_names())
    if not names:
        return ["no topics exist!"]
    live = admin.live_brokers()
    described = {t.name: t for t in admin.describe_topics(names)}
    lines = []
    for name in names:
        if name not in described:
            lines.append(f"topic {name} doesn't exist!")
            continue
        for p in sorted(described[name].partitions, key=lambda p: p.partition):
            matches = (under_replicated and len(p.isr) < len(p.replicas)) or (
                unavailable and (p.leader is None or p.leader not in live)
            )
            if (under_replicated or unavailable) and not matches:
                continue
            leader = "none" if p.leader is None else str(p.leader)
            lines.append(
                f"topic: {name}\tpartition: {p.partition}\tleader: {leader}"
                f"\treplicas: {','.join(map(str, p.replicas))}\tisr: {','.join(map(str, p.isr))}"
            )
    return lines


@dataclass
class TopicsOutcome:
    """What a topics command produced: Kafka's text lines, and the described topics for table/json output."""

    lines: list[str] = field(default_factory=list)
    topics: list[TopicDescription] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def _not_found(argument: str) -> TopicCommandError:
    return TopicCommandError(f"Topic '{argument}' does not exist as expected")


def run_topics(admin: TopicAdmin, options: Mapping[str, object]) -> TopicsOutcome:
    """Carry out one ``mq topics`` action; raises TopicCommandError with Kafka's wording."""
    action = validate_options(None, options)
    topic_arg = options.get("topic")
    topic = str(topic_arg) if topic_arg is not None else None
    outcome = TopicsOutcome()
    configs = parse_configs(_strings(options, "config"))
    if action == "create":
        assert topic is not None
        assignment = options.get("replica_assignment")
        manual = parse_replica_assignment(str(assignment)) if assignment else None
        partitions = _int(options, "partitions") or -1
        factor = _int(options, "replication_factor") or -1
        if options.get("partitions") is not None and partitions < 1:
            raise TopicCommandError("The partitions must be greater than 0")
        if options.get("replication_factor") is not None and not 1 <= factor <= 32767:
            raise TopicCommandError("The replication factor must be between 1 and 32767 inclusive")
        outcome.lines = created_lines(topic)
        try:
            admin.create_topic(topic, partitions, factor, manual, configs)
        except TopicExistsError as exc:
            if options.get("if_not_exists"):
                return TopicsOutcome()
            raise TopicCommandError(str(exc)) from exc
        except TopicCommandError:
            raise
        except Exception as exc:
            raise TopicCommandError(str(exc)) from exc
        return outcome
    zookeeper = bool(options.get("zookeeper"))
    names = select(admin.list_topic_names(), topic, bool(options.get("exclude_internal")))
    if topic is not None and not names and action in ("alter", "delete", "describe") and not options.get("if_exists"):
        raise _not_found(topic)
    marked = admin.marked_for_deletion() if zookeeper else set()
    if action == "list":
        outcome.names = names
        outcome.lines = [f"{n} - marked for deletion" if n in marked else n for n in names]
    elif action == "describe":
        outcome.topics = admin.describe_topics(names) if names else []
        live = admin.live_brokers()
        for described in outcome.topics:
            outcome.lines += describe_lines(
                described,
                live_brokers=live,
                under_replicated=bool(options.get("under_replicated_partitions")),
                unavailable=bool(options.get("unavailable_partitions")),
                with_overrides=bool(options.get("topics_with_overrides")),
                zookeeper=zookeeper,
                marked_for_deletion=described.name in marked,
            )
    elif action == "alter":
        removed = _strings(options, "delete_config")
        for name in names:
            if configs or removed:
                _wrap(functools.partial(admin.alter_config, name, configs, removed))
                outcome.lines += [CONFIG_DEPRECATION, f"Updated config for topic {name}."]
            if options.get("partitions") is None:
                continue
            if name in INTERNAL_TOPICS:
                raise TopicCommandError(f"The number of partitions for the internal topic {name} cannot be changed.")
            total = _int(options, "partitions") or 0
            extra = None
            assignment = options.get("replica_assignment")
            if assignment:
                full = parse_replica_assignment(str(assignment))
                current = len(admin.describe_topics([name])[0].partitions)
                extra = [full[p] for p in sorted(full) if p >= current]
            _wrap(functools.partial(admin.create_partitions, name, total, extra))
            if zookeeper:
                outcome.lines += [PARTITIONS_WARNING, "Adding partitions succeeded!"]
    else:
        for name in names:
            if name in INTERNAL_TOPICS:
                raise TopicCommandError(
                    f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion."
                )
            newly = _wrap(functools.partial(admin.delete_topic, name)) is not False
            if zookeeper:
                outcome.lines += (
                    [f"Topic {name} is marked for deletion.", DELETE_NOTE]
                    if newly
                    else [f"Topic {name} is already marked for deletion."]
                )
    return outcome


def _int(options: Mapping[str, object], key: str) -> int | None:
    value = options.get(key)
    return value if value is None or isinstance(value, int) else int(str(value))


def _strings(options: Mapping[str, object], key: str) -> list[str]:
    value = options.get(key)
    return [str(item) for item in value] if isinstance(value, Iterable) and not isinstance(value, str) else []


def _wrap(operation: Callable[[], T]) -> T:
    try:
        return operation()
    except TopicCommandError:
        raise
    except Exception as exc:
        raise TopicCommandError(str(exc)) from exc


class ClientTopicAdmin:
    """``TopicAdmin`` over mq's client: the ``--bootstrap-server`` path."""

    def __init__(self, admin: SyncAdmin) -> None:
        self.admin = admin

    def list_topic_names(self) -> list[str]:
        return list(self.admin.call(AsyncAdmin.list_topics))

    def live_brokers(self) -> set[int]:
        return {b.node_id for b in self.admin.call(AsyncAdmin.describe_cluster).brokers}

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        described = []
        for metadata in self.admin.call(AsyncAdmin.describe_topics, list(names)):
            entries = self.admin.call(AsyncAdmin.describe_configs, ResourceType.TOPIC, metadata.name)
            overrides = {e.name: e.value or "" for e in entries if e.source not in (ConfigSource.DEFAULT_CONFIG, -1)}
            partitions = [
                PartitionDescription(p.partition, p.leader, tuple(p.replicas), tuple(p.isr))
                for p in metadata.partitions
            ]
            described.append(
                TopicDescription(metadata.name, metadata.topic_id, partitions, overrides, metadata.is_internal)
            )
        return described

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None,
        config: Mapping[str, str],
    ) -> None:
        self.admin.call(
            AsyncAdmin.create_topics, [NewTopic(name, partitions, replication_factor, assignment, dict(config))]
        )

    def create_partitions(self, name: str, total: int, assignment: Sequence[Sequence[int]] | None) -> None:
        self.admin.call(AsyncAdmin.create_partitions, {name: total}, {name: assignment} if assignment else None)

    def delete_topic(self, name: str) -> bool | None:
        self.admin.call(AsyncAdmin.delete_topics, [name])
        return None

    def marked_for_deletion(self) -> set[str]:
        return set()

    def alter_config(self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str]) -> None:
        raise TopicCommandError(ALTER_CONFIG_WITH_BOOTSTRAP_SERVER, usage=True)


class ZkTopicAdmin:
    """``TopicAdmin`` writing the metadata tree directly: the ``--zookeeper`` path, as Kafka's ZooKeeper-mode tool."""

    def __init__(self, store: MetadataStore) -> None:
        self.zk = KafkaZkClient(store)
        self.admin = AdminZkClient(self.zk)

    def list_topic_names(self) -> list[str]:
        return self.zk.get_all_topics()

    def marked_for_deletion(self) -> set[str]:
        return set(self.zk.get_topics_marked_for_deletion())

    def live_brokers(self) -> set[int]:
        return set(self.zk.get_all_brokers())

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        described = []
        for name in names:
            assignment = self.zk.get_topic_assignment(name)
            if assignment is None:
                continue
            partitions = []
            for p, replicas in sorted(assignment.partitions.items()):
                found = self.zk.get_partition_state(name, p)
                leader, isr = (found[0].leader, tuple(found[0].isr)) if found is not None else (None, ())
                adding = tuple(assignment.adding_replicas.get(p, ()))
                removing = tuple(assignment.removing_replicas.get(p, ()))
                partitions.append(PartitionDescription(p, leader, tuple(replicas), isr, adding, removing))
            configs = self.zk.get_entity_config("topics", name)
            described.append(TopicDescription(name, assignment.topic_id, partitions, configs, name in INTERNAL_TOPICS))
        return described

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None,
        config: Mapping[str, str],
    ) -> None:
        self.admin.create_topic(name, partitions, replication_factor, config, assignment)

    def create_partitions(self, name: str, total: int, assignment: Sequence[Sequence[int]] | None) -> None:
        self.admin.add_partitions(name, total, assignment)

    def delete_topic(self, name: str) -> bool | None:
        return self.admin.delete_topic(name)

    def alter_config(self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str]) -> None:
        current = self.zk.get_entity_config("topics", name)
        current.update(set_configs)
        for key in delete_configs:
            current.pop(key, None)
        self.admin.change_topic_config(name, current)
