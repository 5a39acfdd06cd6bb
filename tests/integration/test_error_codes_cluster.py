"""Error codes of situations only a cluster has, as Kafka 2.8's handlers answer them: the table of
``tests/component/test_error_codes.py`` continued on a 3-broker cluster (real ZooKeeper, broker processes).

A request goes to a broker that is not the controller (the controller's requests, ElectLeaders, the admin APIs Kafka
2.8 leaves to its controller), to a broker that does not coordinate the group it names, or, for LeaderAndIsr,
StopReplica and UpdateMetadata, from a controller of an older epoch than the brokers know (nothing changes)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mq.client.connection import BrokerConnection
from mq.errors import ErrorCode as E
from mq.protocol.api_keys import ApiKey as K
from tests.component.test_error_codes import (
    NO_STATE,
    TABLE,
    Row,
    at,
    create_partitions,
    create_topic_body,
    delete_topics,
    elect,
    fixed,
    join_group,
    member_request,
    metadata,
    offset_commit,
    offset_fetch,
    reassign,
)

pytestmark = pytest.mark.slow

TOPIC = "ec-cluster"
GROUP = "ec-cluster-group"
STALE_EPOCH = 0
"""The first controller's epoch is 1: a request of epoch 0 is from a deposed controller."""


NOT_CONTROLLER = "other"
"""A broker that is not the controller."""
NOT_COORDINATOR = "not-coordinator"
"""A broker that does not coordinate GROUP."""


STALE_LEADER_AND_ISR = fixed(
    controller_id=1, controller_epoch=STALE_EPOCH, max_broker_epoch=-1, topic_states=[], live_leaders=[]
)
STALE_STOP_REPLICA = fixed(
    controller_id=1, controller_epoch=STALE_EPOCH, max_broker_epoch=-1, delete_partitions=False, topics=[]
)
STALE_UPDATE_METADATA = fixed(
    controller_id=1, controller_epoch=STALE_EPOCH, max_broker_epoch=-1, topic_states=[], live_brokers=[]
)

# Rows marked ANY_DESIGN: mq answers these admin requests at any broker, which writes the metadata tree (DESIGN.md,
# "Admin APIs over the wire"); Kafka 2.8 leaves them to its controller, where its clients send them.
# fmt: off
CLUSTER_TABLE: list[Row] = [
    # The controller's requests: ReplicaManager.becomeLeaderOrFollower / stopReplicas / maybeUpdateMetadataCache.
    Row(K.LEADER_AND_ISR, 0, None, "stale controller epoch", STALE_LEADER_AND_ISR, E.STALE_CONTROLLER_EPOCH, "error_code", ask=NOT_CONTROLLER),  # "Received LeaderAndIsrRequest ... from an old controller"
    Row(K.STOP_REPLICA, 0, None, "stale controller epoch", STALE_STOP_REPLICA, E.STALE_CONTROLLER_EPOCH, "error_code", ask=NOT_CONTROLLER),
    Row(K.UPDATE_METADATA, 0, None, "stale controller epoch", STALE_UPDATE_METADATA, E.STALE_CONTROLLER_EPOCH, "error_code", ask=NOT_CONTROLLER),  # ControllerMovedException
    # Requests only the active controller answers: KafkaController.electLeaders / controlledShutdown.
    Row(K.ELECT_LEADERS, 0, None, "not the controller", elect(TOPIC), E.NOT_CONTROLLER, "replica_election_results.0.partition_result.0.error_code", ask=NOT_CONTROLLER),
    Row(K.CONTROLLED_SHUTDOWN, 0, None, "not the controller", fixed(broker_id=1, broker_epoch=-1), E.NOT_CONTROLLER, "error_code", ask=NOT_CONTROLLER),
    Row(K.ALTER_PARTITION_REASSIGNMENTS, 0, None, "not the controller", reassign(TOPIC, None), E.NOT_CONTROLLER, "error_code", ask=NOT_CONTROLLER, mq_answers=E.NONE),  # ANY_DESIGN
    Row(K.LIST_PARTITION_REASSIGNMENTS, 0, None, "not the controller", fixed(timeout=5000, topics=None), E.NOT_CONTROLLER, "error_code", ask=NOT_CONTROLLER, mq_answers=E.NONE),  # ANY_DESIGN
    Row(K.CREATE_TOPICS, 2, None, "not the controller", create_topic_body("ec-cluster-new"), E.NOT_CONTROLLER, "topics.0.error_code", ask=NOT_CONTROLLER, mq_answers=E.NONE),  # ANY_DESIGN
    Row(K.DELETE_TOPICS, 1, None, "not the controller", delete_topics("ec-cluster-missing"), E.NOT_CONTROLLER, "responses.0.error_code", ask=NOT_CONTROLLER, mq_answers=E.UNKNOWN_TOPIC_OR_PARTITION),  # ANY_DESIGN
    Row(K.CREATE_PARTITIONS, 0, None, "not the controller", create_partitions(TOPIC, 2), E.NOT_CONTROLLER, "results.0.error_code", ask=NOT_CONTROLLER, mq_answers=E.NONE),  # ANY_DESIGN
    # Group requests at a broker that does not coordinate the group: GroupCoordinator.validateGroupStatus.
    Row(K.JOIN_GROUP, 0, None, "not the coordinator", join_group(GROUP), E.NOT_COORDINATOR, "error_code", ask=NOT_COORDINATOR),
    Row(K.SYNC_GROUP, 0, None, "not the coordinator", member_request(GROUP), E.NOT_COORDINATOR, "error_code", ask=NOT_COORDINATOR),
    Row(K.HEARTBEAT, 0, None, "not the coordinator", member_request(GROUP), E.NOT_COORDINATOR, "error_code", ask=NOT_COORDINATOR),
    Row(K.OFFSET_COMMIT, 2, None, "not the coordinator", offset_commit(GROUP, TOPIC, generation=-1), E.NOT_COORDINATOR, "topics.0.partitions.0.error_code", ask=NOT_COORDINATOR),
    Row(K.OFFSET_FETCH, 2, 7, "not the coordinator", offset_fetch(GROUP, TOPIC), E.NOT_COORDINATOR, "error_code", ask=NOT_COORDINATOR),
    Row(K.DESCRIBE_GROUPS, 0, None, "not the coordinator", fixed(groups=[GROUP], include_authorized_operations=False), E.NOT_COORDINATOR, "groups.0.error_code", ask=NOT_COORDINATOR),
]
# fmt: on


