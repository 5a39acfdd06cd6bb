"""ACLs on broker processes: ``mq acls`` against a standalone broker with Kafka's AclAuthorizer, checked with
confluent-kafka's and kafka-python's admin clients (and changes those make, checked with ``mq acls``); the
``--authorizer-properties zookeeper.connect=`` path reaching a running ZooKeeper-mode broker through the change
notifications; Kafka's answers to bad bindings and to a broker without an authorizer.

Connections to the PLAINTEXT listener are User:ANONYMOUS, made a super user here so it may manage ACLs (requests
checked against the ACLs: test_authorization)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient
from confluent_kafka.admin import ResourcePatternType as CkPatternType
from confluent_kafka.admin import ResourceType as CkResourceType
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType
from kafka.admin import ResourcePattern as KpResourcePattern
from kafka.admin import ResourcePatternFilter as KpResourcePatternFilter
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import SecurityDisabledError
from waiting import wait_for

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.errors import ErrorCode, KafkaError
from mq.protocol.api_keys import ApiKey
from mq.security import acl

pytestmark = pytest.mark.slow

AUTHORIZER = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=User:ANONYMOUS"]
ALL_BINDINGS = AclBindingFilter(
    CkResourceType.ANY, None, CkPatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def mq_acls(mq_command: list[str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mq_command, "acls", *args, "--format", "text"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )


def described(admin: AdminClient) -> set[tuple[str, str, str, str, str, str, str]]:
    """Every ACL the broker describes, as (type, name, pattern type, principal, host, operation, permission)."""
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
         b.permission_type.name)
        for b in admin.describe_acls(ALL_BINDINGS).result(30)
    }  # fmt: skip


@pytest.fixture
def acl_broker(broker_factory: Callable[..., Any]) -> Any:
    return broker_factory("broker", AUTHORIZER).start()


def test_mq_acls_and_the_admin_clients_agree(acl_broker: Any, mq_command: list[str]) -> None:
    bootstrap = ["--bootstrap-server", acl_broker.bootstrap]
    added = mq_acls(
        mq_command, *bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "read",
        "--operation", "Write", "--topic", "orders",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n"
    )
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" in (
        added.stdout
    )
    confluent = AdminClient({"bootstrap.servers": acl_broker.bootstrap})
    assert described(confluent) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
    }

    deny = AclBinding(CkResourceType.GROUP, "app-", CkPatternType.PREFIXED, "User:bob", "10.0.0.1",
                      AclOperation.READ, AclPermissionType.DENY)  # fmt: skip
    for future in confluent.create_acls([deny]).values():
        assert future.result(30) is None
    listed = mq_acls(mq_command, *bootstrap, "--list", "--group", "app-1", "--resource-pattern-type", "match")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)`: \n"
        " \t(principal=User:bob, host=10.0.0.1, operation=READ, permissionType=DENY) \n\n"
    )

    kafka_admin = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap)
    try:
        every = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          KpResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))  # fmt: skip
        found, error = kafka_admin.describe_acls(every)
        assert {(a.resource_pattern.resource_name, a.principal, a.operation.name) for a in found} == {
            ("orders", "User:alice", "READ"),
            ("orders", "User:alice", "WRITE"),
            ("app-", "User:bob", "READ"),
        }
        transactional = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                            KpResourcePattern(KpResourceType.TRANSACTIONAL_ID, "tx-1"))  # fmt: skip
        result = kafka_admin.create_acls([transactional])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        alice_writes = ACLFilter("User:alice", None, ACLOperation.WRITE, ACLPermissionType.ANY,
                                 KpResourcePatternFilter(KpResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL))  # fmt: skip
        ((_, deleted, error),) = kafka_admin.delete_acls([alice_writes])
        assert error.errno == 0
        assert [(a.resource_pattern.resource_name, a.operation.name) for a in deleted] == [("orders", "WRITE")]
    finally:
        kafka_admin.close()
    assert described(confluent) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("GROUP", "app-", "PREFIXED", "User:bob", "10.0.0.1", "READ", "DENY"),
        ("TRANSACTIONAL_ID", "tx-1", "LITERAL", "User:carol", "*", "WRITE", "ALLOW"),
    }

    declined = mq_acls(mq_command, *bootstrap, "--remove", "--topic", "orders", stdin="n\n")
    assert "Are you sure you want to delete all ACLs for resource filter `ResourcePattern(resourceType=TOPIC, " in (
        declined.stdout
    )
    assert ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW") in described(confluent)
    removed = mq_acls(mq_command, *bootstrap, "--remove", "--force", "--topic", "orders")
    assert removed.returncode == 0, removed.stderr
    removed = mq_acls(mq_command, *bootstrap, "--remove", "--transactional-id", "tx-1", stdin="y\n")
    assert removed.returncode == 0, removed.stderr
    deleted_all = confluent.delete_acls([ALL_BINDINGS])
    assert [len(f.result(30)) for f in deleted_all.values()] == [1]
    assert described(confluent) == set()


def test_kafkas_answers_to_bad_requests(acl_broker: Any, mq_command: list[str]) -> None:
    topic = acl.ResourcePattern(acl.ResourceType.TOPIC, "t", acl.PatternType.LITERAL)
    entry = acl.AccessControlEntry("User:a", "*", acl.AclOperation.READ, acl.AclPermissionType.ALLOW)
    with SyncAdmin(acl_broker.bootstrap, api_timeout_ms=30_000) as admin:
        for bad in (
            acl.AclBinding(acl.ResourcePattern(acl.ResourceType.ANY, "t", acl.PatternType.LITERAL), entry),
            acl.AclBinding(acl.ResourcePattern(acl.ResourceType.TOPIC, "t", acl.PatternType.MATCH), entry),
            acl.AclBinding(topic, acl.AccessControlEntry("User:a", "*", acl.AclOperation.ANY, acl.AclPermissionType.ALLOW)),
            acl.AclBinding(topic, acl.AccessControlEntry("User:a", "*", acl.AclOperation.of(77), acl.AclPermissionType.ALLOW)),
            acl.AclBinding(acl.ResourcePattern(acl.ResourceType.CLUSTER, "c", acl.PatternType.LITERAL), entry),
        ):  # fmt: skip
            with pytest.raises(KafkaError) as refused:
                admin.call(AsyncAdmin.create_acls, [bad])
            assert refused.value.code == ErrorCode.INVALID_REQUEST
        unknown = acl.AclBindingFilter(
            acl.ResourcePatternFilter(acl.ResourceType.TOPIC, None, acl.PatternType.UNKNOWN), acl.ANY_ENTRY
        )
        with pytest.raises(KafkaError) as refused:
            admin.call(AsyncAdmin.describe_acls, unknown)
        assert refused.value.code == ErrorCode.INVALID_REQUEST
        admin.call(AsyncAdmin.create_acls, [acl.AclBinding(topic, entry)])
        v0 = {"resource_type_filter": 2, "resource_name_filter": "t", "principal_filter": None, "host_filter": None,
              "operation": 1, "permission_type": 1}  # fmt: skip
        response = admin.call(lambda a: a.cluster.send(None, ApiKey.DESCRIBE_ACLS, v0, version=0))
        assert response.error_code == ErrorCode.NONE
        assert [(r.resource_name, [a.principal for a in r.acls]) for r in response.resources] == [("t", ["User:a"])]


def test_no_authorizer_answers_security_disabled(broker: Any, mq_command: list[str]) -> None:
    kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        every = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          KpResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY))  # fmt: skip
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
            kafka_admin.describe_acls(every)
    finally:
        kafka_admin.close()
    listed = mq_acls(mq_command, "--bootstrap-server", broker.bootstrap, "--list")
    assert listed.returncode == 1
    assert listed.stderr == "Error: No Authorizer is configured on the broker\n"


def test_an_unknown_authorizer_is_refused_at_start(mq_command: list[str], tmp_path: Any) -> None:
    started = subprocess.run(
        [*mq_command, "server", "start", "--override", f"log.dirs={tmp_path}", "--override",
         "authorizer.class.name=com.example.Custom"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    assert "authorizer.class.name com.example.Custom is not an authorizer mq has" in started.stderr
    assert len(started.stderr.strip().splitlines()) == 1, started.stderr


def test_authorizer_properties_reach_a_running_broker(
    zookeeper: Any, broker_factory: Callable[..., Any], mq_command: list[str]
) -> None:
    connect = f"{zookeeper.connect}/mq-{os.urandom(4).hex()}"
    zk_broker = broker_factory("zk-broker", [f"zookeeper.connect={connect}", "broker.id=1", *AUTHORIZER]).start()
    confluent = AdminClient({"bootstrap.servers": zk_broker.bootstrap})
    assert described(confluent) == set()
    store_args = ["--authorizer-properties", f"zookeeper.connect={connect}"]
    added = mq_acls(mq_command, *store_args, "--add", "--producer", "--topic", "events-", "--resource-pattern-type",
                    "prefixed", "--allow-principal", "User:svc")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=events-, patternType=PREFIXED)`" in (
        added.stdout
    )
    expected = {
        ("TOPIC", "events-", "PREFIXED", "User:svc", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    }
    assert wait_for(lambda: described(confluent) == expected, timeout=3.0, interval=0.05)

    kafka_admin = KafkaAdminClient(bootstrap_servers=zk_broker.bootstrap)
    try:
        kafka_admin.create_acls([ACL("User:ops", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                                     KpResourcePattern(KpResourceType.CLUSTER, "kafka-cluster"))])  # fmt: skip
    finally:
        kafka_admin.close()
    listed = mq_acls(mq_command, *store_args, "--list", "--cluster")
    assert listed.stdout == (
        "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`: \n"
        " \t(principal=User:ops, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"
    )
    removed = mq_acls(mq_command, *store_args, "--remove", "--force", "--topic", "events-", "--resource-pattern-type",
                      "any")  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert wait_for(lambda: len(described(confluent)) == 1, timeout=3.0, interval=0.05)
