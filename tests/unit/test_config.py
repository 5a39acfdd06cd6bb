from __future__ import annotations

import copy
import logging
from pathlib import Path
from types import MappingProxyType

import pytest

import mq.config
from mq.config import (
    CLUSTER_WIDE,
    LONG_MAX,
    PER_BROKER,
    READ_ONLY,
    TOPIC_CONFIG_KEYS,
    BrokerConfig,
    DynamicBrokerConfig,
    TopicConfig,
    config_fields,
    parse_ip_counts,
    parse_properties,
    render_properties,
)
from mq.config_catalog import KAFKA_BROKER_KEYS
from mq.errors import ConfigError, ErrorCode, KafkaError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "server.properties"
SEED_ERA = ROOT / "tests" / "data" / "seed_era_server.properties"
SHIPPED_KEYS = {
    "broker.id",
    "listeners",
    "log.dirs",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "group.initial.rebalance.delay.ms",
}


def test_shipped_file_is_the_rendered_defaults() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == render_properties()


def test_shipped_file_starts_a_standalone_broker_on_loopback() -> None:
    config = BrokerConfig.load(SHIPPED)
    assert config.listeners == "PLAINTEXT://127.0.0.1:9092"
    assert config.standalone
    assert config.log_dir_paths == [Path("data/kafka-logs")]
    assert config.offsets_topic_replication_factor == 1
    assert config.group_initial_rebalance_delay_ms == 0


def test_shipped_file_sets_only_what_a_single_broker_needs() -> None:
    assert set(parse_properties(SHIPPED.read_text(encoding="utf-8"))) == SHIPPED_KEYS
    config = BrokerConfig.load(SHIPPED)
    assert config.explicit_keys == SHIPPED_KEYS
    assert config.topic_defaults() == TopicConfig()  # a topic on the shipped file has no broker-set topic key


def test_shipped_file_documents_every_other_key_at_its_default() -> None:
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    commented = dict(
        line[1:].split("=", 1) for line in lines if line.startswith("#") and not line.startswith("# ") and "=" in line
    )
    for f in config_fields(BrokerConfig):
        key = f.metadata["key"]
        if key not in SHIPPED_KEYS:
            assert getattr(BrokerConfig.load(overrides=[f"{key}={commented[key]}"]), f.name) == f.default, key


def test_every_key_has_one_comment_line() -> None:
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    keys = [line.lstrip("#").split("=")[0] for line in lines if "=" in line and not line.startswith("# ")]
    assert len(keys) == len(set(keys))
    for index, line in enumerate(lines):
        if "=" in line and not line.startswith("# "):
            assert lines[index - 1].startswith("# "), line


def test_code_defaults_match_kafka() -> None:
    config = BrokerConfig()
    assert config.log_segment_bytes == 1073741824
    assert config.log_index_interval_bytes == 4096
    assert config.log_index_size_max_bytes == 10485760
    assert config.message_max_bytes == 1048588
    assert config.log_flush_interval_messages == LONG_MAX
    assert config.effective_retention_ms() == 168 * 3_600_000
    assert config.socket_request_max_bytes == 104857600
    assert config.offsets_topic_num_partitions == 50


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("log.segment.bytes=1000\nlog.retention.hours=2\n", encoding="utf-8")
    config = BrokerConfig.load(path, ["log.segment.bytes=2000", "log.retention.ms=5"])
    assert config.log_segment_bytes == 2000
    assert config.effective_retention_ms() == 5


def test_retention_precedence_ms_minutes_hours() -> None:
    assert BrokerConfig(log_retention_hours=1).effective_retention_ms() == 3_600_000
    assert BrokerConfig(log_retention_minutes=2, log_retention_hours=1).effective_retention_ms() == 120_000
    assert BrokerConfig(log_retention_ms=7, log_retention_minutes=2).effective_retention_ms() == 7
    assert BrokerConfig(log_retention_ms=-5).effective_retention_ms() == -1


