"""Kafka's AclAuthorizer decisions over an in-memory set of ACLs, indexed so that a request pays a dict lookup.

A request on (resource type, name) is decided by the ACLs of the literal pattern of that name, of the literal
wildcard ``*`` of that type, and of every prefixed pattern the name starts with:

- a super user (``super.users``, principals separated by ``;``) may do anything;
- no such ACL at all: allowed only with ``allow.everyone.if.no.acl.found=true``;
- a DENY ACL whose principal is the requester's or ``User:*``, whose host is the requester's or ``*`` and whose
  operation is the requested one or ALL denies, whatever else allows;
- otherwise an ALLOW ACL matching the same way allows; DESCRIBE is also allowed by READ, WRITE, DELETE or ALTER, and
  DESCRIBE_CONFIGS by ALTER_CONFIGS (a DENY of those does not deny DESCRIBE).

Index: literal ACLs by (resource type, name); prefixed ACLs per resource type by prefix, probed once for each
distinct prefix length. Decisions are kept in a dict keyed by (principal, host, operation, resource type, name),
emptied whenever an ACL changes, so a repeated question costs one lookup. Not thread-safe: one thread (the broker's
event loop) changes and asks.

Every decision is logged to ``kafka.authorizer.logger`` as Kafka's AclAuthorizer does: a denied request at INFO,
an allowed one at DEBUG (``audit=False``: both at DEBUG, for decisions that only filter what a response lists)::

    Principal = User:alice is Denied Operation = Read from host = 127.0.0.1 on resource = Topic:LITERAL:t for
    request = Fetch with resourceRefCount = 1
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from mq.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
)

audit_log = logging.getLogger("kafka.authorizer.logger")

AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "mq.security.authorizer.AclAuthorizer",
    }
)
"""The ``authorizer.class.name`` values that turn this authorizer on: Kafka's ZooKeeper-era ACL authorizers (2.4+
and before) and mq's own name for the same thing."""

MAX_CACHED_DECISIONS = 100_000
"""The decision cache starts over when it holds this many."""

_ALLOWING: dict[AclOperation, frozenset[AclOperation]] = {op: frozenset({op}) for op in AclOperation}
_ALLOWING[AclOperation.DESCRIBE] = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_ALLOWING[AclOperation.DESCRIBE_CONFIGS] = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

_DecisionKey = tuple[str, str, AclOperation, ResourceType, str | None]


def parse_super_users(text: str) -> frozenset[str]:
    """The principals of a ``super.users`` value (``User:admin;User:broker``); PrincipalError for one without a
    type."""
    principals = set()
    for item in text.split(";"):
        item = item.strip()
        if item:
            parse_principal(item)
            principals.add(item)
    return frozenset(principals)


