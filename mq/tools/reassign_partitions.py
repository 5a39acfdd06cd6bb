"""``mq reassign-partitions``: Kafka's ReassignPartitionsCommand.

Two paths meet the same controller. ``--zookeeper`` writes ``/admin/reassign_partitions`` (JSON v1) and throttles as
dynamic configs in ``/config/brokers/<id>`` and ``/config/topics/<t>``, printing what Kafka 2.5 prints.
``--bootstrap-server`` uses AlterPartitionReassignments, ListPartitionReassignments and IncrementalAlterConfigs,
printing what Kafka 2.6+ prints. Every function returns the lines to print; failures raise ``ReassignCommandError``
worded as Kafka words them.

Throttles (for the partitions whose replica list changes): both rate keys on every broker of the old and new replica
sets; ``leader.replication.throttled.replicas`` = ``partition:broker`` of every pre-move replica and
``follower.replication.throttled.replicas`` = ``partition:broker`` of every replica being added, per topic.

A ``log_dirs`` entry other than ``"any"`` moves that replica into that log dir of its broker (AlterReplicaLogDirs,
``--bootstrap-server`` only), retried while the broker does not host the replica yet (a replica still being added);
``--replica-alter-log-dirs-throttle`` sets ``replica.alter.log.dirs.io.max.bytes.per.second`` on those brokers.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mq.client.admin import AsyncAdmin, OngoingReassignment, ReassignmentResult
from mq.client.cluster import TopicMetadata
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.protocol.configs import AlterConfigOp, ConfigSource, ResourceType
from mq.topic_partition import TopicPartition
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.assignment import AssignmentError, assign_replicas
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import NodeExistsError

Assignment = dict[TopicPartition, list[int]]
LogSizes = dict[tuple[int, TopicPartition], int]
ReplicaMoves = dict[tuple[TopicPartition, int], str]
"""The log dir a replica (partition, broker) must move to."""
LOG_DIR_MOVE_TIMEOUT_S = 10.0
"""How long --execute retries a log dir move whose broker does not host the replica yet (Kafka's default)."""
"""Bytes of the log of each (broker, partition) replica."""
SizeReader = Callable[[Iterable[int], Iterable[TopicPartition]], LogSizes]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLE_KEYS = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
TOPIC_THROTTLE_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

ROLLBACK_HEADER = "Current partition replica assignment"
ROLLBACK_FOOTER = "Save this to use as the --reassignment-json-file option during rollback"


class ReassignCommandError(Exception):
    """A failure worded as Kafka's tool words it."""


# --- JSON ------------------------------------------------------------------------------------------------------------


def _document(text: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ReassignCommandError(f"Unable to parse the {what} JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ReassignCommandError(f"Unable to parse the {what} JSON: not a JSON object")
    version = document.get("version", 1)
    if version != 1:
        raise ReassignCommandError(f"Not supported version field value {version}")
    return document


def parse_topics_to_move(text: str) -> list[str]:
    """Topic names of a ``{"topics": [{"topic": T}], "version": 1}`` file, in file order."""
    try:
        topics = [str(entry["topic"]) for entry in _document(text, "topics-to-move").get("topics") or []]
    except (KeyError, TypeError):
        raise ReassignCommandError("Unable to parse the topics-to-move JSON: every entry needs a topic") from None
    duplicates = _duplicates(topics)
    if duplicates:
        raise ReassignCommandError(f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}")
    return topics


def _duplicates(items: Sequence[Any]) -> list[Any]:
    seen: set[Any] = set()
    repeated: list[Any] = []
    for item in items:
        if item in seen and item not in repeated:
            repeated.append(item)
        seen.add(item)
    return repeated


def _bracket(tp: TopicPartition) -> str:
    return f"[{tp.topic},{tp.partition}]"


def parse_reassignment(text: str) -> Assignment:
    """Target replicas per partition, in file order, validated as Kafka validates them."""
    return _parse_reassignment(text)[0]


def parse_log_dir_moves(text: str) -> ReplicaMoves:
    """The log dir each replica must move to: the entries of ``log_dirs`` other than ``"any"``, keyed by
    (partition, broker) of the replica at the same position of ``replicas``."""
    return _parse_reassignment(text)[1]


def _parse_reassignment(text: str) -> tuple[Assignment, ReplicaMoves]:
    """``log_dirs`` must match ``replicas`` in length."""
    entries = _document(text, "reassignment").get("partitions") or []
    result: Assignment = {}
    moves: ReplicaMoves = {}
    order: list[TopicPartition] = []
    try:
        for entry in entries:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(b) for b in entry["replicas"]]
            log_dirs = entry.get("log_dirs")
            if log_dirs is not None:
                if len(log_dirs) != len(replicas):
                    raise ReassignCommandError(
                        f"Size of replicas list {_java_list(replicas)} is different from size of log dirs list "
                        f"{_java_list(log_dirs)} for partition {tp}"
                    )
                moves.update(
                    ((tp, broker), str(path)) for broker, path in zip(replicas, log_dirs, strict=True) if path != "any"
                )
            order.append(tp)
            result[tp] = replicas
    except (KeyError, TypeError, ValueError):
        raise ReassignCommandError(
            "Unable to parse the reassignment JSON: every entry needs topic, partition and replicas"
        ) from None
    if not order:
        raise ReassignCommandError("Partition reassignment data file is empty")
    duplicated = _duplicates(order)
    if duplicated:
        raise ReassignCommandError(
            f"Partition reassignment contains duplicate topic partitions: {','.join(map(_bracket, duplicated))}"
        )
    for tp, replicas in result.items():
        repeated = _duplicates(replicas)
        if repeated:
            raise ReassignCommandError(
                f"Partition replica lists may not contain duplicate entries: {_bracket(tp)} contains multiple "
                f"entries for {','.join(map(str, repeated))}"
            )
    return result, moves


def _java_list(items: Iterable[Any]) -> str:
    return "[" + ", ".join(map(str, items)) + "]"


def format_reassignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Compact one-line JSON sorted by topic then partition, each entry with one ``"any"`` log dir per replica."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for tp, r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise ReassignCommandError(f"Invalid broker list: {text}") from None
    repeated = _duplicates(brokers)
    if repeated:
        raise ReassignCommandError(f"Broker list contains duplicate entries: {','.join(map(str, repeated))}")
    return brokers


def _csv(items: Iterable[int]) -> str:
    return ",".join(map(str, items))


def _tps(tps: Iterable[TopicPartition]) -> str:
    return ",".join(map(str, tps))


# --- generate --------------------------------------------------------------------------------------------------------


def generate(
    current: Assignment,
    topics: Sequence[str],
    brokers: Sequence[int],
    racks: Mapping[int, str | None],
    *,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> list[str]:
    """Kafka's ``--generate``: the current assignment of ``topics`` and a proposal spreading each topic over
    ``brokers`` (those of them registered in ``racks``) with its partition count and replication factor."""
    for topic in topics:
        if not any(tp.topic == topic for tp in current):
            raise ReassignCommandError(f"Topic {topic} not found")
    chosen = sorted(b for b in brokers if b in racks)
    known = {b: r for b, r in racks.items() if b in chosen and r is not None}
    proposed: Assignment = {}
    wanted = {tp: r for tp, r in current.items() if tp.topic in topics}
    for topic in topics:
        partitions = sorted(tp.partition for tp in wanted if tp.topic == topic)
        factor = len(wanted[TopicPartition(topic, partitions[0])])
        try:
            placed = assign_replicas(
                chosen, len(partitions), factor, racks=known if rack_aware and known else None, rng=rng
            )
        except AssignmentError as exc:
            raise ReassignCommandError(str(exc)) from None
        proposed.update({TopicPartition(topic, p): r for p, r in placed.items()})
    return [
        ROLLBACK_HEADER,
        format_reassignment(wanted),
        "",
        "Proposed partition reassignment configuration",
        format_reassignment(proposed),
    ]


# --- throttles -------------------------------------------------------------------------------------------------------


@dataclass
class Throttles:
    """Dynamic configs that throttle the replication traffic of a reassignment."""

    brokers: dict[int, dict[str, str]] = field(default_factory=dict)
    topics: dict[str, dict[str, str]] = field(default_factory=dict)


def throttles_for(current: Assignment, target: Assignment, rate: int) -> Throttles:
    """The configs of ``--throttle rate`` for the partitions of ``target`` whose replica list changes."""
    leaders: dict[str, list[tuple[int, int]]] = {}
    followers: dict[str, list[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for tp, replicas in sorted(target.items()):
        old = current.get(tp, [])
        if old == replicas:
            continue
        brokers.update(old, replicas)
        leaders.setdefault(tp.topic, []).extend((tp.partition, b) for b in sorted(old))
        followers.setdefault(tp.topic, []).extend((tp.partition, b) for b in sorted(set(replicas) - set(old)))
    throttles = Throttles()
    for broker in sorted(brokers):
        throttles.brokers[broker] = {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
    for topic in sorted(leaders):
        throttles.topics[topic] = {
            LEADER_REPLICAS: ",".join(f"{p}:{b}" for p, b in leaders[topic]),
            FOLLOWER_REPLICAS: ",".join(f"{p}:{b}" for p, b in followers[topic]),
        }
    return throttles


def _rollback_block(current: Assignment, target: Assignment) -> list[str]:
    return [ROLLBACK_HEADER, "", format_reassignment({tp: current[tp] for tp in target}), "", ROLLBACK_FOOTER]


# --- ZooKeeper path (Kafka 2.5 output) -------------------------------------------------------------------------------


def zk_assignment(zk: KafkaZkClient, topics: Iterable[str] | None = None) -> Assignment:
    """Replica lists of every partition of ``topics`` (None: all topics) from ``/brokers/topics``."""
    result: Assignment = {}
    for topic in zk.get_all_topics() if topics is None else topics:
        assignment = zk.get_topic_assignment(topic)
        if assignment is not None:
            result.update({TopicPartition(topic, p): r for p, r in assignment.partitions.items()})
    return result


def _missing_and_unknown(current: Assignment, target: Assignment, brokers: Iterable[int]) -> None:
    missing = [tp for tp in target if tp not in current]
    if missing:
        raise ReassignCommandError(f"The proposed assignment contains non-existent partitions: {_tps(missing)}")
    live = set(brokers)
    unknown = sorted({b for r in target.values() for b in r} - live)
    if unknown:
        raise ReassignCommandError(f"The proposed assignment contains non-existent brokerIDs: {_csv(unknown)}")


def zk_generate(zk: KafkaZkClient, topics: Sequence[str], brokers: Sequence[int], rack_aware: bool) -> list[str]:
    racks = {b: r.rack for b, r in zk.get_all_brokers().items()}
    return generate(zk_assignment(zk, topics), topics, brokers, racks, rack_aware=rack_aware)


def zk_set_throttles(zk: KafkaZkClient, throttles: Throttles) -> None:
    """Merge the throttle configs into each entity's dynamic config (validated), with a change notification each."""
    admin = AdminZkClient(zk)
    for broker, values in throttles.brokers.items():
        admin.change_broker_config(broker, {**zk.get_entity_config("brokers", str(broker)), **values})
    for topic, values in throttles.topics.items():
        admin.change_topic_config(topic, {**zk.get_entity_config("topics", topic), **values})


def zk_execute(zk: KafkaZkClient, target: Assignment, throttle: int = -1) -> tuple[list[str], bool]:
    """Create ``/admin/reassign_partitions``; returns the lines and whether a reassignment was started."""
    current = zk_assignment(zk, {tp.topic for tp in target})
    if zk.get_partition_reassignment() is not None:
        lines = ["There is an existing assignment running."]
        if throttle >= 0:
            zk_set_throttles(zk, throttles_for(current, target, throttle))
            lines.append(f"The inter-broker throttle limit was set to {throttle} B/s")
        return lines, False
    _missing_and_unknown(current, target, zk.get_all_brokers())
    lines = _rollback_block(current, target)
    if throttle >= 0:
        lines.append(
            "Warning: You must run Verify periodically, until the reassignment completes, to ensure the throttle is "
            "removed. You can also alter the throttle by rerunning the Execute command passing a new value."
        )
        zk_set_throttles(zk, throttles_for(current, target, throttle))
        lines.append(f"The inter-broker throttle limit was set to {throttle} B/s")
    try:
        zk.create_partition_reassignment([(tp.topic, tp.partition, r) for tp, r in target.items()])
    except NodeExistsError:
        raise ReassignCommandError("There is an existing assignment running.") from None
    lines.append("Successfully started reassignment of partitions.")
    return lines, True


def zk_clear_throttles(zk: KafkaZkClient, topics: Iterable[str]) -> bool:
    """Remove the throttle keys from every broker and from ``topics``; True when any was set."""
    admin = AdminZkClient(zk)
    removed = False
    for broker in sorted(zk.get_all_brokers()):
        config = zk.get_entity_config("brokers", str(broker))
        if any(k in config for k in BROKER_THROTTLE_KEYS):
            admin.change_broker_config(broker, {k: v for k, v in config.items() if k not in BROKER_THROTTLE_KEYS})
            removed = True
    for topic in sorted(set(topics)):
        config = zk.get_entity_config("topics", topic)
        if any(k in config for k in TOPIC_THROTTLE_KEYS):
            admin.change_topic_config(topic, {k: v for k, v in config.items() if k not in TOPIC_THROTTLE_KEYS})
            removed = True
    return removed


def zk_verify(zk: KafkaZkClient, target: Assignment) -> tuple[list[str], bool]:
    """Kafka 2.5's status lines; returns them and False when some partition failed (ended with other replicas).
    Throttles are removed once no partition is still in progress."""
    pending = {TopicPartition(t, p) for t, p, _ in zk.get_partition_reassignment() or []}
    current = zk_assignment(zk, {tp.topic for tp in target})
    lines = ["Status of partition reassignment: "]
    in_progress = False
    failed = False
    for tp, replicas in target.items():
        if tp in pending:
            lines.append(f"Reassignment of partition {tp} is still in progress")
            in_progress = True
        elif current.get(tp) == replicas:
            lines.append(f"Reassignment of partition {tp} completed successfully")
        else:
            lines.append(
                f"ERROR: Assigned replicas ({_csv(current.get(tp, []))}) don't match the list of replicas for "
                f"reassignment ({_csv(replicas)}) for partition {tp}"
            )
            lines.append(f"Reassignment of partition {tp} failed")
            failed = True
    if not in_progress and zk_clear_throttles(zk, {tp.topic for tp in target}):
        lines.append("Throttle was removed.")
    return lines, not failed


# --- bootstrap-server path (Kafka 2.6+ output) -----------------------------------------------------------------------


class ReassignAdmin(Protocol):
    """What the bootstrap path needs from the cluster (an adapter over ``SyncAdmin`` in production)."""

    def replicas(self, topics: Iterable[str]) -> Assignment:
        """Current replica lists of every partition of the topics that exist."""

    def broker_ids(self) -> list[int]: ...

    def ongoing(self) -> dict[TopicPartition, OngoingReassignment]: ...

    def alter(
        self, moves: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult]: ...

    def set_configs(self, broker: int | None, topic: str | None, changes: Mapping[str, str | None]) -> None:
        """Set (a value) or delete (None) dynamic config keys of one broker or one topic."""

    def dynamic_broker_keys(self, broker: int, keys: Sequence[str]) -> list[str]:
        """Which of ``keys`` are set as dynamic configs on ``broker``."""

    def live(self, topics: Iterable[str]) -> dict[TopicPartition, LiveState]:
        """Replicas, ISR and leader of every partition of the topics that exist."""

    def log_sizes(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> LogSizes:
        """Size in bytes of each replica of ``partitions`` that ``brokers`` hold (DescribeLogDirs)."""

    def alter_log_dirs(self, moves: ReplicaMoves) -> dict[tuple[TopicPartition, int], ErrorCode]:
        """Start moving each replica into its log dir (AlterReplicaLogDirs); the outcome per replica."""

    def replica_log_dirs(
        self, replicas: Iterable[tuple[TopicPartition, int]]
    ) -> dict[tuple[TopicPartition, int], tuple[str | None, str | None]]:
        """The (current, future) log dir of each replica its broker holds in an online dir (DescribeLogDirs)."""


@dataclass(frozen=True)
class LiveState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int


class SyncReassignAdmin:
    """``ReassignAdmin`` over a ``SyncAdmin``."""

    def __init__(self, admin: SyncAdmin) -> None:
        self.admin = admin

    def _describe(self, topics: Iterable[str]) -> list[TopicMetadata]:
        known = set(self.admin.list_topics())
        return self.admin.call(AsyncAdmin.describe_topics, sorted(t for t in set(topics) if t in known))

    def replicas(self, topics: Iterable[str]) -> Assignment:
        return {
            TopicPartition(t.name, p.partition): list(p.replicas) for t in self._describe(topics) for p in t.partitions
        }

    def live(self, topics: Iterable[str]) -> dict[TopicPartition, LiveState]:
        return {
            TopicPartition(t.name, p.partition): LiveState(tuple(p.replicas), tuple(p.isr), p.leader)
            for t in self._describe(topics)
            for p in t.partitions
        }

    def log_sizes(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> LogSizes:
        found = self.admin.call(AsyncAdmin.describe_log_dirs, sorted(set(brokers)), list(partitions))
        return {(broker, tp): info.size_bytes for broker, replicas in found.items() for tp, info in replicas.items()}

    def broker_ids(self) -> list[int]:
        return [b.node_id for b in self.admin.call(AsyncAdmin.describe_cluster).brokers]

    def alter_log_dirs(self, moves: ReplicaMoves) -> dict[tuple[TopicPartition, int], ErrorCode]:
        return self.admin.call(AsyncAdmin.alter_replica_log_dirs, moves)

    def replica_log_dirs(
        self, replicas: Iterable[tuple[TopicPartition, int]]
    ) -> dict[tuple[TopicPartition, int], tuple[str | None, str | None]]:
        wanted = set(replicas)
        described = self.admin.call(
            AsyncAdmin.describe_log_dir_descriptions, sorted({b for _, b in wanted}), sorted({tp for tp, _ in wanted})
        )
        found: dict[tuple[TopicPartition, int], tuple[str | None, str | None]] = {}
        for broker, dirs in described.items():
            for d in dirs:
                for tp, info in d.replicas:
                    if (tp, broker) in wanted:
                        current, future = found.get((tp, broker), (None, None))
                        found[tp, broker] = (current, d.log_dir) if info.is_future else (d.log_dir, future)
        return found

    def ongoing(self) -> dict[TopicPartition, OngoingReassignment]:
        return self.admin.call(AsyncAdmin.list_partition_reassignments)

    def alter(self, moves: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, ReassignmentResult]:
        return self.admin.call(AsyncAdmin.alter_partition_reassignments, moves)

    def set_configs(self, broker: int | None, topic: str | None, changes: Mapping[str, str | None]) -> None:
        resource = (ResourceType.BROKER, str(broker)) if broker is not None else (ResourceType.TOPIC, str(topic))
        operations = {k: (AlterConfigOp.DELETE if v is None else AlterConfigOp.SET, v) for k, v in changes.items()}
        self.admin.call(AsyncAdmin.incremental_alter_configs, *resource, operations)

    def dynamic_broker_keys(self, broker: int, keys: Sequence[str]) -> list[str]:
        entries = self.admin.call(AsyncAdmin.describe_configs, ResourceType.BROKER, str(broker), list(keys))
        return [e.name for e in entries if e.name in keys and e.source == ConfigSource.DYNAMIC_BROKER_CONFIG]


def execute(
    admin: ReassignAdmin,
    target: Assignment,
    throttle: int = -1,
    additional: bool = False,
    moves: ReplicaMoves | None = None,
    log_dir_throttle: int = -1,
) -> tuple[list[str], bool]:
    """Start the reassignment, then the log dir ``moves``; returns the lines and whether every partition's request
    was accepted.

    Throttles cover the moves of ``target`` and of the reassignments already running (from their original
    replicas to their targets), so an ``--additional`` execute keeps throttling those too; ``log_dir_throttle``
    limits the copies of ``moves`` on their brokers."""
    ongoing = admin.ongoing()
    if ongoing and not additional:
        raise ReassignCommandError(
            "Cannot execute because there is an existing partition assignment.  Use --additional to override this "
            "and create a new partition assignment in addition to the existing one. The --additional flag can also "
            "be used to change the throttle by resubmitting the current reassignment."
        )
    current = admin.replicas({tp.topic for tp in target})
    for tp in target:
        if tp not in current:
            raise ReassignCommandError(f"Unable to find partition: {tp}")
    brokers = set(admin.broker_ids())
    for broker in sorted({b for r in target.values() for b in r}):
        if broker not in brokers:
            raise ReassignCommandError(f"Unknown broker id {broker}")
    lines = _rollback_block(current, target)
    moves = moves or {}
    if throttle >= 0 or log_dir_throttle >= 0:
        lines.append(
            "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
            "is removed."
        )
    if throttle >= 0:
        sources, targets = dict(current), dict(target)
        for tp, running in ongoing.items():
            sources[tp] = [b for b in running.replicas if b not in running.adding]
            targets.setdefault(tp, [b for b in running.replicas if b not in running.removing])
        throttles = throttles_for(sources, targets, throttle)
        for broker, values in throttles.brokers.items():
            admin.set_configs(broker, None, values)
        for topic, values in throttles.topics.items():
            admin.set_configs(None, topic, values)
        lines.append(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dir_throttle >= 0:
        for broker in sorted({broker for _, broker in moves}):
            admin.set_configs(broker, None, {LOG_DIRS_RATE: str(log_dir_throttle)})
        lines.append(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    results = admin.alter(target)
    failed = {tp: r for tp, r in sorted(results.items()) if r.error != ErrorCode.NONE}
    if failed:
        lines.append("Error reassigning partition(s):")
        lines.extend(f"{tp}: {r.message or r.error.name}" for tp, r in failed.items())
        return lines, False
    started = sorted(target)
    noun = "reassignment" if len(started) == 1 else "reassignments"
    lines.append(f"Successfully started partition {noun} for {_tps(started)}")
    if moves:
        lines.extend(execute_log_dir_moves(admin, moves))
    return lines, True


def _replica(key: tuple[TopicPartition, int]) -> str:
    """Kafka's ``TopicPartitionReplica.toString``: ``topic-partition-broker``."""
    return f"{key[0]}-{key[1]}"


def _replica_order(key: tuple[TopicPartition, int]) -> tuple[int, TopicPartition]:
    """Kafka's order of replicas: by broker, then topic and partition."""
    return key[1], key[0]


def execute_log_dir_moves(
    admin: ReassignAdmin,
    moves: ReplicaMoves,
    timeout_s: float = LOG_DIR_MOVE_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Send AlterReplicaLogDirs until every move started, retrying replicas their broker does not host yet (being
    added by the reassignment) for ``timeout_s``; Kafka's lines, one per round that started moves."""
    lines = []
    pending = dict(moves)
    deadline = time.monotonic() + timeout_s
    while True:
        results = admin.alter_log_dirs(pending)
        failed = {
            k: code for k, code in results.items() if code not in (ErrorCode.NONE, ErrorCode.REPLICA_NOT_AVAILABLE)
        }
        if failed:
            key = min(failed, key=_replica_order)
            code = failed[key]
            raise ReassignCommandError(f"Failed to move replica {_replica(key)} to {pending[key]}: {code.name}")
        completed = sorted((k for k, code in results.items() if code == ErrorCode.NONE), key=_replica_order)
        if completed:
            noun = "move" if len(completed) == 1 else "moves"
            lines.append(f"Successfully started log directory {noun} for: {','.join(map(_replica, completed))}")
        for key in completed:
            pending.pop(key, None)
        if not pending:
            return lines
        if time.monotonic() >= deadline:
            noun = "move" if len(pending) == 1 else "moves"
            raise ReassignCommandError(
                f"Timed out before log directory {noun} could be started for: "
                f"{','.join(map(_replica, sorted(pending, key=_replica_order)))}"
            )
        sleep(0.1)


def clear_throttles(admin: ReassignAdmin, topics: Iterable[str]) -> list[str]:
    """Delete the throttle keys set on any broker and on ``topics``, as 2.6+ prints it."""
    brokers = sorted(admin.broker_ids())
    for broker in brokers:
        present = admin.dynamic_broker_keys(broker, BROKER_THROTTLE_KEYS)
        if present:
            admin.set_configs(broker, None, dict.fromkeys(present))
    lines = [f"Clearing broker-level throttles on brokers {_csv(brokers)}"]
    for topic in sorted(set(topics)):
        admin.set_configs(None, topic, dict.fromkeys(TOPIC_THROTTLE_KEYS))
        lines.append(f"Clearing topic-level throttles on topic {topic}")
    return lines


@dataclass(frozen=True)
class PartitionStatus:
    """One partition of a verify: ``state`` is ``complete``, ``in_progress`` or ``different``."""

    tp: TopicPartition
    state: str
    replicas: tuple[int, ...]
    target: tuple[int, ...]


def status_line(status: PartitionStatus) -> str:
    if status.state == "complete":
        return f"Reassignment of partition {status.tp} is complete."
    if status.state == "in_progress":
        return f"Reassignment of partition {status.tp} is still in progress."
    return (
        f"There is no active reassignment of partition {status.tp}, but replica set is {_csv(status.replicas)} "
        f"rather than {_csv(status.target)}."
    )


def statuses(admin: ReassignAdmin, target: Assignment) -> list[PartitionStatus]:
    ongoing = admin.ongoing()
    current = admin.replicas({tp.topic for tp in target})
    result = []
    for tp, replicas in sorted(target.items()):
        now = tuple(current.get(tp, ()))
        if tp in ongoing:
            state = "in_progress"
        elif list(now) == replicas:
            state = "complete"
        else:
            state = "different"
        result.append(PartitionStatus(tp, state, now, tuple(replicas)))
    return result


def verify(
    admin: ReassignAdmin, target: Assignment, preserve_throttles: bool = False, moves: ReplicaMoves | None = None
) -> tuple[list[str], bool]:
    """Status lines sorted by partition, then those of the log dir ``moves``, then the throttle clearing when
    nothing is in progress; returns them and False when some partition has no active reassignment but another
    replica set."""
    found = statuses(admin, target)
    lines = ["Status of partition reassignment:", *map(status_line, found)]
    moving = False
    if moves:
        move_lines, moving = log_dir_move_lines(moves, admin.replica_log_dirs(moves))
        lines += move_lines
    if not preserve_throttles and not moving and all(s.state != "in_progress" for s in found):
        lines += clear_throttles(admin, {tp.topic for tp in target})
    return lines, all(s.state != "different" for s in found)


def log_dir_move_lines(
    moves: ReplicaMoves, dirs: Mapping[tuple[TopicPartition, int], tuple[str | None, str | None]]
) -> tuple[list[str], bool]:
    """Kafka's line per log dir move (sorted by broker, topic, partition) from each replica's (current, future) log
    dir (absent: the broker holds no such replica), and whether any move is still running."""
    lines = []
    running = False
    for key in sorted(moves, key=_replica_order):
        (tp, broker), wanted = key, moves[key]
        current, future = dirs.get(key, (None, None))
        if current is None:
            lines.append(f"Partition {tp} cannot be found in any live log directory on broker {broker}.")
        elif future is not None:
            running = True
            if future == wanted:
                lines.append(f"Reassignment of replica {_replica(key)} is still in progress.")
            else:
                lines.append(
                    f"Partition {tp} on broker {broker} is being moved to log dir {future} instead of {wanted}."
                )
        elif current == wanted:
            lines.append(f"Reassignment of replica {_replica(key)} completed successfully.")
        else:
            lines.append(f"Partition {tp} on broker {broker} is not being moved from log dir {current} to {wanted}.")
    return lines, running


def cancel(admin: ReassignAdmin, target: Assignment, preserve_throttles: bool = False) -> tuple[list[str], bool]:
    """Revert each listed partition's ongoing reassignment to its original replicas."""
    results = admin.alter(dict.fromkeys(target))
    cancelled = [tp for tp, r in sorted(results.items()) if r.error == ErrorCode.NONE]
    failed = {
        tp: r
        for tp, r in sorted(results.items())
        if r.error not in (ErrorCode.NONE, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    }
    if failed:
        lines = ["Error cancelling partition reassignment for:"]
        lines += [f"{tp}: {r.message or r.error.name}" for tp, r in failed.items()]
        return lines, False
    if cancelled:
        lines = [f"Successfully cancelled partition reassignments for: {_tps(cancelled)}"]
    else:
        lines = ["None of the specified partition reassignments are active."]
    if not preserve_throttles:
        lines += clear_throttles(admin, {tp.topic for tp in target})
    return lines, True


def list_lines(ongoing: Mapping[TopicPartition, OngoingReassignment]) -> list[str]:
    if not ongoing:
        return ["No partition reassignments found."]
    return ["Current partition reassignments:"] + [
        f"{tp}: replicas: {_csv(r.replicas)}. adding: {_csv(r.adding)}. removing: {_csv(r.removing)}."
        for tp, r in sorted(ongoing.items())
    ]


# --- progress of an executed reassignment ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionProgress:
    """How far one partition's reassignment has got.

    Its new replicas copy the leader's log, then join the ISR. ``copied_bytes`` sums the new replicas' log sizes
    (each capped at the leader's); ``total_bytes`` is the leader's log size times the number of new replicas. Both
    are None when the brokers' log sizes could not be read.
    """

    tp: TopicPartition
    target: tuple[int, ...]
    replicas: tuple[int, ...]
    joining: tuple[int, ...]
    """Target replicas not in the original replica list."""
    in_sync: tuple[int, ...]
    """Those of ``joining`` already in the ISR."""
    done: bool
    copied_bytes: int | None = None
    total_bytes: int | None = None


def progress_of(
    target: Assignment,
    original: Assignment,
    live: Mapping[TopicPartition, LiveState],
    pending: Iterable[TopicPartition],
    sizes: LogSizes | None = None,
) -> list[PartitionProgress]:
    """Each partition's progress: done when it is no longer pending and its replicas are the target's."""
    waiting = set(pending)
    result = []
    for tp, wanted in sorted(target.items()):
        state = live.get(tp, LiveState((), (), -1))
        joining = tuple(b for b in wanted if b not in original.get(tp, []))
        done = tp not in waiting and list(state.replicas) == wanted
        synced = joining if done else tuple(b for b in joining if b in state.isr)
        copied = total = None
        if sizes is not None and (state.leader, tp) in sizes:
            leader_bytes = sizes[(state.leader, tp)]
            total = leader_bytes * len(joining)
            copied = total if done else sum(min(sizes.get((b, tp), 0), leader_bytes) for b in joining)
        result.append(PartitionProgress(tp, tuple(wanted), state.replicas, joining, synced, done, copied, total))
    return result


def _sizes_of(live: Mapping[TopicPartition, LiveState], read: SizeReader | None) -> LogSizes | None:
    """The log sizes of every replica of the partitions, or None when they cannot be read."""
    if read is None:
        return None
    brokers = {b for state in live.values() for b in (*state.replicas, state.leader) if b >= 0}
    try:
        return read(brokers, list(live))
    except (KafkaError, OSError):
        return None


def admin_progress(admin: ReassignAdmin, target: Assignment, original: Assignment) -> list[PartitionProgress]:
    live = admin.live({tp.topic for tp in target})
    wanted = {tp: state for tp, state in live.items() if tp in target}
    return progress_of(target, original, live, admin.ongoing(), _sizes_of(wanted, admin.log_sizes))


def zk_progress(
    zk: KafkaZkClient, target: Assignment, original: Assignment, read_sizes: SizeReader | None = None
) -> list[PartitionProgress]:
    current = zk_assignment(zk, {tp.topic for tp in target})
    live: dict[TopicPartition, LiveState] = {}
    for tp in target:
        state = zk.get_partition_state(tp.topic, tp.partition)
        if state is not None:
            live[tp] = LiveState(tuple(current.get(tp, ())), tuple(state[0].isr), state[0].leader)
    pending = [TopicPartition(t, p) for t, p, _ in zk.get_partition_reassignment() or []]
    return progress_of(target, original, live, pending, _sizes_of(live, read_sizes))


@dataclass
class RateMeter:
    """Copy rate from the first observation to the latest, in bytes per second."""

    first: tuple[float, int] | None = None

    def rate(self, now: float, copied: int) -> float | None:
        if self.first is None:
            self.first = (now, copied)
            return None
        started, base = self.first
        return (copied - base) / (now - started) if now > started else None


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def progress_line(items: Sequence[PartitionProgress], elapsed: float, rate: float | None = None) -> str:
    """One plain summary line: partitions done, new replicas in sync, bytes copied, copy rate and ETA."""
    done = sum(1 for p in items if p.done)
    joining = sum(len(p.joining) for p in items)
    synced = sum(len(p.in_sync) for p in items)
    line = f"[{elapsed:.0f}s] {done}/{len(items)} partitions reassigned, {synced}/{joining} new replicas in sync"
    if all(p.total_bytes is not None for p in items):
        copied = sum(p.copied_bytes or 0 for p in items)
        total = sum(p.total_bytes or 0 for p in items)
        line += f", {_bytes(copied)} of {_bytes(total)} copied"
        if rate is not None and rate > 0:
            line += f", {_bytes(rate)}/s, ETA {max(total - copied, 0) / rate:.0f}s"
    return line


def copied_total(items: Sequence[PartitionProgress]) -> int | None:
    """Bytes copied by all new replicas, or None when some size is unknown."""
    if any(p.copied_bytes is None for p in items):
        return None
    return sum(p.copied_bytes or 0 for p in items)
