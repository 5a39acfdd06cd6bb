"""ACLs in the metadata tree, as Kafka's ZooKeeper-era AclAuthorizer keeps them (layout in ``mq.security.acl``).

Each pattern's ACL set is one node, changed by a version-conditional write (retried after re-reading when another
writer came first) and announced by a change notification, so every broker re-reads it; a set that becomes empty
deletes its node. Used by the broker (CreateAcls, DeleteAcls) and by ``mq acls --authorizer-properties``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence

from mq.security.acl import (
    CHANGE_PREFIX,
    CONCRETE_RESOURCE_TYPES,
    STORED_PATTERN_TYPES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourceType,
    changes_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    resource_path,
    resource_type_named,
    resource_type_path,
    store_path,
)
from mq.zk.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError, StoreError

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_S = 0.1
RETRY_JITTER_S = 0.05

Acls = frozenset[AccessControlEntry]


def create_acl_paths(store: MetadataStore) -> None:
    """``/kafka-acl/<Type>`` and ``/kafka-acl-extended/prefixed/<Type>`` for every resource type, and both change
    paths, as Kafka's brokers create them."""
    for pattern_type in STORED_PATTERN_TYPES:
        for resource_type in CONCRETE_RESOURCE_TYPES:
            store.ensure_path(resource_type_path(pattern_type, resource_type))
        store.ensure_path(changes_path(pattern_type))


def read_acls(store: MetadataStore, pattern: ResourcePattern) -> tuple[Acls, int]:
    """The ACL set of ``pattern`` and its node's version (-1: no node)."""
    try:
        data, stat = store.get(resource_path(pattern))
    except NoNodeError:
        return frozenset(), -1
    return decode_acls(data), stat.version


def load_all_acls(store: MetadataStore) -> dict[ResourcePattern, Acls]:
    """Every stored pattern with ACLs; a resource type Kafka does not know, or a node that is not an ACL set, is
    skipped with a warning."""
    found: dict[ResourcePattern, Acls] = {}
    for pattern_type in STORED_PATTERN_TYPES:
        try:
            type_names = store.get_children(store_path(pattern_type))
        except NoNodeError:
            continue
        for type_name in type_names:
            resource_type = resource_type_named(type_name)
            if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                log.warning("Ignoring unknown ResourceType: %s", type_name)
                continue
            try:
                names = store.get_children(resource_type_path(pattern_type, resource_type))
            except NoNodeError:
                continue
            for name in names:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                try:
                    acls = read_acls(store, pattern)[0]
                except ValueError as exc:
                    log.warning("Ignoring the ACLs of %s: %s", pattern, exc)
                    continue
                if acls:
                    found[pattern] = acls
    return found


