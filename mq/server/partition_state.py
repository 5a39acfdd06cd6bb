"""What the controller tells brokers about one partition (LeaderAndIsr and UpdateMetadata carry it), shared by the
controller, its channels and the data plane, which never import the controller itself."""

from __future__ import annotations

from dataclasses import dataclass

from mq.topic_partition import TopicPartition

LEADER_DURING_DELETE = -2
"""The leader UpdateMetadata carries for a partition whose topic is being deleted (brokers drop it)."""


@dataclass(frozen=True)
class PartitionStateInfo:
    """What LeaderAndIsr and UpdateMetadata carry for one partition."""

    tp: TopicPartition
    topic_id: str | None
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int