async def send(port: int, api: K, body: dict[str, Any], version: int) -> Any:
    connection = BrokerConnection("127.0.0.1", port, client_id="error-codes")
    try:
        return await connection.send(api, body, version)
    finally:
        await connection.close()


async def prepare(ports: dict[int, int]) -> tuple[int, int]:
    """TOPIC created, GROUP's coordinator found; (the controller's id, the coordinator's id)."""
    port = next(iter(ports.values()))
    topic = {"name": TOPIC, "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []}
    meta_body = metadata(TOPIC)(9, NO_STATE)
    created = await send(port, K.CREATE_TOPICS, {"topics": [topic], "timeout": 30_000, "validate_only": False}, 5)
    assert created.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS), created
    for _ in range(300):
        meta = await send(port, K.METADATA, meta_body, 9)
        found = await send(port, K.FIND_COORDINATOR, {"key": GROUP, "key_type": 0}, 3)
        if meta.topics[0].error_code == E.NONE and found.error_code == E.NONE and meta.controller_id >= 0:
            return meta.controller_id, found.node_id
        await asyncio.sleep(0.1)
    raise AssertionError("the cluster did not settle")


def test_error_codes_of_cluster_situations(cluster_on: Any, zookeeper: Any) -> None:
    _, brokers = cluster_on(zookeeper, ["offsets.topic.num.partitions=3"])
    ports = {i + 1: int(b.bootstrap.rsplit(":", 1)[1]) for i, b in enumerate(brokers)}
    controller, coordinator = asyncio.run(prepare(ports))
    asked = {
        NOT_CONTROLLER: next(p for i, p in ports.items() if i != controller),
        NOT_COORDINATOR: next(p for i, p in ports.items() if i != coordinator),
    }

    async def check(row: Row) -> dict[int, int]:
        connection = BrokerConnection("127.0.0.1", asked[row.ask], client_id="error-codes")
        try:
            await connection.connect()
            low, high = connection.api_versions[row.api]
            versions = range(max(row.first, low), (high if row.last is None else min(row.last, high)) + 1)
            assert versions, f"{row.api.name} {row.situation}: no version served ({low}-{high})"
            found = {}
            for version in versions:
                found[version] = at(
                    await connection.send(row.api, row.request(version, NO_STATE), version), row.where, NO_STATE
                )
            return found
        finally:
            await connection.close()

    async def served() -> set[K]:
        connection = BrokerConnection("127.0.0.1", asked[NOT_CONTROLLER], client_id="error-codes")
        try:
            await connection.connect()
            return {K(api) for api in connection.api_versions}
        finally:
            await connection.close()

    tabled = {row.api for row in [*TABLE, *CLUSTER_TABLE]}
    assert asyncio.run(served()) - tabled == set()  # the APIs only a cluster serves are in CLUSTER_TABLE
    wrong = {}
    for row in CLUSTER_TABLE:
        expected = row.expected if row.mq_answers is None else row.mq_answers
        got = asyncio.run(check(row))
        off = {v: E(code).name for v, code in got.items() if code != expected}
        if off:
            wrong[f"{row.api.name} {row.situation} (expected {expected.name})"] = off
    assert not wrong, wrong
