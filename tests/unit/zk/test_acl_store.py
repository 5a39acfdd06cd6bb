"""ACLs in the metadata tree: Kafka's nodes and notifications, conditional updates, deletes by filter."""

from __future__ import annotations

from mq.security.acl import (
    ANY_ENTRY,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from mq.zk import acl_store
from mq.zk.local_store import LocalStore

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
WRITE = AccessControlEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
T = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
T_PREFIX = ResourcePattern(ResourceType.TOPIC, "t", PatternType.PREFIXED)


def test_paths_nodes_and_notifications_are_kafkas() -> None:
    store = LocalStore(None)
    acl_store.create_acl_paths(store)
    assert store.get_children("/kafka-acl") == [
        "Cluster",
        "DelegationToken",
        "Group",
        "Topic",
        "TransactionalId",
        "User",
    ]
    assert "Topic" in store.get_children("/kafka-acl-extended/prefixed")
    acl_store.create_acls(store, [AclBinding(T, READ), AclBinding(T_PREFIX, WRITE)])
    assert store.get("/kafka-acl/Topic/t")[0] == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
    )
    assert store.exists("/kafka-acl-extended/prefixed/Topic/t") is not None
    assert store.get("/kafka-acl-changes/acl_changes_0000000000")[0] == b"TOPIC:t"
    assert store.get("/kafka-acl-extended-changes/acl_changes_0000000000")[0] == (
        b'{"version":1,"resourceType":"TOPIC","name":"t","patternType":"PREFIXED"}'
    )
    assert acl_store.load_all_acls(store) == {T: {READ}, T_PREFIX: {WRITE}}


def test_an_unchanged_set_writes_nothing() -> None:
    store = LocalStore(None)
    acl_store.create_acls(store, [AclBinding(T, READ)])
    acl_store.create_acls(store, [AclBinding(T, READ)])
    assert store.get_children("/kafka-acl-changes") == ["acl_changes_0000000000"]
    assert acl_store.read_acls(store, T) == ({READ}, 0)


def test_update_retries_after_a_concurrent_write() -> None:
    store = LocalStore(None)
    acl_store.create_acls(store, [AclBinding(T, READ)])
    calls = 0

    def add_write(current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
        nonlocal calls
        calls += 1
        if calls == 1:  # another writer comes first
            acl_store.update_acls(
                store,
                T,
                lambda acls: acls | {AccessControlEntry("User:c", "*", AclOperation.READ, AclPermissionType.ALLOW)},
            )
        return current | {WRITE}

    acl_store.update_acls(store, T, add_write)
    assert calls == 2
    assert acl_store.read_acls(store, T)[0] == {
        READ,
        WRITE,
        AccessControlEntry("User:c", "*", AclOperation.READ, AclPermissionType.ALLOW),
    }


def test_delete_by_filter_removes_only_matches_and_empty_nodes() -> None:
    store = LocalStore(None)
    acl_store.create_acls(store, [AclBinding(T, READ), AclBinding(T, WRITE), AclBinding(T_PREFIX, WRITE)])
    bob_only = AccessControlEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY)
    filters = [
        AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.LITERAL), bob_only),
        AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.ANY), ANY_ENTRY),
    ]
    results, changed = acl_store.delete_acls(store, filters[:1], acl_store.load_all_acls(store))
    assert results == [[(AclBinding(T, WRITE), None)]]
    assert changed == {T: {READ}}
    results, changed = acl_store.delete_acls(store, filters[1:], [])  # a filter naming its patterns needs no cache
    assert sorted(b for b, _ in results[0]) == [AclBinding(T, READ), AclBinding(T_PREFIX, WRITE)]
    assert store.exists("/kafka-acl/Topic/t") is None
    assert acl_store.load_all_acls(store) == {}


def test_notifications_name_their_pattern_and_old_ones_are_purged() -> None:
    store = LocalStore(None)
    acl_store.create_acls(store, [AclBinding(T_PREFIX, READ)])
    children = store.get_children("/kafka-acl-extended-changes")
    assert acl_store.read_change(store, "/kafka-acl-extended-changes", children[0]) == T_PREFIX
    assert acl_store.change_sequence(children[0]) == 0
    created = store.exists(f"/kafka-acl-extended-changes/{children[0]}")
    assert created is not None
    acl_store.purge_changes(store, "/kafka-acl-extended-changes", children, created.ctime_ms + 60_000)
    assert store.get_children("/kafka-acl-extended-changes") == children
    acl_store.purge_changes(store, "/kafka-acl-extended-changes", children, created.ctime_ms + 16 * 60_000)
    assert store.get_children("/kafka-acl-extended-changes") == []
