"""``mq preferred-replica-election``: Kafka's PreferredReplicaLeaderElectionCommand on the metadata tree.

With ``--zookeeper`` it writes ``/admin/preferred_replica_election`` with the partitions (all of them, or those of
the JSON file) that exist; the controller moves leadership to each partition's first replica where possible and
removes the znode. With ``--bootstrap-server`` it sends ElectLeaders (preferred) and reports each partition's outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from mq.client.admin import ElectionResult
from mq.tools.leader_election import election_outcomes, failure_detail
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.codecs import encode_partition_list
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import NodeExistsError


class ElectionCommandError(Exception):
    """A failure worded as Kafka's tool words it."""


@dataclass
class ElectionOutcome:
    lines: list[str] = field(default_factory=list)
    started: list[TopicPartition] = field(default_factory=list)


def _set(partitions: list[TopicPartition]) -> str:
    return "Set(" + ", ".join(f"[{tp.topic},{tp.partition}]" for tp in partitions) + ")"


def parse_election_json(text: str) -> list[TopicPartition]:
    try:
        document = json.loads(text)
        entries = document["partitions"]
        partitions = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (ValueError, KeyError, TypeError):
        raise ElectionCommandError("Preferred replica election data is empty") from None
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        listed = ",".join(f"[{tp.topic},{tp.partition}]" for tp in duplicates)
        raise ElectionCommandError(f"Preferred replica election data contains duplicate partitions: {listed}")
    return partitions


def start_preferred_election(zk: KafkaZkClient, wanted: list[TopicPartition] | None) -> ElectionOutcome:
    """Write the election znode for the partitions that exist (all partitions when ``wanted`` is None)."""
    existing: set[TopicPartition] = set()
    for topic in zk.get_all_topics():
        assignment = zk.get_topic_assignment(topic)
        if assignment is not None:
            existing.update(TopicPartition(topic, p) for p in assignment.partitions)
    outcome = ElectionOutcome()
    chosen = sorted(existing) if wanted is None else [tp for tp in wanted if tp in existing]
    for tp in wanted or ():
        if tp not in existing:
            outcome.lines.append(
                f"Skipping preferred replica leader election for partition [{tp.topic},{tp.partition}] since it doesn't exist."
            )
    data = encode_partition_list([(tp.topic, tp.partition) for tp in chosen])
    try:
        zk.store.create(paths.PREFERRED_REPLICA_ELECTION, data, makepath=True)
    except NodeExistsError:
        raise ElectionCommandError(
            f"Preferred replica leader election currently in progress for {_set(chosen)}. Aborting operation"
        ) from None
    outcome.started = chosen
    outcome.lines.append(f"Created preferred replica election path with {data.decode()}")
    outcome.lines.append(f"Successfully started preferred replica election for partitions {_set(chosen)}")
    return outcome


def render_admin_election(results: dict[TopicPartition, ElectionResult]) -> tuple[list[str], int]:
    """Lines of an ElectLeaders(PREFERRED) answer as the AdminClient path of Kafka's tool prints them, and the number
    of partitions whose preferred replica could not be elected."""
    succeeded, noop, failed = election_outcomes(results)
    lines = []
    if succeeded:
        lines.append(
            f"Successfully completed preferred leader election for partitions {', '.join(map(str, succeeded))}"
        )
    if noop:
        lines.append(f"Preferred replica already elected for partitions {', '.join(map(str, noop))}")
    for tp, result in failed:
        lines.append(f"Error completing preferred leader election for partition: {tp}: {failure_detail(result)}")
    return lines, len(failed)
