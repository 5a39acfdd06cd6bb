"""mq acls logic: Kafka's argument checks, the entries of the options and roles, and the add/remove/list lines,
on a local metadata tree."""

from __future__ import annotations

import pytest

from mq.security.acl import AclOperation, PatternType, ResourceType
from mq.tools.acls import (
    AclCommandError,
    AclOptions,
    StoreService,
    add,
    check_args,
    filter_to_entries,
    listing,
    listing_lines,
    pattern_type_named,
    remove,
    resource_to_entries,
)
from mq.zk.local_store import LocalStore

FLAG_NAMES = {
    "topics": "topic",
    "groups": "group",
    "transactional_ids": "transactional-id",
    "allow_principals": "allow-principal",
    "deny_principals": "deny-principal",
    "deny_hosts": "deny-host",
    "operations": "operation",
    "list_principals": "principal",
}


def options(action: str, **values: object) -> AclOptions:
    """The options of a command line with ``--<action>`` and the given values."""
    given = {action} | {FLAG_NAMES.get(k, k.replace("_", "-")) for k, v in values.items() if v}
    return AclOptions(action=action, given=frozenset(given), **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (options("list", producer=True, topics=("t",)), 'Option "[list]" can\'t be used with option "[producer]"'),
        (options("add", producer=True), "With --producer you must specify a --topic"),
        (options("add", idempotent=True, topics=("t",)), "The --idempotent option is only available if --producer is set"),
        (options("add", list_principals=("User:a",), topics=("t",)), "The --principal option is only available if --list is set"),
        (
            options("add", consumer=True, topics=("t",)),
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id option "
            "should be specified.",
        ),
        (options("add", producer=True, topics=("t",), operations=("Read",)), 'Option "[producer]" can\'t be used with option "[operation]"'),
    ],
)  # fmt: skip
def test_kafkas_argument_checks(opts: AclOptions, message: str) -> None:
    with pytest.raises(AclCommandError, match=message.replace("[", r"\[").replace("]", r"\]")) as failure:
        check_args(opts)
    assert failure.value.usage


def test_exactly_one_action() -> None:
    with pytest.raises(AclCommandError, match="exactly one action"):
        check_args(AclOptions(action="add", given=frozenset({"add", "list"})))


def test_add_needs_a_principal_a_resource_and_valid_operations() -> None:
    with pytest.raises(AclCommandError, match="You must specify one of: --allow-principal, --deny-principal"):
        resource_to_entries(options("add", topics=("t",)))
    with pytest.raises(AclCommandError, match="You must provide at least one resource"):
        resource_to_entries(options("add", allow_principals=("User:a",)))
    with pytest.raises(AclCommandError, match="ResourceType GROUP only supports operations"):
        resource_to_entries(options("add", groups=("g",), allow_principals=("User:a",), operations=("Write",)))
    with pytest.raises(AclCommandError, match="Invalid operation 'Reed'"):
        resource_to_entries(options("add", topics=("t",), allow_principals=("User:a",), operations=("Reed",)))
    with pytest.raises(AclCommandError, match="expected a string in format principalType:principalName but got a"):
        resource_to_entries(options("add", topics=("t",), allow_principals=("a",)))
    with pytest.raises(AclCommandError, match="'--resource-pattern-type' value of 'MATCH' is not valid"):
        resource_to_entries(options("add", topics=("t",), allow_principals=("User:a",), pattern_type=PatternType.MATCH))
    with pytest.raises(AclCommandError, match="Unknown resource-pattern-type: wild"):
        pattern_type_named("wild")
    assert pattern_type_named("Prefixed") == PatternType.PREFIXED


def test_roles_give_kafkas_operations() -> None:
    producer = filter_to_entries(
        options("add", producer=True, idempotent=True, topics=("t",), transactional_ids=("tx",), allow_principals=("User:p",))
    )  # fmt: skip
    ops = {f.resource_type: sorted(e.operation for e in entries) for f, entries in producer.items()}
    assert ops == {
        ResourceType.TOPIC: [AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE],
        ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE],
        ResourceType.CLUSTER: [AclOperation.IDEMPOTENT_WRITE],
    }
    consumer = filter_to_entries(
        options("add", consumer=True, topics=("t",), groups=("g",), allow_principals=("User:c",))
    )
    ops = {f.resource_type: sorted(e.operation for e in entries) for f, entries in consumer.items()}
    assert ops == {
        ResourceType.TOPIC: [AclOperation.READ, AclOperation.DESCRIBE],
        ResourceType.GROUP: [AclOperation.READ],
    }
    hosts = filter_to_entries(options("add", topics=("t",), deny_principals=("User:d",), deny_hosts=("10.0.0.1",)))
    (entries,) = hosts.values()
    assert {(e.host, e.permission_type.name, e.operation.name) for e in entries} == {("10.0.0.1", "DENY", "ALL")}


def test_add_list_remove_lines_on_the_tree() -> None:
    store = LocalStore(None)
    out: list[str] = []
    service = StoreService(store, out.append)
    add_opts = options("add", topics=("t",), allow_principals=("User:alice",), operations=("Read", "write"))
    found = add(service, add_opts, out.append)
    assert out == [
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n"
    ]
    assert listing_lines(found) == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n"
    ]
    assert listing_lines(found, ["User:bob"]) == ["ACLs for principal `User:bob`"]
    questions: list[str] = []
    found = remove(service, options("remove", topics=("t",)), out.append, lambda q: questions.append(q) or False)
    assert questions == [
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)"
    ]
    assert len(next(iter(found.values()))) == 2  # declined: nothing removed
    found = remove(service, options("remove", topics=("t",), force=True), out.append, lambda q: False)
    assert found == {}
    match = options("list", topics=("t1",), pattern_type=PatternType.MATCH)
    assert listing(service, match) == {}
