"""Requests only the active controller answers: ElectLeaders and ControlledShutdown (NOT_CONTROLLER elsewhere;
clients then look the controller up again). Each runs as one event on the controller's thread; the loop awaits it.
An election type other than preferred (0) or unclean (1) is INVALID_REQUEST."""

from __future__ import annotations

import asyncio
from typing import Any

from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.server.admin_audit import audit
from mq.server.api_dispatch import Api, RequestContext
from mq.server.controller import PREFERRED, UNCLEAN, Controller
from mq.server.controller_base import ElectionResult
from mq.topic_partition import TopicPartition


def controller_apis(controller: Controller) -> list[Api]:
    async def elect_leaders(context: RequestContext, request: Any) -> dict[str, Any]:
        requested = request.topic_partitions
        partitions = (
            None if requested is None else [TopicPartition(t.topic, int(p)) for t in requested for p in t.partitions]
        )
        election_type = int(getattr(request, "election_type", PREFERRED))
        if election_type not in (PREFERRED, UNCLEAN):
            raise KafkaError(f"Unknown election type {election_type}", ErrorCode.INVALID_REQUEST)

        def elect() -> dict[TopicPartition, ElectionResult] | None:
            return controller.elect_leaders(partitions, election_type) if controller.active else None

        results = await asyncio.wrap_future(controller.call(elect))
        if results is None:
            return elect_leaders_error(context, request, ErrorCode.NOT_CONTROLLER)
        elected = [str(tp) for tp, (code, _) in results.items() if code == ErrorCode.NONE]
        if elected:
            kind = "preferred" if election_type == PREFERRED else "unclean"
            audit(context, f"elected {kind} leaders of {', '.join(elected)}")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, (code, message) in results.items():
            if partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue  # an election over every partition reports only what it did or could not do
            by_topic.setdefault(tp.topic, []).append(
                {"partition_id": tp.partition, "error_code": code, "error_message": message}
            )
        results_by_topic = [{"topic": t, "partition_result": r} for t, r in by_topic.items()]
        return {"throttle_time": 0, "error_code": ErrorCode.NONE, "replica_election_results": results_by_topic}

    def elect_leaders_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        """``code`` for the request and for each partition it names (v0 answers per partition only)."""
        results = [
            {
                "topic": t.topic,
                "partition_result": [
                    {"partition_id": int(p), "error_code": code, "error_message": None} for p in t.partitions
                ],
            }
            for t in request.topic_partitions or ()
        ]
        return {"throttle_time": 0, "error_code": code, "replica_election_results": results}

    async def controlled_shutdown(context: RequestContext, request: Any) -> dict[str, Any]:
        broker_id = int(request.broker_id)

        def shut_down() -> ErrorCode | list[TopicPartition]:
            if not controller.active:
                return ErrorCode.NOT_CONTROLLER
            if broker_id not in controller.context.live_brokers:
                return ErrorCode.BROKER_NOT_AVAILABLE
            return controller.controlled_shutdown(broker_id)

        remaining = await asyncio.wrap_future(controller.call(shut_down))
        if isinstance(remaining, ErrorCode):
            return controlled_shutdown_error(context, request, remaining)
        return {
            "error_code": ErrorCode.NONE,
            "remaining_partitions": [{"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining],
        }

    def controlled_shutdown_error(context: RequestContext, request: Any, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": code, "remaining_partitions": []}

    return [
        Api(ApiKey.ELECT_LEADERS, 0, 2, elect_leaders, elect_leaders_error),
        Api(ApiKey.CONTROLLED_SHUTDOWN, 3, 3, controlled_shutdown, controlled_shutdown_error),
    ]
