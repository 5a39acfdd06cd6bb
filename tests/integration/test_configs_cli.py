"""``mq configs`` (Kafka's kafka-configs) run as a process against a standalone broker process, with confluent-kafka's
AdminClient watching the config sources, and dynamic configs taking effect on the running broker."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from confluent_kafka.admin import ResourceType as AdminResourceType
from conftest import BrokerProcess
from kafka import KafkaProducer
from kafka.errors import MessageSizeTooLargeError
from test_connection_limits import closed_by_broker, open_many
from waiting import wait_for

from mq.tools.configs import ZOOKEEPER_WARNING
from mq.zk.admin_zk_client import AdminZkClient
from mq.zk.codecs import BrokerRegistration
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

BROKER = "0"
FAST = ["broker.id=0", "log.retention.check.interval.ms=200", "log.segment.delete.delay.ms=0"]
"""Broker 0 checking retention five times a second; deleted segments go at once."""


def configs(mq_command: list[str], broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mq_command, "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def create_topic(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(name, 1, 1, config=config or {})], operation_timeout=10)
    futures[name].result(15)


def described(admin: AdminClient, kind: AdminResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(15)
    return entries


def sources(admin: AdminClient, topic: str, *keys: str) -> dict[str, tuple[str | None, ConfigSource]]:
    entries = described(admin, AdminResourceType.TOPIC, topic)
    return {key: (entries[key].value, ConfigSource(entries[key].source)) for key in keys}


def fill_segments(broker: BrokerProcess, topic: str, count: int = 40) -> None:
    """``count`` records, each in its own batch, so a small segment.bytes rolls many segments."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"record-{i}-".encode() * 8)
        producer.flush(10)


def log_start_offset(broker: BrokerProcess, topic: str) -> int:
    """The base offset of the oldest segment file left in the partition's directory."""
    files = sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
    return int(files[0].name.split(".")[0])


@pytest.fixture
def fast_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(overrides=[*FAST, "log.retention.bytes=1000000000"]).start()


