"""Users' SCRAM credentials on broker processes: set, described and deleted with ``mq configs`` (Kafka's
kafka-configs) and with confluent-kafka's AdminClient, through the admin APIs of a standalone broker and through
ZooKeeper beside a cluster-mode broker."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from conftest import BrokerProcess, ZooKeeperProcess

from mq.server.broker import METADATA_FILE
from mq.tools.configs import ZOOKEEPER_WARNING
from mq.zk.codecs import decode_config_change
from mq.zk.kafka_zk_client import KafkaZkClient
from mq.zk.zk_store import ZooKeeperStore

pytestmark = pytest.mark.slow

SECRET = "alice-secret"
ALICE = ["--entity-type", "users", "--entity-name", "alice"]
BAD_INPUT = [
    ("SCRAM-SHA-1=[password=alice-secret]", "Unexpected config names: SCRAM-SHA-1"),
    ("SCRAM-SHA-512=[iterations=20000,password=alice-secret]", "Iterations 20000 is more than the maximum 16384"),
    ("SCRAM-SHA-256=[iterations=8192]", "Invalid credential property SCRAM-SHA-256"),
]
"""--add-config values mq configs refuses in one line: an unknown mechanism, iterations out of bounds, no password."""


def mq_configs(mq_command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mq_command, "configs", *args], capture_output=True, text=True, timeout=60)


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def credentials_seen_by_confluent_kafka(admin: AdminClient) -> dict[str, list[tuple[str, int]]]:
    described = admin.describe_user_scram_credentials().result(15)
    return {
        user: [(info.mechanism.name, info.iterations) for info in description.scram_credential_infos]
        for user, description in described.items()
    }


def stored_user_configs(broker: BrokerProcess) -> dict[str, dict[str, str]]:
    """The ``/config/users`` nodes of a standalone broker's metadata tree file."""
    tree = json.loads((broker.log_dir / METADATA_FILE).read_text())
    nodes = tree.get("nodes", tree)
    return {
        path.rsplit("/", 1)[1]: json.loads(base64.b64decode(node["data"]))["config"]
        for path, node in nodes.items()
        if path.startswith("/config/users/") and node["data"]
    }


def test_credentials_through_the_admin_apis(mq_command: list[str], broker: BrokerProcess) -> None:
    bootstrap = ["--bootstrap-server", broker.bootstrap]
    for bad, message in BAD_INPUT:
        refused = mq_configs(mq_command, *bootstrap, "--alter", *ALICE, "--add-config", bad)
        assert refused.returncode == 1 and refused.stdout == "", bad
        assert len(refused.stderr.splitlines()) == 1 and message in refused.stderr, refused.stderr
        assert SECRET not in refused.stderr
    assert ok(mq_configs(mq_command, *bootstrap, "--describe", *ALICE)) == []

    add = f"SCRAM-SHA-256=[iterations=8192,password={SECRET}],SCRAM-SHA-512=[password={SECRET}]"
    assert ok(mq_configs(mq_command, *bootstrap, "--alter", *ALICE, "--add-config", add)) == [
        "Completed updating config for user alice."
    ]
    assert ok(mq_configs(mq_command, *bootstrap, "--describe", *ALICE)) == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"
    ]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert credentials_seen_by_confluent_kafka(admin) == {"alice": [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]}
    stored = stored_user_configs(broker)["alice"]
    assert set(stored) == {"SCRAM-SHA-256", "SCRAM-SHA-512"} and SECRET not in json.dumps(stored)
    assert stored["SCRAM-SHA-256"].startswith("salt=") and stored["SCRAM-SHA-256"].endswith(",iterations=8192")

    bob = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000), b"bob-pw")
    for future in admin.alter_user_scram_credentials([bob]).values():
        future.result(15)
    ok(mq_configs(mq_command, *bootstrap, "--alter", *ALICE, "--add-config", "producer_byte_rate=1048576"))
    assert ok(mq_configs(mq_command, *bootstrap, "--describe", "--entity-type", "users")) == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=10000",
    ]

    assert ok(mq_configs(mq_command, *bootstrap, "--alter", *ALICE, "--delete-config", "SCRAM-SHA-512")) == [
        "Completed updating config for user alice."
    ]
    assert credentials_seen_by_confluent_kafka(admin) == {
        "alice": [("SCRAM_SHA_256", 8192)],
        "bob": [("SCRAM_SHA_512", 10000)],
    }
    assert set(stored_user_configs(broker)["alice"]) == {"SCRAM-SHA-256", "producer_byte_rate"}
    gone = admin.alter_user_scram_credentials([UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND"):
        gone["alice"].result(15)


def test_credentials_through_zookeeper_reach_a_cluster_broker(
    mq_command: list[str], zookeeper: ZooKeeperProcess, broker_factory: Callable[..., BrokerProcess]
) -> None:
    connect = f"{zookeeper.connect}/mq-{uuid.uuid4().hex[:8]}"
    broker = broker_factory("zk-broker", [f"zookeeper.connect={connect}", "broker.id=0"]).start()
    zookeeper_args = ["--zookeeper", connect]
    add = f"SCRAM-SHA-512=[iterations=8192,password={SECRET}]"
    assert ok(mq_configs(mq_command, *zookeeper_args, "--alter", *ALICE, "--add-config", add)) == [
        *ZOOKEEPER_WARNING,
        "Completed updating config for entity: user-principal 'alice'.",
    ]
    described = ok(mq_configs(mq_command, *zookeeper_args, "--describe", *ALICE))[len(ZOOKEEPER_WARNING) :]
    assert len(described) == 1 and described[0].startswith("Configs for user-principal 'alice' are SCRAM-SHA-512=salt=")
    assert described[0].endswith(",iterations=8192") and SECRET not in described[0]
    assert ok(mq_configs(mq_command, "--bootstrap-server", broker.bootstrap, "--describe", *ALICE)) == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192"
    ]
    store = ZooKeeperStore(connect)
    try:
        zk = KafkaZkClient(store)
        changes = sorted(store.get_children("/config/changes"))
        assert [decode_config_change(store.get(f"/config/changes/{c}")[0]) for c in changes] == ["users/alice"]
        ok(mq_configs(mq_command, *zookeeper_args, "--alter", *ALICE, "--delete-config", "SCRAM-SHA-512"))
        assert zk.get_entity_config("users", "alice") == {}
    finally:
        store.close()