def update_acls(store: MetadataStore, pattern: ResourcePattern, change: Callable[[Acls], Acls]) -> tuple[Acls, Acls]:
    """Apply ``change`` to the stored ACL set of ``pattern`` with a conditional write, retrying on a concurrent
    write; announce the new set when it differs. Returns (old set, new set); StoreError after too many retries."""
    for _ in range(MAX_UPDATE_RETRIES + 1):
        current, version = read_acls(store, pattern)
        updated = change(current)
        if updated == current:
            return current, current
        path = resource_path(pattern)
        try:
            if not updated:
                store.delete(path, version)
            elif version < 0:
                store.create(path, encode_acls(updated), makepath=True)
            else:
                store.set(path, encode_acls(updated), version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            time.sleep(RETRY_BACKOFF_S + random.uniform(0, RETRY_JITTER_S))
            continue
        store.create(
            f"{changes_path(pattern.pattern_type)}/{CHANGE_PREFIX}",
            encode_change(pattern),
            sequence=True,
            makepath=True,
        )
        if updated:
            log.info("Updated ACLs for %s with new version %d", pattern, version + 1)
        else:
            log.info("Deleted the ACL node of %s: no ACLs remain", pattern)
        return current, updated
    raise StoreError(f"Failed to update ACLs for {pattern} after trying a maximum of {MAX_UPDATE_RETRIES} times")


def create_acls(store: MetadataStore, bindings: Sequence[AclBinding]) -> dict[ResourcePattern, Acls | StoreError]:
    """Add ``bindings`` (valid ones: see ``binding_error``), one write per pattern: each pattern's new ACL set, or the
    failure of its write."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
    outcome: dict[ResourcePattern, Acls | StoreError] = {}
    for pattern, entries in by_pattern.items():
        try:
            outcome[pattern] = update_acls(store, pattern, frozenset(entries).union)[1]
        except StoreError as exc:
            outcome[pattern] = exc
    return outcome


def delete_acls(
    store: MetadataStore, filters: Sequence[AclBindingFilter], known: Iterable[ResourcePattern]
) -> tuple[list[list[tuple[AclBinding, StoreError | None]]], dict[ResourcePattern, Acls]]:
    """Remove the ACLs each filter matches among the ``known`` patterns and the patterns a filter names outright.
    Returns, per filter, the bindings it deleted (each with the failure of its write, if any; a binding two filters
    match is reported by the first), and every changed pattern's new ACL set."""
    candidates = set(known)
    for binding_filter in filters:
        candidates.update(binding_filter.pattern.named_patterns())
    deleted: dict[AclBinding, int] = {}
    failures: dict[AclBinding, StoreError] = {}
    changed: dict[ResourcePattern, Acls] = {}
    for pattern in sorted(candidates):
        matching = [(i, f) for i, f in enumerate(filters) if f.pattern.matches(pattern)]
        if not matching:
            continue
        removed: dict[AclBinding, int] = {}
        remove = _remover(pattern, matching, removed)
        try:
            old, new = update_acls(store, pattern, remove)
            if new != old:
                changed[pattern] = new
        except StoreError as exc:
            failures.update(dict.fromkeys(removed, exc))
        for binding, index in removed.items():
            deleted.setdefault(binding, index)
    results: list[list[tuple[AclBinding, StoreError | None]]] = [[] for _ in filters]
    for binding, index in sorted(deleted.items()):
        results[index].append((binding, failures.get(binding)))
    return results, changed


def _remover(
    pattern: ResourcePattern, matching: list[tuple[int, AclBindingFilter]], removed: dict[AclBinding, int]
) -> Callable[[Acls], Acls]:
    """The change removing from ``pattern``'s ACLs those ``matching`` filters match; ``removed`` holds, after each
    attempt, the bindings it removed with the index of the first filter that matched each."""

    def remove(current: Acls) -> Acls:
        removed.clear()
        for entry in current:
            for index, binding_filter in matching:
                if binding_filter.entry.matches(entry):
                    removed.setdefault(AclBinding(pattern, entry), index)
        return current - {b.entry for b in removed}

    return remove


def read_change(store: MetadataStore, changes: str, child: str) -> ResourcePattern | None:
    """The pattern named by notification ``child`` of ``changes`` (None: it is gone or unreadable)."""
    data = store.get_or_none(f"{changes}/{child}")
    if data is None:
        return None
    try:
        return decode_change(changes, data)
    except ValueError as exc:
        log.warning("Ignoring ACL change notification %s/%s: %s", changes, child, exc)
        return None


def change_sequence(child: str) -> int:
    """The sequence number of ``acl_changes_0000000042``."""
    return int(child.rsplit("_", 1)[1])


CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""Change notifications older than this are deleted by the brokers that read them, as Kafka's do."""


def purge_changes(store: MetadataStore, changes: str, children: Iterable[str], now_ms: int) -> None:
    """Delete the notifications among ``children`` created more than ``CHANGE_EXPIRATION_MS`` before ``now_ms``."""
    for child in children:
        path = f"{changes}/{child}"
        stat = store.exists(path)
        if stat is not None and stat.ctime_ms < now_ms - CHANGE_EXPIRATION_MS:
            with contextlib.suppress(NoNodeError):  # another broker purged it first
                store.delete(path)
