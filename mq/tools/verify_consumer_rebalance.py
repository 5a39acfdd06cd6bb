"""``mq verify-consumer-rebalance``: Kafka's VerifyConsumerRebalance for a ZooKeeper-coordinated group.

For every topic the registered consumers subscribe to and every partition of it, the owner node must exist and hold
the thread id (``<consumer id>-<n>``) of a registered consumer (a wildcard registration stands for every existing
topic its filter allows, internal ones included, as Kafka's tool reads it). Problems are worded as Kafka logs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mq.topic_partition import TopicPartition
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient

SUCCESS = "Rebalance operation successful !"
FAILURE = "Rebalance operation failed !"


@dataclass
class RebalanceCheck:
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        return SUCCESS if self.ok else FAILURE


def verify(groups: ZkConsumerGroups, zk: KafkaZkClient, group: str) -> RebalanceCheck:
    subscriptions = groups.subscriptions(group, exclude_internal=False)
    threads = {f"{cid}-{n}" for cid, s in subscriptions.items() for streams in s.values() for n in range(streams)}
    check = RebalanceCheck()
    if not subscriptions:
        check.problems.append(f"No consumers are registered in group {group}")
    topics = sorted({topic for s in subscriptions.values() for topic in s})
    for topic in topics:
        assignment = zk.get_topic_assignment(topic)
        for partition in sorted(assignment.partitions) if assignment is not None else []:
            owner = groups.owner(group, TopicPartition(topic, partition))
            if owner is None:
                check.problems.append(f"No owner for partition [{topic},{partition}]")
            elif owner not in threads:
                check.problems.append(
                    f"Owner {owner} for partition [{topic},{partition}] is not a valid member of consumer group {group}"
                )
    return check
