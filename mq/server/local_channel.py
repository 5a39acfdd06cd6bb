"""The controller's channels to brokers: ``LocalChannel`` calls into the broker it runs in; ``ClusterChannel`` sends
LeaderAndIsr, UpdateMetadata and StopReplica over the wire to the other brokers, in order per broker.

The controller calls a channel from its own thread; both hand the work to the broker's event loop
(``call_soon_threadsafe``, which keeps the order of the calls), which owns the replica manager, the metadata cache
and the sockets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from mq.client.connection import BrokerConnection
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import ErrorCode
from mq.protocol.inter_broker import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache, PartitionInfo
from mq.server.partition_state import LEADER_DURING_DELETE, PartitionStateInfo
from mq.server.replica_manager import ReplicaManager
from mq.topic_partition import TopicPartition
from mq.zk.codecs import BrokerRegistration

log = logging.getLogger(__name__)


SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's SecurityProtocol ids, as UpdateMetadata carries them."""


def endpoint_of(registration: BrokerRegistration, listener: str) -> BrokerEndpoint:
    """The broker of ``registration`` reached on ``listener`` (the inter-broker one), with all its listeners."""
    addresses = registration.addresses()
    host, port = addresses.get(listener, ("", -1))
    listeners = tuple((name, h, p) for name, (h, p) in addresses.items())
    return BrokerEndpoint(registration.broker_id, host, port, registration.rack, listeners)


def apply_update_metadata(
    cache: MetadataCache,
    partitions: Iterable[PartitionStateInfo],
    brokers: Iterable[BrokerEndpoint],
    controller_id: int,
) -> None:
    """What a broker does with UpdateMetadata: new live brokers, partition states, deleted topics dropped."""
    cache.update_brokers(brokers, controller_id)
    for info in partitions:
        if info.leader == LEADER_DURING_DELETE:
            cache.remove_topic(info.tp.topic)
            continue
        offline = tuple(r for r in info.replicas if r not in cache.brokers)
        state = PartitionInfo(info.leader, info.leader_epoch, info.replicas, info.isr, offline)
        cache.update_partition(info.tp.topic, info.topic_id, info.tp.partition, state)


_Queued = tuple[int, dict[str, Any], Callable[[bool, Any], None] | None]
"""A request waiting for its broker: (api key, body, told whether the broker answered without error, and the response,
None when the broker could not be reached)."""


def _without_errors(response: Any) -> bool:
    """Whether a controller request's response carries no error, top-level or per partition."""
    if int(getattr(response, "error_code", 0)) != 0:
        return False
    return all(int(p.error_code) == 0 for p in getattr(response, "partition_errors", ()))


class LocalChannel:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        cache: MetadataCache,
        loop: asyncio.AbstractEventLoop,
        listener: str = "PLAINTEXT",
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.cache = cache
        self._loop = loop
        self.listener = listener
        """The inter-broker listener's name."""

    def leader_and_isr(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        on_storage_errors: Callable[[list[TopicPartition]], None] | None = None,
    ) -> None:
        if broker_id == self.broker_id:
            self.replica_manager.prepare_logs(partitions)  # file work on the controller's thread
            self._loop.call_soon_threadsafe(self.replica_manager.become_leader_or_follower, partitions)
            if on_storage_errors is not None:
                on_storage_errors([info.tp for info in partitions if self.replica_manager.is_offline(info.tp)])

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None:
        if broker_id == self.broker_id:
            endpoints = [endpoint_of(b, self.listener) for b in brokers]
            self._loop.call_soon_threadsafe(apply_update_metadata, self.cache, partitions, endpoints, controller_id)

    def stop_replica(
        self,
        broker_id: int,
        partitions: list[TopicPartition],
        delete: bool,
        on_response: Callable[[bool], None] | None = None,
    ) -> None:
        def stop() -> None:
            if broker_id == self.broker_id:
                self.replica_manager.stop_replicas(partitions, delete)
            if on_response is not None:
                on_response(broker_id == self.broker_id)

        self._loop.call_soon_threadsafe(stop)


def _partition_state(info: PartitionStateInfo) -> dict[str, Any]:
    return {
        "partition_index": info.tp.partition,
        "controller_epoch": info.controller_epoch,
        "leader": info.leader,
        "leader_epoch": info.leader_epoch,
        "isr": list(info.isr),
        "zk_version": info.zk_version,
        "replicas": list(info.replicas),
    }


