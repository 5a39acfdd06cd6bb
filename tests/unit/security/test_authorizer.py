"""AclAuthorizer decisions as Kafka's: super users, DENY over ALLOW, wildcards, prefixes, implied operations, the
no-ACL default, the decision cache following changes, the by-resource-type check and the audit lines."""

from __future__ import annotations

import logging

import pytest

from mq.security.acl import (
    ANY_ENTRY,
    AccessControlEntry,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from mq.security.authorizer import AclAuthorizer, parse_super_users

Op, Perm = AclOperation, AclPermissionType
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"


def acl(principal: str, op: AclOperation, perm: AclPermissionType = Perm.ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def topic(name: str, pattern_type: PatternType = LITERAL) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, pattern_type)


def can(authorizer: AclAuthorizer, principal: str, op: AclOperation, name: str, host: str = "10.0.0.1") -> bool:
    return authorizer.authorize(principal, host, op, TOPIC, name, request="Fetch")


def test_no_acl_falls_back_to_allow_everyone_if_no_acl_found() -> None:
    assert not can(AclAuthorizer(), ALICE, Op.READ, "t")
    assert can(AclAuthorizer(allow_everyone_if_no_acl_found=True), ALICE, Op.READ, "t")
    some = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    some.set_acls(topic("t"), [acl(BOB, Op.READ)])
    assert not can(some, ALICE, Op.READ, "t")  # an ACL exists for t: the default no longer applies
    assert can(some, ALICE, Op.READ, "other")


def test_super_users_may_do_anything() -> None:
    authorizer = AclAuthorizer(parse_super_users("User:admin; User:broker"))
    authorizer.set_acls(topic("t"), [acl("User:admin", Op.ALL, Perm.DENY)])
    assert can(authorizer, "User:admin", Op.DELETE, "t")
    assert can(authorizer, "User:broker", Op.CLUSTER_ACTION, "x")
    assert not can(authorizer, ALICE, Op.READ, "t")


def test_deny_wins_over_allow() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("t"), [acl(ALICE, Op.READ), acl(ALICE, Op.READ, Perm.DENY, host="10.0.0.1")])
    assert not can(authorizer, ALICE, Op.READ, "t", host="10.0.0.1")
    assert can(authorizer, ALICE, Op.READ, "t", host="10.0.0.2")
    authorizer.set_acls(topic("*"), [acl("User:*", Op.ALL, Perm.DENY)])
    assert not can(authorizer, ALICE, Op.READ, "t", host="10.0.0.2")


def test_wildcard_principal_host_and_resource() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("*"), [acl("User:*", Op.WRITE)])
    assert can(authorizer, ALICE, Op.WRITE, "anything")
    assert not can(authorizer, ALICE, Op.READ, "anything")
    assert authorizer.authorize("Group:ops", "h", Op.WRITE, TOPIC, "x")  # Kafka: an ACL for User:* matches anyone
    assert not authorizer.authorize(ALICE, "h", Op.WRITE, GROUP, "x")  # another resource type


def test_host_must_match_unless_wildcard() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("t"), [acl(ALICE, Op.READ, host="10.0.0.9")])
    assert can(authorizer, ALICE, Op.READ, "t", host="10.0.0.9")
    assert not can(authorizer, ALICE, Op.READ, "t", host="10.0.0.1")


def test_prefixed_patterns_apply_to_names_they_start() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("orders-", PREFIXED), [acl(ALICE, Op.READ)])
    authorizer.set_acls(topic("orders-eu-", PREFIXED), [acl(ALICE, Op.READ, Perm.DENY)])
    authorizer.set_acls(topic("o", PREFIXED), [acl(BOB, Op.READ)])
    assert can(authorizer, ALICE, Op.READ, "orders-us")
    assert not can(authorizer, ALICE, Op.READ, "orders-eu-1")
    assert not can(authorizer, ALICE, Op.READ, "order")
    assert can(authorizer, BOB, Op.READ, "orders-eu-1")  # the deny is alice's
    assert not can(authorizer, BOB, Op.READ, "x")
    assert authorizer.matching_acls(TOPIC, "orders-eu-1") and not authorizer.matching_acls(TOPIC, "x")


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        (Op.ALL, Op.DELETE, True),
        (Op.READ, Op.DESCRIBE, True),
        (Op.WRITE, Op.DESCRIBE, True),
        (Op.DELETE, Op.DESCRIBE, True),
        (Op.ALTER, Op.DESCRIBE, True),
        (Op.CREATE, Op.DESCRIBE, False),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
        (Op.DESCRIBE, Op.READ, False),
        (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
        (Op.ALTER_CONFIGS, Op.DESCRIBE, False),
    ],
)
def test_implied_operations(granted: AclOperation, asked: AclOperation, allowed: bool) -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("t"), [acl(ALICE, granted)])
    assert can(authorizer, ALICE, asked, "t") is allowed


