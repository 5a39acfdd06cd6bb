"""The broker process: wires storage, the metadata tree, the controller, the replica manager and the network.

Start-up: lock every log dir first (a dir another process holds refuses the start before anything is opened or
written, and the shutdown then touches nothing), load every log under ``log.dirs`` (recovering after an unclean shutdown), open the metadata tree (the
local store in standalone mode), bind the listener, register ``/brokers/ids/<id>`` (kept while serving), start
pinging the other brokers (``broker_liveness``), start the controller. Shutdown (SIGTERM/SIGINT): controlled
shutdown, a controller hands its role over, stop accepting, answer the requests already received, checkpoint high
watermarks, flush and close every log, write the clean-shutdown marker, remove the pid file (only if it names this
process), release the locks.

Threads: the event loop owns sockets, request handling, the replica manager and the purgatories; the controller runs
on its own thread; the scheduler's worker threads do retention, flushes and checkpoints; one metadata thread does
the broker's own ZooKeeper reads and writes (ISR changes, config changes, topic configs), so a slow disk or a stalled
ZooKeeper never stalls the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mq.client.connection import BrokerConnection
from mq.client.security import PLAINTEXT, ClientSecurity
from mq.compiled import COMPILED_MODULES, native_modules
from mq.config import (
    BrokerConfig,
    DynamicBrokerConfig,
    Listener,
    TopicConfig,
    parse_ip_counts,
    parse_properties,
    sensitive_key,
)
from mq.errors import ConfigError, ErrorCode, KafkaError
from mq.protocol.inter_broker import CONTROLLED_SHUTDOWN
from mq.security.authorizer import AclAuthorizer, parse_super_users
from mq.security.jaas import LoginModule
from mq.security.password_encoder import PasswordEncoderError
from mq.security.password_encoder import decode as decode_password
from mq.security.plain import MECHANISM as PLAIN
from mq.security.plain import PlainServer
from mq.security.scram import ScramServer
from mq.server import long_lived
from mq.server.acl_cache import AclCache
from mq.server.api_dispatch import ApiDispatcher
from mq.server.broker_liveness import PeerLivenessMonitor, RegistrationKeeper
from mq.server.clock import Clock, SystemClock
from mq.server.controller import Controller
from mq.server.controller_base import ControllerChannel
from mq.server.event_thread import EventThread
from mq.server.group_coordinator import GroupCoordinator
from mq.server.group_metadata_manager import GROUP_METADATA_TOPIC_NAME, GroupMetadataManager
from mq.server.handlers.acls import acl_apis
from mq.server.handlers.admin_topics import admin_topic_apis
from mq.server.handlers.api_versions import api_versions_api
from mq.server.handlers.client_metrics import client_metrics_apis
from mq.server.handlers.client_quotas import client_quota_apis
from mq.server.handlers.cluster import cluster_apis
from mq.server.handlers.configs import configs_apis
from mq.server.handlers.consumer_group_protocol import consumer_group_protocol_apis
from mq.server.handlers.controller_requests import controller_apis
from mq.server.handlers.fetch import fetch_api
from mq.server.handlers.group_offsets import group_offset_apis
from mq.server.handlers.groups import group_apis, offsets_topic_creator, transaction_topic_creator
from mq.server.handlers.inter_broker import inter_broker_apis
from mq.server.handlers.leader_epoch import leader_epoch_apis
from mq.server.handlers.log_dirs import log_dirs_apis
from mq.server.handlers.metadata import metadata_api
from mq.server.handlers.offsets import offsets_apis
from mq.server.handlers.produce import produce_api
from mq.server.handlers.producers import producers_api
from mq.server.handlers.reassignments import reassignment_apis
from mq.server.handlers.sasl import sasl_apis
from mq.server.handlers.topic_partitions import describe_topic_partitions_api
from mq.server.handlers.transactions import transaction_apis
from mq.server.handlers.user_scram_credentials import user_scram_credential_apis
from mq.server.isr_updates import IsrChangeWriter
from mq.server.listener_security import inter_broker_security, jaas_key, listener_security, listener_tls_settings
from mq.server.local_channel import ClusterChannel, LocalChannel, endpoint_of
from mq.server.log_dir_mover import LogDirMover
from mq.server.metadata_cache import BrokerEndpoint, MetadataCache
from mq.server.metrics import BrokerCollector, RequestStats, Timer, registry_for
from mq.server.metrics_http import CONTROLLER_WAIT_S, MetricsServer
from mq.server.network import ConnectionLimits, Endpoint, SocketServer
from mq.server.partition import write_roll_snapshot
from mq.server.producer_id_manager import ProducerIdManager
from mq.server.quotas import (
    ClientQuotas,
    Entity,
    desanitize,
    parse_entity_path,
    read_all_quota_configs,
    read_quota_config,
)
from mq.server.replica_fetcher import ReplicaFetcherManager
from mq.server.replica_manager import ReplicaManager
from mq.server.sasl_authenticator import MechanismFactory
from mq.server.scheduler import Scheduler
from mq.server.scram_credentials import (
    ScramCredentialCache,
    UserCredentials,
    read_all_credentials,
    read_user_credentials,
)
from mq.server.transaction_coordinator import TransactionCoordinator
from mq.server.transaction_marker_channel import TransactionMarkerChannelManager
from mq.server.transaction_state_manager import TRANSACTION_STATE_TOPIC_NAME, TransactionStateManager
from mq.storage.checkpoints import OffsetCheckpointFile
from mq.storage.log_cleaner import LogCleaner
from mq.storage.log_dir_lock import LogDirLocks
from mq.storage.log_manager import LogManager
from mq.storage.partition_log import Log
from mq.topic_partition import TopicPartition, topic_name_error
from mq.zk import paths
from mq.zk.admin_zk_client import DEFAULT_BROKER_ENTITY, AdminZkClient
from mq.zk.codecs import BrokerRegistration, decode_config_change
from mq.zk.consumer_groups import ZkConsumerGroups
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.local_store import LocalStore
from mq.zk.store import MetadataStore, NodeExistsError, StoreError
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
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        """``clock`` (default: the real time, with the loop's timers) is what every timeout reads; the component
        tests drive one."""
        self.config = config
        self._given_clock = clock
        self.broker_id = config.broker_id
        self.inter_broker_security: ClientSecurity = PLAINTEXT
        """TLS and SASL of this broker's connections to other brokers (controller requests, replica fetches,
        liveness probes, controlled shutdown): the inter-broker listener's, from the start on."""
        self.bound: Listener | None = None
        """The first advertised listener, once listening."""
        self.advertised: list[Listener] = []
        """Every listener as registered (a port 0 replaced by the bound one), once listening."""
        self.inter_broker_listener = config.inter_broker_listener().name
        self._stopping = asyncio.Event()
        self._topic_configs: dict[str, TopicConfig] = {}
        self.dynamic_config = config
        """``config`` overlaid with this broker's dynamic config (``/config/brokers``); what topic defaults and
        connection limits come from. Replaced on the loop when a config change notification names this broker."""
        self._dynamic_config_read = config
        """The metadata thread's copy: the dynamic config last read, which the loop's may not have caught up with;
        topic configs read on that thread are laid over it."""
        self._last_change = -1
        self.store: MetadataStore | None = None
        self.zk: KafkaZkClient | None = None
        self.admin: AdminZkClient | None = None
        self.cluster_channel: ClusterChannel | None = None
        self.server: SocketServer | None = None
        self.log_manager: LogManager | None = None
        self.dir_locks: LogDirLocks | None = None
        """The log dirs' locks, taken first at start-up: without them the broker has touched nothing to undo."""
        self.replica_manager: ReplicaManager | None = None
        self.log_cleaner: LogCleaner | None = None
        self.log_dir_mover: LogDirMover | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        self.marker_channel: TransactionMarkerChannelManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.clock: Clock = SystemClock()
        self.scheduler: Scheduler | None = None
        self.zk_executor = ThreadPoolExecutor(1, thread_name_prefix="mq-metadata")
        """The broker's own ZooKeeper reads and writes (not the controller's): one thread, in submission order."""
        self.controller_thread = EventThread("mq-controller")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._auto_creating: set[str] = set()
        self._auto_create_failures: dict[str, ErrorCode] = {}
        self.liveness: PeerLivenessMonitor | None = None
        self.registration_keeper: RegistrationKeeper | None = None
        self.client_quotas: ClientQuotas | None = None
        self.scram_credentials = ScramCredentialCache()
        """Every user's SCRAM credentials, for the SASL exchanges (loop-owned)."""
        self.acl_cache: AclCache | None = None
        """The ACLs and the authorizer deciding on them while ``authorizer.class.name`` is set (None: no authorizer,
        every request is allowed)."""
        self.dispatcher: ApiDispatcher | None = None
        self.ready = False
        """Logs loaded, registered and serving; False again from the start of the shutdown (``/ready``)."""
        self.shutting_down = False
        self.request_stats: RequestStats | None = None
        """Request times, recorded while ``metrics.listener`` is set."""
        self.flush_timer = Timer()
        self.metrics_server: MetricsServer | None = None
        self.metrics_port = 0
        """The bound port of ``metrics.listener`` (0: off)."""
        self._metrics_collector: BrokerCollector | None = None

    # --- configuration of topics -------------------------------------------------------------------------------

    def topic_config(self, topic: str) -> TopicConfig:
        config = self._topic_configs.get(topic)
        if config is None:
            assert self.zk is not None
            overrides = self.zk.get_entity_config("topics", topic)
            config = self._topic_configs[topic] = self.dynamic_config.topic_defaults().with_overrides(overrides)
        return config

    def _read_dynamic_config(self) -> BrokerConfig:
        """The broker config in effect: the properties file overlaid with ``/config/brokers/<default>`` and
        ``/config/brokers/<id>`` (a stored value the broker cannot parse leaves the properties file's in force)."""
        assert self.zk is not None
        default = self._decoded(self.zk.get_entity_config("brokers", DEFAULT_BROKER_ENTITY))
        per_broker = self._decoded(self.zk.get_entity_config("brokers", str(self.broker_id)))
        try:
            return DynamicBrokerConfig.apply(self.config, default, per_broker)
        except ConfigError as exc:
            log.error("dynamic broker config of broker %d not applied: %s", self.broker_id, exc)
            return self.config

    def _decoded(self, stored: dict[str, str]) -> dict[str, str]:
        """``stored`` with its secrets decrypted (``password.encoder.secret``, else the old one); a secret that does
        not decrypt is left out, and logged without its value."""
        config = self.config
        decoded = dict(stored)
        for key, value in stored.items():
            if sensitive_key(key):
                try:
                    decoded[key] = decode_password(
                        value, config.password_encoder_secret or "", config.password_encoder_old_secret
                    )
                except PasswordEncoderError as exc:
                    log.error("dynamic config %s of broker %d not applied: %s", key, self.broker_id, exc)
                    del decoded[key]
        return decoded

    def _read_config_changes(self, children: list[str]) -> None:
        """On the metadata thread: read the new ``/config/changes`` entries and what they changed, then apply it on
        the loop. A change of this broker's dynamic config (its own entry or the cluster default) gives every topic
        new defaults, so every topic's config is read again."""
        assert self.zk is not None
        changed_topics: set[str] = set()
        quotas: dict[Entity, dict[str, str]] = {}
        credentials: dict[str, UserCredentials] = {}
        brokers_changed = False
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
                changed_topics.add(name)
            elif entity_type == "brokers" and name in (str(self.broker_id), DEFAULT_BROKER_ENTITY):
                brokers_changed = True
            elif entity_type in ("users", "clients"):
                entity = parse_entity_path(f"{entity_type}/{name}")
                if entity is not None:
                    quotas[entity] = read_quota_config(self.zk, entity)
                if entity_type == "users" and "/" not in name:
                    credentials[desanitize(name)] = read_user_credentials(self.zk, desanitize(name))
        dynamic = self._read_dynamic_config() if brokers_changed else None
        if dynamic is not None:
            self._dynamic_config_read = dynamic
        defaults = self._dynamic_config_read.topic_defaults()
        if brokers_changed:
            overrides = self.zk.get_all_entity_configs("topics")
        else:
            overrides = {name: self.zk.get_entity_config("topics", name) for name in changed_topics}
        topics = {name: defaults.with_overrides(topic_overrides) for name, topic_overrides in overrides.items()}
        rates = self._read_throttle_rates() if brokers_changed else None
        self._post(lambda: self._apply_config_changes(topics, rates, dynamic, quotas, credentials))

    def _apply_config_changes(
        self,
        topics: dict[str, TopicConfig],
        rates: tuple[dict[str, str], dict[str, str]] | None,
        dynamic: BrokerConfig | None,
        quotas: dict[Entity, dict[str, str]],
        credentials: dict[str, UserCredentials],
    ) -> None:
        """On the loop: the new topic configs go to their logs at once; a new broker config replaces the cached
        topic configs (those not read again are read on next use) and the connection limits; users' quotas and SCRAM
        credentials replace theirs."""
        assert self.replica_manager is not None
        if dynamic is not None:
            self._reload_tls(self.dynamic_config, dynamic)
            if dynamic.advertised() != self.dynamic_config.advertised() and self.server is not None:
                self._readvertise(dynamic)
            self.dynamic_config = dynamic
            self._topic_configs.clear()
            if self.server is not None:
                self.server.update_limits(
                    dataclasses.replace(
                        self.server.limits,
                        max_connections=dynamic.max_connections,
                        max_connections_per_ip=dynamic.max_connections_per_ip,
                    )
                )
        for name, topic_config in topics.items():
            self._topic_configs[name] = topic_config
            self.replica_manager.update_topic_config(name)
        if rates is not None:
            self.replica_manager.quotas.update_rates(*rates)
            self._update_log_dir_move_rate(*rates)
        if quotas:
            self._update_client_quotas(quotas)
        for user, user_credentials in credentials.items():
            self.scram_credentials.update(user, user_credentials)

    def _update_log_dir_move_rate(self, broker_overrides: dict[str, str], default_overrides: dict[str, str]) -> None:
        """``replica.alter.log.dirs.io.max.bytes.per.second`` of ``/config/brokers/<id>`` over ``<default>``."""
        key = "replica.alter.log.dirs.io.max.bytes.per.second"
        value = broker_overrides.get(key, default_overrides.get(key))
        try:
            dynamic = DynamicBrokerConfig().with_overrides({} if value is None else {key: value}, "/config/brokers")
        except ConfigError as exc:
            log.warning("ignoring dynamic broker config: %s", exc)
            return
        if self.log_dir_mover is not None:
            self.log_dir_mover.update_rate(dynamic.replica_alter_log_dirs_io_max_bytes_per_second)

    def _update_client_quotas(self, quotas: dict[Entity, dict[str, str]]) -> None:
        """Apply changed client quota configs; requests are recorded against quotas only while any is set."""
        client_quotas, dispatcher = self.client_quotas, self.dispatcher
        assert client_quotas is not None and dispatcher is not None
        for entity, config in quotas.items():
            client_quotas.update(entity, config)
        dispatcher.quotas = client_quotas if client_quotas.enabled else None

    def _read_throttle_rates(self) -> tuple[dict[str, str], dict[str, str]]:
        """The replication throttle rates of ``/config/brokers/<id>`` and ``/config/brokers/<default>``."""
        assert self.zk is not None
        return (
            self.zk.get_entity_config("brokers", str(self.broker_id)),
            self.zk.get_entity_config("brokers", DEFAULT_BROKER_ENTITY),
        )

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def _log_dir_failed(self, directory: Path) -> None:
        """A log dir went offline (any thread): the replica manager answers parked requests on its partitions, and
        ``/log_dir_event_notification`` tells the controller (in both modes, as a Kafka broker tells its controller),
        which moves their leadership away and no longer elects those replicas until the broker restarts."""
        replica_manager, zk = self.replica_manager, self.zk
        assert replica_manager is not None and zk is not None
        self._post(lambda: replica_manager.log_dir_failed(directory))
        self._submit_metadata_work(lambda: zk.propagate_log_dir_event(self.broker_id))

    def _submit_metadata_work(self, fn: Callable[[], None]) -> None:
        self.zk_executor.submit(fn)

    def _post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event loop (from any thread)."""
        assert self._loop is not None
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    async def startup(self) -> Listener:
        loop = self._loop = asyncio.get_running_loop()
        self.clock = self._given_clock or SystemClock(loop)
        config = self.config
        listeners = config.bound_listeners()
        endpoints = [Endpoint(b.host, b.port, listener_security(config, b, self._sasl_mechanism)) for b in listeners]
        self.inter_broker_security = inter_broker_security(config)
        log_dirs = [d.resolve() for d in config.log_dir_paths]
        for directory in log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self.dir_locks = LogDirLocks.acquire(log_dirs)
        if config.metrics_listener:
            await self._start_metrics(config.metrics_listener)
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
        self.dynamic_config = self._dynamic_config_read = self._read_dynamic_config()
        log_manager = self.log_manager = LogManager(
            log_dirs,
            self.dynamic_config.topic_defaults(),
            self.topic_config,
            broker_id=self.broker_id,
            recovery_threads=config.num_recovery_threads_per_data_dir,
            time_ms=self.clock.time_ms,
            dir_locks=self.dir_locks,
        )
        await loop.run_in_executor(None, self.log_manager.startup)
        high_watermarks: dict[TopicPartition, int] = {}
        for directory in log_dirs:
            high_watermarks.update(OffsetCheckpointFile(directory / HIGH_WATERMARK_FILE).read())
        self.cache = MetadataCache(self.broker_id, cluster_id)
        self.replica_manager = ReplicaManager(
            config, self.broker_id, self.log_manager, self.topic_config, high_watermarks, clock=self.clock
        )
        self.replica_manager.known_partition = lambda tp: self.cache.partition(tp) is not None
        self.log_dir_mover = LogDirMover(log_manager, self.replica_manager.partitions.get)
        scheduler = self.scheduler = Scheduler(self.clock, config.background_threads, loop)
        self.replica_manager.snapshot_requested = lambda directory, offset, entries: scheduler.submit(
            "producer-snapshot", functools.partial(write_roll_snapshot, directory, offset, entries)
        )
        self.replica_manager.flush_requested = lambda partition: scheduler.submit(
            "flush", functools.partial(log_manager.flush, partition.log), key=partition.log
        )
        self.log_manager.dir_failure_listener = self._log_dir_failed
        self.cache.local_replica_offline = self.replica_manager.is_offline

        def flush_rolled(rolled: Log) -> None:
            """A log rolled (on the loop, or on a retention thread): fsync its old segments on a worker thread."""
            if not loop.is_closed():
                loop.call_soon_threadsafe(
                    lambda: scheduler.submit(
                        "flush-log", functools.partial(log_manager.flush_rolled, rolled), key=(rolled, "roll")
                    )
                )

        self.log_manager.roll_listener = flush_rolled
        self.log_manager.flush_listener = self.flush_timer.record

        coordinator = self.group_coordinator = GroupCoordinator(
            config,
            GroupMetadataManager(config, self.replica_manager, self._offsets_topic_partitions, self.clock.time_ms),
            self.clock,
        )
        self.cache.topic_removed_listener = coordinator.schedule_topic_removal
        producer_ids = self.producer_ids = ProducerIdManager(self.store, self.broker_id)
        replica_manager = self.replica_manager
        transactions = self.transaction_coordinator = TransactionCoordinator(
            config,
            TransactionStateManager(config, replica_manager, self._transaction_topic_partitions, self.clock.time_ms),
            self._next_producer_id,
            self._write_txn_marker,
            replica_manager.leads,
            self.clock,
        )

        def leadership_changed(tp: TopicPartition, is_leader: bool) -> None:
            coordinator.on_leadership_change(tp, is_leader)
            partition = replica_manager.partitions.get(tp)
            transactions.on_leadership_change(tp, is_leader, -1 if partition is None else partition.leader_epoch)

        self.replica_manager.leadership_listener = leadership_changed

        channel: ControllerChannel
        if config.standalone:
            channel = LocalChannel(self.broker_id, self.replica_manager, self.cache, loop, self.inter_broker_listener)
        else:
            self.cluster_channel = ClusterChannel(
                self.broker_id,
                lambda: self.controller.context.epoch,
                self._endpoint,
                loop,
                security=self.inter_broker_security,
            )
            channel = self.cluster_channel
            self.replica_manager.fetchers = ReplicaFetcherManager(
                self.broker_id,
                self._cached_endpoint,
                max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                max_bytes=config.replica_fetch_max_bytes,
                quota=self.replica_manager.quotas.follower,
                security=self.inter_broker_security,
            )
            markers = self.marker_channel = TransactionMarkerChannelManager(
                self.broker_id, self.cache, self._cached_endpoint, self.inter_broker_security
            )
            transactions.send_markers = markers.send
            isr_writer = IsrChangeWriter(
                self.zk, self.broker_id, self.zk_executor, self._post, self.replica_manager.isr_change_done
            )
            self.replica_manager.isr_submitter = isr_writer.submit
            log_manager = self.log_manager
            self.replica_manager.fetchers.storage_failed = lambda partition, error: log_manager.mark_offline(
                partition.log.dir.parent, error
            )
        self.controller = Controller(
            self.zk,
            self.broker_id,
            channel,
            self.controller_thread.post,
            lambda topic: self.topic_config(topic).unclean_leader_election_enable,
        )
        admin = self.admin = AdminZkClient(self.zk)
        if config.authorizer_class_name:
            authorizer = AclAuthorizer(parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found)
            self.acl_cache = AclCache(self.store, authorizer, self.zk_executor, self._post)
            await loop.run_in_executor(self.zk_executor, self.acl_cache.start)
        acl = self.acl_cache
        dispatcher = self.dispatcher = ApiDispatcher(acl=acl)
        self.client_quotas = ClientQuotas(config.quota_window_num, config.quota_window_size_seconds, self.clock.time_ms)
        for api in [
            produce_api(self.replica_manager, acl, self.cache),
            fetch_api(self.replica_manager, acl, self.cache),
            *offsets_apis(self.replica_manager, acl),
            producers_api(self.replica_manager, self.cache, acl),
            *log_dirs_apis(self.replica_manager, self.log_dir_mover),
            *leader_epoch_apis(self.replica_manager, acl),
            metadata_api(self.cache, self._auto_create if config.auto_create_topics_enable else None, acl),
            describe_topic_partitions_api(self.cache, acl),
            *admin_topic_apis(admin, self.cache, config, self.broker_id, acl),
            *configs_apis(admin, config, self.broker_id, acl),
            *client_quota_apis(self.zk),
            *client_metrics_apis(self.cache, acl),
            *user_scram_credential_apis(self.zk),
            *acl_apis(acl),
            *cluster_apis(self.cache, producer_ids, acl, transactions),
            *controller_apis(self.controller),
            *sasl_apis(),
            *reassignment_apis(self.zk),
            *group_apis(
                coordinator,
                self.cache,
                offsets_topic_creator(admin, self.cache, config),
                acl,
                transaction_topic_creator(admin, self.cache, config),
                transactions.manager.partition_for,
            ),
            *transaction_apis(transactions, coordinator, self.cache, config, acl),
            *group_offset_apis(coordinator, self.cache, config, ZkConsumerGroups(self.store), acl=acl),
            *consumer_group_protocol_apis(coordinator, self.cache, acl),
            *(
                []
                if config.standalone
                else inter_broker_apis(self.replica_manager, self.cache, self.zk, self.inter_broker_listener)
            ),
        ]:
            dispatcher.add(api)
        dispatcher.add(api_versions_api(dispatcher))
        # SCRAM credentials before the listeners accept: the other brokers authenticate as soon as this one registers
        for user, user_credentials in (
            await loop.run_in_executor(self.zk_executor, read_all_credentials, self.zk)
        ).items():
            self.scram_credentials.update(user, user_credentials)
        self.server = SocketServer(
            listeners[0].host,
            listeners[0].port,
            dispatcher,
            endpoints=endpoints,
            now_handler=dispatcher.now,
            max_request_bytes=config.socket_request_max_bytes,
            limits=ConnectionLimits(
                queued_max_request_bytes=config.request_memory_bytes,
                queued_max_requests=config.queued_max_requests,
                max_connections=self.dynamic_config.max_connections,
                max_connections_per_ip=self.dynamic_config.max_connections_per_ip,
                max_connections_per_ip_overrides=parse_ip_counts(config.max_connections_per_ip_overrides),
                connections_max_idle_ms=config.connections_max_idle_ms,
                request_receive_timeout_ms=config.socket_request_receive_timeout_ms,
            ),
            send_buffer_bytes=config.socket_send_buffer_bytes,
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
        )
        self.server.request_stats = self.request_stats
        await self.server.start(serve=not config.standalone)  # standalone: once it leads its partitions
        self._registration = self._advertise(self.dynamic_config)
        bound, port = self.advertised[0], self.server.bound_ports[0]
        self.zk.register_broker(self._registration)
        if isinstance(self.store, ZooKeeperStore):
            self.store.on_new_session(lambda: self._submit_metadata_work(self._on_new_session))
            self.registration_keeper = RegistrationKeeper(self.zk, self._registration, self._post)
            self.registration_keeper.start()
            interval = config.broker_liveness_interval_ms
            self.liveness = PeerLivenessMonitor(
                self.broker_id, self.store, lambda: self.cache.brokers, interval, security=self.inter_broker_security
            )
            self.liveness.start()

        self.controller_thread.start()
        self.controller.startup()

        def on_config_changes(children: list[str]) -> bool:
            self._submit_metadata_work(lambda: self._read_config_changes(children))
            return True

        rates = self._read_throttle_rates()
        self.replica_manager.quotas.update_rates(*rates)
        self._update_log_dir_move_rate(*rates)
        self.log_dir_mover.start()
        self._update_client_quotas(await loop.run_in_executor(self.zk_executor, read_all_quota_configs, self.zk))
        self.store.watch_children(paths.CONFIG_CHANGES, on_config_changes)
        self._start_background_tasks()
        if config.standalone:
            # the controller's first election (an event on its thread) has handed its LeaderAndIsr to the loop
            await asyncio.wrap_future(self.controller.call(lambda: None))
            self.server.serve()
        gc.collect()
        long_lived.freeze()  # the logs, groups and metadata loaded at startup
        pid_file(config).write_text(f"{os.getpid()}\n", encoding="utf-8")
        self.ready = True
        log.info("mq broker %d started on %s:%d (cluster id %s)", self.broker_id, bound.host, port, cluster_id)
        native = len(native_modules())
        log.info("request path: %d of %d modules compiled (mq.compiled)", native, len(COMPILED_MODULES))
        return bound

    def _advertise(self, config: BrokerConfig) -> BrokerRegistration:
        """Set ``advertised`` and ``bound`` from ``config``'s advertised listeners (an empty host: this host's name;
        port 0 or the configured port of a bound listener: its bound port) and return the registration they make."""
        assert self.server is not None
        listeners = config.bound_listeners()
        bound = {b.name: (b.port, port) for b, port in zip(listeners, self.server.bound_ports, strict=True)}
        self.advertised = [
            dataclasses.replace(
                a,
                host=a.host or socket.gethostname(),
                port=bound[a.name][1] if a.name in bound and a.port in (0, bound[a.name][0]) else a.port,
            )
            for a in config.advertised()
        ]
        self.bound = self.advertised[0]
        return BrokerRegistration(
            self.broker_id,
            [str(a) for a in self.advertised],
            config.broker_rack,
            int(time.time() * 1000),
            {a.name: a.protocol for a in self.advertised},
        )

    def _readvertise(self, config: BrokerConfig) -> None:
        """On the loop: new advertised listeners (a dynamic ``advertised.listeners``) rewrite this broker's
        registration, whose change the controller sends to every broker's metadata."""
        zk = self.zk
        assert zk is not None
        registration = self._registration = self._advertise(config)
        if self.registration_keeper is not None:
            self.registration_keeper.registration = registration
        log.info("broker %d now advertises %s", self.broker_id, ",".join(registration.endpoints))
        self._submit_metadata_work(lambda: zk.update_broker_info(registration))

    async def _start_metrics(self, listener: str) -> None:
        """Serve /metrics, /health and /ready on ``metrics.listener`` (ConfigError when it cannot be bound)."""
        registry, self._metrics_collector = registry_for(self)
        self.request_stats = RequestStats()
        self.metrics_server = MetricsServer(registry, lambda: self.ready, self._refresh_controller_metrics)
        self.metrics_port = await self.metrics_server.start(listener)

    async def _refresh_controller_metrics(self) -> None:
        """Before a scrape: the controller's counts, taken on its thread (the last ones stay if it is busy)."""
        controller = getattr(self, "controller", None)
        collector = self._metrics_collector
        if controller is None or collector is None or not controller.active:
            return

        def counts() -> tuple[int, int, int, int]:
            context = controller.context
            live = context.live_brokers
            offline = sum(1 for state, _ in context.states.values() if state.leader not in live)
            partitions = sum(len(a.partitions) for a in context.assignments.values())
            return int(controller.active), offline, len(context.assignments), partitions

        with contextlib.suppress(Exception):
            found = asyncio.wrap_future(controller.call(counts))
            collector.controller_snapshot = await asyncio.wait_for(found, CONTROLLER_WAIT_S)

    def _on_new_session(self) -> None:
        """On the metadata thread: the ZooKeeper session expired and a new one began: register again and stop acting
        as controller (the controller role is contested anew through the ``/controller`` watch)."""
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
        return None if registration is None else endpoint_of(registration, self.inter_broker_listener)

    def _offsets_topic_partitions(self) -> int:
        """Partitions of ``__consumer_offsets``: the topic's own count once it exists, else the configured one."""
        topic = self.cache.topics.get(GROUP_METADATA_TOPIC_NAME)
        return (
            len(topic.partitions)
            if topic is not None and topic.partitions
            else self.config.offsets_topic_num_partitions
        )

    def _transaction_topic_partitions(self) -> int:
        """Partitions of ``__transaction_state``: the topic's own count once it exists, else the configured one."""
        topic = self.cache.topics.get(TRANSACTION_STATE_TOPIC_NAME)
        return (
            len(topic.partitions)
            if topic is not None and topic.partitions
            else self.config.transaction_state_log_num_partitions
        )

    async def _next_producer_id(self) -> int:
        """A new producer id (a block may be claimed in the metadata tree: off the loop)."""
        assert self.producer_ids is not None
        return await asyncio.to_thread(self.producer_ids.next_id)

    async def _write_txn_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> ErrorCode:
        """Append a transaction marker to a partition this broker leads; one on ``__consumer_offsets`` also settles
        the transaction's offset commits in the group coordinator."""
        assert self.replica_manager is not None
        code = await self.replica_manager.write_txn_marker(tp, producer_id, producer_epoch, coordinator_epoch, commit)
        if code == ErrorCode.NONE and tp.topic == GROUP_METADATA_TOPIC_NAME and self.group_coordinator is not None:
            self.group_coordinator.complete_txn(tp.partition, producer_id, commit)
        return code

    def _reload_tls(self, before: BrokerConfig, after: BrokerConfig) -> None:
        """Give the TLS listeners whose key or trust stores changed (settings, or a store file rewritten) a new
        context for their next connections, as Kafka reloads them on a dynamic update; a store that cannot be loaded
        is logged and the listener keeps its context."""
        if self.server is None:
            return
        for listener in after.bound_listeners():
            if listener.protocol not in ("SSL", "SASL_SSL"):
                continue
            settings = listener_tls_settings(after, listener.name)
            if settings == listener_tls_settings(before, listener.name) and not self.server.tls_files_changed(
                listener.name
            ):
                continue
            try:
                security = listener_security(after, listener, self._sasl_mechanism)
            except ConfigError as exc:
                log.error("listener %s keeps its TLS stores: %s", listener.name, exc)
                continue
            self.server.update_security(security)
            log.info("listener %s: TLS key and trust stores reloaded", listener.name)

    def _sasl_mechanism(self, listener: str, mechanism: str, login: LoginModule | None) -> MechanismFactory:
        """The server of one SASL mechanism on ``listener``: PLAIN over the users of its JAAS login module, SCRAM
        over the credentials in the metadata store."""
        if mechanism == PLAIN:
            users = login.users() if login is not None else {}
            if not users:
                raise ConfigError(
                    f"listener {listener} serves PLAIN: set {jaas_key(listener, mechanism)} with its users "
                    '(user_<name>="<password>")'
                )
            return lambda: PlainServer(users)
        lookup = self.scram_credentials.for_mechanism(mechanism)
        return lambda: ScramServer(mechanism, lookup)

    def _cached_endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        return self.cache.brokers.get(broker_id)

    def _auto_create(self, topic: str) -> ErrorCode:
        """auto.create.topics.enable: a Metadata request for an unknown topic starts its creation on the metadata
        thread and answers LEADER_NOT_AVAILABLE; an invalid name is refused at once, and a creation that failed
        answers its error to the next request for the topic."""
        error = topic_name_error(topic)
        if error is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        failed = self._auto_create_failures.pop(topic, None)
        if failed is not None:
            return failed
        if topic not in self._auto_creating:
            self._auto_creating.add(topic)
            self._submit_metadata_work(lambda: self._create_topic(topic))
        return ErrorCode.LEADER_NOT_AVAILABLE

    def _create_topic(self, topic: str) -> None:
        """On the metadata thread: create an auto-created topic; tell the loop how it went."""
        assert self.admin is not None
        code = ErrorCode.NONE
        try:
            self.admin.create_topic(topic, self.config.num_partitions, self.config.default_replication_factor)
        except KafkaError as exc:
            code = exc.code
        except Exception as exc:
            log.warning("auto-creation of topic %s failed: %s", topic, exc)
            code = ErrorCode.LEADER_NOT_AVAILABLE

        def done() -> None:
            self._auto_creating.discard(topic)
            if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.LEADER_NOT_AVAILABLE):
                self._auto_create_failures[topic] = code

        self._post(done)

    def _start_background_tasks(self) -> None:
        """The scheduler's periodic tasks: disk work on its threads with snapshots of loop state taken on the loop;
        ISR expiry and offset expiry are loop work; the leader rebalance check is a controller event."""
        config = self.config
        replica_manager, scheduler, log_manager = self.replica_manager, self.scheduler, self.log_manager
        assert replica_manager is not None and scheduler is not None and log_manager is not None
        scheduler.schedule(
            "retention",
            config.log_retention_check_interval_ms,
            log_manager.cleanup_logs,
            snapshot=replica_manager.high_watermarks,
        )
        if not config.standalone:
            scheduler.schedule_on_loop(
                "isr-expiration", config.replica_lag_time_max_ms // 2, replica_manager.shrink_isrs
            )
        if config.auto_leader_rebalance_enable:
            threshold = config.leader_imbalance_per_broker_percentage
            scheduler.schedule_on_loop(
                "auto-leader-rebalance",
                config.leader_imbalance_check_interval_seconds * 1000,
                lambda: self.controller_thread.post(lambda: self.controller.check_leader_imbalance(threshold)),
            )
        scheduler.schedule("flush", config.log_flush_scheduler_interval_ms, log_manager.flush_dirty_logs)
        if config.log_cleaner_enable:
            cleaner = self.log_cleaner = LogCleaner(
                log_manager,
                threads=config.log_cleaner_threads,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                io_buffer_size=config.log_cleaner_io_buffer_size,
                io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                backoff_ms=config.log_cleaner_backoff_ms,
                bounded_by_last_stable_offsets=True,
            )
            cleaner.update_last_stable_offsets(replica_manager.last_stable_offsets())
            cleaner.start()
            scheduler.schedule(
                "cleaner-last-stable-offsets",
                max(min(config.log_cleaner_backoff_ms, 1000), 100),
                cleaner.update_last_stable_offsets,
                snapshot=replica_manager.last_stable_offsets,
            )
        coordinator = self.group_coordinator
        if coordinator is not None:
            scheduler.schedule_on_loop(
                "offset-expiration", config.offsets_retention_check_interval_ms, coordinator.schedule_offset_expiration
            )
        transactions = self.transaction_coordinator
        if transactions is not None:
            scheduler.schedule_on_loop(
                "transaction-abort",
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                transactions.abort_timed_out,
            )
            scheduler.schedule_on_loop(
                "transactionalId-expiration",
                config.transaction_remove_expired_transaction_cleanup_interval_ms,
                transactions.remove_expired,
            )
        scheduler.schedule_on_loop(
            "producer-id-expiration",
            config.producer_id_expiration_check_interval_ms,
            replica_manager.remove_expired_producers,
        )
        scheduler.schedule(
            "recovery-point-checkpoint",
            config.log_flush_offset_checkpoint_interval_ms,
            log_manager.checkpoint_recovery_points,
        )
        scheduler.schedule(
            "log-start-offset-checkpoint",
            config.log_flush_start_offset_checkpoint_interval_ms,
            log_manager.checkpoint_log_start_offsets,
        )
        scheduler.schedule(
            "high-watermark-checkpoint",
            config.replica_high_watermark_checkpoint_interval_ms,
            self.write_high_watermarks,
            snapshot=self.high_watermarks_by_dir,
        )

    def high_watermarks_by_dir(self) -> dict[Path, dict[TopicPartition, int]]:
        """On the loop, so no system call: each log dir's partitions and their high watermarks (logs live in the
        resolved log dirs the log manager was given)."""
        if self.log_manager is None:
            return {}
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_manager.log_dirs}
        if self.replica_manager is not None:
            for tp, partition in self.replica_manager.partitions.items():
                by_dir.setdefault(partition.log.dir.parent, {})[tp] = partition.high_watermark
        return by_dir

    def write_high_watermarks(self, by_dir: dict[Path, dict[TopicPartition, int]]) -> None:
        """Write ``replication-offset-checkpoint`` in every online log dir (any thread)."""
        if self.log_manager is None:
            return
        for directory, offsets in by_dir.items():
            self.log_manager.write_checkpoint(directory, HIGH_WATERMARK_FILE, offsets)

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
            retired = asyncio.wrap_future(self.controller.call(self.controller.retire))
            await asyncio.wait_for(retired, CONTROLLER_HANDOVER_DRAIN_S + STOPPING_ZOOKEEPER_TIMEOUT_S)
        except (StoreError, TimeoutError) as exc:
            log.warning("broker %d could not give up /controller: %s", self.broker_id, exc)
        await self.cluster_channel.close(CONTROLLER_HANDOVER_DRAIN_S)

    async def _request_controlled_shutdown(self) -> list[str]:
        """Send ControlledShutdown to the controller (or act directly when this broker is it); returns the partitions
        this broker still leads."""
        if self.controller.active:
            local = self.controller.call(lambda: self.controller.controlled_shutdown(self.broker_id))
            return [str(tp) for tp in await asyncio.wrap_future(local)]
        endpoint = self.cache.brokers.get(self.cache.controller_id)
        if endpoint is None:
            raise KafkaError("no controller is known", ErrorCode.NOT_CONTROLLER)
        connection = BrokerConnection(
            endpoint.host,
            endpoint.port,
            node_id=endpoint.broker_id,
            client_id=f"broker-{self.broker_id}-shutdown",
            security=self.inter_broker_security,
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
        if self.dir_locks is None:  # the start-up stopped before the log dirs were ours: leave them as they are
            self.zk_executor.shutdown(wait=False)
            return
        self.ready, self.shutting_down = False, True
        log.info("mq broker %d shutting down", self.broker_id)
        if isinstance(self.store, ZooKeeperStore):
            self.store.operation_timeout_s = STOPPING_ZOOKEEPER_TIMEOUT_S
        if self.registration_keeper is not None:
            self.registration_keeper.stop()
        if self.acl_cache is not None:
            self.acl_cache.stop()
        if self.liveness is not None:
            await self.liveness.stop()
        if self.server is not None and self.zk is not None:
            await self._controlled_shutdown()
        await self._hand_over_controller()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()  # members waiting on a rebalance are answered before the drain
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self.marker_channel is not None:
            await self.marker_channel.close()
        if self.server is not None:
            await self.server.stop()
        if self.replica_manager is not None and self.replica_manager.fetchers is not None:
            await self.replica_manager.fetchers.shutdown()
        if self.log_dir_mover is not None:
            await self.log_dir_mover.stop()
        if self.scheduler is not None:
            await self.scheduler.shutdown()
        loop = asyncio.get_running_loop()
        if self.log_cleaner is not None:
            await loop.run_in_executor(None, self.log_cleaner.shutdown)
        self.controller_thread.stop()
        if self.replica_manager is not None:
            self.replica_manager.fetch_purgatory.complete_all()
            self.replica_manager.produce_purgatory.complete_all()
        self.write_high_watermarks(self.high_watermarks_by_dir())
        if self.replica_manager is not None:
            await loop.run_in_executor(None, self.replica_manager.write_producer_snapshots)
        if self.log_manager is not None:
            self.log_manager.shutdown()
        if self.store is not None:
            self.store.close()
        self.zk_executor.shutdown(wait=False, cancel_futures=True)
        marker = pid_file(self.config)
        with contextlib.suppress(FileNotFoundError):
            if marker.read_text(encoding="utf-8").strip() == str(os.getpid()):
                marker.unlink()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        self.dir_locks.release()
        log.info("mq broker %d stopped", self.broker_id)


def new_event_loop(name: str) -> asyncio.AbstractEventLoop:
    """The broker's event loop (``event.loop``): uvloop's where chosen and installed, else asyncio's."""
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            log.warning("event.loop=uvloop, but uvloop is not installed: running on asyncio's loop")
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


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