class AclAuthorizer:
    """The ACLs a broker enforces (``set_acls`` / ``replace_all``) and the decisions on them (``authorize``)."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._decisions: dict[_DecisionKey, bool] = {}

    # --- the ACLs ----------------------------------------------------------------------------------------------

    @property
    def patterns(self) -> frozenset[ResourcePattern]:
        """Every pattern that has ACLs."""
        return frozenset(self._acls)

    def get_acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the ACLs of ``pattern`` (none: the pattern has no ACLs any more)."""
        entries = frozenset(entries)
        if entries == self._acls.get(pattern, frozenset()):
            return
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        if pattern.pattern_type == PatternType.LITERAL:
            if entries:
                self._literal[pattern.resource_type, pattern.name] = entries
            else:
                self._literal.pop((pattern.resource_type, pattern.name), None)
        else:
            by_prefix = self._prefixed.setdefault(pattern.resource_type, {})
            if entries:
                by_prefix[pattern.name] = entries
            else:
                by_prefix.pop(pattern.name, None)
            self._prefix_lengths[pattern.resource_type] = tuple(sorted({len(p) for p in by_prefix}))
        self._decisions.clear()

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        for pattern in self._acls.keys() - acls.keys():
            self.set_acls(pattern, ())
        for pattern, entries in acls.items():
            self.set_acls(pattern, entries)

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings ``binding_filter`` matches, sorted."""
        return sorted(
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            if binding_filter.pattern.matches(pattern)
            for entry in entries
            if binding_filter.entry.matches(entry)
        )

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to the resource: its literal pattern's, the literal wildcard's and every prefixed
        pattern's that ``name`` starts with."""
        found: list[AccessControlEntry] = []
        for literal in (WILDCARD_RESOURCE, name):
            entries = self._literal.get((resource_type, literal))
            if entries is not None:
                found.extend(entries)
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            by_prefix = self._prefixed[resource_type]
            for length in lengths:
                if length > len(name):
                    break
                entries = by_prefix.get(name[:length])
                if entries is not None:
                    found.extend(entries)
        return found

    # --- decisions ---------------------------------------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        request: str = "",
        ref_count: int = 1,
        audit: bool = True,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the resource; logged for the request
        named ``request`` (Kafka's name, ``Fetch``), which names the resource ``ref_count`` times."""
        key = (principal, host, operation, resource_type, name)
        allowed = self._decisions.get(key)
        if allowed is None:
            allowed = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = allowed
        level = logging.INFO if audit and not allowed else logging.DEBUG
        if audit_log.isEnabledFor(level):
            _log(
                level, principal, allowed, operation, host, resource_type, PatternType.LITERAL, name, request, ref_count
            )
        return allowed

    def authorized_names(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        request: str = "",
    ) -> list[str]:
        """The ``names`` ``principal`` may do ``operation`` on (what a listing such as Metadata for all topics
        shows); a denial is logged at DEBUG only, as Kafka logs such filtering."""
        if principal in self.super_users:
            return list(names)
        return [
            n
            for n in names
            if self.authorize(principal, host, operation, resource_type, n, request=request, audit=False)
        ]

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            audit_log.debug("principal = %s is a super user, allowing operation without checking acls.", principal)
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            audit_log.debug(
                "No acl found for resource %s, authorized = %s",
                ResourcePattern(resource_type, name, PatternType.LITERAL),
                str(self.allow_everyone_if_no_acl_found).lower(),
            )
            return self.allow_everyone_if_no_acl_found
        allowing = _ALLOWING[operation]
        allowed = False
        for acl in acls:
            if (acl.principal == principal or acl.principal == WILDCARD_PRINCIPAL) and (
                acl.host == WILDCARD_HOST or acl.host == host
            ):
                if acl.permission_type == AclPermissionType.DENY:
                    if acl.operation == operation or acl.operation == AclOperation.ALL:
                        return False
                elif acl.permission_type == AclPermissionType.ALLOW and (
                    acl.operation in allowing or acl.operation == AclOperation.ALL
                ):
                    allowed = True
        return allowed

    def authorize_by_resource_type(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        *,
        request: str = "",
    ) -> bool:
        """Kafka's ``authorizeByResourceType``: whether ``principal`` may do ``operation`` on at least one resource
        of the type (a DENY of the literal wildcard denies; a deny prefix denies the allowed names it starts)."""
        key = (principal, host, operation, resource_type, None)
        allowed = self._decisions.get(key)
        if allowed is None:
            allowed = self._decide_by_type(principal, host, operation, resource_type)
            self._decisions[key] = allowed
        level = logging.DEBUG if allowed else logging.INFO
        if audit_log.isEnabledFor(level):
            _log(level, principal, allowed, operation, host, resource_type, PatternType.UNKNOWN, "NONE", request, 0)
        return allowed

    def _decide_by_type(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        if principal in self.super_users:
            return True

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {
                pattern.name
                for pattern, entries in self._acls.items()
                if pattern.resource_type == resource_type and pattern.pattern_type == pattern_type
                if any(
                    e.permission_type == permission
                    and e.principal in (principal, WILDCARD_PRINCIPAL)
                    and e.host in (host, WILDCARD_HOST)
                    and e.operation in (operation, AclOperation.ALL)
                    for e in entries
                )
            }

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)
        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(len(name) + 1))

        return any(not denied_by_prefix(p) for p in allow_prefixes) or any(
            literal == WILDCARD_RESOURCE or (literal not in deny_literals and not denied_by_prefix(literal))
            for literal in allow_literals
        )


def _log(
    level: int,
    principal: str,
    allowed: bool,
    operation: AclOperation,
    host: str,
    resource_type: ResourceType,
    pattern_type: PatternType,
    name: str,
    request: str,
    ref_count: int,
) -> None:
    audit_log.log(
        level,
        "Principal = %s is %s Operation = %s from host = %s on resource = %s:%s:%s for request = %s with "
        "resourceRefCount = %d",
        principal,
        "Allowed" if allowed else "Denied",
        operation.pascal,
        host,
        resource_type.pascal,
        pattern_type.name,
        name,
        request,
        ref_count,
    )
