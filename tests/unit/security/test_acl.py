"""The ACL model: Kafka's wire codes and names, filter matching (ANY, MATCH, wildcards, prefixes), what may be
stored, and the ZooKeeper JSON and change notifications byte for byte."""

from __future__ import annotations

import pytest

from mq.security.acl import (
    ANY_BINDING,
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
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
    binding_error,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    parse_principal,
    resource_path,
)

LITERAL, PREFIXED, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH
TOPIC = ResourceType.TOPIC
ALICE_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


def test_wire_codes_are_kafkas() -> None:
    assert [int(t) for t in ResourceType] == list(range(8))
    assert ResourceType.TRANSACTIONAL_ID == 5 and ResourceType.USER == 7
    assert (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (1, 2, 3, 4)
    assert AclOperation.ALL == 2 and AclOperation.IDEMPOTENT_WRITE == 12 and AclOperation.DESCRIBE_TOKENS == 14
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)
    assert AclOperation.of(99) == AclOperation.UNKNOWN and ResourceType.of(-1) == ResourceType.UNKNOWN


def test_names_parse_in_any_case_and_print_as_kafka() -> None:
    assert AclOperation.parse("describe_configs") == AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.parse("DescribeConfigs") == AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.parse("READ") == AclOperation.parse("read") == AclOperation.READ
    assert AclOperation.parse("Reed") == AclOperation.UNKNOWN
    assert AclOperation.IDEMPOTENT_WRITE.pascal == "IdempotentWrite"
    assert ResourceType.TRANSACTIONAL_ID.pascal == "TransactionalId"


def test_to_string_is_kafkas() -> None:
    pattern = ResourcePattern(TOPIC, "t", LITERAL)
    assert str(pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(ALICE_READ) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert str(ResourcePatternFilter(ResourceType.ANY, None, ANY)) == (
        "ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY)"
    )


@pytest.mark.parametrize(
    ("filter_", "pattern", "expected"),
    [
        (ResourcePatternFilter(TOPIC, "t", LITERAL), ResourcePattern(TOPIC, "t", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "t", LITERAL), ResourcePattern(TOPIC, "t", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "t", LITERAL), ResourcePattern(TOPIC, "*", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "t", ANY), ResourcePattern(TOPIC, "t", PREFIXED), True),
        (ResourcePatternFilter(TOPIC, "t", ANY), ResourcePattern(TOPIC, "*", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "t1", ANY), ResourcePattern(TOPIC, "t", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(TOPIC, "orders", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(TOPIC, "*", LITERAL), True),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(TOPIC, "ord", PREFIXED), True),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(TOPIC, "orders", PREFIXED), True),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(TOPIC, "orders-x", PREFIXED), False),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(TOPIC, "order", LITERAL), False),
        (ResourcePatternFilter(TOPIC, "orders", MATCH), ResourcePattern(ResourceType.GROUP, "*", LITERAL), False),
        (ResourcePatternFilter(ResourceType.ANY, None, MATCH), ResourcePattern(TOPIC, "x", PREFIXED), True),
        (ResourcePatternFilter(TOPIC, None, PREFIXED), ResourcePattern(TOPIC, "x", LITERAL), False),
    ],
)
def test_pattern_filter_matches_as_kafka(
    filter_: ResourcePatternFilter, pattern: ResourcePattern, expected: bool
) -> None:
    assert filter_.matches(pattern) is expected


def test_entry_filter_null_and_any_match_everything() -> None:
    assert ANY_BINDING.matches(AclBinding(ResourcePattern(TOPIC, "t", LITERAL), ALICE_READ))
    only_bob = AccessControlEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY)
    assert not only_bob.matches(ALICE_READ)
    deny = AccessControlEntryFilter(None, "*", AclOperation.READ, AclPermissionType.DENY)
    assert not deny.matches(ALICE_READ)
    assert AccessControlEntryFilter(None, "*", AclOperation.READ, AclPermissionType.ALLOW).matches(ALICE_READ)


def test_named_patterns_of_a_filter() -> None:
    assert ResourcePatternFilter(TOPIC, "t", ANY).named_patterns() == (
        ResourcePattern(TOPIC, "t", LITERAL),
        ResourcePattern(TOPIC, "t", PREFIXED),
    )
    assert ResourcePatternFilter(TOPIC, "t", MATCH).named_patterns() == ()
    assert ResourcePatternFilter(TOPIC, None, LITERAL).named_patterns() == ()


