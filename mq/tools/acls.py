"""``mq acls``: Kafka's kafka-acls (AclCommand of Kafka 3.x). Add, remove and list ACLs through the admin APIs
(``--bootstrap-server``) or directly in the metadata tree (``--authorizer-properties zookeeper.connect=...``), where
every change is announced to the brokers by an ACL change notification, as Kafka's AclAuthorizer announces it.

Resources come from ``--topic``, ``--group``, ``--transactional-id``, ``--delegation-token`` (each repeatable) and
``--cluster``, with ``--resource-pattern-type`` (literal by default; prefixed; any and match only filter, for
``--list`` and ``--remove``). Entries come from ``--allow-principal``/``--deny-principal`` with ``--allow-host``/
``--deny-host`` (``*`` by default) and ``--operation`` (All by default), or from the roles: ``--producer`` gives WRITE,
DESCRIBE and CREATE on each topic, WRITE and DESCRIBE on each transactional id, and IDEMPOTENT_WRITE on the cluster
with ``--idempotent``; ``--consumer`` gives READ and DESCRIBE on each topic and READ on each group.

Output lines are Kafka's: ``Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t,
patternType=LITERAL)`: `` then `` \\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)``, one
line per entry, and after every change the ``Current ACLs for resource ...`` listing of the named resources.
Resources are listed in (type, pattern type, name) order and their entries sorted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mq.client.admin import AsyncAdmin
from mq.client.sync import SyncAdmin
from mq.security.acl import (
    ANY_BINDING,
    ANY_ENTRY,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    PrincipalError,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    binding_error,
    entry_filter,
    group_by_pattern,
    parse_principal,
)
from mq.security.authorizer import AUTHORIZER_CLASS_NAMES, AclAuthorizer
from mq.zk import acl_store
from mq.zk.store import MetadataStore, StoreError

CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
ZOOKEEPER_CONNECT_KEYS = ("authorizer.zookeeper.url", "zookeeper.connect")
"""Where ``--authorizer-properties`` names the ZooKeeper (the first wins, as Kafka's AclAuthorizer reads them)."""

Listing = dict[ResourcePattern, list[AccessControlEntry]]


class AclCommandError(Exception):
    """A failure printed in one line; ``usage`` when the command line itself is wrong (exit 2, else 1)."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def _usage(message: str) -> AclCommandError:
    return AclCommandError(message, usage=True)


@dataclass(frozen=True)
class AclOptions:
    """The command line, as kafka-acls reads it (``None``/empty: the option was not given)."""

    action: str
    """add, remove or list."""
    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    delegation_tokens: tuple[str, ...] = ()
    cluster: bool = False
    pattern_type: PatternType = PatternType.LITERAL
    allow_principals: tuple[str, ...] = ()
    deny_principals: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    producer: bool = False
    idempotent: bool = False
    consumer: bool = False
    list_principals: tuple[str, ...] = ()
    force: bool = False
    given: frozenset[str] = field(default_factory=frozenset)
    """The options present on the command line, by their long names (``allow-principal``)."""


def pattern_type_named(text: str) -> PatternType:
    """A ``--resource-pattern-type`` value in any case; a usage error for an unknown one."""
    pattern_type = PatternType.parse(text)
    if pattern_type == PatternType.UNKNOWN or text.strip().upper() != pattern_type.name:
        raise _usage(f"Unknown resource-pattern-type: {text}")
    return pattern_type


def check_args(options: AclOptions) -> None:
    """Kafka's ``AclCommandOptions.checkArgs`` for everything but the connection options."""
    given = options.given
    if sum(a in given for a in ("add", "remove", "list")) != 1:
        raise _usage("Command must include exactly one action: --list, --add, --remove. ")
    invalid_with = {
        "list": ("producer", "consumer", "allow-host", "allow-principal", "deny-host", "deny-principal"),
        "producer": ("operation", "deny-principal", "deny-host"),
        "consumer": ("operation", "deny-principal", "deny-host"),
    }
    for used, invalid in invalid_with.items():
        for other in invalid:
            if used in given and other in given:
                raise _usage(f'Option "[{used}]" can\'t be used with option "[{other}]"')
    if "principal" in given and "list" not in given:
        raise _usage("The --principal option is only available if --list is set")
    if options.producer and not options.topics:
        raise _usage("With --producer you must specify a --topic")
    if options.idempotent and not options.producer:
        raise _usage("The --idempotent option is only available if --producer is set")
    if options.consumer and (
        not options.topics
        or not options.groups
        or (not options.producer and (options.cluster or bool(options.transactional_ids)))
    ):
        raise _usage(
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id option "
            "should be specified."
        )


def resource_filters(options: AclOptions, *, required: bool = True) -> list[ResourcePatternFilter]:
    """The resources named on the command line, as filters of ``--resource-pattern-type``."""
    pattern_type = options.pattern_type
    filters: list[ResourcePatternFilter] = []
    for resource_type, names in (
        (ResourceType.TOPIC, options.topics),
        (ResourceType.GROUP, options.groups),
        (ResourceType.TRANSACTIONAL_ID, options.transactional_ids),
        (ResourceType.DELEGATION_TOKEN, options.delegation_tokens),
    ):
        filters.extend(ResourcePatternFilter(resource_type, name.strip(), pattern_type) for name in names)
    if pattern_type == PatternType.LITERAL and (options.cluster or options.idempotent):
        filters.append(CLUSTER_FILTER)
    if not filters and required:
        raise _usage(
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--delegation-token <Delegation Token ID>"
        )
    return list(dict.fromkeys(filters))


def _principals(texts: Iterable[str]) -> list[str]:
    principals = []
    for text in texts:
        try:
            principal_type, name = parse_principal(text.strip())
        except PrincipalError as exc:
            raise _usage(str(exc)) from None
        principals.append(f"{principal_type}:{name}")
    return principals


def _entries(options: AclOptions, operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """Kafka's ``getAcl``: every (principal, operation, host) of the allow options, then of the deny options."""
    entries: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
        (options.allow_principals, options.allow_hosts, AclPermissionType.ALLOW),
        (options.deny_principals, options.deny_hosts, AclPermissionType.DENY),
    ):
        host_names = [h.strip() for h in hosts] or ["*"]
        for principal in _principals(principals):
            for operation in operations:
                entries.update(AccessControlEntry(principal, host, operation, permission) for host in host_names)
    return entries


def _operations(options: AclOptions) -> list[AclOperation]:
    operations: list[AclOperation] = []
    for text in options.operations or ("All",):
        operation = AclOperation.parse(text)
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            valid = ", ".join(op.pascal for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY))
            raise _usage(f"Invalid operation '{text}': valid operations are {valid}")
        operations.append(operation)
    return operations


