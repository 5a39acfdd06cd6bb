"""The broker's ACLs: loaded from the metadata tree at start, followed through ACL change notifications, changed
by CreateAcls and DeleteAcls, and asked by request handlers.

Threads: the authorizer (``mq.security.authorizer``) belongs to the event loop, which asks it and changes it. The
metadata thread reads and writes the tree: at start it loads every ACL set; on a new notification under
``/kafka-acl-changes`` or ``/kafka-acl-extended-changes`` (its sequence above the last one read from that path) it
re-reads the pattern named there and posts the set to the loop; CreateAcls and DeleteAcls write there too and post
their new sets before they answer. Posts keep the metadata thread's order, so the loop's sets are never older than
one it already has. A change by another broker or by ``mq acls --authorizer-properties`` is in force here as soon
as ZooKeeper delivers the watch and the pattern is read (well within a second). Notifications older than 15
minutes are deleted, as Kafka's brokers delete them.

Handlers ask ``authorize(context, operation, resource_type, name)`` (through ``mq.server.authorization``): one dict
lookup once a decision is cached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from mq.protocol.api_keys import request_name
from mq.security.acl import (
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourcePattern,
    ResourceType,
)
from mq.security.authorizer import AclAuthorizer
from mq.zk import acl_store
from mq.zk.acl_store import Acls
from mq.zk.store import MetadataStore, StoreError

if TYPE_CHECKING:
    from mq.server.api_dispatch import RequestContext

log = logging.getLogger(__name__)

Post = Callable[[Callable[[], None]], None]
DeleteResults = list[list[tuple[AclBinding, StoreError | None]]]


class AclCache:
    """The ACLs of ``store`` kept in ``authorizer``; the store is read and written on ``executor`` (one thread),
    the authorizer changed through ``post`` (run on the loop)."""

    def __init__(self, store: MetadataStore, authorizer: AclAuthorizer, executor: Executor, post: Post) -> None:
        self.store = store
        self.authorizer = authorizer
        self._executor = executor
        self._post = post
        self._last_change = {LITERAL_CHANGES_PATH: -1, EXTENDED_CHANGES_PATH: -1}
        self._stopped = False

    # --- asked by handlers (on the loop) -----------------------------------------------------------------------

    def authorize(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        ref_count: int = 1,
        audit: bool = True,
    ) -> bool:
        """Whether the client of ``context`` may do ``operation`` on the resource (logged for its request)."""
        client = context.client
        return self.authorizer.authorize(
            client.principal,
            client.host,
            operation,
            resource_type,
            name,
            request=request_name(context.header.api_key),
            ref_count=ref_count,
            audit=audit,
        )

    def authorize_by_resource_type(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the client of ``context`` may do ``operation`` on at least one resource of the type."""
        client = context.client
        return self.authorizer.authorize_by_resource_type(
            client.principal, client.host, operation, resource_type, request=request_name(context.header.api_key)
        )

    # --- following the tree ------------------------------------------------------------------------------------

    def start(self) -> None:
        """On the metadata thread: create the ACL paths, load every ACL set, then follow both change paths (the
        notifications already there are read again, which changes nothing loaded since)."""
        acl_store.create_acl_paths(self.store)
        loaded = acl_store.load_all_acls(self.store)
        self._post(lambda: self.authorizer.replace_all(loaded))
        log.info("Loaded ACLs of %d resource patterns", len(loaded))
        for changes in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self.store.watch_children(changes, self._watcher(changes))

    def stop(self) -> None:
        """No more notifications are followed (the watches end at their next event)."""
        self._stopped = True

    def _watcher(self, changes: str) -> Callable[[list[str]], bool]:
        def on_children(children: list[str]) -> bool:
            if self._stopped:
                return False
            try:
                self._executor.submit(self._read_changes, changes, children)
            except RuntimeError:  # the executor was shut down: the broker is stopping
                return False
            return True

        return on_children

    def _read_changes(self, changes: str, children: list[str]) -> None:
        """On the metadata thread: re-read the patterns named by the new notifications and post their sets."""
        updates: dict[ResourcePattern, Acls] = {}
        try:
            for child in sorted(children, key=acl_store.change_sequence):
                sequence = acl_store.change_sequence(child)
                if sequence <= self._last_change[changes]:
                    continue
                self._last_change[changes] = sequence
                pattern = acl_store.read_change(self.store, changes, child)
                if pattern is None:
                    continue
                try:
                    updates[pattern] = acl_store.read_acls(self.store, pattern)[0]
                except ValueError as exc:
                    log.error("ACLs of %s not read: %s", pattern, exc)
                    continue
                log.info("Processing Acl change notification for %s, versionedAcls : %s", pattern, updates[pattern])
            acl_store.purge_changes(self.store, changes, children, int(time.time() * 1000))
        except StoreError as exc:
            log.error("ACL change notifications under %s not read: %s", changes, exc)
        if updates:
            self._post(lambda: self._apply(updates))

    def _apply(self, updates: dict[ResourcePattern, Acls]) -> None:
        for pattern, acls in updates.items():
            self.authorizer.set_acls(pattern, acls)

    # --- CreateAcls and DeleteAcls -----------------------------------------------------------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> dict[ResourcePattern, Acls | StoreError]:
        """Store ``bindings`` (valid ones); in force here before this returns. Per pattern: its new set, or why its
        write failed."""

        def create() -> dict[ResourcePattern, Acls | StoreError]:
            outcome = acl_store.create_acls(self.store, bindings)
            self._post(lambda: self._apply({p: a for p, a in outcome.items() if not isinstance(a, StoreError)}))
            return outcome

        return await asyncio.get_running_loop().run_in_executor(self._executor, create)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> DeleteResults:
        """Remove what each filter matches (among the patterns known here and those a filter names); in force here
        before this returns. Per filter: the bindings it removed, each with the failure of its write, if any."""
        known = self.authorizer.patterns

        def delete() -> DeleteResults:
            results, changed = acl_store.delete_acls(self.store, filters, known)
            self._post(lambda: self._apply(changed))
            return results

        return await asyncio.get_running_loop().run_in_executor(self._executor, delete)