def test_topic_defaults_follow_broker_keys() -> None:
    config = BrokerConfig(log_roll_hours=2, log_roll_jitter_ms=9, log_cleanup_policy="compact", message_max_bytes=77)
    topic = config.topic_defaults()
    assert topic.segment_ms == 7_200_000
    assert topic.segment_jitter_ms == 9
    assert topic.compact and not topic.delete
    assert topic.max_message_bytes == 77
    assert BrokerConfig(log_roll_ms=5).topic_defaults().segment_ms == 5


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("no.such.key=1", "unknown broker config key 'no.such.key' in --override"),
        ("log.segment.bytes=big", "invalid value 'big' for log.segment.bytes in --override: expected an integer"),
        ("log.preallocate=yes", "invalid value 'yes' for log.preallocate in --override: expected true or false"),
        ("num.partitions=0", "invalid value '0' for num.partitions in --override: must be at least 1"),
        ("log.cleanup.policy=tidy", "expected delete, compact or both"),
        ("log.message.timestamp.type=Now", "expected one of CreateTime, LogAppendTime"),
        ("novalue", "invalid --override 'novalue': expected key=value"),
    ],
)
def test_bad_overrides_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, [override])
    assert message in str(info.value)


def test_bad_file_key_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.properties"
    path.write_text("# comment\nlog.segmnt.bytes=5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"unknown broker config key 'log.segmnt.bytes' in {path}"):
        BrokerConfig.load(path)


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.load(tmp_path / "absent.properties")


def test_properties_syntax() -> None:
    text = "! bang comment\n  a.b = 1\nc:2\nd 3\ne=multi \\\n    line\nf=\n"
    assert parse_properties(text) == {"a.b": "1", "c": "2", "d": "3", "e": "multi line", "f": ""}


def test_optional_key_may_be_empty() -> None:
    assert BrokerConfig.load(None, ["zookeeper.connect="]).zookeeper_connect is None
    assert not BrokerConfig.load(None, ["zookeeper.connect=localhost:2181/mq"]).standalone


def test_topic_overrides() -> None:
    base = TopicConfig()
    topic = base.with_overrides({"cleanup.policy": "compact,delete", "segment.bytes": "1024"})
    assert topic.compact and topic.delete and topic.segment_bytes == 1024
    assert base.segment_bytes == 1073741824
    with pytest.raises(ConfigError, match="unknown topic config key 'segment.byte' in topic config; did you mean"):
        base.with_overrides({"segment.byte": "1"})
    assert set(topic.to_properties()) == TOPIC_CONFIG_KEYS
    assert topic.to_properties()["preallocate"] == "false"


def test_topic_keys_of_later_kafka_releases_are_accepted_and_type_checked() -> None:
    kafka_only = {"compression.gzip.level": "9", "remote.storage.enable": "false", "message.format.version": "2.8"}
    assert TopicConfig().with_overrides({**kafka_only, "retention.ms": "5"}) == TopicConfig(retention_ms=5)
    with pytest.raises(ConfigError, match="invalid value 'yes' for remote.storage.enable in the request"):
        TopicConfig().with_overrides({"remote.storage.enable": "yes"}, source="the request")
    with pytest.raises(ConfigError, match="did you mean local.retention.ms"):
        TopicConfig().with_overrides({"local.retention.mss": "1"})


def test_request_memory_defaults_to_twice_the_largest_request_and_must_fit_one() -> None:
    assert BrokerConfig().request_memory_bytes == 2 * 104857600
    assert BrokerConfig.load(overrides=["socket.request.max.bytes=1000"]).request_memory_bytes == 2000
    assert BrokerConfig.load(overrides=["queued.max.request.bytes=-1"]).request_memory_bytes == -1
    with pytest.raises(ConfigError, match="queued.max.request.bytes .1000. must be -1 or at least"):
        BrokerConfig.load(overrides=["queued.max.request.bytes=1000"])


def test_per_ip_overrides_are_host_count_pairs() -> None:
    assert parse_ip_counts("127.0.0.1:5, broker-a:2,::1:7") == {"127.0.0.1": 5, "broker-a": 2, "::1": 7}
    with pytest.raises(ConfigError, match="expected host:count pairs"):
        BrokerConfig.load(overrides=["max.connections.per.ip.overrides=127.0.0.1"])


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mq.config" and r.levelno == logging.WARNING]


def test_seed_era_file_starts_with_its_keys_mapped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    config = BrokerConfig.load(SEED_ERA)
    assert config.listeners == "PLAINTEXT://127.0.0.1:9092"
    assert config.advertised_listeners == "PLAINTEXT://127.0.0.1:9092"
    assert config.offsets_retention_minutes == 1440
    assert {"listeners", "advertised.listeners", "offsets.retention.minutes"} <= config.explicit_keys
    assert not {"port", "host.name", "offsets.topic.retention.minutes"} & config.explicit_keys
    assert warnings_of(caplog) == [
        f"offsets.topic.retention.minutes in {SEED_ERA}: deprecated (a name only Kafka 0.8's documentation used); "
        "read as offsets.retention.minutes=1440",
        f"port and host.name in {SEED_ERA}: deprecated (removed in Kafka 3.0); "
        "read as listeners=PLAINTEXT://127.0.0.1:9092",
        f"advertised.port and advertised.host.name in {SEED_ERA}: deprecated (removed in Kafka 3.0); "
        "read as advertised.listeners=PLAINTEXT://127.0.0.1:9092",
        "Accepted but unused by mq: fetch.purgatory.purge.interval.requests, "
        "producer.purgatory.purge.interval.requests, replica.lag.max.messages, replica.socket.receive.buffer.bytes, "
        "replica.socket.timeout.ms, zookeeper.sync.time.ms",
    ]


@pytest.mark.parametrize(
    "item", [f"{k}={v}" for k, v in parse_properties(SEED_ERA.read_text(encoding="utf-8")).items()]
)
def test_every_seed_era_key_is_accepted_alone(item: str) -> None:
    BrokerConfig.load(overrides=[item])


@pytest.mark.parametrize(
    ("overrides", "listeners", "advertised"),
    [
        (["port=9093"], "PLAINTEXT://:9093", None),
        (["host.name=broker-a"], "PLAINTEXT://broker-a:9092", None),
        (["host.name=a", "port=1", "advertised.port=2"], "PLAINTEXT://a:1", "PLAINTEXT://a:2"),
        (["advertised.host.name=b", "port=5"], "PLAINTEXT://:5", "PLAINTEXT://b:5"),
        (["listeners=PLAINTEXT://c:7", "port=5", "advertised.port=6"], "PLAINTEXT://c:7", "PLAINTEXT://:6"),
        (["advertised.listeners=PLAINTEXT://d:8", "advertised.port=6"], "PLAINTEXT://:9092", "PLAINTEXT://d:8"),
    ],
)
def test_seed_era_listener_keys(overrides: list[str], listeners: str, advertised: str | None) -> None:
    config = BrokerConfig.load(overrides=overrides)
    assert (config.listeners, config.advertised_listeners) == (listeners, advertised)
    assert ("advertised.listeners" in config.explicit_keys) == (advertised is not None)
    set_listener = any(item.partition("=")[0] in ("listeners", "port", "host.name") for item in overrides)
    assert ("listeners" in config.explicit_keys) == set_listener


def test_a_set_successor_wins_over_its_old_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    config = BrokerConfig.load(
        overrides=[
            "listeners=PLAINTEXT://c:7",
            "port=5",
            "offsets.topic.retention.minutes=9",
            "offsets.retention.minutes=3",
        ]
    )
    assert (config.listeners, config.offsets_retention_minutes) == ("PLAINTEXT://c:7", 3)
    assert warnings_of(caplog) == [
        "offsets.topic.retention.minutes in --override: deprecated (a name only Kafka 0.8's documentation used); "
        "ignored, offsets.retention.minutes is set",
        "port in --override: deprecated (removed in Kafka 3.0); ignored, listeners is set",
    ]


def test_kraft_node_id_is_the_broker_id() -> None:
    config = BrokerConfig.load(overrides=["node.id=4", "process.roles=broker"])
    assert config.broker_id == 4 and "broker.id" in config.explicit_keys
    assert BrokerConfig.load(overrides=["node.id=4", "broker.id=4"]).broker_id == 4
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=["node.id=4", "broker.id=5"])
    assert str(info.value) == "node.id (4) in --override and broker.id (5) in --override must be equal"