def test_a_denied_read_does_not_deny_describe_but_a_denied_all_does() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("t"), [acl(ALICE, Op.DESCRIBE), acl(ALICE, Op.READ, Perm.DENY)])
    assert can(authorizer, ALICE, Op.DESCRIBE, "t")
    assert not can(authorizer, ALICE, Op.READ, "t")
    authorizer.set_acls(topic("t"), [acl(ALICE, Op.DESCRIBE), acl(ALICE, Op.ALL, Perm.DENY)])
    assert not can(authorizer, ALICE, Op.DESCRIBE, "t")


def test_cached_decisions_follow_changes() -> None:
    authorizer = AclAuthorizer()
    assert not can(authorizer, ALICE, Op.READ, "t")
    authorizer.set_acls(topic("t", PREFIXED), [acl(ALICE, Op.READ)])
    assert can(authorizer, ALICE, Op.READ, "t")
    authorizer.replace_all({topic("*"): [acl(ALICE, Op.READ, Perm.DENY)]})
    assert not can(authorizer, ALICE, Op.READ, "t")
    assert authorizer.patterns == {topic("*")}
    authorizer.set_acls(topic("*"), [])
    assert authorizer.patterns == frozenset()
    assert not can(authorizer, ALICE, Op.READ, "t")


def test_authorized_names_filters_a_listing() -> None:
    authorizer = AclAuthorizer(["User:admin"])
    authorizer.set_acls(topic("a", PREFIXED), [acl(ALICE, Op.DESCRIBE)])
    names = ["a1", "b1", "a2"]
    assert authorizer.authorized_names(ALICE, "h", Op.DESCRIBE, TOPIC, names) == ["a1", "a2"]
    assert authorizer.authorized_names("User:admin", "h", Op.DESCRIBE, TOPIC, names) == names


def test_acls_lists_what_a_filter_matches() -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("t"), [acl(ALICE, Op.READ), acl(BOB, Op.WRITE)])
    authorizer.set_acls(topic("t", PREFIXED), [acl(ALICE, Op.READ)])
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "t", PatternType.MATCH), ANY_ENTRY)
    assert len(authorizer.acls(match)) == 3
    literal = AclBindingFilter(ResourcePatternFilter(TOPIC, "t", LITERAL), ANY_ENTRY)
    assert {b.entry.principal for b in authorizer.acls(literal)} == {ALICE, BOB}


def test_authorize_by_resource_type() -> None:
    authorizer = AclAuthorizer()
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    authorizer.set_acls(topic("t-", PREFIXED), [acl(ALICE, Op.WRITE)])
    assert authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    authorizer.set_acls(topic("t", PREFIXED), [acl(ALICE, Op.WRITE, Perm.DENY)])  # dominates t-
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    authorizer.set_acls(topic("x"), [acl(ALICE, Op.ALL)])
    assert authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    authorizer.set_acls(topic("*"), [acl("User:*", Op.WRITE, Perm.DENY)])
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)


def test_audit_lines_are_kafkas(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = AclAuthorizer()
    authorizer.set_acls(topic("t"), [acl(ALICE, Op.WRITE)])
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        authorizer.authorize(ALICE, "127.0.0.1", Op.READ, TOPIC, "t", request="Fetch")
        authorizer.authorize(ALICE, "127.0.0.1", Op.WRITE, TOPIC, "t", request="Produce", ref_count=2)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert (
        logging.INFO,
        "Principal = User:alice is Denied Operation = Read from host = 127.0.0.1 on resource = Topic:LITERAL:t "
        "for request = Fetch with resourceRefCount = 1",
    ) in lines
    assert (
        logging.DEBUG,
        "Principal = User:alice is Allowed Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:t "
        "for request = Produce with resourceRefCount = 2",
    ) in lines


def test_super_users_text() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users("User:a;User:b;") == {"User:a", "User:b"}
    with pytest.raises(ValueError):
        parse_super_users("User:a;admin")