@pytest.fixture
def admin(fast_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": fast_broker.bootstrap})


def test_sources_seen_by_confluent_kafka_follow_mq_configs(mq_command, fast_broker, admin) -> None:
    create_topic(admin, "sources")
    keys = ("retention.ms", "retention.bytes", "segment.bytes")
    assert sources(admin, "sources", *keys) == {
        "retention.ms": ("604800000", ConfigSource.DEFAULT_CONFIG),
        "retention.bytes": ("1000000000", ConfigSource.STATIC_BROKER_CONFIG),
        "segment.bytes": ("1073741824", ConfigSource.DEFAULT_CONFIG),
    }
    ok(configs(mq_command, fast_broker, "--alter", "--topic", "sources", "--add-config", "retention.ms=60000"))
    ok(configs(mq_command, fast_broker, "--alter", "--broker-defaults", "--add-config", "log.segment.bytes=2000000"))
    ok(configs(mq_command, fast_broker, "--alter", "--broker", BROKER, "--add-config", "log.retention.bytes=5000000"))
    assert sources(admin, "sources", *keys) == {
        "retention.ms": ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "retention.bytes": ("5000000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        "segment.bytes": ("2000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    }
    broker_entries = described(admin, AdminResourceType.BROKER, BROKER)
    assert ConfigSource(broker_entries["log.retention.bytes"].source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert ConfigSource(broker_entries["log.segment.bytes"].source) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert ConfigSource(broker_entries["listeners"].source) == ConfigSource.STATIC_BROKER_CONFIG
    assert not broker_entries["log.segment.bytes"].is_read_only
    assert broker_entries["log.retention.hours"].is_read_only

    ok(configs(mq_command, fast_broker, "--alter", "--topic", "sources", "--delete-config", "retention.ms"))
    ok(configs(mq_command, fast_broker, "--alter", "--broker", BROKER, "--delete-config", "log.retention.bytes"))
    assert sources(admin, "sources", "retention.ms", "retention.bytes") == {
        "retention.ms": ("604800000", ConfigSource.DEFAULT_CONFIG),
        "retention.bytes": ("1000000000", ConfigSource.STATIC_BROKER_CONFIG),
    }


def test_describe_prints_kafkas_lines_and_json(mq_command, fast_broker, admin, tmp_path) -> None:
    create_topic(admin, "lines", {"cleanup.policy": "compact,delete"})
    ok(configs(mq_command, fast_broker, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
               "log.retention.ms=86400000"))  # fmt: skip
    assert ok(configs(mq_command, fast_broker, "--describe", "--entity-type", "topics", "--entity-name", "lines")) == [
        "Dynamic configs for topic lines are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete,"
        " DEFAULT_CONFIG:log.cleanup.policy=delete}",
    ]
    assert ok(configs(mq_command, fast_broker, "--describe", "--broker-defaults")) == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=86400000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400000}",
    ]
    properties = tmp_path / "admin.properties"
    properties.write_text("client.id=configs-test\nrequest.timeout.ms=20000\n", encoding="utf-8")
    every_topic = ok(
        configs(mq_command, fast_broker, "--describe", "--entity-type", "topics", "--command-config", str(properties),
                "--timeout", "5")
    )  # fmt: skip
    assert every_topic[every_topic.index("Dynamic configs for topic lines are:") + 1].startswith("  cleanup.policy=")
    every_broker = ok(configs(mq_command, fast_broker, "--describe", "--entity-type", "brokers"))
    assert every_broker[0] == "Dynamic configs for broker 0 are:"
    assert every_broker[1] == "Default configs for brokers in the cluster are:"
    everything = ok(configs(mq_command, fast_broker, "--describe", "--all", "--topic", "lines"))
    assert everything[0] == "All configs for topic lines are:"
    assert (
        "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=86400000,"
        " DEFAULT_CONFIG:log.retention.hours=168}" in everything
    )
    document = json.loads(ok(configs(mq_command, fast_broker, "--describe", "--topic", "lines", "--format", "json"))[0])
    assert document == [
        {
            "entity_type": "topics",
            "entity_name": "lines",
            "default": False,
            "configs": [
                {
                    "name": "cleanup.policy",
                    "value": "compact,delete",
                    "source": "DYNAMIC_TOPIC_CONFIG",
                    "read_only": False,
                    "sensitive": False,
                    "synonyms": [
                        {"name": "cleanup.policy", "value": "compact,delete", "source": "DYNAMIC_TOPIC_CONFIG"},
                        {"name": "log.cleanup.policy", "value": "delete", "source": "DEFAULT_CONFIG"},
                    ],
                }
            ],
        }
    ]


REFUSALS = [
    (["--alter", "--broker", BROKER, "--add-config", "log.retention.hours=1"], 1,
     "Cannot update these configs dynamically: Set(log.retention.hours)"),
    (["--alter", "--broker-defaults", "--add-config", "log.dirs=/elsewhere,listeners=PLAINTEXT://:1"], 1,
     "Cannot update these configs dynamically: Set(log.dirs, listeners)"),
    (["--alter", "--broker", BROKER, "--add-config", "log.retention.ms=soon"], 1,
     "invalid value 'soon' for log.retention.ms"),
    (["--alter", "--topic", "absent", "--add-config", "retention.ms=1"], 1, "Topic 'absent' does not exist."),
    (["--alter", "--broker", BROKER, "--delete-config", "log.retention.ms"], 1, "Invalid config(s): log.retention.ms"),
    (["--alter", "--topic", "t"], 2, "At least one of --add-config, --add-config-file, or --delete-config"),
    (["--describe", "--broker", "first"], 2, "must be a valid integer broker id, but it is: first"),
    (["--alter", "--broker-logger", BROKER, "--add-config", "no.such.logger=DEBUG"], 1,
     "Invalid broker logger(s): no.such.logger"),
    (["--alter", "--broker-logger", BROKER, "--add-config", "kafka.controller=LOUD"], 1,
     "Cannot set the log level of kafka.controller to LOUD as it is not a supported log level"),
    (["--alter", "--broker-logger", BROKER, "--delete-config", "root"], 1,
     "Removing the log level of the root logger is not allowed"),
    (["--describe", "--alter", "--topic", "t"], 2, "exactly one action"),
    (["--describe", "--topic", "t", "--delete-config", "a"], 2,
     'Option "[describe]" can\'t be used with option "[delete-config]"'),
    (["--describe", "--topic", "t", "--zookeeper", "127.0.0.1:1"], 2,
     "Only one of --bootstrap-server or --zookeeper must be specified"),
]  # fmt: skip
"""Command lines mq configs refuses: arguments, exit code, what the one line on stderr says."""


def test_refusals_are_one_line_and_change_nothing(mq_command, fast_broker) -> None:
    for args, code, message in REFUSALS:
        result = configs(mq_command, fast_broker, *args)
        assert result.returncode == code, args
        assert message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert ok(configs(mq_command, fast_broker, "--describe", "--broker-defaults")) == [
        "Default configs for brokers in the cluster are:"
    ]
    assert ok(configs(mq_command, fast_broker, "--describe", "--broker", BROKER)) == [
        "Dynamic configs for broker 0 are:"
    ]
    topics = [*mq_command, "topics", "--bootstrap-server", fast_broker.bootstrap, "--alter", "--topic", "t"]
    result = subprocess.run([*topics, "--config", "retention.ms=1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        'Error: Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]" (the '
        "kafka-configs CLI supports altering topic configs with a --bootstrap-server option)"
    )


def test_a_dynamic_message_max_bytes_refuses_larger_batches_at_once(mq_command, fast_broker, admin) -> None:
    create_topic(admin, "limited")
    producer = KafkaProducer(bootstrap_servers=fast_broker.bootstrap, linger_ms=0)
    producer.send("limited", b"x" * 2000).get(10)
    ok(configs(mq_command, fast_broker, "--alter", "--broker-defaults", "--add-config", "message.max.bytes=1000"))

    def refused() -> bool:
        try:
            producer.send("limited", b"x" * 2000).get(10)
        except MessageSizeTooLargeError:
            return True
        return False

    assert wait_for(refused)
    producer.close()
    small = KafkaProducer(bootstrap_servers=fast_broker.bootstrap, linger_ms=0)
    small.send("limited", b"x" * 500).get(10)
    small.close()
    assert sources(admin, "limited", "max.message.bytes") == {
        "max.message.bytes": ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    }


def test_a_lowered_topic_retention_deletes_segments_at_once(mq_command, fast_broker, admin) -> None:
    create_topic(admin, "shrinking", {"segment.bytes": "1024"})
    fill_segments(fast_broker, "shrinking")
    assert log_start_offset(fast_broker, "shrinking") == 0
    ok(configs(mq_command, fast_broker, "--alter", "--topic", "shrinking", "--add-config", "retention.ms=1"))
    assert wait_for(lambda: log_start_offset(fast_broker, "shrinking") > 0)


def test_a_dynamic_broker_retention_applies_live_and_after_a_restart(mq_command, broker_factory) -> None:
    broker = broker_factory(overrides=FAST).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, "kept", {"segment.bytes": "1024"})
    create_topic(admin, "pinned", {"segment.bytes": "1024", "retention.ms": "-1"})
    fill_segments(broker, "kept")
    fill_segments(broker, "pinned")
    ok(configs(mq_command, broker, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
               "log.retention.ms=1"))  # fmt: skip
    assert wait_for(lambda: log_start_offset(broker, "kept") > 0)
    assert log_start_offset(broker, "pinned") == 0  # its own retention.ms wins over the broker's
    assert sources(admin, "kept", "retention.ms") == {"retention.ms": ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)}

    broker.stop()
    broker.start()
    first_after_restart = log_start_offset(broker, "kept")
    assert ok(configs(mq_command, broker, "--describe", "--entity-type", "brokers", "--entity-default")) == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1}",
    ]
    fill_segments(broker, "kept")
    assert wait_for(lambda: log_start_offset(broker, "kept") > first_after_restart)