def test_renamed_key_is_converted() -> None:
    assert BrokerConfig.load(overrides=["log.cleanup.interval.mins=5"]).log_retention_check_interval_ms == 300000
    with pytest.raises(ConfigError, match="invalid value 'x' for port in --override: expected an integer"):
        BrokerConfig.load(overrides=["port=x"])


def test_kafka_keys_mq_does_not_use_are_listed_in_one_line(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.WARNING)
    path = tmp_path / "server.properties"
    path.write_text("zookeeper.sync.time.ms=2000\nprocess.roles=broker\nlog.segment.bytes=2000\n", encoding="utf-8")
    overrides = ["listener.name.internal.max.connections=5", "listener.name.a.ssl.key.password=p", "sasl.jaas.config=x"]
    config = BrokerConfig.load(path, overrides)
    assert config.explicit_keys == {"log.segment.bytes", "listener.name.a.ssl.key.password"}
    assert warnings_of(caplog) == [
        "Accepted but unused by mq: listener.name.internal.max.connections, process.roles, sasl.jaas.config, "
        "zookeeper.sync.time.ms"
    ]
    caplog.clear()
    BrokerConfig.load(overrides=["log.segment.bytes=2000"])
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("zookeeper.sync.time.ms=soon", "an integer"),
        ("zookeeper.set.acl=maybe", "true or false"),
        ("sasl.kerberos.ticket.renew.window.factor=most", "a number"),
    ],
)
def test_values_of_unused_kafka_keys_are_type_checked(override: str, expected: str) -> None:
    key, _, value = override.partition("=")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=[override])
    assert str(info.value) == f"invalid value '{value}' for {key} in --override: expected {expected}"
    BrokerConfig.load(overrides=[f"{key}="])  # empty: left unset


