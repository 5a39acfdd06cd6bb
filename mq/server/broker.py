"""The broker process: wires storage, the metadata tree, the controller, the replica manager and the network.

Start-up: load every log under ``log.dirs`` (recovering after an unclean shutdown), open the metadata tree (the
local store in standalone mode), bind the listener, register ``/brokers/ids/<id>`` (kept while serving), start
pinging the other brokers (``broker_liveness``), start the controller. Shutdown (SIGTERM/SIGINT): controlled
shutdown, a controller hands its role over, stop accepting, answer the requests already received, checkpoint high
watermarks, flush and close every log, write the clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mq.client.connection import BrokerConnection
from mq.config import BrokerConfig, TopicConfig, parse_properties
from mq.errors import ConfigError, ErrorCode, KafkaError
from mq.protocol.inter_broker import CONTROLLED_SHUTDOWN
from mq.server.api_dispatch import ApiDispatcher
from mq.server.broker_liveness import PeerLivenessMonitor, RegistrationKeeper
from mq.server.controller import Controller, ControllerChannel
from mq.server.group_coordinator import GroupCoordinator
from mq.server.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, GroupMetadataManager
from mq.server.handlers.admin_topics import admin_topic_apis
from mq.server.handlers.api_versions import api_versions_api
from mq.server.handlers.cluster import cluster_apis
from mq.server.handlers.configs import configs_apis
from mq.server.handlers.controller_requests import controller_apis
from mq.server.handlers.fetch import fetch_api
from mq.server.handlers.group_offsets import group_offset_apis
from mq.server.handlers.groups import group_apis, offsets_topic_creator
from mq.server.handlers.inter_broker import inter_broker_apis
from mq.server.handlers.leader_epoch import leader_epoch_apis
from mq.server.handlers.log_dirs import log_dirs_apis
from mq.server.handlers.metadata import metadata_api
from mq.server.handlers.offsets import offsets_apis
from mq.server.handlers.produce import produce_api
from mq.server.handlers.reassignments import reassignment_apis
from mq.server.local_channel import ClusterChannel, LocalChannel, endpoint_of
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache
from mq.server.network import SocketServer
from mq.server.partition import Partition
from mq.server.producer_id_manager import ProducerIdManager
from mq.server.replica_fetcher import ReplicaFetcherManager
from mq.server.replica_manager import ReplicaManager
from mq.storage.checkpoints import OffsetCheckpointFile
from mq.storage.log_cleaner import LogCleaner
from mq.storage.log_manager import LogManager
from mq.topic_partition import TopicPartition
from mq.zk import paths
from mq.zk.admin_zk_client import DEFAULT_BROKER_ENTITY, AdminZkClient
from mq.zk.codecs import BrokerRegistration, PartitionState, decode_config_change, encode_partition_list
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from mq.zk.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, StoreError
from mq.zk.zk_store import ZooKeeperStore

log = logging.getLogger(__name__)

METADATA_FILE = "metadata-tree.json"
PID_FILE = "mq-server.pid"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
RESERVED_BROKER_MAX_ID = 1000
CONTROL_REQUEST_TIMEOUT_S = 30.0
CONTROLLER_HANDOVER_DRAIN_S = 2.0
"""Longest wait, when stopping, for the controller's queued requests to reach the brokers."""
STOPPING_ZOOKEEPER_TIMEOUT_S = 2.0
"""Longest wait, when stopping, for one ZooKeeper answer (a ZooKeeper that stopped answering holds no stop up)."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listener(text: str) -> Listener:
    """The first ``NAME://host:port`` of a listeners value (an empty host binds every interface)."""
    first = text.split(",")[0].strip()
    name, sep, address = first.partition("://")
    host, _, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"invalid listener '{first}': expected NAME://host:port")
    return Listener(name, host.strip("[]"), int(port))


def stored_broker_id(log_dirs: list[Path]) -> int | None:
    """The ``broker.id`` an earlier start recorded in a log dir's ``meta.properties``."""
    for directory in log_dirs:
        meta = directory / "meta.properties"
        if meta.exists():
            value = parse_properties(meta.read_text(encoding="utf-8")).get("broker.id")
            if value is not None and value.lstrip("-").isdigit() and int(value) >= 0:
                return int(value)
    return None


def generate_broker_id(store: MetadataStore) -> int:
    """Kafka's generated ids: the new version of ``/brokers/seqid`` plus ``reserved.broker.max.id`` (1000)."""
    store.ensure_path(paths.BROKER_SEQID)
    return store.set(paths.BROKER_SEQID, b"").version + RESERVED_BROKER_MAX_ID


