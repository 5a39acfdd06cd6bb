"""InitProducerId (idempotent producers) and DescribeCluster."""

from __future__ import annotations

import asyncio
from typing import Any

from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.server.api_dispatch import Api, RequestContext
from mq.server.metadata_cache import MetadataCache
from mq.server.producer_id_manager import ProducerIdManager

MAX_PRODUCER_EPOCH = 32767
NO_AUTHORIZED_OPERATIONS = -2147483648


def cluster_apis(cache: MetadataCache, producer_ids: ProducerIdManager) -> list[Api]:
    async def init_producer_id(context: RequestContext, request: Any) -> dict[str, Any]:
        if request.transactional_id is not None:
            return init_error(context, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        producer_id = int(getattr(request, "producer_id", -1))
        epoch = int(getattr(request, "producer_epoch", -1))
        if producer_id >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH:
            return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": epoch + 1}
        producer_id = await asyncio.to_thread(producer_ids.next_id)  # a new block is claimed in the metadata tree
        return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}

    def init_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}

    async def describe_cluster(context: RequestContext, request: Any) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "error_code": 0,
            "cluster_id": cache.cluster_id,
            "controller_id": cache.controller_id,
            "brokers": [
                {"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in cache.brokers_on(context.client.listener)
            ],
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
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
        Api(ApiKey.INIT_PRODUCER_ID, 0, 4, init_producer_id, init_error),
        Api(ApiKey.DESCRIBE_CLUSTER, 0, 1, describe_cluster, describe_cluster_error),
    ]
