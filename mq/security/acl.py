"""Kafka's ACL model: resource patterns, access control entries, bindings and their filters, and how ZooKeeper-era
Kafka stores them.

Wire codes are Kafka's (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``); a code Kafka
does not know reads as UNKNOWN. ``str()`` of a pattern, an entry, a binding and a filter is Kafka's ``toString``
(what kafka-acls prints), e.g. ``ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`` and
``(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)``.

Filters match as Kafka's: a null name, principal or host matches any; ANY matches any type, operation, permission
or pattern type (the name must then be equal); MATCH matches every pattern that applies to the name: the literal
pattern of that name, the literal wildcard ``*`` and every prefixed pattern the name starts with.

ZooKeeper layout (Kafka 2.0+): a LITERAL pattern's ACL set is ``/kafka-acl/<ResourceType>/<name>``, a PREFIXED one's
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` (``<ResourceType>`` is ``Topic``, ``Group``, ``Cluster``,
``TransactionalId``, ``DelegationToken`` or ``User``), each holding
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``. A
change is announced by a sequential node ``/kafka-acl-changes/acl_changes_<seq>`` holding ``TOPIC:<name>`` (literal)
or ``/kafka-acl-extended-changes/acl_changes_<seq>`` holding
``{"version":1,"resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}``; readers of either path re-read
the named pattern's node.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Self


class _Coded(IntEnum):
    @classmethod
    def of(cls, code: int) -> Self:
        """The member of wire code ``code``; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def pascal(self) -> str:
        """Kafka's ``SecurityUtils`` name: ``DESCRIBE_CONFIGS`` -> ``DescribeConfigs``."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> Self:
        """The member named ``text`` in any case, with or without underscores (``describe_configs``,
        ``DescribeConfigs``); UNKNOWN when none is."""
        wanted = text.strip().replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        return cls(0)


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
"""The pattern types an ACL is stored with (the others only filter)."""

WILDCARD_RESOURCE = "*"
"""A LITERAL pattern of this name applies to every resource of its type."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource."""

CONCRETE_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)

_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
"""Kafka's ``AclEntry.supportedOperations``: what an ACL on each resource type may name (besides ALL)."""


class PrincipalError(ValueError):
    """A principal that is not ``<type>:<name>``."""


def parse_principal(text: str) -> tuple[str, str]:
    """(type, name) of ``User:alice``, split at the first colon, as Kafka's ``SecurityUtils.parseKafkaPrincipal``."""
    principal_type, sep, name = text.partition(":")
    if not text or not sep:
        raise PrincipalError(f"expected a string in format principalType:principalName but got {text}")
    return principal_type, name


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


def binding_error(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be stored (None: it can): a type, pattern type, operation or permission that is not
    concrete, an empty name, a name with ``/`` (a znode separator), a CLUSTER name other than ``kafka-cluster`` or a
    principal without a type."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {entry.permission_type.name}"
    if not pattern.name:
        return "Invalid empty resource name"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if "/" in pattern.name:
        return f"ACL binding contains invalid resource name: {pattern.name}"
    if ":" not in entry.principal:
        return (
            f"Could not parse principal from `{entry.principal}` (no colon is present separating the principal type "
            "from the principal name)"
        )
    return None


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name)

    def named_patterns(self) -> tuple[ResourcePattern, ...]:
        """The stored patterns this filter names outright (a concrete type and a name, pattern type LITERAL,
        PREFIXED or ANY); none for a filter that must be matched against the known patterns."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or self.name is None:
            return ()
        types = STORED_PATTERN_TYPES if self.pattern_type == PatternType.ANY else (self.pattern_type,)
        return tuple(ResourcePattern(self.resource_type, self.name, t) for t in types if t in STORED_PATTERN_TYPES)

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation == AclOperation.ANY or self.operation == entry.operation)
            and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type)
        )


ANY_ENTRY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)


def entry_filter(entry: AccessControlEntry) -> AccessControlEntryFilter:
    """The filter matching exactly ``entry``."""
    return AccessControlEntryFilter(entry.principal, entry.host, entry.operation, entry.permission_type)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def unknown_element(self) -> str | None:
        """The UNKNOWN part of this filter, which Kafka's brokers refuse (None: there is none)."""
        for what, value in (
            ("resource type", self.pattern.resource_type),
            ("pattern type", self.pattern.pattern_type),
            ("operation", self.entry.operation),
            ("permission type", self.entry.permission_type),
        ):
            if value == 0:
                return f"Filter contains an UNKNOWN {what}"
        return None