def test_unknown_key_suggests_the_closest_known_one(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("log.retention.hour=1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(path)
    assert (
        str(info.value)
        == f"unknown broker config key 'log.retention.hour' in {path}; did you mean log.retention.hours?"
    )
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=["advertized.listeners=PLAINTEXT://a:1"])
    assert str(info.value) == (
        "unknown broker config key 'advertized.listeners' in --override; did you mean advertised.listeners?"
    )
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=["qqqq=1"])
    assert str(info.value) == "unknown broker config key 'qqqq' in --override"


def test_catalogue_facts() -> None:
    assert KAFKA_BROKER_KEYS["port"] == ("0.8.0", "3.0", "int")
    assert KAFKA_BROKER_KEYS["advertised.host.name"] == ("0.8.1", "3.0", "string")
    assert KAFKA_BROKER_KEYS["replica.lag.max.messages"] == ("0.8.0", "0.9.0", "long")
    assert KAFKA_BROKER_KEYS["offsets.retention.minutes"] == ("0.8.2", None, "int")
    assert KAFKA_BROKER_KEYS["process.roles"] == ("2.8", None, "list")
    assert KAFKA_BROKER_KEYS["transactional.id.expiration.ms"] == ("0.11.0", None, "int")
    assert KAFKA_BROKER_KEYS["zookeeper.connect"] == ("0.8.0", "4.0", "string")
    assert KAFKA_BROKER_KEYS["group.streams.session.timeout.ms"] == ("4.x", None, None)
    assert "offsets.topic.retention.minutes" not in KAFKA_BROKER_KEYS  # only ever in 0.8's documentation


