"""Peer liveness: each broker pings the other live brokers and unregisters one that proves dead.

A killed broker's sockets close at once: connecting to its port is refused and open connections end (EOF or
reset), while its ZooKeeper session only expires after ``zookeeper.session.timeout.ms``. On that proof the monitor
deletes the peer's ``/brokers/ids/<id>`` if it is still the registration seen while the peer answered (same czxid,
the broker epoch: a restarted broker's new registration is left alone), and ``/controller`` if that same session
holds it; the controller's watches then run the usual broker-failure and controller elections. A timeout proves
nothing (the peer may be hung or cut off), so such a peer is left to its session's expiry, as in Kafka. Every
ZooKeeper call runs in an executor, off the event loop.

``RegistrationKeeper`` is the other side: a broker whose registration is deleted while it serves registers again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mq.client.connection import BrokerConnection, BrokerConnectionError, RequestTimedOutError
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.errors import KafkaError
from mq.protocol.api_keys import ApiKey
from mq.server.metadata_cache import BrokerEndpoint
from mq.zk import paths
from mq.zk.codecs import BrokerRegistration
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, Stat, StoreError

log = logging.getLogger(__name__)

_PING = {"client_software_name": "mq", "client_software_version": "1"}
REREAD_REGISTRATION_S = 10.0
"""How often the registration of a peer that answers is read again (it may have registered anew meanwhile)."""


@dataclass(frozen=True)
class _Registration:
    """What identifies one run of a broker in ZooKeeper."""

    epoch: int
    """The czxid of ``/brokers/ids/<id>``."""
    session: int
    """The ZooKeeper session that owns it (and ``/controller`` when that broker is the controller)."""


def _refused_or_reset(exc: BrokerConnectionError) -> bool:
    """Whether a failed request proves nothing listens at the peer's port: the connect was refused or reset, or an
    open connection was closed or broken (a failure without a connect-time cause). A connect that timed out or found
    no route proves nothing."""
    cause = exc.__cause__
    return cause is None or isinstance(cause, ConnectionRefusedError | ConnectionResetError)


async def probe(connection: BrokerConnection) -> bool | None:
    """Send ApiVersions: True when the peer answered, False when it is proven dead, None when it did not answer in
    time."""
    try:
        await connection.send(ApiKey.API_VERSIONS, _PING)
    except RequestTimedOutError:
        return None
    except BrokerConnectionError as exc:
        return False if _refused_or_reset(exc) else None
    except KafkaError:
        return True  # an error response is still an answer
    return True


class PeerLivenessMonitor:
    """Pings every peer in ``peers()`` (the brokers the metadata cache lists) each ``interval_ms``, one task per
    peer; a peer leaves the watch when it leaves ``peers()``."""

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        peers: Callable[[], Mapping[int, BrokerEndpoint]],
        interval_ms: int,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.security = security
        """TLS and SASL of the probes' connections (the inter-broker listener's)."""
        self.store = store
        self.peers = peers
        self.interval_s = interval_ms / 1000
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._supervisor: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def stop(self) -> None:
        tasks = [t for t in [self._supervisor, *self._tasks.values()] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            for peer_id in self.peers():
                task = self._tasks.get(peer_id)
                if peer_id != self.broker_id and (task is None or task.done()):
                    self._tasks[peer_id] = loop.create_task(self._watch(peer_id))
            await asyncio.sleep(self.interval_s)

    async def _watch(self, peer_id: int) -> None:
        """Ping ``peer_id`` until it leaves ``peers()``; unregister it when two attempts in a row (the second on a
        fresh connection) prove it dead. Its registration is read when it answers (first, and every
        ``REREAD_REGISTRATION_S``): only that registration is ever deleted."""
        loop = asyncio.get_running_loop()
        seen: _Registration | None = None
        seen_at = 0.0
        connection: BrokerConnection | None = None
        try:
            while (endpoint := self.peers().get(peer_id)) is not None:
                if connection is None or (connection.host, connection.port) != (endpoint.host, endpoint.port):
                    if connection is not None:
                        await connection.close()
                    timeout_ms = max(int(self.interval_s * 4000), 1000)
                    connection = BrokerConnection(
                        endpoint.host,
                        endpoint.port,
                        node_id=peer_id,
                        client_id=f"broker-{self.broker_id}-liveness",
                        request_timeout_ms=timeout_ms,
                        connect_timeout_ms=timeout_ms,
                        security=self.security,
                    )
                answered = await probe(connection)
                if answered is False:
                    answered = await probe(connection)
                try:
                    if answered and (seen is None or loop.time() - seen_at > REREAD_REGISTRATION_S):
                        seen = await loop.run_in_executor(None, self._registration, peer_id)
                        seen_at = loop.time()
                    elif answered is False and seen is not None:
                        await loop.run_in_executor(None, self._unregister, peer_id, seen)
                        seen = None
                except StoreError as exc:
                    log.warning("liveness of broker %d: ZooKeeper call failed (%s)", peer_id, exc)
                await asyncio.sleep(self.interval_s)
        finally:
            if connection is not None:
                await connection.close()

    def _registration(self, peer_id: int) -> _Registration | None:
        stat = self.store.exists(paths.broker(peer_id))
        return None if stat is None else _Registration(stat.czxid, stat.ephemeral_owner)

    def _unregister(self, peer_id: int, seen: _Registration) -> None:
        """Delete the dead run's registration and, when its session holds it, ``/controller``."""
        path = paths.broker(peer_id)
        stat = self.store.exists(path)
        if stat is not None and stat.czxid == seen.epoch and _delete(self.store, path, stat):
            log.warning("broker %d refuses connections: deleted its registration (epoch %d)", peer_id, seen.epoch)
        controller = self.store.exists(paths.CONTROLLER)
        held = controller is not None and controller.ephemeral_owner == seen.session
        if held and controller is not None and _delete(self.store, paths.CONTROLLER, controller):
            log.warning("broker %d refuses connections: deleted /controller it held", peer_id)


def _delete(store: MetadataStore, path: str, stat: Stat) -> bool:
    """Delete ``path`` if it still has ``stat``'s version; whether this call deleted it."""
    try:
        store.delete(path, stat.version)
    except (NoNodeError, BadVersionError):
        return False
    return True


class RegistrationKeeper:
    """Registers this broker again whenever its ``/brokers/ids/<id>`` disappears while it serves (deleted by a peer
    that judged it dead, or by an operator); ``stop`` before shutting down, so a stopping broker stays away."""

    def __init__(
        self, zk: KafkaZkClient, registration: BrokerRegistration, post: Callable[[Callable[[], None]], None]
    ) -> None:
        self.zk = zk
        self.registration = registration
        self._post = post
        self._stopped = False
        self._pending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self.zk.store.watch_data(paths.broker(self.registration.broker_id), self._on_change)

    def stop(self) -> None:
        self._stopped = True

    def _on_change(self, data: bytes | None, stat: Stat | None) -> bool:
        if self._stopped:
            return False
        if data is None:
            self._post(self._schedule_register)
        return True

    def _schedule_register(self) -> None:
        task = asyncio.get_running_loop().create_task(self._register())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _register(self) -> None:
        if self._stopped:
            return
        try:
            epoch = await asyncio.get_running_loop().run_in_executor(None, self.zk.register_broker, self.registration)
        except NodeExistsError:
            return
        except StoreError as exc:
            log.warning("registration of broker %d failed: %s", self.registration.broker_id, exc)
            return
        log.warning(
            "registration of broker %d was gone; registered again (epoch %d)", self.registration.broker_id, epoch
        )