def group_by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Bindings grouped by pattern, patterns and entries in sorted order."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in sorted(bindings):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return grouped


ANY_BINDING = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), ANY_ENTRY)


# --- ZooKeeper layout ------------------------------------------------------------------------------------------

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1


def store_path(pattern_type: PatternType) -> str:
    """Where the ACLs of one pattern type live: ``/kafka-acl`` or ``/kafka-acl-extended/prefixed``."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_path(pattern_type)}/{resource_type.pascal}"


def resource_path(pattern: ResourcePattern) -> str:
    """``/kafka-acl/Topic/t``, ``/kafka-acl-extended/prefixed/Group/g-`` (no ``/`` is allowed in a name)."""
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def resource_type_named(text: str) -> ResourceType:
    """A resource type by Kafka's ZooKeeper name (``TransactionalId``) or enum name (``TRANSACTIONAL_ID``, any
    case); UNKNOWN when neither."""
    for member in ResourceType:
        if text == member.pascal or text.upper() == member.name:
            return member
    return ResourceType.UNKNOWN


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """Kafka's JSON of one pattern's ACL set (entries in sorted order)."""
    document = {
        "version": ACL_JSON_VERSION,
        "acls": [
            {
                "principal": e.principal,
                "permissionType": e.permission_type.pascal,
                "operation": e.operation.pascal,
                "host": e.host,
            }
            for e in sorted(entries)
        ],
    }
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """The ACL set of a pattern's node (empty for no data); ValueError for anything but version 1 JSON. Unknown
    operation or permission names read as UNKNOWN (such an entry matches no request), as Kafka reads them."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data.decode("utf-8"))
        if document["version"] != ACL_JSON_VERSION:
            raise ValueError(f"unsupported ACL JSON version {document['version']}")
        entries = set()
        for item in document["acls"]:
            principal = str(item["principal"])
            parse_principal(principal)
            entries.add(
                AccessControlEntry(
                    principal,
                    str(item["host"]),
                    AclOperation.parse(str(item["operation"])),
                    AclPermissionType.parse(str(item["permissionType"])),
                )
            )
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"not an ACL set: {exc!r}") from None
    return frozenset(entries)


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES_PATH if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES_PATH


def encode_change(pattern: ResourcePattern) -> bytes:
    """The data of the change notification announcing a new ACL set of ``pattern``."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    document = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def decode_change(changes: str, data: bytes) -> ResourcePattern:
    """The pattern a notification under ``changes`` (one of the two change paths) names; ValueError if none."""
    try:
        text = data.decode("utf-8")
        if changes == LITERAL_CHANGES_PATH:
            type_name, sep, name = text.partition(":")
            if not sep:
                raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
            pattern = ResourcePattern(resource_type_named(type_name), name, PatternType.LITERAL)
        else:
            document = json.loads(text)
            if int(document["version"]) > 1:
                raise ValueError(f"Acl change event received for unsupported version: {document['version']}")
            pattern = ResourcePattern(
                resource_type_named(str(document["resourceType"])),
                str(document["name"]),
                PatternType.parse(str(document["patternType"])),
            )
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"not an ACL change notification: {exc!r}") from None
    if pattern.resource_type == ResourceType.UNKNOWN or pattern.pattern_type not in STORED_PATTERN_TYPES:
        raise ValueError(f"ACL change notification names no stored pattern: {text}")
    return pattern