def _by_topic(partitions: Iterable[PartitionStateInfo]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for info in partitions:
        topics.setdefault(info.tp.topic, []).append(_partition_state(info))
    return [{"topic_name": t, "partition_states": states} for t, states in topics.items()]


class ClusterChannel:
    """Sends the controller's requests to every broker (itself included, over the wire like the others).

    Each target broker has a queue drained by one task, so requests reach a broker in the order they were made.
    """

    def __init__(
        self,
        controller_id: int,
        controller_epoch: Callable[[], int],
        endpoints: Callable[[int], BrokerEndpoint | None],
        loop: asyncio.AbstractEventLoop,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._loop = loop
        self.security = security
        """TLS and SASL of the controller's connections to brokers (the inter-broker listener's)."""
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.endpoints = endpoints
        self._queues: dict[int, asyncio.Queue[_Queued]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def _enqueue(
        self,
        broker_id: int,
        api_key: int,
        body: dict[str, Any],
        on_response: Callable[[bool, Any], None] | None = None,
    ) -> None:
        """Called on the controller's thread: the epoch is taken now, the request queued on the loop."""
        body = {"controller_id": self.controller_id, "controller_epoch": self.controller_epoch(), **body}
        self._loop.call_soon_threadsafe(self._put, broker_id, (api_key, body, on_response))

    def _put(self, broker_id: int, item: _Queued) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = asyncio.Queue()
            self._tasks[broker_id] = self._loop.create_task(self._drain(broker_id, queue))
        queue.put_nowait(item)

    async def _drain(self, broker_id: int, queue: asyncio.Queue[_Queued]) -> None:
        connection: BrokerConnection | None = None
        while True:
            api_key, body, on_response = await queue.get()
            confirmed, response = False, None
            for attempt in range(30):
                endpoint = self.endpoints(broker_id)
                if endpoint is None:
                    break
                if connection is None or (connection.host, connection.port) != (endpoint.host, endpoint.port):
                    if connection is not None:
                        await connection.close()
                    connection = BrokerConnection(
                        endpoint.host,
                        endpoint.port,
                        node_id=broker_id,
                        client_id=f"controller-{self.controller_id}",
                        security=self.security,
                    )
                try:
                    response = await connection.send(api_key, body)
                except Exception as exc:
                    log.warning("controller request %d to broker %d failed (%s); retrying", api_key, broker_id, exc)
                    await asyncio.sleep(min(0.1 * (attempt + 1), 1.0))
                    continue
                confirmed = _without_errors(response)
                break
            if on_response is not None:
                on_response(confirmed, response)
            queue.task_done()

    def leader_and_isr(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        on_storage_errors: Callable[[list[TopicPartition]], None] | None = None,
    ) -> None:
        leaders = {info.leader for info in partitions}
        live = [self.endpoints(b) for b in leaders]
        body = {
            "topic_states": _by_topic(partitions),
            "live_leaders": [{"broker_id": e.broker_id, "host_name": e.host, "port": e.port} for e in live if e],
        }

        def answered(confirmed: bool, response: Any) -> None:
            if on_storage_errors is not None and response is not None:
                on_storage_errors(
                    [
                        TopicPartition(e.topic_name, e.partition_index)
                        for e in response.partition_errors
                        if e.error_code == ErrorCode.KAFKA_STORAGE_ERROR
                    ]
                )

        self._enqueue(broker_id, LEADER_AND_ISR, body, answered)

    def update_metadata(
        self,
        broker_id: int,
        partitions: list[PartitionStateInfo],
        brokers: list[BrokerRegistration],
        controller_id: int,
    ) -> None:
        live = []
        for registration in brokers:
            protocols = registration.security_protocol_map
            endpoints = [
                {
                    "port": port,
                    "host": host,
                    "listener": name,
                    "security_protocol": SECURITY_PROTOCOL_IDS.get(protocols.get(name, name), 0),
                }
                for name, (host, port) in registration.addresses().items()
            ]
            live.append({"id": registration.broker_id, "endpoints": endpoints, "rack": registration.rack})
        self._enqueue(broker_id, UPDATE_METADATA, {"topic_states": _by_topic(partitions), "live_brokers": live})

    def stop_replica(
        self,
        broker_id: int,
        partitions: list[TopicPartition],
        delete: bool,
        on_response: Callable[[bool], None] | None = None,
    ) -> None:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {"delete_partitions": delete, "topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]}
        self._enqueue(
            broker_id, STOP_REPLICA, body, None if on_response is None else lambda confirmed, _: on_response(confirmed)
        )

    async def drain(self, timeout_s: float) -> None:
        """Wait until every queued request has been delivered or given up, at most ``timeout_s``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(q.join() for q in self._queues.values())), timeout_s)

    async def close(self, drain_timeout_s: float = 5.0) -> None:
        """Deliver what is queued (bounded by ``drain_timeout_s``: a broker that does not answer is given up), then
        stop; a controller's last decisions, such as those of its own controlled shutdown, reach the brokers."""
        await self.drain(drain_timeout_s)
        for task in self._tasks.values():
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks.values()), timeout=5.0)