def test_unknown_elements_of_a_filter() -> None:
    good = AclBindingFilter(ResourcePatternFilter(TOPIC, None, ANY), AccessControlEntryFilter(None, None, 1, 1))
    assert good.unknown_element() is None
    bad = AclBindingFilter(ResourcePatternFilter(TOPIC, None, PatternType.of(9)), good.entry)
    assert bad.unknown_element() == "Filter contains an UNKNOWN pattern type"


@pytest.mark.parametrize(
    ("pattern", "entry", "error"),
    [
        (ResourcePattern(ResourceType.ANY, "t", LITERAL), ALICE_READ, "Invalid resourceType ANY"),
        (ResourcePattern(TOPIC, "t", MATCH), ALICE_READ, "Invalid patternType MATCH"),
        (ResourcePattern(TOPIC, "t", ANY), ALICE_READ, "Invalid patternType ANY"),
        (
            ResourcePattern(TOPIC, "t", LITERAL),
            AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW),
            "Invalid operation ANY",
        ),
        (
            ResourcePattern(TOPIC, "t", LITERAL),
            AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.UNKNOWN),
            "Invalid permissionType UNKNOWN",
        ),
        (ResourcePattern(TOPIC, "", LITERAL), ALICE_READ, "Invalid empty resource name"),
        (
            ResourcePattern(ResourceType.CLUSTER, "c", LITERAL),
            ALICE_READ,
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (ResourcePattern(TOPIC, "a/b", LITERAL), ALICE_READ, "ACL binding contains invalid resource name: a/b"),
        (
            ResourcePattern(TOPIC, "t", LITERAL),
            AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            "Could not parse principal from `alice` (no colon is present separating the principal type from the "
            "principal name)",
        ),
        (ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LITERAL), ALICE_READ, None),
        (ResourcePattern(TOPIC, "t-", PREFIXED), ALICE_READ, None),
    ],
)
def test_what_may_be_stored(pattern: ResourcePattern, entry: AccessControlEntry, error: str | None) -> None:
    assert binding_error(AclBinding(pattern, entry)) == error


def test_principal_is_split_at_the_first_colon() -> None:
    assert parse_principal("User:CN=a,O=b:c") == ("User", "CN=a,O=b:c")
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got bob"):
        parse_principal("bob")


def test_acl_json_is_kafkas_text() -> None:
    data = encode_acls([ALICE_READ])
    assert data == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
    )
    assert decode_acls(data) == {ALICE_READ}


def test_acl_json_of_kafka_reads_in_any_key_order() -> None:
    written_by_kafka = (
        b'{"version": 1, "acls": [{"host":"h1","permissionType":"Deny","operation":"DescribeConfigs",'
        b'"principal":"User:bob"}, {"principal":"User:*","permissionType":"Allow","operation":"All","host":"*"}]}'
    )
    assert decode_acls(written_by_kafka) == {
        AccessControlEntry("User:bob", "h1", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY),
        AccessControlEntry("User:*", "*", AclOperation.ALL, AclPermissionType.ALLOW),
    }
    assert decode_acls(b"") == frozenset()
    with pytest.raises(ValueError):
        decode_acls(b'{"version":2,"acls":[]}')
    with pytest.raises(ValueError):
        decode_acls(b"not json")


def test_znode_paths_are_kafkas() -> None:
    assert resource_path(ResourcePattern(TOPIC, "t", LITERAL)) == "/kafka-acl/Topic/t"
    assert resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED)) == (
        "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    )
    assert resource_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LITERAL)) == (
        "/kafka-acl/Cluster/kafka-cluster"
    )


def test_change_notifications_are_kafkas() -> None:
    literal = ResourcePattern(TOPIC, "a:b", LITERAL)
    assert encode_change(literal) == b"TOPIC:a:b"
    assert decode_change(LITERAL_CHANGES_PATH, b"TOPIC:a:b") == literal
    assert decode_change(LITERAL_CHANGES_PATH, b"Topic:a:b") == literal  # as Kafka 2.0 to 2.3 wrote it
    prefixed = ResourcePattern(ResourceType.GROUP, "g-", PREFIXED)
    assert encode_change(prefixed) == b'{"version":1,"resourceType":"GROUP","name":"g-","patternType":"PREFIXED"}'
    assert decode_change(EXTENDED_CHANGES_PATH, encode_change(prefixed)) == prefixed
    with pytest.raises(ValueError):
        decode_change(LITERAL_CHANGES_PATH, b"Nothing:x")