@pytest.mark.parametrize(
    "override",
    [
        "remote.log.manager.follower.thread.pool.size=4",  # 4.2, KIP-1179
        "group.share.max.delivery.count.limit=12",  # 4.3, KIP-1240
        "group.consumer.assignor.offload.enable=false",  # 4.3, KIP-1263
        "transaction.two.phase.commit.enable=true",  # 4.1, KIP-939
        "sasl.oauthbearer.assertion.claim.exp.seconds=300",  # 4.1, KIP-1139
        "rlmm.config.remote.log.metadata.topic.min.isr=2",  # 4.3, KIP-1235, under the manager's prefix
    ],
)
def test_keys_of_kafka_4_1_to_4_3_are_accepted(override: str) -> None:
    BrokerConfig.load(None, [override])


def test_keys_of_kafka_4_1_to_4_3_are_checked() -> None:
    assert KAFKA_BROKER_KEYS["remote.log.manager.follower.thread.pool.size"] == ("4.2", None, "int")
    assert KAFKA_BROKER_KEYS["group.streams.assignment.interval.ms"] == ("4.3", None, "int")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, ["remote.log.manager.follower.thread.pool.sise=4"])
    assert str(info.value) == (
        "unknown broker config key 'remote.log.manager.follower.thread.pool.sise' in --override; "
        "did you mean remote.log.manager.follower.thread.pool.size?"
    )
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, ["group.share.min.delivery.count.limit=two"])
    assert str(info.value) == (
        "invalid value 'two' for group.share.min.delivery.count.limit in --override: expected an integer"
    )


def test_update_modes_follow_kafka() -> None:
    modes = {f.metadata["key"]: f.metadata["update"] for f in config_fields(BrokerConfig)}
    for key in ("log.retention.ms", "log.segment.bytes", "log.cleanup.policy", "message.max.bytes", "max.connections"):
        assert modes[key] == CLUSTER_WIDE
    for key in ("log.retention.hours", "log.roll.hours", "log.retention.check.interval.ms", "listeners", "broker.id"):
        assert modes[key] == READ_ONLY


def test_dynamic_broker_config_validation() -> None:
    DynamicBrokerConfig.validate({"log.retention.ms": "5", "leader.replication.throttled.rate": "7"}, per_broker=False)
    with pytest.raises(KafkaError) as read_only:
        DynamicBrokerConfig.validate({"log.retention.hours": "5", "log.dirs": "/x"}, per_broker=True)
    assert read_only.value.code == ErrorCode.INVALID_REQUEST
    assert str(read_only.value) == "Cannot update these configs dynamically: Set(log.retention.hours, log.dirs)"
    with pytest.raises(ConfigError, match="invalid value 'soon' for log.retention.ms"):
        DynamicBrokerConfig.validate({"log.retention.ms": "soon"}, per_broker=True)
    with pytest.raises(ConfigError, match="unknown dynamic broker config key 'no.such.key'"):
        DynamicBrokerConfig.validate({"no.such.key": "1"}, per_broker=True)


def test_dynamic_broker_config_overlays_the_static_one() -> None:
    static = BrokerConfig(log_retention_hours=5, explicit_keys=frozenset({"log.retention.hours"}))
    effective = DynamicBrokerConfig.apply(
        static,
        {"log.retention.ms": "1000", "log.segment.bytes": "2048", "leader.replication.throttled.rate": "9"},
        {"log.retention.ms": "3000"},
    )
    assert effective.topic_defaults().retention_ms == 3000
    assert effective.topic_defaults().segment_bytes == 2048
    assert effective.explicit_keys == static.explicit_keys
    assert DynamicBrokerConfig.apply(static, {}, {}).topic_defaults().retention_ms == 5 * 3_600_000


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts() -> None:
    topic = TopicConfig().with_overrides({"cleanup.policy": ""})
    assert topic.cleanup_policy == ""
    assert not topic.delete and not topic.compact
    with pytest.raises(ConfigError, match="expected delete, compact or both"):
        TopicConfig().with_overrides({"cleanup.policy": "delete,"})


