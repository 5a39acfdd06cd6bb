"""InitProducerId (idempotent and transactional producers) and DescribeCluster.

A transactional producer's InitProducerId goes to the transaction coordinator (PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH before v4). InitProducerId v5 tells that the client also accepts TRANSACTION_ABORTABLE (KIP-890),
which mq's coordinator never answers; v5 is otherwise answered as v4.

With an authorizer, as Kafka 3.x (KIP-679): an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
some topic, else CLUSTER_AUTHORIZATION_FAILED; a transactional one WRITE on its transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. DescribeCluster answers the client's authorized
operations on the cluster when asked (0 without DESCRIBE on it). A DescribeCluster for controller endpoints (v1+
``endpoint_type`` 2) is MISMATCHED_ENDPOINT_TYPE and one of an unknown type UNSUPPORTED_ENDPOINT_TYPE, as Kafka's brokers
answer them; v2's fenced brokers never exist in a ZooKeeper-era cluster, so every broker listed is unfenced."""

from __future__ import annotations

import asyncio
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import Api, RequestContext
from mq.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    allows,
    allows_any,
    allows_cluster,
    authorized_operations,
)
from mq.server.handlers.transactions import fenced_for
from mq.server.metadata_cache import MetadataCache
from mq.server.producer_id_manager import ProducerIdManager
from mq.server.transaction_coordinator import TransactionCoordinator

MAX_PRODUCER_EPOCH = 32767
BROKER_ENDPOINT_TYPE = 1
CONTROLLER_ENDPOINT_TYPE = 2
"""DescribeCluster v1+ ``endpoint_type`` values (Kafka's ``EndpointType``): brokers answer the first only."""


def cluster_apis(
    cache: MetadataCache,
    producer_ids: ProducerIdManager,
    acl: AclCache | None = None,
    transactions: TransactionCoordinator | None = None,
) -> list[Api]:
    """InitProducerId and DescribeCluster, authorized by ``acl`` (None: no authorizer); transactional producers are
    served by ``transactions`` (None: COORDINATOR_NOT_AVAILABLE)."""

    async def init_producer_id(context: RequestContext, request: Any) -> dict[str, Any]:
        transactional_id = request.transactional_id
        if transactional_id is not None:
            if not allows(acl, context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                return init_error(context, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            if transactions is None:
                return init_error(context, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            code, producer_id, epoch = await transactions.init_producer_id(
                transactional_id,
                int(request.transaction_timeout.total_seconds() * 1000),
                int(getattr(request, "producer_id", -1)),
                int(getattr(request, "producer_epoch", -1)),
            )
            code = fenced_for(context.version, 4, code)
            return {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}
        if not (
            allows_cluster(acl, context, AclOperation.IDEMPOTENT_WRITE, audit=False)
            or allows_any(acl, context, AclOperation.WRITE, ResourceType.TOPIC)
        ):
            return init_error(context, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        producer_id = int(getattr(request, "producer_id", -1))
        epoch = int(getattr(request, "producer_epoch", -1))
        if producer_id >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH:
            return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": epoch + 1}
        producer_id = await asyncio.to_thread(producer_ids.next_id)  # a new block is claimed in the metadata tree
        return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}

    def init_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}

    async def describe_cluster(context: RequestContext, request: Any) -> dict[str, Any]:
        endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINT_TYPE)
        if endpoint_type != BROKER_ENDPOINT_TYPE:
            mismatched = endpoint_type == CONTROLLER_ENDPOINT_TYPE
            return {
                **describe_cluster_error(
                    context,
                    request,
                    ErrorCode.MISMATCHED_ENDPOINT_TYPE if mismatched else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                ),
                "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                "type CONTROLLER"
                if mismatched
                else f"Unsupported endpoint type {endpoint_type}",
            }
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if request.include_cluster_authorized_operations:
            operations = (
                authorized_operations(acl, context, ResourceType.CLUSTER, CLUSTER_NAME)
                if allows_cluster(acl, context, AclOperation.DESCRIBE)
                else 0
            )
        return {
            "throttle_time": 0,
            "error_code": 0,
            "cluster_id": cache.cluster_id,
            "controller_id": cache.controller_id,
            "brokers": [
                {"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack, "is_fenced": False}
                for b in cache.brokers_on(context.client.listener)
            ],
            "cluster_authorized_operations": operations,
        }

    def describe_cluster_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "error_code": code,
            "cluster_id": cache.cluster_id,
            "controller_id": -1,
            "brokers": [],
        }

    return [
        Api(ApiKey.INIT_PRODUCER_ID, 0, 5, init_producer_id, init_error),
        Api(ApiKey.DESCRIBE_CLUSTER, 0, 2, describe_cluster, describe_cluster_error),
    ]
