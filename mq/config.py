"""Broker and topic configuration: Kafka's key names and defaults, typed and validated once.

``BrokerConfig`` holds every broker key mq understands; its fields are the keys with ``.`` turned into ``_``
(``log.segment.bytes`` -> ``log_segment_bytes``). ``TopicConfig`` holds the per-topic settings (``segment.bytes`` ->
``segment_bytes``); ``BrokerConfig.topic_defaults()`` derives the broker-wide defaults a topic override map is laid
over. The other keys of every Kafka release are listed in ``mq.config_catalog``: a properties file may carry them
(renamed ones are read as their successor), and only a key no Kafka release reads is refused.
``config/server.properties`` is ``render_properties()``: ``python -m mq.config`` prints it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mq.config_catalog import KAFKA_BROKER_KEY_PREFIXES, KAFKA_BROKER_KEYS, KAFKA_TOPIC_KEYS
from mq.errors import ConfigError, ErrorCode, KafkaError
from mq.security.acl import PrincipalError
from mq.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LISTENER_PREFIX = "listener.name."
_DYNAMIC_LISTENER_KEY = re.compile(
    r"listener\.name\.[^.]+\.ssl\.(?:keystore\.[a-z.]+|key\.password|truststore\.[a-z.]+)"
)
"""The ``listener.name.<listener>.<key>`` keys a broker changes while running: its TLS stores (per broker)."""
_LISTENER_KEY = re.compile(
    r"listener\.name\.[^.]+\.(?:ssl\.[a-z.]+|sasl\.enabled\.mechanisms|connections\.max\.reauth\.ms|"
    r"(?:plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config)"
)
"""The ``listener.name.<listener>.<key>`` keys mq reads: a listener's own security settings."""

READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"
UPDATE_MODES = (READ_ONLY, PER_BROKER, CLUSTER_WIDE)
"""Kafka's Dynamic Update Modes of a broker key: set only in the properties file; also in ``/config/brokers/<id>``;
also in ``/config/brokers/<id>`` or ``/config/brokers/<default>`` (a per-broker value wins over the default)."""


def _key(
    name: str,
    default: Any,
    doc: str,
    *,
    kind: str | None = None,
    choices: tuple[str, ...] | None = None,
    minimum: float | None = None,
    shipped: str | None = None,
    update: str = READ_ONLY,
) -> Any:
    """A config field: its Kafka key, a one-line description, how to parse it, what the shipped file sets and, for a
    broker key, Kafka's Dynamic Update Mode (``update``: read-only, per-broker or cluster-wide)."""
    assert update in UPDATE_MODES
    meta = {
        "key": name,
        "doc": doc,
        "kind": kind,
        "choices": choices,
        "minimum": minimum,
        "shipped": shipped,
        "update": update,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TopicConfig:
    """Effective configuration of one topic: broker defaults overlaid with the topic's overrides."""

    cleanup_policy: str = _key("cleanup.policy", "delete", "delete, compact, or compact,delete", kind="policy")
    compression_type: str = _key(
        "compression.type", "producer", "codec the broker stores batches in", choices=COMPRESSION_TYPES
    )
    delete_retention_ms: int = _key(
        "delete.retention.ms", 86400000, "how long tombstones survive compaction", minimum=0
    )
    file_delete_delay_ms: int = _key(
        "file.delete.delay.ms", 60000, "delay before a deleted segment is removed", minimum=0
    )
    flush_messages: int = _key("flush.messages", LONG_MAX, "fsync after this many appended messages", minimum=1)
    flush_ms: int = _key("flush.ms", LONG_MAX, "fsync when the oldest unflushed append is this old", minimum=0)
    follower_replication_throttled_replicas: str = _key(
        "follower.replication.throttled.replicas",
        "",
        "partition:broker pairs throttled as followers, or *",
        kind="replicas",
    )
    index_interval_bytes: int = _key("index.interval.bytes", 4096, "bytes between offset index entries", minimum=0)
    leader_replication_throttled_replicas: str = _key(
        "leader.replication.throttled.replicas",
        "",
        "partition:broker pairs throttled as leaders, or *",
        kind="replicas",
    )
    max_compaction_lag_ms: int = _key(
        "max.compaction.lag.ms", LONG_MAX, "longest a record stays uncompacted", minimum=1
    )
    max_message_bytes: int = _key("max.message.bytes", 1048588, "largest record batch accepted", minimum=0)
    message_downconversion_enable: bool = _key(
        "message.downconversion.enable", True, "whether Fetch v0-v3 may read batches down-converted to magic 0 or 1"
    )
    message_timestamp_difference_max_ms: int = _key(
        "message.timestamp.difference.max.ms", LONG_MAX, "largest allowed |create time - broker time|", minimum=0
    )
    message_timestamp_type: str = _key(
        "message.timestamp.type", "CreateTime", "CreateTime or LogAppendTime", choices=TIMESTAMP_TYPES
    )
    min_cleanable_dirty_ratio: float = _key(
        "min.cleanable.dirty.ratio", 0.5, "dirty share of a log before it is compacted", minimum=0
    )
    min_compaction_lag_ms: int = _key("min.compaction.lag.ms", 0, "shortest a record stays uncompacted", minimum=0)
    min_insync_replicas: int = _key("min.insync.replicas", 1, "in-sync replicas an acks=all produce needs", minimum=1)
    preallocate: bool = _key("preallocate", False, "preallocate segment files to segment.bytes")
    retention_bytes: int = _key(
        "retention.bytes", -1, "partition size kept before deleting old segments; -1 = no limit"
    )
    retention_ms: int = _key("retention.ms", 604800000, "age of a segment before deletion; -1 = no limit", minimum=-1)
    segment_bytes: int = _key("segment.bytes", 1073741824, "size at which a segment is rolled", minimum=14)
    segment_index_bytes: int = _key("segment.index.bytes", 10485760, "size of a segment's offset index", minimum=8)
    segment_jitter_ms: int = _key("segment.jitter.ms", 0, "random jitter subtracted from segment.ms", minimum=0)
    segment_ms: int = _key("segment.ms", 604800000, "age at which a segment is rolled", minimum=1)
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable", False, "allow an out-of-sync replica to become leader"
    )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    def with_overrides(self, overrides: Mapping[str, str], source: str = "topic config") -> TopicConfig:
        """A copy with ``overrides`` (Kafka topic key -> string value) applied. A topic key of some Kafka release
        that mq does not model (``KAFKA_TOPIC_KEYS``) is only type-checked; a key no release knows raises
        ConfigError naming the closest known key."""
        modelled = {}
        for key, text in overrides.items():
            if key in TOPIC_CONFIG_KEYS:
                modelled[key] = text
            elif key in KAFKA_TOPIC_KEYS:
                _check_kafka_value(key, text, source, KAFKA_TOPIC_KEYS)
            else:
                message = f"unknown topic config key '{key}' in {source}"
                close = difflib.get_close_matches(key, sorted(TOPIC_CONFIG_KEYS | KAFKA_TOPIC_KEYS.keys()), n=1)
                raise ConfigError(f"{message}; did you mean {close[0]}?" if close else message)
        return dataclasses.replace(self, **_parse_values(TopicConfig, modelled, source, "topic config"))

    def to_properties(self) -> dict[str, str]:
        """Every topic key with its value rendered as Kafka prints it."""
        return {f.metadata["key"]: _render(getattr(self, f.name)) for f in dataclasses.fields(self)}


TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(f.metadata["key"] for f in dataclasses.fields(TopicConfig))

TOPIC_TO_BROKER_KEYS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
}
"""Broker keys whose values a topic inherits when it has no override, most specific first (Kafka's synonyms)."""


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""The SASL mechanisms mq serves."""


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` entry of ``listeners`` or ``advertised.listeners`` with its security protocol."""

    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str, key: str, protocols: Mapping[str, str]) -> list[Listener]:
    """The entries of a listeners value (an empty host binds every interface), each with its protocol."""
    listeners: list[Listener] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, address = entry.partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not name or not port.isdigit():
            raise ConfigError(f"invalid listener '{entry}' in {key}: expected NAME://host:port")
        name = name.strip().upper()
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(
                f"listener {entry} in {key}: no security protocol for {name} in listener.security.protocol.map"
            )
        listeners.append(Listener(name, host.strip("[]"), int(port), protocol))
    if not listeners:
        raise ConfigError(f"{key} names no listener")
    return listeners


@dataclass(frozen=True)
class BrokerConfig:
    """Every broker key mq understands, with Kafka's names and defaults."""

    broker_id: int = _key("broker.id", -1, "this broker's id; -1 = generate one", shipped="0")
    listeners: str = _key(
        "listeners", "PLAINTEXT://:9092", "NAME://host:port listeners to bind", shipped="PLAINTEXT://127.0.0.1:9092"
    )
    advertised_listeners: str | None = _key(
        "advertised.listeners", None, "listeners given to clients; default: listeners", update=PER_BROKER
    )
    listener_security_protocol_map: str = _key(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "NAME:PROTOCOL pairs: the security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) of each listener name",
    )
    inter_broker_listener_name: str | None = _key(
        "inter.broker.listener.name",
        None,
        "the listener brokers connect to each other on; default: the first one of security.inter.broker.protocol",
    )
    security_inter_broker_protocol: str = _key(
        "security.inter.broker.protocol",
        "PLAINTEXT",
        "security protocol between brokers, when inter.broker.listener.name is unset",
        choices=SECURITY_PROTOCOLS,
    )
    sasl_enabled_mechanisms: str = _key(
        "sasl.enabled.mechanisms",
        "GSSAPI",
        "SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are not"
        " served)",
    )
    sasl_mechanism_inter_broker_protocol: str = _key(
        "sasl.mechanism.inter.broker.protocol",
        "GSSAPI",
        "SASL mechanism brokers authenticate to each other with (PLAIN or SCRAM-*; the username and password of the "
        "inter-broker listener's JAAS config for it)",
    )
    connections_max_reauth_ms: int = _key(
        "connections.max.reauth.ms",
        0,
        "SASL session lifetime; a client re-authenticates before it ends; 0 = none",
        minimum=0,
    )
    ssl_keystore_type: str = _key(
        "ssl.keystore.type",
        "JKS",
        "PEM or PKCS12; JKS: the file's own type (a Java KeyStore cannot be read)",
        update=PER_BROKER,
    )
    ssl_keystore_location: str | None = _key(
        "ssl.keystore.location", None, "the listener's key and certificate", update=PER_BROKER
    )
    ssl_keystore_password: str | None = _key(
        "ssl.keystore.password", None, "password of a PKCS12 keystore", kind="password", update=PER_BROKER
    )
    ssl_keystore_certificate_chain: str | None = _key(
        "ssl.keystore.certificate.chain",
        None,
        "PEM certificate chain inline (with ssl.keystore.key)",
        kind="password",
        update=PER_BROKER,
    )
    ssl_keystore_key: str | None = _key(
        "ssl.keystore.key", None, "PEM private key inline", kind="password", update=PER_BROKER
    )
    ssl_key_password: str | None = _key(
        "ssl.key.password", None, "password of an encrypted PEM key", kind="password", update=PER_BROKER
    )
    ssl_truststore_type: str = _key(
        "ssl.truststore.type",
        "JKS",
        "PEM or PKCS12; JKS: the file's own type (a Java KeyStore cannot be read)",
        update=PER_BROKER,
    )
    ssl_truststore_location: str | None = _key(
        "ssl.truststore.location",
        None,
        "CA certificates that verify clients (and brokers, between brokers)",
        update=PER_BROKER,
    )
    ssl_truststore_password: str | None = _key(
        "ssl.truststore.password", None, "password of a PKCS12 truststore", kind="password", update=PER_BROKER
    )
    ssl_truststore_certificates: str | None = _key(
        "ssl.truststore.certificates", None, "PEM CA certificates inline", kind="password", update=PER_BROKER
    )
    ssl_client_auth: str = _key(
        "ssl.client.auth",
        "none",
        "client certificates: none, requested or required",
        choices=("none", "requested", "required"),
    )
    ssl_enabled_protocols: str = _key("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "TLS versions offered")
    ssl_cipher_suites: str = _key("ssl.cipher.suites", "", "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: all")
    ssl_endpoint_identification_algorithm: str = _key(
        "ssl.endpoint.identification.algorithm", "https", "https: verify a broker's host name between brokers"
    )
    ssl_principal_mapping_rules: str = _key(
        "ssl.principal.mapping.rules", "DEFAULT", "RULE:pattern/replacement/[LU] rules mapping a certificate's DN"
    )
    log_dirs: str | None = _key("log.dirs", None, "comma-separated log directories", shipped="data/kafka-logs")
    log_dir: str = _key("log.dir", "/tmp/kafka-logs", "log directory used when log.dirs is unset")
    num_partitions: int = _key("num.partitions", 1, "partitions of an auto-created topic", minimum=1)
    default_replication_factor: int = _key(
        "default.replication.factor", 1, "replication factor of an auto-created topic", minimum=1
    )
    auto_create_topics_enable: bool = _key("auto.create.topics.enable", True, "create unknown topics on first use")
    delete_topic_enable: bool = _key("delete.topic.enable", True, "allow topics to be deleted")
    zookeeper_connect: str | None = _key(
        "zookeeper.connect", None, "host:port[,host:port][/chroot]; unset = standalone broker"
    )
    zookeeper_session_timeout_ms: int = _key("zookeeper.session.timeout.ms", 18000, "ZooKeeper session timeout")
    zookeeper_connection_timeout_ms: int | None = _key(
        "zookeeper.connection.timeout.ms", None, "ZooKeeper connect timeout; default: the session timeout"
    )
    broker_liveness_interval_ms: int = _key(
        "broker.liveness.interval.ms",
        250,
        "how often each broker pings its peers; a refused or reset peer is unregistered at once",
        minimum=1,
    )
    socket_request_max_bytes: int = _key(
        "socket.request.max.bytes", 104857600, "largest request accepted; larger frames are refused", minimum=1
    )
    socket_send_buffer_bytes: int = _key("socket.send.buffer.bytes", 102400, "SO_SNDBUF; -1 = OS default")
    socket_receive_buffer_bytes: int = _key("socket.receive.buffer.bytes", 102400, "SO_RCVBUF; -1 = OS default")
    queued_max_request_bytes: int | None = _key(
        "queued.max.request.bytes",
        None,
        "memory for requests larger than a connection's 64 KiB receive buffer, reserved as their bytes arrive (a"
        " connection waits, unread, for memory); -1 = no limit (Kafka's default, under which a connection that sends"
        " a 100 MB size prefix and nothing else costs 100 MB); default: 2 x socket.request.max.bytes, so the two"
        " largest requests fit at once; at least socket.request.max.bytes",
        minimum=-1,
    )
    queued_max_requests: int = _key(
        "queued.max.requests",
        500,
        "requests of one connection that may wait to be handled or have their responses unsent; at the limit the"
        " connection is not read until half of them are done (Kafka counts them across connections)",
        minimum=1,
    )
    event_loop: str = _key(
        "event.loop",
        "uvloop",
        "mq only (Kafka has none): the broker's event loop, uvloop or asyncio; uvloop falls back to asyncio where it"
        " is not installed",
        choices=("uvloop", "asyncio"),
    )
    max_connections: int = _key(
        "max.connections",
        INT_MAX,
        "connections the broker keeps; at the limit it stops accepting until one closes",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    max_connections_per_ip: int = _key(
        "max.connections.per.ip",
        INT_MAX,
        "connections one IP address may have; more are closed at accept",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    max_connections_per_ip_overrides: str = _key(
        "max.connections.per.ip.overrides",
        "",
        "host:count pairs separated by commas: per-IP limits for these addresses or host names",
        kind="ip_counts",
    )
    connections_max_idle_ms: int = _key(
        "connections.max.idle.ms",
        600000,
        "a connection with no request for this long is closed; -1 = never",
        minimum=-1,
    )
    socket_request_receive_timeout_ms: int = _key(
        "socket.request.receive.timeout.ms",
        30000,
        "mq only (Kafka has none): a connection whose request is not whole this long after its first bytes"
        " arrived is closed; -1 = no limit",
        minimum=-1,
    )
    num_network_threads: int = _key(
        "num.network.threads", 3, "not used: one event loop reads and writes every socket", minimum=1
    )
    num_io_threads: int = _key(
        "num.io.threads",
        8,
        "not used: requests are handled on the event loop; blocking work runs on background.threads",
        minimum=1,
    )
    background_threads: int = _key(
        "background.threads", 10, "scheduler threads: retention, flushes, checkpoints (never on the loop)", minimum=1
    )
    num_recovery_threads_per_data_dir: int = _key(
        "num.recovery.threads.per.data.dir", 1, "threads that recover logs at start-up", minimum=1
    )
    message_max_bytes: int = _key(
        "message.max.bytes", 1048588, "largest record batch accepted", minimum=0, update=CLUSTER_WIDE
    )
    compression_type: str = _key(
        "compression.type",
        "producer",
        "codec the broker stores batches in",
        choices=COMPRESSION_TYPES,
        update=CLUSTER_WIDE,
    )
    min_insync_replicas: int = _key(
        "min.insync.replicas", 1, "in-sync replicas an acks=all produce needs", minimum=1, update=CLUSTER_WIDE
    )
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable", False, "allow an out-of-sync replica to become leader", update=CLUSTER_WIDE
    )
    log_segment_bytes: int = _key(
        "log.segment.bytes", 1073741824, "size at which a segment is rolled", minimum=14, update=CLUSTER_WIDE
    )
    log_roll_ms: int | None = _key(
        "log.roll.ms", None, "age at which a segment is rolled; wins over log.roll.hours", update=CLUSTER_WIDE
    )
    log_roll_hours: int = _key("log.roll.hours", 168, "age in hours at which a segment is rolled", minimum=1)
    log_roll_jitter_ms: int | None = _key(
        "log.roll.jitter.ms", None, "random roll jitter; wins over the hours key", update=CLUSTER_WIDE
    )
    log_roll_jitter_hours: int = _key("log.roll.jitter.hours", 0, "random roll jitter in hours", minimum=0)
    log_retention_ms: int | None = _key(
        "log.retention.ms", None, "segment age before deletion; -1 = no limit", update=CLUSTER_WIDE
    )
    log_retention_minutes: int | None = _key("log.retention.minutes", None, "the same in minutes")
    log_retention_hours: int = _key("log.retention.hours", 168, "the same in hours")
    log_retention_bytes: int = _key(
        "log.retention.bytes", -1, "partition size kept; -1 = no limit", update=CLUSTER_WIDE
    )
    log_retention_check_interval_ms: int = _key(
        "log.retention.check.interval.ms", 300000, "how often retention runs", minimum=1
    )
    log_cleanup_policy: str = _key(
        "log.cleanup.policy", "delete", "delete, compact, or compact,delete", kind="policy", update=CLUSTER_WIDE
    )
    log_cleaner_enable: bool = _key("log.cleaner.enable", True, "run the log cleaner for compacted topics")
    log_cleaner_threads: int = _key("log.cleaner.threads", 1, "log cleaner threads", minimum=0)
    log_cleaner_dedupe_buffer_size: int = _key(
        "log.cleaner.dedupe.buffer.size", 134217728, "memory for the cleaner's key map", minimum=0
    )
    log_cleaner_io_buffer_size: int = _key(
        "log.cleaner.io.buffer.size", 524288, "read buffer memory across cleaner threads", minimum=0
    )
    log_cleaner_io_buffer_load_factor: float = _key(
        "log.cleaner.io.buffer.load.factor", 0.9, "share of the key map's slots the cleaner fills", minimum=0
    )
    log_cleaner_io_max_bytes_per_second: float = _key(
        "log.cleaner.io.max.bytes.per.second", sys.float_info.max, "cleaner read + write rate limit", minimum=0
    )
    log_cleaner_backoff_ms: int = _key("log.cleaner.backoff.ms", 15000, "cleaner sleep when idle", minimum=0)
    log_cleaner_min_cleanable_ratio: float = _key(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        "dirty share of a log before it is compacted",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    log_cleaner_delete_retention_ms: int = _key(
        "log.cleaner.delete.retention.ms",
        86400000,
        "how long tombstones survive compaction",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    log_cleaner_min_compaction_lag_ms: int = _key(
        "log.cleaner.min.compaction.lag.ms", 0, "shortest a record stays uncompacted", minimum=0, update=CLUSTER_WIDE
    )
    log_cleaner_max_compaction_lag_ms: int = _key(
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        "longest a record stays uncompacted",
        minimum=1,
        update=CLUSTER_WIDE,
    )
    log_index_size_max_bytes: int = _key(
        "log.index.size.max.bytes", 10485760, "size of a segment's offset index", minimum=8, update=CLUSTER_WIDE
    )
    log_index_interval_bytes: int = _key(
        "log.index.interval.bytes", 4096, "bytes between offset index entries", minimum=0, update=CLUSTER_WIDE
    )
    log_flush_interval_messages: int = _key(
        "log.flush.interval.messages",
        LONG_MAX,
        "fsync after this many appended messages",
        minimum=1,
        update=CLUSTER_WIDE,
    )
    log_flush_interval_ms: int | None = _key(
        "log.flush.interval.ms", None, "fsync when the oldest unflushed append is this old", update=CLUSTER_WIDE
    )
    log_flush_scheduler_interval_ms: int = _key(
        "log.flush.scheduler.interval.ms", LONG_MAX, "how often the flusher checks the logs"
    )
    log_flush_offset_checkpoint_interval_ms: int = _key(
        "log.flush.offset.checkpoint.interval.ms", 60000, "how often recovery points are checkpointed", minimum=0
    )
    log_flush_start_offset_checkpoint_interval_ms: int = _key(
        "log.flush.start.offset.checkpoint.interval.ms", 60000, "how often log start offsets are checkpointed"
    )
    log_segment_delete_delay_ms: int = _key(
        "log.segment.delete.delay.ms",
        60000,
        "delay before a deleted segment is removed",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    log_preallocate: bool = _key(
        "log.preallocate", False, "preallocate segment files to log.segment.bytes", update=CLUSTER_WIDE
    )
    log_message_downconversion_enable: bool = _key(
        "log.message.downconversion.enable",
        True,
        "whether Fetch v0-v3 may read batches down-converted to magic 0 or 1",
        update=CLUSTER_WIDE,
    )
    log_message_timestamp_type: str = _key(
        "log.message.timestamp.type",
        "CreateTime",
        "CreateTime or LogAppendTime",
        choices=TIMESTAMP_TYPES,
        update=CLUSTER_WIDE,
    )
    log_message_timestamp_difference_max_ms: int = _key(
        "log.message.timestamp.difference.max.ms",
        LONG_MAX,
        "largest allowed |create time - broker time|",
        update=CLUSTER_WIDE,
    )
    replica_lag_time_max_ms: int = _key(
        "replica.lag.time.max.ms", 30000, "a follower this far behind leaves the ISR", minimum=1
    )
    replica_fetch_max_bytes: int = _key("replica.fetch.max.bytes", 1048576, "follower fetch size per partition")
    replica_fetch_wait_max_ms: int = _key("replica.fetch.wait.max.ms", 500, "follower fetch long-poll time")
    replica_fetch_min_bytes: int = _key("replica.fetch.min.bytes", 1, "follower fetch minimum bytes")
    num_replica_fetchers: int = _key(
        "num.replica.fetchers",
        1,
        "not used: one fetcher task per source broker fetches every partition followed there",
        minimum=1,
    )
    replication_quota_window_num: int = _key(
        "replication.quota.window.num", 11, "samples kept to measure replication throttle rates", minimum=1
    )
    replication_quota_window_size_seconds: int = _key(
        "replication.quota.window.size.seconds", 1, "length of one replication throttle sample", minimum=1
    )
    replica_high_watermark_checkpoint_interval_ms: int = _key(
        "replica.high.watermark.checkpoint.interval.ms", 5000, "how often high watermarks are checkpointed"
    )
    controlled_shutdown_enable: bool = _key("controlled.shutdown.enable", True, "move leadership away before stopping")
    controlled_shutdown_max_retries: int = _key(
        "controlled.shutdown.max.retries", 3, "attempts to move leadership away before stopping anyway", minimum=0
    )
    controlled_shutdown_retry_backoff_ms: int = _key(
        "controlled.shutdown.retry.backoff.ms", 5000, "wait between controlled shutdown attempts", minimum=0
    )
    auto_leader_rebalance_enable: bool = _key(
        "auto.leader.rebalance.enable", True, "elect preferred leaders when imbalanced"
    )
    leader_imbalance_per_broker_percentage: int = _key(
        "leader.imbalance.per.broker.percentage", 10, "imbalance that triggers a rebalance"
    )
    leader_imbalance_check_interval_seconds: int = _key(
        "leader.imbalance.check.interval.seconds", 300, "how often imbalance is checked"
    )
    offsets_topic_num_partitions: int = _key(
        "offsets.topic.num.partitions", 50, "partitions of __consumer_offsets", minimum=1
    )
    offsets_topic_replication_factor: int = _key(
        "offsets.topic.replication.factor", 3, "replication factor of __consumer_offsets", minimum=1, shipped="1"
    )
    offsets_topic_segment_bytes: int = _key(
        "offsets.topic.segment.bytes", 104857600, "segment size of __consumer_offsets", minimum=1
    )
    offsets_retention_minutes: int = _key(
        "offsets.retention.minutes", 10080, "how long committed offsets of empty groups are kept", minimum=1
    )
    offsets_retention_check_interval_ms: int = _key(
        "offsets.retention.check.interval.ms", 600000, "how often stale offsets are removed", minimum=1
    )
    offsets_commit_timeout_ms: int = _key("offsets.commit.timeout.ms", 5000, "offset commit wait", minimum=1)
    offsets_commit_required_acks: int = _key(
        "offsets.commit.required.acks", -1, "acks an offset commit waits for (-1: the whole ISR)", minimum=-1
    )
    offsets_load_buffer_size: int = _key(
        "offsets.load.buffer.size", 5242880, "read size when loading __consumer_offsets partitions", minimum=1
    )
    offset_metadata_max_bytes: int = _key("offset.metadata.max.bytes", 4096, "largest offset commit metadata")
    group_min_session_timeout_ms: int = _key("group.min.session.timeout.ms", 6000, "smallest session timeout")
    group_max_session_timeout_ms: int = _key("group.max.session.timeout.ms", 1800000, "largest session timeout")
    group_max_size: int = _key("group.max.size", INT_MAX, "most members one consumer group may have", minimum=1)
    group_initial_rebalance_delay_ms: int = _key(
        "group.initial.rebalance.delay.ms",
        3000,
        "wait for more members before a new group's first rebalance",
        shipped="0",
    )
    transaction_state_log_replication_factor: int = _key(
        "transaction.state.log.replication.factor", 3, "replication factor of __transaction_state", shipped="1"
    )
    transaction_state_log_min_isr: int = _key(
        "transaction.state.log.min.isr", 2, "min.insync.replicas of __transaction_state", shipped="1"
    )
    transaction_state_log_num_partitions: int = _key(
        "transaction.state.log.num.partitions", 50, "partitions of __transaction_state", minimum=1
    )
    transaction_state_log_segment_bytes: int = _key(
        "transaction.state.log.segment.bytes", 104857600, "segment size of __transaction_state", minimum=1
    )
    transaction_state_log_load_buffer_size: int = _key(
        "transaction.state.log.load.buffer.size",
        5242880,
        "read size when loading __transaction_state partitions",
        minimum=1,
    )
    transaction_max_timeout_ms: int = _key(
        "transaction.max.timeout.ms", 900000, "largest transaction timeout a producer may ask for", minimum=1
    )
    transactional_id_expiration_ms: int = _key(
        "transactional.id.expiration.ms",
        604800000,
        "how long a transactional id with no transaction in progress is kept after its last update",
        minimum=1,
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10000,
        "how often transactions past their timeout are aborted",
        minimum=1,
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3600000,
        "how often expired transactional ids are removed",
        minimum=1,
    )
    producer_id_expiration_ms: int = _key(
        "producer.id.expiration.ms",
        86400000,
        "how long a partition keeps an idempotent producer with no open transaction after its last batch or marker",
        minimum=1,
    )
    producer_id_expiration_check_interval_ms: int = _key(
        "producer.id.expiration.check.interval.ms",
        600000,
        "how often partitions forget producers past producer.id.expiration.ms",
        minimum=1,
    )
    broker_rack: str | None = _key("broker.rack", None, "rack of this broker, for rack-aware assignment")
    quota_window_num: int = _key("quota.window.num", 11, "samples kept to measure client quota rates", minimum=1)
    quota_window_size_seconds: int = _key(
        "quota.window.size.seconds", 1, "length of one client quota sample", minimum=1
    )
    authorizer_class_name: str = _key(
        "authorizer.class.name",
        "",
        "kafka.security.authorizer.AclAuthorizer (or kafka.security.auth.SimpleAclAuthorizer, "
        "mq.security.authorizer.AclAuthorizer) enforces ACLs; empty: no authorizer",
    )
    super_users: str = _key(
        "super.users",
        "",
        "principals allowed everything, separated by ;, e.g. User:admin;User:ANONYMOUS: include the brokers' "
        "inter-broker principal (User:ANONYMOUS on a PLAINTEXT inter-broker listener)",
    )
    allow_everyone_if_no_acl_found: bool = _key(
        "allow.everyone.if.no.acl.found", False, "a resource no ACL applies to is open to everyone"
    )
    password_encoder_secret: str | None = _key(
        "password.encoder.secret", None, "encrypts the secrets of dynamic broker configs in ZooKeeper", kind="password"
    )
    password_encoder_old_secret: str | None = _key(
        "password.encoder.old.secret",
        None,
        "the previous password.encoder.secret, to read secrets stored with it",
        kind="password",
    )
    metrics_listener: str = _key(
        "metrics.listener", "", "http://HOST:PORT serving /metrics (Prometheus), /health, /ready; empty: off"
    )
    listener_keys: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """The ``listener.name.<listener>.<key>`` keys as set: a listener's own values of security keys."""
    explicit_keys: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """Keys set by the properties file or an override (their source is STATIC_BROKER_CONFIG)."""

    def __post_init__(self) -> None:
        self._check_listeners()
        self._check_authorizer()
        queued = self.queued_max_request_bytes
        if queued is not None and queued != -1 and queued < self.socket_request_max_bytes:
            raise ConfigError(
                f"queued.max.request.bytes ({queued}) must be -1 or at least socket.request.max.bytes "
                f"({self.socket_request_max_bytes}), or a largest request could never be received"
            )

    def _check_authorizer(self) -> None:
        """An authorizer mq has (Kafka's ZooKeeper-era ACL authorizers), and super users it can parse."""
        name = self.authorizer_class_name.strip()
        if name and name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(
                f"authorizer.class.name {name} is not an authorizer mq has; use "
                f"{' or '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or leave it empty for none"
            )
        try:
            parse_super_users(self.super_users)
        except PrincipalError as exc:
            raise ConfigError(f"super.users: {exc}") from None

    def _check_listeners(self) -> None:
        """Listeners with distinct names and ports, each of a mapped protocol; advertised listeners among them; the
        inter-broker listener one of them; SASL mechanisms mq serves (refused at start, never served otherwise)."""
        names = [listener.name for listener in self.bound_listeners()]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners names a listener twice: {self.listeners}")
        ports = [listener.port for listener in self.bound_listeners() if listener.port]
        if len(set(ports)) != len(ports):
            raise ConfigError(f"listeners binds a port twice: {self.listeners}")
        for advertised in self.advertised():
            if advertised.name not in names:
                raise ConfigError(f"advertised.listeners names {advertised.name}, which is not in listeners")
        self.inter_broker_listener()
        if any(listener.protocol.startswith("SASL_") for listener in self.bound_listeners()):
            mechanisms = self.enabled_mechanisms()
            refused = [m for m in mechanisms if m not in SASL_MECHANISMS]
            if refused or not mechanisms:
                raise ConfigError(
                    f"sasl.enabled.mechanisms={self.sasl_enabled_mechanisms}: mq serves "
                    f"{', '.join(SASL_MECHANISMS)} (not {', '.join(refused) or 'none'}); set sasl.enabled.mechanisms"
                )

    def protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as listener name -> protocol."""
        protocols: dict[str, str] = {}
        for pair in self.listener_security_protocol_map.split(","):
            name, sep, protocol = pair.strip().partition(":")
            protocol = protocol.strip().upper()
            if not sep or not name.strip() or not protocol:
                raise ConfigError(
                    f"invalid listener.security.protocol.map entry '{pair.strip()}': expected NAME:PROTOCOL"
                )
            if protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: unknown security protocol {protocol} (expected one of "
                    f"{', '.join(SECURITY_PROTOCOLS)})"
                )
            protocols[name.strip().upper()] = protocol
        return protocols

    def bound_listeners(self) -> list[Listener]:
        """The ``listeners`` to bind, in order."""
        return parse_listeners(self.listeners, "listeners", self.protocol_map())

    def advertised(self) -> list[Listener]:
        """``advertised.listeners``, else ``listeners``: what brokers register and clients are told."""
        if not self.advertised_listeners:
            return self.bound_listeners()
        return parse_listeners(self.advertised_listeners, "advertised.listeners", self.protocol_map())

    def inter_broker_listener(self) -> Listener:
        """The listener brokers reach each other on: ``inter.broker.listener.name``, else the first listener of
        ``security.inter.broker.protocol`` (a standalone broker, which has no peers, falls back to its first)."""
        listeners = self.advertised()
        if self.inter_broker_listener_name:
            wanted = self.inter_broker_listener_name.strip().upper()
            found = [listener for listener in listeners if listener.name == wanted]
            if not found:
                raise ConfigError(f"inter.broker.listener.name={wanted} is not one of the (advertised) listeners")
            return found[0]
        found = [listener for listener in listeners if listener.protocol == self.security_inter_broker_protocol]
        if not found and self.standalone:
            return listeners[0]
        if not found:
            raise ConfigError(
                f"no listener of security.inter.broker.protocol={self.security_inter_broker_protocol}: set "
                "inter.broker.listener.name or add such a listener"
            )
        return found[0]

    def enabled_mechanisms(self) -> list[str]:
        return [m.strip().upper() for m in self.sasl_enabled_mechanisms.split(",") if m.strip()]

    def listener_value(self, listener: str, key: str) -> str | None:
        """``listener.name.<listener>.<key>`` if set (Kafka's per-listener value), else the broker key's value."""
        own = self.listener_keys.get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")
        if own is not None:
            return own
        f = _broker_field(key)
        value = getattr(self, f.name) if f is not None else None
        return None if value is None else str(value)

    @property
    def request_memory_bytes(self) -> int:
        """The memory pool for received requests: queued.max.request.bytes, by default twice the largest request;
        -1 = no limit."""
        queued = self.queued_max_request_bytes
        return queued if queued is not None else 2 * self.socket_request_max_bytes

    @property
    def log_dir_paths(self) -> list[Path]:
        dirs = self.log_dirs if self.log_dirs is not None else self.log_dir
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    @property
    def standalone(self) -> bool:
        return not self.zookeeper_connect

    def effective_retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours (Kafka's precedence); any negative value = no limit."""
        if self.log_retention_ms is not None:
            value = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            value = self.log_retention_minutes * 60_000
        else:
            value = self.log_retention_hours * 3_600_000
        return -1 if value < 0 else value

    def topic_defaults(self) -> TopicConfig:
        """The broker-wide defaults every topic's overrides are laid over."""
        return TopicConfig(
            cleanup_policy=self.log_cleanup_policy,
            compression_type=self.compression_type,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            file_delete_delay_ms=self.log_segment_delete_delay_ms,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=(
                self.log_flush_interval_ms
                if self.log_flush_interval_ms is not None
                else self.log_flush_scheduler_interval_ms
            ),
            index_interval_bytes=self.log_index_interval_bytes,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            max_message_bytes=self.message_max_bytes,
            message_timestamp_difference_max_ms=self.log_message_timestamp_difference_max_ms,
            message_timestamp_type=self.log_message_timestamp_type,
            message_downconversion_enable=self.log_message_downconversion_enable,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            min_insync_replicas=self.min_insync_replicas,
            preallocate=self.log_preallocate,
            retention_bytes=self.log_retention_bytes,
            retention_ms=self.effective_retention_ms(),
            segment_bytes=self.log_segment_bytes,
            segment_index_bytes=self.log_index_size_max_bytes,
            segment_jitter_ms=(
                self.log_roll_jitter_ms if self.log_roll_jitter_ms is not None else self.log_roll_jitter_hours * 3600000
            ),
            segment_ms=self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3600000,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
        )

    @classmethod
    def load(cls, path: Path | str | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Defaults, then the properties file at ``path`` (if any), then ``key=value`` overrides, validated.

        Every key some Kafka release reads is accepted: a key Kafka renamed since (``port``, ``host.name``, ...)
        sets its successor, with one deprecation warning; the keys mq does not use are named in one warning line.
        A key no Kafka release reads is refused, naming its source and the closest known key.
        """
        entries: dict[str, tuple[str, str]] = {}
        if path is not None:
            source = str(path)
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            for key, value in parse_properties(text, source).items():
                _check_broker_key(key, source)
                entries[key] = (value, source)
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"invalid --override '{item}': expected key=value")
            _check_broker_key(key.strip(), "--override")
            entries[key.strip()] = (value.strip(), "--override")
        entries = _read_renamed_keys(entries)
        by_key = {f.metadata["key"]: f for f in config_fields(cls)}
        listener_keys = {key: text.strip() for key, (text, _) in entries.items() if _LISTENER_KEY.fullmatch(key)}
        unused = sorted(key for key in entries if key not in by_key and key not in listener_keys)
        for key in unused:
            _check_kafka_value(key, *entries[key])
        if unused:
            log.warning("Accepted but unused by mq: %s", ", ".join(unused))
        parsed = {
            by_key[key].name: _parse_value(by_key[key], text.strip(), where)
            for key, (text, where) in entries.items()
            if key in by_key
        }
        return cls(**parsed, listener_keys=listener_keys, explicit_keys=frozenset(entries) - frozenset(unused))


@dataclass(frozen=True)
class DynamicBrokerConfig:
    """Broker keys changed at runtime through ``/config/brokers/<id>`` and ``/config/brokers/<default>``
    (AlterConfigs on a BROKER resource); a per-broker value wins over the cluster default. Its fields are the
    replication throttle rates, which are not ``BrokerConfig`` keys; the ``BrokerConfig`` keys whose update mode is
    not read-only are stored beside them (``validate``) and overlay the properties file (``apply``)."""

    leader_replication_throttled_rate: int = _key(
        "leader.replication.throttled.rate",
        LONG_MAX,
        "bytes/s a leader sends for throttled replicas",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    follower_replication_throttled_rate: int = _key(
        "follower.replication.throttled.rate",
        LONG_MAX,
        "bytes/s a follower fetches for throttled replicas",
        minimum=0,
        update=CLUSTER_WIDE,
    )
    replica_alter_log_dirs_io_max_bytes_per_second: int = _key(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        LONG_MAX,
        "bytes/s read to move replicas between the log dirs of a broker",
        minimum=0,
        update=CLUSTER_WIDE,
    )

    def with_overrides(self, overrides: Mapping[str, str], source: str = "broker config") -> DynamicBrokerConfig:
        """A copy with ``overrides`` applied; an unknown key or a bad value raises ConfigError."""
        dynamic = {
            k: v
            for k, v in overrides.items()
            if k not in _UPDATABLE_BROKER_FIELDS and not _DYNAMIC_LISTENER_KEY.fullmatch(k)
        }
        return dataclasses.replace(self, **_parse_values(DynamicBrokerConfig, dynamic, source, "dynamic broker config"))

    @staticmethod
    def validate(config: Mapping[str, str], per_broker: bool, source: str = "the request") -> None:
        """What ``/config/brokers/<id>`` (``per_broker``) or ``/config/brokers/<default>`` may hold, as Kafka checks it:
        a read-only broker key raises KafkaError INVALID_REQUEST ``Cannot update these configs dynamically: Set(k)``,
        a per-broker key at the cluster default ``Cannot update these configs at default cluster level, broker id must
        be specified: Set(k)``; an unknown key or an ill-typed value raises ConfigError (INVALID_CONFIG)."""
        read_only = [
            k
            for k in config
            if (k in _BROKER_FIELDS and k not in _UPDATABLE_BROKER_FIELDS)
            or (k.startswith(LISTENER_PREFIX) and not _DYNAMIC_LISTENER_KEY.fullmatch(k))
        ]
        if read_only:
            raise KafkaError(
                f"Cannot update these configs dynamically: Set({', '.join(read_only)})", ErrorCode.INVALID_REQUEST
            )
        per_broker_only = [
            k for k, f in _UPDATABLE_BROKER_FIELDS.items() if k in config and f.metadata["update"] == PER_BROKER
        ] + [k for k in config if _DYNAMIC_LISTENER_KEY.fullmatch(k)]
        if per_broker_only and not per_broker:
            raise KafkaError(
                "Cannot update these configs at default cluster level, broker id must be specified: "
                f"Set({', '.join(per_broker_only)})",
                ErrorCode.INVALID_REQUEST,
            )
        DynamicBrokerConfig().with_overrides(config, source)
        _parse_values(BrokerConfig, _broker_keys(config), source, "broker config")

    @staticmethod
    def apply(static: BrokerConfig, default: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The effective broker config: ``static`` overlaid with the cluster default's broker keys, then with this
        broker's; ``explicit_keys`` stays the static file's. Raises ConfigError for an ill-typed stored value."""
        values = {**_broker_keys(default), **_broker_keys(per_broker)}
        listener_keys = {k: v for k, v in per_broker.items() if _DYNAMIC_LISTENER_KEY.fullmatch(k)}
        return dataclasses.replace(
            static,
            listener_keys={**static.listener_keys, **listener_keys},
            **_parse_values(BrokerConfig, values, "/config/brokers", "broker config"),
        )


def _broker_keys(config: Mapping[str, str]) -> dict[str, str]:
    """The entries of a ``/config/brokers`` map that are dynamic BrokerConfig keys (not the throttle rates)."""
    return {k: v for k, v in config.items() if k in _UPDATABLE_BROKER_FIELDS}


_BROKER_FIELDS = {f.metadata["key"]: f for f in dataclasses.fields(BrokerConfig) if "key" in f.metadata}
_UPDATABLE_BROKER_FIELDS = {k: f for k, f in _BROKER_FIELDS.items() if f.metadata["update"] != READ_ONLY}


DYNAMIC_BROKER_CONFIG_KEYS: frozenset[str] = frozenset(
    f.metadata["key"] for f in dataclasses.fields(DynamicBrokerConfig)
) | frozenset(_UPDATABLE_BROKER_FIELDS)
"""Every key ``/config/brokers/<id>`` may hold: the throttle rates and the broker keys that are not read-only."""

_THROTTLED_REPLICA = re.compile(r"\d+:\d+")


def parse_throttled_replicas(text: str) -> list[tuple[int, int]] | None:
    """A ``*.replication.throttled.replicas`` value as (partition, broker) pairs; None for ``*`` (every replica).
    Raises ValueError unless the text is ``*`` or ``partition:broker`` pairs separated by commas (or empty)."""
    if text.strip() == "*":
        return None
    pairs: list[tuple[int, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not _THROTTLED_REPLICA.fullmatch(item):
            raise ValueError(item)
        partition, _, broker = item.partition(":")
        pairs.append((int(partition), int(broker)))
    return pairs


def parse_ip_counts(text: str) -> dict[str, int]:
    """A ``max.connections.per.ip.overrides`` value: ``host:count`` pairs separated by commas (an IPv6 address is
    everything before the last colon). Raises ValueError."""
    counts: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(item)
        counts[host.strip()] = int(count)
    return counts


_LINE_CONTINUATION = re.compile(r"(?<!\\)(\\\\)*\\$")


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java ``.properties`` text to a dict: ``#``/``!`` comments, ``=``/``:``/space separators, ``\\`` continuations."""
    result: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _LINE_CONTINUATION.search(line):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"((?:\\.|[^=:\s\\])+)\s*[=:\s]?\s*(.*)$", logical)
        if match is None:
            raise ConfigError(f"malformed line in {source}: {logical!r}")
        result[match.group(1).replace("\\", "")] = match.group(2)
        logical = ""
    return result


def config_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of a config class that are configuration keys."""
    return [f for f in dataclasses.fields(cls) if "key" in f.metadata]


RENAMED_BROKER_KEYS: dict[str, tuple[str, int, str]] = {
    "log.cleanup.interval.mins": ("log.retention.check.interval.ms", 60000, "renamed in Kafka 0.8.1"),
    "offsets.topic.retention.minutes": (
        "offsets.retention.minutes",
        1,
        "a name only Kafka 0.8's documentation used",
    ),
}
"""Keys read as their successor: old key -> (successor, factor applied to the value, why)."""

LEGACY_LISTENER_KEYS = ("port", "host.name", "advertised.port", "advertised.host.name")
"""Kafka 0.8's single plaintext listener (removed in 3.0), read as ``listeners`` / ``advertised.listeners``."""


def sensitive_key(key: str) -> bool:
    """Whether a broker key holds a secret (Kafka's PASSWORD type: store passwords, inline keys, JAAS configs), also
    behind a ``listener.name.<listener>.[<mechanism>.]`` prefix: its value is never described or logged."""
    if key.startswith(LISTENER_PREFIX):
        key = key.split(".", 3)[3] if key.count(".") >= 3 else key
        if key.endswith(".sasl.jaas.config"):
            key = "sasl.jaas.config"
    f = _broker_field(key)
    if f is not None:
        return bool(f.metadata["kind"] == "password")
    return KAFKA_BROKER_KEYS.get(key, ("", None, None))[2] == "password"


@functools.cache
def _broker_fields() -> dict[str, dataclasses.Field[Any]]:
    return {f.metadata["key"]: f for f in config_fields(BrokerConfig)}


def _broker_field(key: str) -> dataclasses.Field[Any] | None:
    """The BrokerConfig field of a broker key, if mq has one."""
    return _broker_fields().get(key)


@functools.cache
def _known_broker_keys() -> frozenset[str]:
    """Every key ``BrokerConfig.load`` accepts: mq's own, every Kafka release's, and the renamed ones."""
    return (
        frozenset(f.metadata["key"] for f in config_fields(BrokerConfig))
        | KAFKA_BROKER_KEYS.keys()
        | RENAMED_BROKER_KEYS.keys()
    )


def _check_broker_key(key: str, source: str) -> None:
    """A ConfigError naming ``source`` and the closest known key unless mq or some Kafka release reads ``key``."""
    if key in _known_broker_keys() or key.startswith(KAFKA_BROKER_KEY_PREFIXES):
        return
    message = f"unknown broker config key '{key}' in {source}"
    close = difflib.get_close_matches(key, sorted(_known_broker_keys()), n=1)
    raise ConfigError(f"{message}; did you mean {close[0]}?" if close else message)


_KAFKA_INTEGER = re.compile(r"[+-]?\d+")


def _check_kafka_value(
    key: str, text: str, source: str, catalogue: Mapping[str, tuple[str, str | None, str | None]] = KAFKA_BROKER_KEYS
) -> None:
    """A ConfigError unless ``text`` parses as the type Kafka gives ``key`` in ``catalogue`` (numbers and booleans
    are checked; an empty value leaves the key unset)."""
    kind = catalogue[key][2] if key in catalogue else None
    text = text.strip()
    if not text:
        return
    if kind in ("int", "long", "short") and not _KAFKA_INTEGER.fullmatch(text):
        raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected an integer")
    if kind == "boolean" and text.lower() not in ("true", "false"):
        raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected true or false")
    if kind == "double":
        try:
            float(text)
        except ValueError:
            raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected a number") from None


def _read_renamed_keys(entries: Mapping[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """``entries`` (key -> (value, source)) with renamed and legacy listener keys replaced by their successors,
    logging one deprecation warning per replacement; a successor that is set itself wins. KRaft's ``node.id`` is
    ``broker.id`` (as Kafka does, the two must agree when both are set)."""
    result = {k: v for k, v in entries.items() if k not in RENAMED_BROKER_KEYS and k not in LEGACY_LISTENER_KEYS}
    if "node.id" in entries:
        node_id, node_source = result.pop("node.id")
        broker_id, broker_source = result.setdefault("broker.id", (node_id, node_source))
        if broker_id.strip() != node_id.strip():
            raise ConfigError(
                f"node.id ({node_id.strip()}) in {node_source} and broker.id ({broker_id.strip()}) in {broker_source}"
                " must be equal"
            )
    for old, (new, factor, why) in RENAMED_BROKER_KEYS.items():
        if old not in entries:
            continue
        text, where = entries[old]
        if new in entries:
            log.warning("%s in %s: deprecated (%s); ignored, %s is set", old, where, why, new)
            continue
        value = str(_legacy_int(old, text, where) * factor)
        log.warning("%s in %s: deprecated (%s); read as %s=%s", old, where, why, new, value)
        result[new] = (value, where)
    for target, host_keys, port_keys in (
        ("listeners", ("host.name",), ("port",)),
        ("advertised.listeners", ("advertised.host.name", "host.name"), ("advertised.port", "port")),
    ):
        present = [k for k in (*port_keys[:1], *host_keys[:1]) if k in entries]
        if not present:
            continue
        names = " and ".join(present)
        where = " and ".join(dict.fromkeys(entries[k][1] for k in present))
        if target in entries:
            log.warning("%s in %s: deprecated (removed in Kafka 3.0); ignored, %s is set", names, where, target)
            continue
        host = next((entries[k][0].strip() for k in host_keys if k in entries), "")
        port = next((_legacy_int(k, entries[k][0], entries[k][1]) for k in port_keys if k in entries), 9092)
        value = f"PLAINTEXT://{host}:{port}"
        log.warning("%s in %s: deprecated (removed in Kafka 3.0); read as %s=%s", names, where, target, value)
        result[target] = (value, where)
    return result


def _legacy_int(key: str, text: str, source: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(f"invalid value '{text.strip()}' for {key} in {source}: expected an integer") from None


def _parse_values(cls: type, values: Mapping[str, str], source: str, what: str) -> dict[str, Any]:
    by_key = {f.metadata["key"]: f for f in config_fields(cls)}
    parsed: dict[str, Any] = {}
    for key, text in values.items():
        f = by_key.get(key)
        if f is None:
            raise ConfigError(f"unknown {what} key '{key}' in {source}")
        parsed[f.name] = _parse_value(f, text.strip(), source)
    return parsed


def _parse_value(f: dataclasses.Field[Any], text: str, source: str) -> Any:
    key, meta = f.metadata["key"], f.metadata
    field_type = str(f.type)
    optional = "None" in field_type
    if optional and text == "":
        return None
    if "bool" in field_type:
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected true or false")
        return text.lower() == "true"
    if "int" in field_type or "float" in field_type:
        number_type = float if "float" in field_type else int
        try:
            number: int | float = number_type(text)
        except ValueError:
            expected = "a number" if number_type is float else "an integer"
            raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected {expected}") from None
        if meta["minimum"] is not None and number < meta["minimum"]:
            raise ConfigError(f"invalid value '{text}' for {key} in {source}: must be at least {meta['minimum']}")
        if number_type is int and number > LONG_MAX:
            raise ConfigError(f"invalid value '{text}' for {key} in {source}: must be at most {LONG_MAX}")
        return number
    if meta["choices"] is not None and text not in meta["choices"]:
        raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected one of {', '.join(meta['choices'])}")
    if meta["kind"] == "replicas":
        try:
            parse_throttled_replicas(text)
        except ValueError:
            raise ConfigError(
                f"invalid value '{text}' for {key} in {source}: expected * or partitionId:brokerId pairs separated "
                "by commas"
            ) from None
        return text
    if meta["kind"] == "ip_counts":
        try:
            parse_ip_counts(text)
        except ValueError:
            raise ConfigError(
                f"invalid value '{text}' for {key} in {source}: expected host:count pairs separated by commas"
            ) from None
        return text
    if meta["kind"] == "policy":
        parts = [p.strip() for p in text.split(",")] if text else []  # empty (Kafka 4.1+): neither delete nor compact
        if any(p not in CLEANUP_POLICIES for p in parts):
            raise ConfigError(f"invalid value '{text}' for {key} in {source}: expected delete, compact or both")
        return ",".join(parts)
    return text


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_properties() -> str:
    """The shipped ``config/server.properties``: the keys a single local broker needs (the fields with a ``shipped``
    value) are set; every other key mq reads is a commented ``#key=default`` line, so it keeps its default and
    DescribeConfigs reports it as DEFAULT_CONFIG. Each key has one comment line above it.
    """
    lines = [
        "# mq broker configuration: Kafka's key names and defaults. Generated by `python -m mq.config`.",
        "# Without zookeeper.connect the broker runs standalone on the listener below. Any other key a Kafka release",
        "# (0.8 to 4.0) reads is accepted: one start-up line names those mq does not use, and keys Kafka renamed",
        "# (port, host.name, advertised.host.name, advertised.port, ...) are read as their successors.",
        "",
        "############################# Set for a single local broker #############################",
    ]
    fields = config_fields(BrokerConfig)
    for f in [f for f in fields if f.metadata["shipped"] is not None]:
        lines += ["", f"# {f.metadata['doc']}", f"{f.metadata['key']}={f.metadata['shipped']}"]
    lines += ["", "############################# Defaults: uncomment to change #############################"]
    for f in [f for f in fields if f.metadata["shipped"] is None]:
        lines += ["", f"# {f.metadata['doc']}", f"#{f.metadata['key']}={_render(f.default)}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_properties(), end="")