def filter_to_entries(options: AclOptions) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """Kafka's ``getResourceFilterToAcls``: each resource with the entries the options give it, checked against
    the operations its type supports."""
    filters = resource_filters(options)
    result: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    if not options.producer and not options.consumer:
        entries = _entries(options, _operations(options))
        result = {f: set(entries) for f in filters}
    if options.producer:
        topic = _entries(options, (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE))
        transactional = _entries(options, (AclOperation.WRITE, AclOperation.DESCRIBE))
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result[f] = set(topic)
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                result[f] = set(transactional)
        if options.idempotent:
            result[CLUSTER_FILTER] = _entries(options, (AclOperation.IDEMPOTENT_WRITE,))
    if options.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result.setdefault(f, set()).update(_entries(options, (AclOperation.READ, AclOperation.DESCRIBE)))
            elif f.resource_type == ResourceType.GROUP:
                result.setdefault(f, set()).update(_entries(options, (AclOperation.READ,)))
    for f, entries in result.items():
        valid = SUPPORTED_OPERATIONS[f.resource_type] | {AclOperation.ALL}
        if any(e.operation not in valid for e in entries):
            names = ",".join(op.name for op in sorted(valid))
            raise _usage(f"ResourceType {f.resource_type.name} only supports operations {names}")
    return result