def test_incremental_subtract_of_the_last_cleanup_policy_leaves_it_empty(fast_broker, admin) -> None:
    create_topic(admin, "policies")

    def alter(*entries: ConfigEntry) -> None:
        resource = ConfigResource(AdminResourceType.TOPIC, "policies", incremental_configs=list(entries))
        admin.incremental_alter_configs([resource])[resource].result(15)

    policy = "cleanup.policy"
    alter(ConfigEntry(policy, "compact", incremental_operation=AlterConfigOpType.APPEND))
    assert sources(admin, "policies", policy) == {policy: ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)}
    alter(ConfigEntry(policy, "delete,compact", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert sources(admin, "policies", policy) == {policy: ("", ConfigSource.DYNAMIC_TOPIC_CONFIG)}

    # One ill-typed key refuses the whole request: retention.ms stays as it was.
    with pytest.raises(KafkaException) as refused:
        alter(
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", "big", incremental_operation=AlterConfigOpType.SET),
        )
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    assert "invalid value 'big' for segment.bytes" in refused.value.args[0].str()
    assert sources(admin, "policies", "retention.ms")["retention.ms"][1] == ConfigSource.DEFAULT_CONFIG


def test_zookeeper_mode_reads_and_writes_the_tree(mq_command, zookeeper) -> None:
    connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
    store = ZooKeeperStore(connect)
    try:
        zk = KafkaZkClient(store)
        zk.create_top_level_paths()
        AdminZkClient(zk).create_topic("orders", 1, 1, replica_assignment={0: [1]})

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            command = [*mq_command, "configs", "--zookeeper", connect, *args]
            return subprocess.run(command, capture_output=True, text=True, timeout=60)

        warning = ZOOKEEPER_WARNING
        altered = ok(
            run("--alter", "--topic", "orders", "--add-config", "retention.ms=1000,cleanup.policy=[delete,compact]")
        )
        assert altered == [*warning, "Completed updating config for entity: topic 'orders'."]
        assert zk.get_entity_config("topics", "orders") == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
        described = ok(run("--describe", "--entity-type", "topics", "--entity-name", "orders"))
        assert described == [*warning, "Configs for topic 'orders' are retention.ms=1000,cleanup.policy=delete,compact"]

        zk.register_broker(BrokerRegistration(1, ["PLAINTEXT://127.0.0.1:9092"]))
        rate = "leader.replication.throttled.rate=1000"
        assert ok(run("--alter", "--broker", "1", "--add-config", rate))[-1] == (
            "Completed updating config for entity: brokers '1'."
        )
        running = run("--alter", "--broker", "1", "--add-config", "log.retention.ms=5")
        assert running.returncode == 1
        assert (
            "--bootstrap-server option must be specified to update broker configs Set(log.retention.ms) when broker 1"
            " is running." in running.stderr
        )
        assert ok(run("--alter", "--broker", "2", "--add-config", "log.retention.ms=5"))[-1] == (
            "Completed updating config for entity: brokers '2'."
        )
        read_only = run("--alter", "--broker", "2", "--add-config", "log.retention.hours=5")
        assert read_only.returncode == 1 and "Cannot update these configs dynamically: Set(log.retention.hours)" in (
            read_only.stderr
        )
        assert ok(run("--describe", "--entity-type", "brokers"))[len(warning) :] == [
            "Configs for brokers '1' are leader.replication.throttled.rate=1000",
            "Configs for brokers '2' are log.retention.ms=5",
        ]
        assert run("--describe", "--all", "--topic", "orders").returncode == 2
    finally:
        store.close()


def test_connection_limits_change_without_a_restart(mq_command, fast_broker) -> None:
    ok(configs(mq_command, fast_broker, "--alter", "--broker-defaults", "--add-config", "max.connections.per.ip=2"))

    def two_of_four_refused() -> bool:
        socks = open_many(fast_broker, 4, source="127.0.0.3")
        try:
            return wait_for(lambda: len(closed_by_broker(socks)) == 2, timeout=2)
        finally:
            for sock in socks:
                sock.close()

    assert wait_for(two_of_four_refused)


def test_cluster_broker_applies_its_own_and_the_default_entry(mq_command, zookeeper, broker_factory) -> None:
    connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
    broker = broker_factory("zk-broker", [f"zookeeper.connect={connect}", *FAST]).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert wait_for(lambda: admin.list_topics(timeout=5).controller_id == 0)  # elected and known to the broker
    create_topic(admin, "clustered", {"segment.bytes": "1024"})
    fill_segments(broker, "clustered")
    ok(configs(mq_command, broker, "--alter", "--broker-defaults", "--add-config", "log.retention.ms=604800000"))
    ok(configs(mq_command, broker, "--alter", "--broker", BROKER, "--add-config", "log.retention.ms=1"))
    assert wait_for(lambda: log_start_offset(broker, "clustered") > 0)
    assert sources(admin, "clustered", "retention.ms") == {"retention.ms": ("1", ConfigSource.DYNAMIC_BROKER_CONFIG)}
    everything = ok(configs(mq_command, broker, "--describe", "--all", "--topic", "clustered"))
    assert (
        "  retention.ms=1 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=1,"
        " DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=604800000, DEFAULT_CONFIG:log.retention.hours=168}"
    ) in everything


def test_client_and_user_quotas_through_mq_configs(mq_command, fast_broker) -> None:
    add = ["--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"]
    assert ok(configs(mq_command, fast_broker, *add, "--entity-type", "clients", "--entity-name", "c1")) == [
        "Completed updating config for client c1."
    ]
    default_user = ["--entity-type", "users", "--entity-default"]
    assert ok(configs(mq_command, fast_broker, "--alter", "--add-config", "request_percentage=50", *default_user)) == [
        "Completed updating default config for users in the cluster."
    ]
    assert ok(configs(mq_command, fast_broker, "--describe", "--entity-type", "clients", "--entity-name", "c1")) == [
        "Quota configs for client-id 'c1' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0"
    ]
    assert ok(configs(mq_command, fast_broker, "--describe", *default_user)) == [
        "Quota configs for the default user-principal are request_percentage=50.0"
    ]
    delete = ["--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "clients", "--entity-name", "c1"]
    ok(configs(mq_command, fast_broker, *delete))
    assert ok(configs(mq_command, fast_broker, "--describe", "--entity-type", "clients")) == [
        "Quota configs for client-id 'c1' are producer_byte_rate=1048576.0"
    ]
    refused = configs(mq_command, fast_broker, "--alter", "--add-config", "producer_byte_rate=0", "--client", "c2")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert ok(configs(mq_command, fast_broker, "--describe", "--client", "c2")) == []


def test_topic_keys_of_later_kafka_releases_are_stored_and_described(mq_command, fast_broker, admin) -> None:
    create_topic(admin, "later", {"message.timestamp.before.max.ms": "3600000"})
    entries = described(admin, AdminResourceType.TOPIC, "later")
    assert entries["message.timestamp.before.max.ms"].value == "3600000"
    assert ConfigSource(entries["message.timestamp.before.max.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert "remote.storage.enable" not in entries  # described only when set
    ok(configs(mq_command, fast_broker, "--alter", "--topic", "later", "--add-config", "compression.zstd.level=9"))
    assert described(admin, AdminResourceType.TOPIC, "later")["compression.zstd.level"].value == "9"
    refused = configs(mq_command, fast_broker, "--alter", "--topic", "later", "--add-config", "local.retention.ms=x")
    assert refused.returncode == 1 and "local.retention.ms" in refused.stderr, refused.stderr