def test_a_per_broker_key_needs_a_broker_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key mq applies live is per-broker in Kafka (those are listener and SSL keys): one is made so here."""
    listeners = next(f for f in config_fields(BrokerConfig) if f.metadata["key"] == "listeners")
    per_broker = copy.copy(listeners)
    per_broker.metadata = MappingProxyType({**listeners.metadata, "update": PER_BROKER})
    monkeypatch.setitem(mq.config._UPDATABLE_BROKER_FIELDS, "listeners", per_broker)
    DynamicBrokerConfig.validate({"listeners": "PLAINTEXT://:9093"}, per_broker=True)
    with pytest.raises(KafkaError) as default:
        DynamicBrokerConfig.validate({"listeners": "PLAINTEXT://:9093"}, per_broker=False)
    assert default.value.code == ErrorCode.INVALID_REQUEST
    assert str(default.value) == (
        "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["listeners=INTERNAL://:9092"], "no security protocol for INTERNAL in listener.security.protocol.map"),
        (["listeners=PLAINTEXT://:1,PLAINTEXT://:2"], "listeners names a listener twice"),
        (["listeners=PLAINTEXT://:1,SSL://:1"], "listeners binds a port twice"),
        (["listeners=A://:1", "listener.security.protocol.map=A"], "invalid listener.security.protocol.map entry 'A'"),
        (["listeners=A://:1", "listener.security.protocol.map=A:TLS"], "unknown security protocol TLS"),
        (["advertised.listeners=SSL://h:1"], "advertised.listeners names SSL, which is not in listeners"),
        (["listeners=SASL_SSL://:1"], "sasl.enabled.mechanisms=GSSAPI: mq serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        (["listeners=SASL_SSL://:1", "sasl.enabled.mechanisms=PLAIN,OAUTHBEARER"], r"\(not OAUTHBEARER\)"),
        (["listeners=SSL://:1", "zookeeper.connect=z:2181"], "no listener of security.inter.broker.protocol=PLAINTEXT"),
        (["inter.broker.listener.name=OTHER"], "inter.broker.listener.name=OTHER is not one of the"),
    ],
)
def test_listeners_mq_cannot_serve_as_configured_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, overrides)


def test_several_listeners_with_their_protocols_and_own_keys() -> None:
    config = BrokerConfig.load(
        None,
        [
            "listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093,CLIENTS://h:9094",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CLIENTS:SSL",
            "advertised.listeners=PLAINTEXT://a:9092,SASL_SSL://b:9093,CLIENTS://c:9094",
            "inter.broker.listener.name=sasl_ssl",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "ssl.keystore.type=PEM",
            "listener.name.clients.ssl.keystore.type=PKCS12",
            "listener.name.sasl_ssl.plain.sasl.jaas.config=x required;",
        ],
    )
    assert [(b.name, b.host, b.port, b.protocol) for b in config.bound_listeners()] == [
        ("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        ("SASL_SSL", "", 9093, "SASL_SSL"),
        ("CLIENTS", "h", 9094, "SSL"),
    ]
    assert [str(a) for a in config.advertised()] == ["PLAINTEXT://a:9092", "SASL_SSL://b:9093", "CLIENTS://c:9094"]
    assert config.inter_broker_listener().name == "SASL_SSL"
    assert config.listener_value("CLIENTS", "ssl.keystore.type") == "PKCS12"
    assert config.listener_value("SASL_SSL", "ssl.keystore.type") == "PEM"
    assert config.listener_value("SASL_SSL", "ssl.truststore.location") is None
    assert config.listener_keys["listener.name.sasl_ssl.plain.sasl.jaas.config"] == "x required;"


def test_a_named_listener_mapped_to_plaintext_is_served() -> None:
    config = BrokerConfig.load(
        None, ["listeners=INTERNAL://:9092", "listener.security.protocol.map=INTERNAL:PLAINTEXT"]
    )
    assert config.listeners == "INTERNAL://:9092"