def resource_to_entries(options: AclOptions) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """Kafka's ``getResourceToAcls``: what ``--add`` adds."""
    if options.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _usage(
            f"A '--resource-pattern-type' value of '{options.pattern_type.name}' is not valid when adding acls."
        )
    by_filter = filter_to_entries(options)
    if any(not entries for entries in by_filter.values()):
        raise _usage("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return {ResourcePattern(f.resource_type, f.name or "", f.pattern_type): entries for f, entries in by_filter.items()}


class AclService(Protocol):
    """Where the ACLs are: the brokers' admin APIs or the metadata tree."""

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...

    def create(self, bindings: Sequence[AclBinding]) -> None: ...

    def delete(self, filters: Sequence[AclBindingFilter]) -> None: ...


class AdminService:
    """Through a broker's DescribeAcls, CreateAcls and DeleteAcls; a refused request raises KafkaError."""

    def __init__(self, admin: SyncAdmin) -> None:
        self._admin = admin

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self._admin.call(AsyncAdmin.describe_acls, binding_filter)

    def create(self, bindings: Sequence[AclBinding]) -> None:
        self._admin.call(AsyncAdmin.create_acls, bindings)

    def delete(self, filters: Sequence[AclBindingFilter]) -> None:
        self._admin.call(AsyncAdmin.delete_acls, filters)


class StoreService:
    """Directly in the metadata tree, as Kafka's AclAuthorizer writes it (the brokers learn of each change from its
    notification); a binding or write that fails is reported through ``out`` as Kafka's AclCommand reports it."""

    def __init__(self, store: MetadataStore, out: Callable[[str], None]) -> None:
        self._store = store
        self._out = out
        acl_store.create_acl_paths(store)

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        stored = AclAuthorizer()
        stored.replace_all(acl_store.load_all_acls(self._store))
        return stored.acls(binding_filter)

    def create(self, bindings: Sequence[AclBinding]) -> None:
        valid = []
        for binding in bindings:
            error = binding_error(binding)
            if error is None:
                valid.append(binding)
            else:
                self._out(f"Error while adding ACLs: {error}")
        for outcome in acl_store.create_acls(self._store, valid).values():
            if isinstance(outcome, StoreError):
                self._out(f"Error while adding ACLs: {outcome}")

    def delete(self, filters: Sequence[AclBindingFilter]) -> None:
        known = acl_store.load_all_acls(self._store)
        results, _ = acl_store.delete_acls(self._store, filters, known)
        for removed in results:
            for _, failure in removed:
                if failure is not None:
                    self._out(f"Error while removing ACLs: {failure}")


def zookeeper_connect(properties: dict[str, str]) -> str:
    """The ZooKeeper of ``--authorizer-properties``."""
    for key in ZOOKEEPER_CONNECT_KEYS:
        if properties.get(key):
            return properties[key]
    raise _usage('Missing required configuration "zookeeper.connect" which has no default value.')


def check_authorizer(name: str) -> None:
    if name not in AUTHORIZER_CLASS_NAMES:
        raise _usage(f"--authorizer {name}: mq has {' and '.join(sorted(AUTHORIZER_CLASS_NAMES))}")


def _entry_lines(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join(f"\t{e}" for e in sorted(entries))


def resource_lines(header: str, resource: object, entries: Iterable[AccessControlEntry]) -> str:
    """Kafka's block for one resource: ``<header> `<resource>`: `` then the entries, and a blank line after."""
    return f"{header} `{resource}`: \n {_entry_lines(entries)} \n"


def add(service: AclService, options: AclOptions, out: Callable[[str], None]) -> Listing:
    """``--add``: create the entries of each resource (printing each resource's first), then list the resources."""
    for pattern, entries in sorted(resource_to_entries(options).items()):
        out(resource_lines("Adding ACLs for resource", pattern, entries))
        service.create([AclBinding(pattern, e) for e in sorted(entries)])
    return listing(service, options)


def remove(
    service: AclService, options: AclOptions, out: Callable[[str], None], confirm: Callable[[str], bool]
) -> Listing:
    """``--remove``: per resource filter, after ``confirm`` (unless ``--force``), delete the given entries (or all
    of the resource's), then list the resources."""
    for pattern_filter, entries in filter_to_entries(options).items():
        if entries:
            question = (
                f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)} \n from resource filter "
                f"`{pattern_filter}`? (y/n)"
            )
            filters = [AclBindingFilter(pattern_filter, entry_filter(e)) for e in sorted(entries)]
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{pattern_filter}`? (y/n)"
            filters = [AclBindingFilter(pattern_filter, ANY_ENTRY)]
        if options.force or confirm(question):
            service.delete(filters)
    return listing(service, options)


def listing(service: AclService, options: AclOptions) -> Listing:
    """The ACLs of the resources named (of every resource when none is), by resource pattern."""
    filters = resource_filters(options, required=False)
    if not filters:
        return group_by_pattern(service.describe(ANY_BINDING))
    bindings: set[AclBinding] = set()
    for pattern_filter in filters:
        bindings.update(service.describe(AclBindingFilter(pattern_filter, ANY_ENTRY)))
    return group_by_pattern(bindings)


def listing_lines(found: Listing, principals: Sequence[str] = ()) -> list[str]:
    """Kafka's listing: a ``Current ACLs for resource`` block per resource, or with ``--principal`` an
    ``ACLs for principal `P``` line per principal followed by the blocks of that principal's entries."""
    if not principals:
        return [resource_lines("Current ACLs for resource", p, entries) for p, entries in found.items()]
    lines = []
    for principal in _principals(principals):
        lines.append(f"ACLs for principal `{principal}`")
        for pattern, entries in found.items():
            mine = [e for e in entries if e.principal == principal]
            if mine:
                lines.append(resource_lines("Current ACLs for resource", pattern, mine))
    return lines


def listing_document(found: Listing, principals: Sequence[str] = ()) -> list[dict[str, object]]:
    """The listing as JSON: one object per resource pattern with its entries (only ``principals``' when given)."""
    wanted = set(_principals(principals))
    document: list[dict[str, object]] = []
    for pattern, entries in found.items():
        shown = [e for e in entries if not wanted or e.principal in wanted]
        if shown:
            document.append(
                {
                    "resourceType": pattern.resource_type.name,
                    "name": pattern.name,
                    "patternType": pattern.pattern_type.name,
                    "acls": [
                        {
                            "principal": e.principal,
                            "host": e.host,
                            "operation": e.operation.name,
                            "permissionType": e.permission_type.name,
                        }
                        for e in shown
                    ],
                }
            )
    return document
