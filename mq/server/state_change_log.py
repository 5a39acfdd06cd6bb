"""``state.change.logger``: the partition and replica state changes of controllers and brokers, in Kafka 2.8's lines.

A controller's lines start ``[Controller id=<id> epoch=<epoch>] ``, a broker's ``[Broker id=<id>] ``; partitions are
written ``topic-partition`` and a partition state as ``LeaderAndIsr(leader=0, leaderEpoch=1, isr=List(0, 1),
zkVersion=0)``. The lines of every broker's state-change.log, merged by ``mq state-change-log-merger``, tell one
partition's history across the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mq.server.logging_config import TRACE
from mq.topic_partition import TopicPartition

state_change_log = logging.getLogger("state.change.logger")


def leader_and_isr(leader: int, leader_epoch: int, isr: Iterable[int], zk_version: int) -> str:
    """Kafka's ``LeaderAndIsr`` as printed."""
    members = ", ".join(str(b) for b in isr)
    return f"LeaderAndIsr(leader={leader}, leaderEpoch={leader_epoch}, isr=List({members}), zkVersion={zk_version})"


def controller_changed(
    broker_id: int, epoch: int, tp: TopicPartition, from_state: str, to_state: str, state: str
) -> None:
    """``[Controller id=0 epoch=1] Changed partition t-0 from NewPartition to OnlinePartition with state ...``."""
    state_change_log.info(
        "[Controller id=%d epoch=%d] Changed partition %s from %s to %s with state %s",
        broker_id,
        epoch,
        tp,
        from_state,
        to_state,
        state,
    )


def controller_replica_changed(
    broker_id: int, epoch: int, replica: int, tp: TopicPartition, from_state: str, to_state: str
) -> None:
    """TRACE: ``[Controller id=0 epoch=1] Changed state of replica 2 for partition t-0 from OnlineReplica to
    OfflineReplica``."""
    state_change_log.log(
        TRACE,
        "[Controller id=%d epoch=%d] Changed state of replica %d for partition %s from %s to %s",
        broker_id,
        epoch,
        replica,
        tp,
        from_state,
        to_state,
    )


def controller_sending(broker_id: int, epoch: int, target: int, leaders: int, followers: int) -> None:
    """The LeaderAndIsr request a controller sends one broker."""
    state_change_log.info(
        "[Controller id=%d epoch=%d] Sending LeaderAndIsr request to broker %d with %d become-leader and %d "
        "become-follower partitions",
        broker_id,
        epoch,
        target,
        leaders,
        followers,
    )


def broker_became(
    broker_id: int,
    leader: bool,
    tp: TopicPartition,
    leader_epoch: int,
    log_end_offset: int,
    high_watermark: int,
    previous_epoch: int,
) -> None:
    """``[Broker id=1] Leader t-0 starts at leader epoch 1 from offset 5 with high watermark 5. Previous leader epoch
    was 0.`` (``Follower`` for a follower)."""
    state_change_log.info(
        "[Broker id=%d] %s %s starts at leader epoch %d from offset %d with high watermark %d. Previous leader epoch "
        "was %d.",
        broker_id,
        "Leader" if leader else "Follower",
        tp,
        leader_epoch,
        log_end_offset,
        high_watermark,
        previous_epoch,
    )


def broker_stopped(broker_id: int, tp: TopicPartition, delete: bool) -> None:
    """A StopReplica handled for ``tp``."""
    state_change_log.info(
        "[Broker id=%d] Stopped replica of partition %s with deletePartition=%s",
        broker_id,
        tp,
        "true" if delete else "false",
    )