def pid_file(config: BrokerConfig) -> Path:
    return config.log_dir_paths[0] / PID_FILE


class KafkaServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.bound: Listener | None = None
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._topic_configs: dict[str, TopicConfig] = {}
        self._last_change = -1
        self.store: MetadataStore | None = None
        self.zk: KafkaZkClient | None = None
        self.admin: AdminZkClient | None = None
        self.cluster_channel: ClusterChannel | None = None
        self.server: SocketServer | None = None
        self.log_manager: Any = None
        self.replica_manager: ReplicaManager | None = None
        self.log_cleaner: LogCleaner | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.liveness: PeerLivenessMonitor | None = None
        self.registration_keeper: RegistrationKeeper | None = None

    # --- configuration of topics -------------------------------------------------------------------------------

    def topic_config(self, topic: str) -> TopicConfig:
        config = self._topic_configs.get(topic)
        if config is None:
            assert self.zk is not None
            overrides = self.zk.get_entity_config("topics", topic)
            config = self._topic_configs[topic] = self.config.topic_defaults().with_overrides(overrides)
        return config

    def _on_config_changes(self, children: list[str]) -> None:
        assert self.zk is not None and self.replica_manager is not None
        for child in sorted(children):
            sequence = int(child.rsplit("_", 1)[1])
            if sequence <= self._last_change:
                continue
            self._last_change = sequence
            data = self.zk.store.get_or_none(f"{paths.CONFIG_CHANGES}/{child}")
            if data is None:
                continue
            entity_type, _, name = decode_config_change(data).partition("/")
            if entity_type == "topics":
                self._topic_configs.pop(name, None)
                self.replica_manager.update_topic_config(name)
            elif entity_type == "brokers" and name in (str(self.broker_id), DEFAULT_BROKER_ENTITY):
                self._load_throttle_rates()

    def _load_throttle_rates(self) -> None:
        """Apply the replication throttle rates of ``/config/brokers/<id>`` over ``/config/brokers/<default>``."""
        assert self.zk is not None and self.replica_manager is not None
        self.replica_manager.quotas.update_rates(
            self.zk.get_entity_config("brokers", str(self.broker_id)),
            self.zk.get_entity_config("brokers", DEFAULT_BROKER_ENTITY),
        )

    # --- lifecycle ---------------------------------------------------------------------------------------------

    async def startup(self) -> Listener:
        loop = asyncio.get_running_loop()
        config = self.config
        log_dirs = [d.resolve() for d in config.log_dir_paths]
        for directory in log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        if config.zookeeper_connect:
            connect = config.zookeeper_connect
            self.store = await loop.run_in_executor(
                None,
                lambda: ZooKeeperStore(
                    connect,
                    session_timeout_ms=config.zookeeper_session_timeout_ms,
                    connection_timeout_ms=config.zookeeper_connection_timeout_ms,
                ),
            )
        else:
            self.store = LocalStore(log_dirs[0] / METADATA_FILE)
        self.zk = KafkaZkClient(self.store)
        self.zk.create_top_level_paths()
        cluster_id = self.zk.get_or_create_cluster_id()
        if self.broker_id < 0:
            stored = stored_broker_id(log_dirs)
            self.broker_id = stored if stored is not None else generate_broker_id(self.store)
        self.log_manager = LogManager(
            log_dirs,
            config.topic_defaults(),
            self.topic_config,
            broker_id=self.broker_id,
            recovery_threads=config.num_recovery_threads_per_data_dir,
        )
        await loop.run_in_executor(None, self.log_manager.startup)
        high_watermarks: dict[TopicPartition, int] = {}
        for directory in log_dirs:
            high_watermarks.update(OffsetCheckpointFile(directory / HIGH_WATERMARK_FILE).read())
        self.cache = MetadataCache(self.broker_id, cluster_id)
        self.replica_manager = ReplicaManager(
            config, self.broker_id, self.log_manager, self.topic_config, high_watermarks
        )

        coordinator = self.group_coordinator = GroupCoordinator(
            config, GroupMetadataManager(config, self.replica_manager, self._offsets_topic_partitions)
        )
        self.replica_manager.leadership_listener = coordinator.on_leadership_change
        self.cache.topic_removed_listener = coordinator.schedule_topic_removal

        def post(fn: Callable[[], None]) -> None:
            loop.call_soon_threadsafe(fn)

        channel: ControllerChannel
        if config.standalone:
            channel = LocalChannel(self.broker_id, self.replica_manager, self.cache)
        else:
            self.cluster_channel = ClusterChannel(self.broker_id, lambda: self.controller.context.epoch, self._endpoint)
            channel = self.cluster_channel
            self.replica_manager.fetchers = ReplicaFetcherManager(
                self.broker_id,
                self._cached_endpoint,
                max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                max_bytes=config.replica_fetch_max_bytes,
                quota=self.replica_manager.quotas.follower,
            )
            self.replica_manager.isr_writer = self._write_isr
        self.controller = Controller(
            self.zk,
            self.broker_id,
            channel,
            post,
            lambda topic: self.topic_config(topic).unclean_leader_election_enable,
        )
        admin = self.admin = AdminZkClient(self.zk)
        dispatcher = ApiDispatcher()
        for api in [
            produce_api(self.replica_manager),
            fetch_api(self.replica_manager),
            *offsets_apis(self.replica_manager),
            *log_dirs_apis(self.replica_manager),
            *leader_epoch_apis(self.replica_manager),
            metadata_api(self.cache, self._auto_create if config.auto_create_topics_enable else None),
            *admin_topic_apis(admin, self.cache, config),
            *configs_apis(admin, config, self.broker_id),
            *cluster_apis(self.cache, ProducerIdManager(self.store, self.broker_id)),
            *controller_apis(self.controller),
            *reassignment_apis(self.zk),
            *group_apis(coordinator, self.cache, offsets_topic_creator(admin, self.cache, config)),
            *group_offset_apis(coordinator, self.cache, config),
            *([] if config.standalone else inter_broker_apis(self.replica_manager, self.cache, self.zk)),
        ]:
            dispatcher.add(api)
        dispatcher.add(api_versions_api(dispatcher))
        listener = parse_listener(config.listeners)
        self.server = SocketServer(
            listener.host,
            listener.port,
            dispatcher,
            max_request_bytes=config.socket_request_max_bytes,
            send_buffer_bytes=config.socket_send_buffer_bytes,
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
        )
        _, port = await self.server.start()
        advertised = parse_listener(config.advertised_listeners or config.listeners)
        host = advertised.host or socket.gethostname()
        self.bound = Listener(listener.name, host, port if advertised.port in (0, listener.port) else advertised.port)
        self._registration = BrokerRegistration(
            self.broker_id,
            [f"{self.bound.name}://{self.bound.host}:{self.bound.port}"],
            config.broker_rack,
            int(time.time() * 1000),
        )
        self.zk.register_broker(self._registration)
        if isinstance(self.store, ZooKeeperStore):
            self.store.on_new_session(lambda: post(self._on_new_session))
            self.registration_keeper = RegistrationKeeper(self.zk, self._registration, post)
            self.registration_keeper.start()
            interval = config.broker_liveness_interval_ms
            self.liveness = PeerLivenessMonitor(self.broker_id, self.store, lambda: self.cache.brokers, interval)
            self.liveness.start()

        self.controller.startup()

        def on_config_changes(children: list[str]) -> bool:
            post(lambda: self._on_config_changes(children))
            return True

        self._load_throttle_rates()
        self.store.watch_children(paths.CONFIG_CHANGES, on_config_changes)
        self._start_background_tasks()
        pid_file(config).write_text(f"{os.getpid()}\n", encoding="utf-8")
        log.info("mq broker %d started on %s:%d (cluster id %s)", self.broker_id, self.bound.host, port, cluster_id)
        return self.bound

    def _on_new_session(self) -> None:
        """The ZooKeeper session expired and a new one began: register again and stop acting as controller (the
        controller role is contested anew through the ``/controller`` watch)."""
        assert self.zk is not None
        log.warning("ZooKeeper session of broker %d expired; registering again", self.broker_id)
        try:
            self.zk.register_broker(self._registration)
        except NodeExistsError:
            pass  # the registration keeper registered first
        except StoreError as exc:
            log.error("re-registration of broker %d failed: %s", self.broker_id, exc)
        self.controller.resign()

    def _endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        registration = self.controller.context.live_brokers.get(broker_id)
        return None if registration is None else endpoint_of(registration)

    def _write_isr(self, partition: Partition, isr: frozenset[int]) -> bool:
        """A leader's ISR change: a conditional write of the state znode, then an ISR change notification."""
        assert self.zk is not None
        tp = partition.tp
        state = PartitionState(self.broker_id, partition.leader_epoch, sorted(isr), partition.controller_epoch)
        try:
            partition.zk_version = self.zk.set_partition_state(tp.topic, tp.partition, state, partition.zk_version)
        except (BadVersionError, NoNodeError):
            log.info(
                "Cached zkVersion %d not equal to that in zookeeper, skip updating ISR of %s", partition.zk_version, tp
            )
            return False
        self.zk.store.create(
            paths.ISR_CHANGE_PREFIX, encode_partition_list([(tp.topic, tp.partition)]), sequence=True, makepath=True
        )
        log.info("ISR of %s is now %s", tp, sorted(isr))
        return True

    def _offsets_topic_partitions(self) -> int:
        """Partitions of ``__consumer_offsets``: the topic's own count once it exists, else the configured one."""
        topic = self.cache.topics.get(GROUP_METADATA_TOPIC_NAME)
        return (
            len(topic.partitions)
            if topic is not None and topic.partitions
            else self.config.offsets_topic_num_partitions
        )

    def _cached_endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        return self.cache.brokers.get(broker_id)

    def _auto_create(self, topic: str) -> ErrorCode:
        try:
            assert self.admin is not None
            self.admin.create_topic(topic, self.config.num_partitions, self.config.default_replication_factor)
        except KafkaError as exc:
            return ErrorCode.LEADER_NOT_AVAILABLE if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS else exc.code
        return ErrorCode.LEADER_NOT_AVAILABLE

    def _start_background_tasks(self) -> None:
        config = self.config

        def every(interval_ms: int, action: Callable[[], None], name: str) -> None:
            async def loop() -> None:
                while True:
                    await asyncio.sleep(interval_ms / 1000)
                    try:
                        action()
                    except Exception:
                        log.exception("%s failed", name)

            if interval_ms < 2**31:
                self._tasks.append(asyncio.get_running_loop().create_task(loop()))

        replica_manager = self.replica_manager
        assert replica_manager is not None
        every(
            config.log_retention_check_interval_ms,
            lambda: self.log_manager.cleanup_logs(replica_manager.high_watermarks()),
            "retention",
        )
        if not config.standalone:
            every(config.replica_lag_time_max_ms // 2, replica_manager.shrink_isrs, "ISR shrink")
        if config.auto_leader_rebalance_enable:
            threshold = config.leader_imbalance_per_broker_percentage
            every(
                config.leader_imbalance_check_interval_seconds * 1000,
                lambda: self.controller.check_leader_imbalance(threshold),
                "leader rebalance",
            )
        every(config.log_flush_scheduler_interval_ms, self.log_manager.flush_dirty_logs, "flush")
        if config.log_cleaner_enable:
            cleaner = self.log_cleaner = LogCleaner(
                self.log_manager,
                threads=config.log_cleaner_threads,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                io_buffer_size=config.log_cleaner_io_buffer_size,
                io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                backoff_ms=config.log_cleaner_backoff_ms,
                bounded_by_high_watermarks=True,
            )
            cleaner.update_high_watermarks(replica_manager.high_watermarks())
            cleaner.start()
            every(
                max(min(config.log_cleaner_backoff_ms, 1000), 100),
                lambda: cleaner.update_high_watermarks(replica_manager.high_watermarks()),
                "cleaner high watermarks",
            )
        coordinator = self.group_coordinator
        if coordinator is not None:
            every(config.offsets_retention_check_interval_ms, coordinator.schedule_offset_expiration, "offset expiry")
        every(
            config.log_flush_offset_checkpoint_interval_ms,
            self.log_manager.checkpoint_recovery_points,
            "recovery checkpoint",
        )
        every(
            config.log_flush_start_offset_checkpoint_interval_ms,
            self.log_manager.checkpoint_log_start_offsets,
            "log start offset checkpoint",
        )
        every(
            config.replica_high_watermark_checkpoint_interval_ms,
            self.checkpoint_high_watermarks,
            "high watermark checkpoint",
        )

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` in every log dir for the partitions it holds."""
        if self.replica_manager is None:
            return
        by_dir: dict[Path, dict[TopicPartition, int]] = {d.resolve(): {} for d in self.config.log_dir_paths}
        for tp, partition in self.replica_manager.partitions.items():
            directory = Path(partition.log.dir).resolve().parent
            by_dir.setdefault(directory, {})[tp] = partition.high_watermark
        for directory, offsets in by_dir.items():
            OffsetCheckpointFile(directory / HIGH_WATERMARK_FILE).write(offsets)

    def request_stop(self) -> None:
        self._stopping.set()

    async def wait_for_stop(self) -> None:
        await self._stopping.wait()

    async def _controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: replica fetchers stop (so no leader re-adds this broker to an ISR), then the
        controller moves leadership off this broker; retried while partitions remain or the controller is
        unreachable, up to ``controlled.shutdown.max.retries`` times and for at most that many retry backoffs in all,
        so the rest of the shutdown runs even while ZooKeeper or the controller is out of reach."""
        config = self.config
        if config.standalone or not config.controlled_shutdown_enable or self.replica_manager is None:
            return
        fetchers, self.replica_manager.fetchers = self.replica_manager.fetchers, None  # followers stay stopped
        if fetchers is not None:
            await fetchers.shutdown()
        bound_s = config.controlled_shutdown_max_retries * config.controlled_shutdown_retry_backoff_ms / 1000
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(bound_s, 1.0)):
                for attempt in range(1, config.controlled_shutdown_max_retries + 1):
                    try:
                        remaining = await self._request_controlled_shutdown()
                    except (KafkaError, StoreError, OSError, TimeoutError) as exc:
                        log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
                    else:
                        if not remaining:
                            log.info("Controlled shutdown of broker %d succeeded", self.broker_id)
                            return
                        log.warning(
                            "controlled shutdown attempt %d: %d partitions still led here", attempt, len(remaining)
                        )
                    if attempt < config.controlled_shutdown_max_retries:
                        await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
        log.warning("Controlled shutdown of broker %d did not move every partition; stopping anyway", self.broker_id)

    async def _hand_over_controller(self) -> None:
        """Before the listener closes: deliver the controller's last requests (those of this broker's controlled
        shutdown included), give up ``/controller`` so another broker takes over at once, then stop the channel (no
        request is sent, to this broker or any other, once it stops acting)."""
        if self.cluster_channel is None:
            return
        await self.cluster_channel.drain(CONTROLLER_HANDOVER_DRAIN_S)
        try:
            self.controller.retire()
        except StoreError as exc:
            log.warning("broker %d could not give up /controller: %s", self.broker_id, exc)
        await self.cluster_channel.close(CONTROLLER_HANDOVER_DRAIN_S)

    async def _request_controlled_shutdown(self) -> list[str]:
        """Send ControlledShutdown to the controller (or act directly when this broker is it); returns the partitions
        this broker still leads."""
        if self.controller.active:
            return [str(tp) for tp in self.controller.controlled_shutdown(self.broker_id)]
        endpoint = self.cache.brokers.get(self.cache.controller_id)
        if endpoint is None:
            raise KafkaError("no controller is known", ErrorCode.NOT_CONTROLLER)
        connection = BrokerConnection(
            endpoint.host, endpoint.port, node_id=endpoint.broker_id, client_id=f"broker-{self.broker_id}-shutdown"
        )
        try:
            body = {"broker_id": self.broker_id, "broker_epoch": -1}
            response = await asyncio.wait_for(connection.send(CONTROLLED_SHUTDOWN, body), CONTROL_REQUEST_TIMEOUT_S)
        finally:
            await connection.close()
        if response.error_code != ErrorCode.NONE:
            raise KafkaError("controlled shutdown refused", ErrorCode(response.error_code))
        return [f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions]

    async def shutdown(self) -> None:
        log.info("mq broker %d shutting down", self.broker_id)
        if isinstance(self.store, ZooKeeperStore):
            self.store.operation_timeout_s = STOPPING_ZOOKEEPER_TIMEOUT_S
        if self.registration_keeper is not None:
            self.registration_keeper.stop()
        if self.liveness is not None:
            await self.liveness.stop()
        if self.server is not None and self.zk is not None:
            await self._controlled_shutdown()
        await self._hand_over_controller()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()  # members waiting on a rebalance are answered before the drain
        if self.server is not None:
            await self.server.stop()
        if self.replica_manager is not None and self.replica_manager.fetchers is not None:
            await self.replica_manager.fetchers.shutdown()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)
        if self.log_cleaner is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.log_cleaner.shutdown)
        self.checkpoint_high_watermarks()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        if self.store is not None:
            self.store.close()
        with contextlib.suppress(FileNotFoundError):
            pid_file(self.config).unlink()
        log.info("mq broker %d stopped", self.broker_id)


async def run(config: BrokerConfig, ready: Callable[[Listener], None] | None = None) -> None:
    """Start a broker, serve until SIGTERM or SIGINT, shut down cleanly."""
    server = KafkaServer(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    try:
        bound = await server.startup()
        if ready is not None:
            ready(bound)
        await server.wait_for_stop()
    finally:
        await server.shutdown()
